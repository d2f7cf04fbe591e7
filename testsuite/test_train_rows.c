/*
 * Embedding gradients by rows (orionc --gather-grad=rows, docs/training.md
 * "The gradient of an embedding"): the loop's scatter-add against the
 * one-hot product, exactly; ids out of range named; the contract's
 * RowGradients for a tied table and a position table; the refusals of a
 * row gradient that does not fit; and training with them against the
 * one-hot backward (ignored targets included).
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/compile.h"
#include "orion/manifest.h"
#include "contract_check.h"
#include "orion/npy.h"
#include "orion/train_loop.h"
#include "orion/train_rows.h"

static char dir[] = "/tmp/orion-train-rows-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(dir)); }
static void teardown(void) { remove_tree(dir); }

TestSuite(train_rows, .init = setup, .fini = teardown);

static const char *text_of(const StrBuf *sb) { return sb->data ? sb->data : ""; }

/* A tied table (gathered by tokens, then the classifier) and a position table
 * gathered by a fixed input; targets equal to 3 are ignored. */
#define TIED                                                          \
  "func main(tokens: int32[2,8], targets: int32[2,8], pos: int32[2,8]) {\n" \
  "  param wte: fp32[16,8] = normal(seed=1, std=0.5);\n"              \
  "  param wpe: fp32[8,8] = normal(seed=2, std=0.5);\n"               \
  "  param fc.weight: fp32[12,8] = normal(seed=3, std=0.35);\n"       \
  "  param fc2.weight: fp32[8,12] = normal(seed=4, std=0.3);\n"       \
  "  e = gather(wte, tokens, axis=0);\n"                              \
  "  p = gather(wpe, pos, axis=0);\n"                                 \
  "  x = add(e, p);\n"                                                \
  "  h = linear(x, fc.weight);\n"                                     \
  "  a = tanh(h);\n"                                                  \
  "  b = linear(a, fc2.weight);\n"                                    \
  "  logits = linear(b, wte);\n"                                      \
  "  loss: fp32[] = cross_entropy(logits, targets, ignore_index=3);\n" \
  "  return loss;\n"                                                  \
  "}\n"

static char *compile(bool rows, const char *name) {
  StrBuf out;
  sb_init(&out);
  sb_printf(&out, "%s/%s", dir, name);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.train = true;
  o.autodiff.gather_rows = rows;
  Diag d;
  diag_init(&d, NULL);
  StrBuf msgs;
  sb_init(&msgs);
  d.capture = &msgs;
  d.suppress_warnings = true;
  OrionCompileResult r;
  cr_assert(orion_compile_text("tied.oir", TIED, strlen(TIED), &o, out.data, &r, &d), "%s", text_of(&msgs));
  orion_compile_result_free(&r);
  sb_free(&msgs);
  return out.data;
}

Test(train_rows, the_scatter_add_is_the_one_hot_product) {
  enum { V = 7, W = 5, N = 12 };
  static const int32_t ids[N] = {3, 0, 6, 3, 3, 1, 0, 6, 2, 3, 5, 1}; /* repeats; row 4 never */
  float rows[N * W], grad[V * W], want[V * W];
  for (int i = 0; i < N * W; i++) rows[i] = (float)sin(0.7 * i + 0.1) * 3.0f; /* not exactly representable sums */
  for (int i = 0; i < V * W; i++) grad[i] = want[i] = (float)cos(0.3 * i);    /* what the backward gave */
  /* one_hot[V, N] times rows[N, W], summed in position order */
  for (int v = 0; v < V; v++)
    for (int k = 0; k < W; k++) {
      float s = want[v * W + k];
      for (int j = 0; j < N; j++) s += (ids[j] == v ? 1.0f : 0.0f) * rows[j * W + k];
      want[v * W + k] = s;
    }
  cr_assert_eq(train_rows_add(grad, V, W, ids, N, rows), -1);
  for (int i = 0; i < V * W; i++) cr_assert_eq(grad[i], want[i], "element %d: %.9g, want %.9g", i, (double)grad[i], (double)want[i]);
}

Test(train_rows, ids_out_of_range_are_named_and_change_nothing) {
  int32_t ids[4] = {1, 2, 4, 0};
  float rows[4 * 2] = {1, 2, 3, 4, 5, 6, 7, 8}, grad[4 * 2] = {0};
  cr_assert_eq(train_rows_add(grad, 4, 2, ids, 4, rows), 2, "the position of the id 4 in a table of 4 rows");
  ids[2] = -1;
  cr_assert_eq(train_rows_add(grad, 4, 2, ids, 4, rows), 2, "a negative id");
  for (int i = 0; i < 8; i++) cr_assert_eq(grad[i], 0.0f, "nothing added");
  ids[2] = 3;
  cr_assert_eq(train_rows_add(grad, 4, 2, ids, 4, rows), -1);
  cr_assert_eq(grad[2 * 2], 3.0f, "row 2 takes position 1's row");
  cr_assert_eq(grad[3 * 2 + 1], 6.0f);
}

Test(train_rows, the_contract_has_the_rows_of_both_tables) {
  char *path = compile(true, "rows.anepkg");
  Package pkg;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_read(path, &pkg, &d));
  const PkgTraining *t = pkg.training;
  cr_assert_not_null(t);
  /* wte keeps a gradient output (the tied classifier's part); wpe, read only by
   * its gather, has its rows alone, no [8, 8] of zeros */
  cr_assert_eq(t->ngradients, 3);
  for (uint32_t i = 0; i < t->ngradients; i++) cr_assert_str_neq(t->gradients[i].param, "wpe");
  bool wpe_trains = false;
  for (uint32_t i = 0; i < t->nparams; i++) wpe_trains = wpe_trains || !strcmp(t->params[i], "wpe");
  cr_assert(wpe_trains, "wpe is a trainable param all the same");
  cr_assert_str_eq(t->gradients[0].output, "grad.wte");
  cr_assert_eq(t->nrows, 2);
  cr_assert_str_eq(t->rows[0].param, "wpe", "the sweep meets the later gather first");
  cr_assert_str_eq(t->rows[0].indices, "pos");
  cr_assert_str_eq(t->rows[0].output, "rows.wpe");
  cr_assert_str_eq(t->rows[1].param, "wte");
  cr_assert_str_eq(t->rows[1].indices, "tokens");
  cr_assert_str_eq(t->rows[1].output, "rows.wte");
  const PkgFunction *bwd = package_function(&pkg, t->backward);
  const PkgTensor *out = NULL;
  for (uint32_t i = 0; i < bwd->noutputs; i++)
    if (!strcmp(bwd->outputs[i].name, "rows.wte")) out = &bwd->outputs[i];
  cr_assert_not_null(out);
  cr_assert_eq(out->dtype, ORION_DT_FP32);
  cr_assert_eq(out->rank, 3);
  cr_assert(out->dims[0] == 2 && out->dims[1] == 8 && out->dims[2] == 8, "tokens' [2,8] + a row of 8");
  for (uint32_t i = 0; i < t->ninputs; i++)
    cr_assert(t->inputs[i].from != PKG_TRAIN_FROM_INPUT || strcmp(t->inputs[i].name, "tokens"),
              "the backward no longer reads the token ids");
  package_free(&pkg);
  free(path);
}

/* The package's manifest with `from` (after the RowGradients key) replaced
 * by `to` is refused with exactly `want` (after "manifest: Training: "). */
static void refused(const char *manifest, const char *from, const char *to, const char *want) {
  char full[512];
  snprintf(full, sizeof full, "Training: %s", want);
  contract_refused(manifest, "<key>RowGradients</key>", from, to, full);
}

Test(train_rows, a_row_gradient_that_does_not_fit_is_refused) {
  char *path = compile(true, "refused.anepkg");
  StrBuf mp;
  sb_init(&mp);
  sb_printf(&mp, "%s/Manifest.plist", path);
  char *manifest;
  size_t len;
  const char *err;
  cr_assert(read_file(mp.data, 1u << 20, &manifest, &len, &err), "%s", err);
  refused(manifest, "<string>rows.wpe</string>", "<string>rows.wtf</string>",
          "the row gradient 'rows.wtf' (rows of 'wpe' by 'pos') is not an output of the backward function");
  refused(manifest, "<string>rows.wpe</string>", "<string>grad.wte</string>",
          "the row gradient 'grad.wte' (rows of 'wpe' by 'pos') is the output of another gradient too");
  /* (wte's rows: wpe without its rows would be a trainable param with no gradient at all) */
  refused(manifest, "<string>wte</string>", "<string>wxe</string>",
          "the row gradient 'rows.wte' (rows of 'wxe' by 'tokens') belongs to no trainable param of rank 1 or more");
  refused(manifest, "<string>pos</string>", "<string>x</string>",
          "the row gradient 'rows.wpe' (rows of 'wpe' by 'x') is indexed by no int32 input of the forward function");
  refused(manifest, "<string>wte</string>", "<string>fc2.weight</string>",
          "the row gradient 'rows.wte' is fp32[2,8,8] but rows of 'fc2.weight' by 'tokens' are fp32[2,8,12]");
  refused(manifest, "<string>wpe</string>", "<string>wte</string>",
          "the trainable param 'wpe' has no gradient");
  free(manifest);
  sb_free(&mp);
  free(path);
}

typedef struct Steps {
  OrionTrainLogEntry e[8];
  uint32_t n;
} Steps;

static void record(void *ctx, const OrionTrainLogEntry *e, uint64_t total) {
  (void)total;
  Steps *s = ctx;
  cr_assert_lt(s->n, 8);
  s->e[s->n++] = *e;
}

/* 6 plain SGD steps of a package on examples/train/tiny.tokens.bin (ids below
 * 16, a fifth of the targets the ignored 3 or not: both happen), pos fixed. */
static Steps train(const char *pkg, const char *pos) {
  Steps s = {0};
  OrionTrainOptions o;
  orion_train_options_init(&o);
  o.package = pkg;
  StrBuf work;
  sb_init(&work);
  sb_printf(&work, "%s/work-XXXXXX", dir);
  cr_assert_not_null(mkdtemp(work.data));
  o.work_dir = work.data;
  o.data = ORION_SOURCE_ROOT "/examples/train/tiny.tokens.bin";
  o.numerics = ORION_NUMERICS_FP32;
  o.steps = 6;
  o.optimizer = train_optimizer_defaults(TRAIN_OPT_SGD);
  o.schedule.lr = 0.5;
  OrionTrainInputFile in = {.name = "pos", .file = pos};
  o.inputs = &in;
  o.ninputs = 1;
  o.on_step = record;
  o.ctx = &s;
  StrBuf msgs;
  sb_init(&msgs);
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  d.capture = &msgs;
  OrionTrainReport r;
  cr_assert(orion_train_run(&o, &r, &d), "%s", text_of(&msgs));
  orion_train_report_free(&r);
  srcset_free(&sources);
  sb_free(&msgs);
  sb_free(&work);
  return s;
}

Test(train_rows, training_by_rows_is_training_by_the_one_hot_product) {
  StrBuf pos;
  sb_init(&pos);
  sb_printf(&pos, "%s/pos.npy", dir);
  int32_t ids[16];
  for (int i = 0; i < 16; i++) ids[i] = (i * 5) % 8; /* every position row, some twice in a row of the batch */
  NpyArray a = {.dtype = ORION_DT_INT32, .rank = 2, .dims = {2, 8}, .data = ids, .nbytes = sizeof ids};
  Diag d;
  diag_init(&d, NULL);
  cr_assert(npy_write(pos.data, &a, &d));
  char *onehot = compile(false, "onehot.anepkg"), *rows = compile(true, "rows2.anepkg");
  Steps want = train(onehot, pos.data), got = train(rows, pos.data);
  cr_assert_eq(got.n, 6);
  cr_assert_eq(want.n, 6);
  /* the same gradients up to the order of fp32 sums (the one-hot product's sgemm against the loop's rows) */
  for (uint32_t i = 0; i < 6; i++) {
    cr_assert(got.e[i].has_grad_norm && want.e[i].has_grad_norm);
    cr_assert_leq(fabs(got.e[i].loss - want.e[i].loss), 1e-6 * fabs(want.e[i].loss), "step %u loss %.9g, want %.9g",
                  i + 1, got.e[i].loss, want.e[i].loss);
    cr_assert_leq(fabs(got.e[i].grad_norm - want.e[i].grad_norm), 1e-6 * want.e[i].grad_norm,
                  "step %u gradient norm %.9g, want %.9g", i + 1, got.e[i].grad_norm, want.e[i].grad_norm);
  }
  cr_assert_lt(got.e[5].loss, got.e[0].loss, "it trains");
  free(onehot);
  free(rows);
  sb_free(&pos);
}
