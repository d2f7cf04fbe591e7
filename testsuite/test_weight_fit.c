/*
 * The weight write's check made by the optimizer (orion/values_fit.h):
 * train_optimizer_step_counted counts the new values that do not fit the
 * target weight, exactly and with the same bits as train_optimizer_step;
 * orion_write_weights takes a count instead of its check pass, refuses to
 * write anything when a count is not 0 (the same message as its own check),
 * refuses a count of other values, for another limit or taken up already,
 * and a counted write computes what a fresh open of the committed package
 * computes; the CPU backend, which binds again after a write only for
 * weights that are settings, takes a new clip bound up. On
 * testsuite/train/model/bigram16.oir (fp16 W [8,8], b [8]), bigram.oir
 * (fp32) and a hand-written MIL program.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orion/backend.h"
#include "orion/blob_writer.h"
#include "orion/compile.h"
#include "orion/fp16.h"
#include "orion/train_loop.h"
#include "orion/train_optim.h"

#define MODEL ORION_SOURCE_ROOT "/testsuite/train/model"

static char dir[] = "/tmp/orion-weight-fit-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(dir)); }
static void teardown(void) { remove_tree(dir); }

static char *path_in(const char *name) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%s/%s", dir, name);
  return sb.data;
}

static const char *text_of(const StrBuf *sb) { return sb->data ? sb->data : ""; }

/* testsuite/train/model/SOURCE with its training contract, compiled into dir/name. */
static char *bigram(const char *source, const char *name) {
  char *out = path_in(name);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  Diag d;
  StrBuf msgs;
  sb_init(&msgs);
  diag_init(&d, NULL);
  d.capture = &msgs;
  d.suppress_warnings = true;
  PkgTraining *t = NULL;
  cr_assert(orion_train_contract_read_json(MODEL "/bigram.train.json", &t, &d), "%s", text_of(&msgs));
  o.training = t;
  OrionCompileResult r;
  StrBuf src;
  sb_init(&src);
  sb_printf(&src, "%s/%s", MODEL, source);
  cr_assert(orion_compile_file(src.data, &o, out, &r, &d), "%s", text_of(&msgs));
  sb_free(&src);
  orion_compile_result_free(&r);
  package_training_free(t);
  sb_free(&msgs);
  return out;
}

typedef struct Fixture {
  SourceSet sources;
  Diag d;
  StrBuf msgs;
  char *pkg;
  OrionProgram *p;
  OrionBackend *be;
  uint32_t fwd, w, b; /* the forward and its weights W and b */
} Fixture;

static uint32_t weight_index(const OrionProgram *p, uint32_t fn, const char *name) {
  for (uint32_t i = 0; i < orion_weight_count(p, fn); i++)
    if (!strcmp(orion_weight(p, fn, i)->name, name)) return i;
  cr_assert_fail("no weight %s", name);
  return 0;
}

static void open_fixture(Fixture *f, const char *source) {
  srcset_init(&f->sources);
  diag_init(&f->d, &f->sources);
  sb_init(&f->msgs);
  f->d.capture = &f->msgs;
  f->pkg = bigram(source, "b.anepkg");
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true;
  f->p = orion_open(f->pkg, &oo, &f->d);
  cr_assert_not_null(f->p, "%s", text_of(&f->msgs));
  f->be = orion_backend_open("cpu", NULL, &f->d);
  cr_assert_not_null(f->be, "%s", text_of(&f->msgs));
  f->fwd = orion_function_find(f->p, "fwd");
  f->w = weight_index(f->p, f->fwd, "W");
  f->b = weight_index(f->p, f->fwd, "b");
}

static void close_fixture(Fixture *f) {
  orion_backend_close(f->be);
  orion_close(f->p);
  free(f->pkg);
  sb_free(&f->msgs);
  srcset_free(&f->sources);
}

static void clear_messages(Fixture *f) {
  sb_free(&f->msgs);
  sb_init(&f->msgs);
}

static const void *data_of(const Fixture *f, uint32_t weight) { return orion_weight(f->p, f->fwd, weight)->data; }

/* A count of n values against limit, as the optimizer makes it. */
static OrionValuesFit counted(const float *values, size_t n, float limit) {
  OrionValuesFit fit = {.values = values, .count = n, .limit = limit};
  for (size_t i = 0; i < n; i++) fit.unfit += !(fabsf(values[i]) < limit);
  return fit;
}

/* The forward's loss on fixed tokens. */
static float loss_of(OrionExec *e, Diag *d) {
  int32_t tokens[8] = {0, 1, 2, 3, 4, 5, 6, 7}, targets[8] = {1, 2, 3, 4, 5, 6, 7, 0};
  OrionTensor in[2] = {{.dtype = MIL_DT_INT32, .rank = 2, .dims = {2, 4}, .data = tokens},
                       {.dtype = MIL_DT_INT32, .rank = 2, .dims = {2, 4}, .data = targets}};
  OrionTensor out[3];
  cr_assert(orion_exec_run_alloc(e, in, out, d));
  float loss = *(const float *)out[0].data;
  for (int i = 0; i < 3; i++) orion_tensor_free(&out[i]);
  return loss;
}

TestSuite(weight_fit, .init = setup, .fini = teardown);

Test(weight_fit, a_count_of_misfits_writes_nothing_and_names_the_weight) {
  Fixture f;
  open_fixture(&f, "bigram16.oir");
  uint16_t w0[64], b0[8];
  memcpy(w0, data_of(&f, f.w), sizeof w0);
  memcpy(b0, data_of(&f, f.b), sizeof b0);
  float w[64] = {0}, b[8] = {1, 2, 3, 65520.0f, 5, NAN, 7, 8};
  OrionValuesFit fw = counted(w, 64, ORION_FP16_FIT_LIMIT), fb = counted(b, 8, ORION_FP16_FIT_LIMIT);
  cr_assert_eq(fb.unfit, 2);
  OrionWeightValues v[2] = {{.fn = f.fwd, .weight = f.w, .values = w, .label = "W", .fit = &fw},
                            {.fn = f.fwd, .weight = f.b, .values = b, .label = "b", .fit = &fb}};
  cr_assert_not(orion_backend_write_weights(f.be, f.p, v, 2, &f.d));
  cr_assert(strstr(text_of(&f.msgs), "weight 'b': 2 of 8 values are not finite in fp16 (element 3 is 65520); the "
                                     "weights were not written"), "%s", text_of(&f.msgs));
  cr_assert_eq(memcmp(w0, data_of(&f, f.w), sizeof w0), 0, "W, counted fine, was not written either");
  cr_assert_eq(memcmp(b0, data_of(&f, f.b), sizeof b0), 0);
  cr_assert_null(fw.values, "both counts were taken up");
  cr_assert_null(fb.values);
  cr_assert(orion_commit_weights(f.p, &f.d));
  cr_assert_eq(orion_weights_generation(f.p), 0, "nothing was written: the manifest stays");
  close_fixture(&f);
}

Test(weight_fit, a_count_of_other_values_another_limit_or_used_before_is_refused) {
  Fixture f;
  open_fixture(&f, "bigram16.oir");
  uint16_t b0[8];
  memcpy(b0, data_of(&f, f.b), sizeof b0);
  float b[8] = {1, 2, 3, 4, 5, 6, 7, 8}, other[8] = {0};
  OrionValuesFit fb = counted(other, 8, ORION_FP16_FIT_LIMIT);
  OrionWeightValues v = {.fn = f.fwd, .weight = f.b, .values = b, .label = "b", .fit = &fb};
  cr_assert_not(orion_write_weights(f.p, &v, 1, &f.d));
  cr_assert(strstr(text_of(&f.msgs), "orion_write_weights: the count of misfits given for weight 'b' is not of its 8 "
                                     "values for |x| < 65520 (it counted other values); nothing was written"),
            "%s", text_of(&f.msgs));
  clear_messages(&f);
  fb = counted(b, 8, INFINITY); /* an fp32 weight's limit: 70000 would pass it */
  cr_assert_not(orion_write_weights(f.p, &v, 1, &f.d));
  cr_assert(strstr(text_of(&f.msgs), "is not of its 8 values for |x| < 65520 (it counted other values)"), "%s",
            text_of(&f.msgs));
  fb = counted(b, 7, ORION_FP16_FIT_LIMIT);
  cr_assert_not(orion_write_weights(f.p, &v, 1, &f.d));
  cr_assert_eq(memcmp(b0, data_of(&f, f.b), sizeof b0), 0, "none of these wrote anything");

  fb = counted(b, 8, ORION_FP16_FIT_LIMIT);
  cr_assert(orion_write_weights(f.p, &v, 1, &f.d), "%s", text_of(&f.msgs));
  for (int i = 0; i < 8; i++) cr_assert_eq(((const uint16_t *)data_of(&f, f.b))[i], fp16_from_float_reference(b[i]));
  b[2] = NAN; /* changed after the count: the count cannot stand for it again */
  clear_messages(&f);
  cr_assert_not(orion_write_weights(f.p, &v, 1, &f.d));
  cr_assert(strstr(text_of(&f.msgs), "weight 'b' is not of its 8 values for |x| < 65520 (it was taken up already, "
                                     "or nothing was counted); nothing was written"), "%s", text_of(&f.msgs));
  cr_assert_eq(((const uint16_t *)data_of(&f, f.b))[2], fp16_from_float_reference(3.0f));
  v.fit = NULL; /* without a count the write checks by itself */
  clear_messages(&f);
  cr_assert_not(orion_write_weights(f.p, &v, 1, &f.d));
  cr_assert(strstr(text_of(&f.msgs), "weight 'b': 1 of 8 values are not finite in fp16 (element 2 is nan)"), "%s",
            text_of(&f.msgs));
  close_fixture(&f);
}

/* Counted writes of both weight types, then the commit: a fresh open of the
 * package computes exactly what the running program computes. */
static void counted_write_matches_a_fresh_open(const char *source, bool fp16) {
  Fixture f;
  open_fixture(&f, source);
  OrionPrepareOptions po = {.numerics = fp16 ? ORION_NUMERICS_ANE : ORION_NUMERICS_FP32};
  OrionExec *e = orion_backend_prepare(f.be, f.p, f.fwd, &po, &f.d);
  cr_assert_not_null(e, "%s", text_of(&f.msgs));
  float before = loss_of(e, &f.d);
  float w[64], b[8] = {0.5f, -1.0f / 3.0f, 60000.0f, -0.0f, 0x1p-25f, 0x1.8p-25f, 1.0009765625f + 0x1p-11f, 2.0f};
  for (int i = 0; i < 64; i++) w[i] = (float)(i - 32) / 7.0f;
  float limit = orion_fit_limit(fp16);
  OrionValuesFit fw = counted(w, 64, limit), fb = counted(b, 8, limit);
  OrionWeightValues v[2] = {{.fn = f.fwd, .weight = f.w, .values = w, .fit = &fw},
                            {.fn = f.fwd, .weight = f.b, .values = b, .fit = &fb}};
  cr_assert(orion_backend_write_weights(f.be, f.p, v, 2, &f.d), "%s", text_of(&f.msgs));
  for (int i = 0; i < 8; i++) {
    if (fp16) cr_assert_eq(((const uint16_t *)data_of(&f, f.b))[i], fp16_from_float_reference(b[i]), "b[%d]", i);
    else cr_assert_eq(memcmp((const float *)data_of(&f, f.b) + i, &b[i], 4), 0, "b[%d]", i);
  }
  float after = loss_of(e, &f.d);
  cr_assert_neq(after, before);
  cr_assert(orion_commit_weights(f.p, &f.d), "%s", text_of(&f.msgs));
  OrionProgram *again = orion_open(f.pkg, NULL, &f.d); /* verifies the checksums */
  cr_assert_not_null(again, "%s", text_of(&f.msgs));
  OrionExec *e2 = orion_backend_prepare(f.be, again, f.fwd, &po, &f.d);
  cr_assert_not_null(e2, "%s", text_of(&f.msgs));
  float fresh = loss_of(e2, &f.d);
  cr_assert_eq(memcmp(&fresh, &after, sizeof fresh), 0, "fresh %.9g, written %.9g", (double)fresh, (double)after);
  orion_exec_release(e2);
  orion_close(again);
  close_fixture(&f);
}

Test(weight_fit, a_counted_fp16_write_computes_what_a_fresh_open_computes) {
  counted_write_matches_a_fresh_open("bigram16.oir", true);
}

Test(weight_fit, a_counted_fp32_write_computes_what_a_fresh_open_computes) {
  counted_write_matches_a_fresh_open("bigram.oir", false);
}

/* The training loop refuses the first step whose new fp16 weights overflow
 * (SGD at a huge learning rate, fp32 numerics: the gradients are finite),
 * by the optimizer's count, naming the weight. */
Test(weight_fit, a_run_whose_weights_overflow_fp16_stops_naming_the_weight) {
  char *pkg = bigram("bigram16.oir", "b16.anepkg"), *work = path_in("work");
  cr_assert_eq(mkdir(work, 0755), 0);
  OrionTrainOptions o;
  orion_train_options_init(&o);
  o.package = pkg;
  o.work_dir = work;
  o.data = MODEL "/bigram_tokens.npy";
  o.numerics = ORION_NUMERICS_FP32;
  o.optimizer = train_optimizer_defaults(TRAIN_OPT_SGD);
  o.steps = 3;
  o.schedule.lr = 1e9;
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  StrBuf msgs;
  sb_init(&msgs);
  d.capture = &msgs;
  OrionTrainReport rep;
  cr_assert_not(orion_train_run(&o, &rep, &d));
  cr_assert(strstr(text_of(&msgs), "weight 'W': "), "%s", text_of(&msgs));
  cr_assert(strstr(text_of(&msgs), " of 64 values are not finite in fp16 (element "), "%s", text_of(&msgs));
  cr_assert(strstr(text_of(&msgs), "); the weights were not written"), "%s", text_of(&msgs));
  cr_assert_eq(rep.weight_updates, 0);
  cr_assert_eq(rep.steps_run, 0);
  orion_train_report_free(&rep);
  sb_free(&msgs);
  srcset_free(&sources);
  free(work);
  free(pkg);
}

/* The CPU backend binds again after a write only when a weight is a setting
 * (a scalar argument, here clip's bounds read from BLOBFILE consts): the new
 * bound is what the next run uses. */
Test(weight_fit, a_weight_read_as_a_setting_is_taken_up_after_a_write) {
  char *bare = path_in("bare"), *weights = path_in("bare/weights");
  cr_assert_eq(mkdir(bare, 0755), 0);
  cr_assert_eq(mkdir(weights, 0755), 0);
  float lo = -1.0f, hi = 1.0f;
  BlobWriter bw;
  blob_writer_init(&bw);
  uint64_t off_lo = blob_writer_add(&bw, BLOB_FP32, &lo, sizeof lo), off_hi = blob_writer_add(&bw, BLOB_FP32, &hi, sizeof hi);
  char *file = path_in("bare/weights/weight.bin"), *mil_path = path_in("bare/model.mil");
  const char *err;
  cr_assert(write_file_atomic(file, bw.data, bw.len, &err), "%s", err);
  blob_writer_free(&bw);
  char mil[2048];
  snprintf(mil, sizeof mil,
           "program(1.3)\n[buildInfo = dict<string, string>({{\"coremlc-version\", \"3505.4.1\"}})]\n{\n"
           "    func main<ios18>(tensor<fp32, [4]> x) {\n"
           "        tensor<fp32, []> lo = const()[name = string(\"lo\"), val = tensor<fp32, []>(BLOBFILE(path = "
           "string(\"@model_path/weights/weight.bin\"), offset = uint64(%llu)))];\n"
           "        tensor<fp32, []> hi = const()[name = string(\"hi\"), val = tensor<fp32, []>(BLOBFILE(path = "
           "string(\"@model_path/weights/weight.bin\"), offset = uint64(%llu)))];\n"
           "        tensor<fp32, [4]> y = clip(x = x, alpha = lo, beta = hi)[name = string(\"y\")];\n"
           "    } -> (y);\n}\n",
           (unsigned long long)off_lo, (unsigned long long)off_hi);
  cr_assert(write_file_atomic(mil_path, mil, strlen(mil), &err), "%s", err);
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  StrBuf msgs;
  sb_init(&msgs);
  d.capture = &msgs;
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true;
  OrionProgram *p = orion_open(bare, &oo, &d);
  cr_assert_not_null(p, "%s", text_of(&msgs));
  OrionBackend *be = orion_backend_open("cpu", NULL, &d);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_FP32};
  OrionExec *e = orion_backend_prepare(be, p, 0, &po, &d);
  cr_assert_not_null(e, "%s", text_of(&msgs));
  float x[4] = {-5.0f, -0.5f, 0.5f, 5.0f}, y[4];
  OrionTensor in = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {4}, .data = x},
              out = {.dtype = MIL_DT_FP32, .rank = 1, .dims = {4}, .data = y};
  cr_assert(orion_exec_run(e, &in, &out, &d), "%s", text_of(&msgs));
  const float before[4] = {-1.0f, -0.5f, 0.5f, 1.0f}, after[4] = {-0.25f, -0.25f, 0.5f, 1.0f};
  cr_assert_eq(memcmp(y, before, sizeof y), 0);
  float new_lo = -0.25f;
  OrionValuesFit fit = counted(&new_lo, 1, INFINITY);
  uint32_t w_lo = weight_index(p, 0, "lo");
  OrionWeightValues v = {.fn = 0, .weight = w_lo, .values = &new_lo, .fit = &fit};
  cr_assert(orion_backend_write_weights(be, p, &v, 1, &d), "%s", text_of(&msgs));
  cr_assert(orion_exec_run(e, &in, &out, &d), "%s", text_of(&msgs));
  for (int i = 0; i < 4; i++) cr_assert_eq(y[i], after[i], "y[%d] = %g, want %g", i, (double)y[i], (double)after[i]);
  orion_exec_release(e);
  orion_backend_close(be);
  orion_close(p);
  sb_free(&msgs);
  srcset_free(&sources);
  free(file);
  free(mil_path);
  free(weights);
  free(bare);
}

/* ---- the optimizer's counts ---- */

/* A param of more than one chunk with a tail that is not a multiple of 8. */
#define BIG ((size_t)(1u << 20) + 13)

static float pattern(size_t i, uint32_t salt) {
  uint32_t x = (uint32_t)i * 2654435761u ^ salt;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return ((float)(x & 0xFFFFFF) / (float)0x1000000 - 0.5f) * 0.02f;
}

/* Values that end beyond fp16's range (lanes of the vector loop, its tail,
 * both chunks), NaN and infinite ones. */
static void plant_misfits(TrainParam *p) {
  static const size_t big[] = {0, 7, 8, 1000, (1u << 20) - 1, 1u << 20, BIG - 1};
  for (size_t i = 0; i < sizeof big / sizeof *big; i++) p->value[big[i]] = 70000.0f;
  p->value[3] = NAN;
  p->value[(1u << 20) + 9] = -INFINITY;
  p->value[12] = 65519.0f; /* fits: rounds to 65504 */
}

static void counts_are_exact(TrainOptimizerKind kind) {
  TrainParam p[2] = {{.name = "big", .rank = 2, .dims = {1, (int64_t)BIG}, .count = BIG},
                     {.name = "small", .rank = 1, .dims = {5}, .count = 5}};
  TrainParam q[2];
  memcpy(q, p, sizeof p);
  for (int k = 0; k < 2; k++) {
    size_t n = p[k].count;
    p[k].value = malloc(n * sizeof(float));
    p[k].grad = malloc(n * sizeof(float));
    q[k].value = malloc(n * sizeof(float));
    q[k].grad = p[k].grad;
    for (size_t i = 0; i < n; i++) {
      p[k].value[i] = pattern(i, 1u + (uint32_t)k) * 50.0f;
      p[k].grad[i] = pattern(i, 9u + (uint32_t)k);
    }
  }
  plant_misfits(&p[0]);
  for (int k = 0; k < 2; k++) memcpy(q[k].value, p[k].value, p[k].count * sizeof(float));
  TrainOptimizerConfig c = train_optimizer_defaults(kind);
  c.momentum = kind == TRAIN_OPT_SGD ? 0.9 : 0;
  TrainOptimizer *counted_opt = train_optimizer_new(&c, p, 2, NULL), *plain = train_optimizer_new(&c, q, 2, NULL);
  for (int step = 1; step <= 2; step++) {
    /* fp16's limit for the big param, fp32's for the small one */
    OrionValuesFit fit[2] = {{.limit = ORION_FP16_FIT_LIMIT}, {.limit = INFINITY}};
    train_optimizer_step_counted(counted_opt, p, 2, 1e-3, NULL, fit);
    train_optimizer_step(plain, q, 2, 1e-3);
    for (int k = 0; k < 2; k++) {
      cr_assert_eq(memcmp(p[k].value, q[k].value, p[k].count * sizeof(float)), 0, "the same bits as without counting");
      cr_assert_eq(fit[k].values, p[k].value);
      cr_assert_eq(fit[k].count, p[k].count);
      cr_assert_eq(fit[k].limit, k == 0 ? ORION_FP16_FIT_LIMIT : INFINITY);
    }
    cr_assert_eq(fit[0].unfit, 9, "step %d: 7 beyond 65520, a NaN, an infinity (got %zu)", step, fit[0].unfit);
    cr_assert_eq(fit[1].unfit, 0);
  }
  OrionValuesFit fit[2] = {{.limit = INFINITY}, {.limit = INFINITY}};
  train_optimizer_step_counted(counted_opt, p, 2, 1e-3, NULL, fit);
  cr_assert_eq(fit[0].unfit, 2, "against fp32's limit only the NaN and the infinity (got %zu)", fit[0].unfit);
  train_optimizer_free(counted_opt);
  train_optimizer_free(plain);
  for (int k = 0; k < 2; k++) {
    free(p[k].value);
    free(p[k].grad);
    free(q[k].value);
  }
}

Test(optim_fit, adamw_counts_exactly_the_new_values_that_do_not_fit) { counts_are_exact(TRAIN_OPT_ADAMW); }

Test(optim_fit, sgd_counts_exactly_the_new_values_that_do_not_fit) { counts_are_exact(TRAIN_OPT_SGD); }
