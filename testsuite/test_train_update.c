/*
 * The per-step weight update of training: orion_backend_write_weights (fp32
 * values checked, then converted straight into a writable program's weight
 * data, the backend told), orion_commit_weights (the package verifies
 * again), the training loop's working copy after a run, and the fused
 * optimizer passes (AVX and chunked over two threads) against the scalar
 * formulas and the gradients' unscaling and clipping folded into them
 * against their own passes, bit for bit. On testsuite/train/model/bigram16.oir (fp16
 * weights W [8,8] and b [8]).
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orion/backend.h"
#include "orion/compile.h"
#include "orion/fp16.h"
#include "orion/patch.h"
#include "orion/train_loop.h"

#define MODEL ORION_SOURCE_ROOT "/testsuite/train/model"

static char dir[] = "/tmp/orion-train-update-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(dir)); }
static void teardown(void) { remove_tree(dir); }

static char *path_in(const char *name) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%s/%s", dir, name);
  return sb.data;
}

static const char *text_of(const StrBuf *sb) { return sb->data ? sb->data : ""; }

/* bigram16 with its training contract, compiled into dir/name. */
static char *bigram16(const char *name) {
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
  cr_assert(orion_compile_file(MODEL "/bigram16.oir", &o, out, &r, &d), "%s", text_of(&msgs));
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
  uint32_t fwd, w, b; /* the forward and its weights W and b */
} Fixture;

static uint32_t weight_index(const OrionProgram *p, uint32_t fn, const char *name) {
  for (uint32_t i = 0; i < orion_weight_count(p, fn); i++)
    if (!strcmp(orion_weight(p, fn, i)->name, name)) return i;
  cr_assert_fail("no weight %s", name);
  return 0;
}

static void open_fixture(Fixture *f, bool writable) {
  srcset_init(&f->sources);
  diag_init(&f->d, &f->sources);
  sb_init(&f->msgs);
  f->d.capture = &f->msgs;
  f->pkg = bigram16("b16.anepkg");
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = writable;
  f->p = orion_open(f->pkg, &oo, &f->d);
  cr_assert_not_null(f->p, "%s", text_of(&f->msgs));
  f->fwd = orion_function_find(f->p, "fwd");
  f->w = weight_index(f->p, f->fwd, "W");
  f->b = weight_index(f->p, f->fwd, "b");
}

static void close_fixture(Fixture *f) {
  orion_close(f->p);
  free(f->pkg);
  sb_free(&f->msgs);
  srcset_free(&f->sources);
}

static const uint16_t *halves(const Fixture *f, uint32_t weight) {
  return orion_weight(f->p, f->fwd, weight)->data;
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

TestSuite(weight_write, .init = setup, .fini = teardown);

Test(weight_write, values_are_converted_into_the_program_and_the_commit_verifies) {
  Fixture f;
  open_fixture(&f, true);
  OrionBackend *be = orion_backend_open("cpu", NULL, &f.d);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e = orion_backend_prepare(be, f.p, f.fwd, &po, &f.d);
  cr_assert_not_null(e, "%s", text_of(&f.msgs));
  float before = loss_of(e, &f.d);
  /* Round-to-nearest-even cases: a third, ties, the largest value that
   * stays finite, subnormals, below half the smallest subnormal, -0. */
  float w[64], b[8] = {0.5f, -1.0f / 3.0f, 65519.0f, -0.0f, 0x1p-25f, 0x1.8p-25f, 1.0009765625f + 0x1p-11f, 2.0f};
  for (int i = 0; i < 64; i++) w[i] = (float)(i - 32) / 7.0f;
  OrionWeightValues v[2] = {{.fn = f.fwd, .weight = f.w, .values = w, .label = "W"},
                            {.fn = f.fwd, .weight = f.b, .values = b, .label = "b"}};
  cr_assert(orion_backend_write_weights(be, f.p, v, 2, &f.d), "%s", text_of(&f.msgs));
  for (int i = 0; i < 64; i++) cr_assert_eq(halves(&f, f.w)[i], fp16_from_float_reference(w[i]), "W[%d]", i);
  const uint16_t want_b[8] = {0x3800, 0xB555, 0x7BFF, 0x8000, 0x0000, 0x0001, 0x3C02, 0x4000};
  for (int i = 0; i < 8; i++) cr_assert_eq(halves(&f, f.b)[i], want_b[i], "b[%d] is %04x", i, halves(&f, f.b)[i]);
  float after = loss_of(e, &f.d);
  cr_assert_neq(after, before, "the prepared function computes with the new weights");

  /* Until the commit, the package on disk keeps its old weights (and verifies). */
  Package pkg;
  cr_assert(package_read(f.pkg, &pkg, &f.d));
  cr_assert(package_verify(&pkg, &f.d), "%s", text_of(&f.msgs));
  package_free(&pkg);
  OrionProgram *old = orion_open(f.pkg, NULL, &f.d);
  cr_assert_not_null(old, "%s", text_of(&f.msgs));
  OrionExec *e_old = orion_backend_prepare(be, old, f.fwd, &po, &f.d);
  cr_assert_eq(loss_of(e_old, &f.d), before);
  orion_exec_release(e_old);
  orion_close(old);
  uint64_t generation = orion_weights_generation(f.p);
  cr_assert(orion_commit_weights(f.p, &f.d), "%s", text_of(&f.msgs));
  cr_assert_eq(orion_weights_generation(f.p), generation + 1);
  sb_free(&f.msgs);
  sb_init(&f.msgs);
  cr_assert(package_read(f.pkg, &pkg, &f.d));
  cr_assert(package_verify(&pkg, &f.d), "%s", text_of(&f.msgs));
  package_free(&pkg);
  cr_assert(orion_commit_weights(f.p, &f.d), "nothing written since: nothing to do");
  cr_assert_eq(orion_weights_generation(f.p), generation + 1);

  /* A fresh open (checksums verified) computes the same loss. */
  OrionProgram *again = orion_open(f.pkg, NULL, &f.d);
  cr_assert_not_null(again, "%s", text_of(&f.msgs));
  OrionExec *e2 = orion_backend_prepare(be, again, f.fwd, &po, &f.d);
  cr_assert_not_null(e2);
  cr_assert_eq(loss_of(e2, &f.d), after);
  orion_backend_close(be);
  orion_close(again);
  close_fixture(&f);
}

Test(weight_write, a_value_that_does_not_fit_writes_nothing) {
  Fixture f;
  open_fixture(&f, true);
  OrionBackend *be = orion_backend_open("cpu", NULL, &f.d);
  uint16_t w0[64], b0[8];
  memcpy(w0, halves(&f, f.w), sizeof w0);
  memcpy(b0, halves(&f, f.b), sizeof b0);
  float w[64] = {0}, b[8] = {1, 2, 3, 4, 5, NAN, 7, 8};
  OrionWeightValues v[2] = {{.fn = f.fwd, .weight = f.w, .values = w, .label = "W"},
                            {.fn = f.fwd, .weight = f.b, .values = b, .label = "b"}};
  cr_assert_not(orion_backend_write_weights(be, f.p, v, 2, &f.d));
  cr_assert(strstr(text_of(&f.msgs), "weight 'b': 1 of 8 values are not finite in fp16 (element 5 is nan); the "
                                     "weights were not written"), "%s", text_of(&f.msgs));
  b[5] = 65520.0f; /* rounds to infinity in fp16 */
  b[7] = -INFINITY;
  cr_assert_not(orion_backend_write_weights(be, f.p, v, 2, &f.d));
  cr_assert(strstr(text_of(&f.msgs), "weight 'b': 2 of 8 values are not finite in fp16 (element 5 is 65520)"), "%s",
            text_of(&f.msgs));
  cr_assert_eq(memcmp(w0, halves(&f, f.w), sizeof w0), 0, "W, checked fine, was not written either");
  cr_assert_eq(memcmp(b0, halves(&f, f.b), sizeof b0), 0);
  cr_assert(orion_commit_weights(f.p, &f.d));
  cr_assert_eq(orion_weights_generation(f.p), 0, "nothing was written: the manifest stays");
  orion_backend_close(be);
  close_fixture(&f);
}

Test(weight_write, needs_a_writable_program) {
  Fixture f;
  open_fixture(&f, false);
  float b[8] = {0};
  OrionWeightValues v = {.fn = f.fwd, .weight = f.b, .values = b};
  cr_assert_not(orion_write_weights(f.p, &v, 1, &f.d));
  cr_assert(strstr(text_of(&f.msgs), "b16.anepkg' was not opened with writable weights "
                                     "(OrionOpenOptions.writable_weights)"), "%s", text_of(&f.msgs));
  close_fixture(&f);
}

TestSuite(train_update, .init = setup, .fini = teardown);

/* After a run, the working copy verifies and holds the fp16 conversion of
 * the trained masters (the export), exactly. */
Test(train_update, the_working_copy_holds_the_masters_and_verifies) {
  char *pkg = bigram16("b16.anepkg"), *exported = path_in("b16.safetensors"), *work = path_in("work");
  cr_assert_eq(mkdir(work, 0755), 0);
  OrionTrainOptions o;
  orion_train_options_init(&o);
  o.package = pkg;
  o.work_dir = work;
  o.data = MODEL "/bigram_tokens.npy";
  o.numerics = ORION_NUMERICS_ANE;
  o.steps = 12;
  o.schedule.lr = 0.05;
  o.export_path = exported;
  o.checkpoint_dir = path_in("ckpt");
  o.checkpoint_every = 5;
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  StrBuf msgs;
  sb_init(&msgs);
  d.capture = &msgs;
  OrionTrainReport rep;
  cr_assert(orion_train_run(&o, &rep, &d), "%s", text_of(&msgs));
  cr_assert_eq(rep.weight_updates, 11, "step 1 overflows and is skipped; each other step writes the weights");
  cr_assert_eq(rep.compiles, 0);
  Package wc;
  cr_assert(package_read(rep.work_package, &wc, &d), "%s", text_of(&msgs));
  cr_assert(package_verify(&wc, &d), "%s", text_of(&msgs));
  cr_assert_gt(wc.weights_generation, 0);
  package_free(&wc);
  OrionProgram *p = orion_open(rep.work_package, NULL, &d); /* verifies the checksums */
  cr_assert_not_null(p, "%s", text_of(&msgs));
  uint32_t fwd = orion_function_find(p, "fwd");
  PatchSet set = {0};
  cr_assert(patch_set_add_safetensors(&set, exported, &d));
  cr_assert_eq(set.n, 2);
  for (uint32_t t = 0; t < set.n; t++) {
    const OrionWeight *w = orion_weight(p, fwd, weight_index(p, fwd, set.tensors[t].name));
    const float *master = set.tensors[t].data;
    const uint16_t *h = w->data;
    for (uint64_t k = 0; k < set.tensors[t].nbytes / 4; k++)
      cr_assert_eq(h[k], fp16_from_float_reference(master[k]), "%s[%llu]", set.tensors[t].name,
                   (unsigned long long)k);
  }
  patch_set_free(&set);
  orion_close(p);
  orion_train_report_free(&rep);
  sb_free(&msgs);
  srcset_free(&sources);
  free((void *)(uintptr_t)o.checkpoint_dir);
  free(work);
  free(exported);
  free(pkg);
}

TestSuite(optim_passes);

/* A param of more than one chunk with a tail that is not a multiple of 8. */
#define BIG ((size_t)(1u << 20) + 13)

static float pattern(size_t i, uint32_t salt) {
  uint32_t x = (uint32_t)i * 2654435761u ^ salt;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return ((float)(x & 0xFFFFFF) / (float)0x1000000 - 0.5f) * 0.02f;
}

Test(optim_passes, adamw_is_the_scalar_formula_bit_for_bit) {
  TrainParam p[2] = {{.name = "big", .rank = 2, .dims = {1, (int64_t)BIG}, .count = BIG},
                     {.name = "small", .rank = 1, .dims = {5}, .count = 5}};
  float *ref_w[2], *ref_m[2], *ref_v[2];
  for (int k = 0; k < 2; k++) {
    size_t n = p[k].count;
    p[k].value = malloc(n * sizeof(float));
    p[k].grad = malloc(n * sizeof(float));
    ref_w[k] = malloc(n * sizeof(float));
    ref_m[k] = calloc(n, sizeof(float));
    ref_v[k] = calloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) ref_w[k][i] = p[k].value[i] = pattern(i, 1u + (uint32_t)k) * 50.0f;
  }
  TrainOptimizerConfig c = train_optimizer_defaults(TRAIN_OPT_ADAMW);
  TrainOptimizer *opt = train_optimizer_new(&c, p, 2, NULL);
  for (int step = 1; step <= 3; step++) {
    double lr = 1e-3 * step;
    double bc1 = 1.0 - pow(c.beta1, step), bc2s = sqrt(1.0 - pow(c.beta2, step));
    for (int k = 0; k < 2; k++) {
      for (size_t i = 0; i < p[k].count; i++) p[k].grad[i] = pattern(i, 7u * (uint32_t)step + (uint32_t)k);
      /* The formula as optim.c states it, element by element. */
      float decay = (float)(1.0 - lr * (k == 0 ? c.weight_decay : 0.0)), b1 = (float)c.beta1,
            omb1 = (float)(1.0 - c.beta1), b2 = (float)c.beta2, omb2 = (float)(1.0 - c.beta2),
            neg_step = (float)-(lr / bc1), bc2 = (float)bc2s, eps = (float)c.eps;
      for (size_t i = 0; i < p[k].count; i++) {
        float g = p[k].grad[i];
        float pe = ref_w[k][i] * decay;
        float me = ref_m[k][i] * b1 + omb1 * g;
        float ve = ref_v[k][i] * b2 + omb2 * g * g;
        float denom = sqrtf(ve) / bc2 + eps;
        ref_m[k][i] = me;
        ref_v[k][i] = ve;
        ref_w[k][i] = pe + (neg_step * me) / denom;
      }
    }
    train_optimizer_step(opt, p, 2, lr);
    for (int k = 0; k < 2; k++) {
      size_t bytes = p[k].count * sizeof(float);
      cr_assert_eq(memcmp(p[k].value, ref_w[k], bytes), 0, "step %d: %s", step, p[k].name);
      cr_assert_eq(memcmp(train_optimizer_slot(opt, (size_t)k, 0), ref_m[k], bytes), 0, "step %d: m", step);
      cr_assert_eq(memcmp(train_optimizer_slot(opt, (size_t)k, 1), ref_v[k], bytes), 0, "step %d: v", step);
    }
  }
  train_optimizer_free(opt);
  for (int k = 0; k < 2; k++) {
    free(p[k].value);
    free(p[k].grad);
    free(ref_w[k]);
    free(ref_m[k]);
    free(ref_v[k]);
  }
}

Test(optim_passes, unscale_measures_and_finds_every_non_finite_value) {
  TrainParam p = {.name = "big", .rank = 1, .dims = {(int64_t)BIG}, .count = BIG};
  p.grad = malloc(BIG * sizeof(float));
  p.value = NULL;
  long double want = 0;
  for (size_t i = 0; i < BIG; i++) {
    p.grad[i] = pattern(i, 3) * 1024.0f;
    float unscaled = p.grad[i] * (1.0f / 1024.0f);
    want += (long double)unscaled * unscaled;
  }
  double norm;
  cr_assert(train_grads_unscale_norm(&p, 1, 1024.0f, &norm));
  size_t differ = 0;
  for (size_t i = 0; i < BIG; i++) differ += p.grad[i] != pattern(i, 3) * 1024.0f * (1.0f / 1024.0f);
  cr_assert_eq(differ, 0, "every gradient is unscaled once");
  double expect = (double)(float)sqrtl(want);
  cr_assert_leq(fabs(norm - expect), 1e-6 * expect, "norm %.9g, expected %.9g", norm, expect);
  cr_assert_eq(norm, train_grads_global_norm(&p, 1), "the same measure as train_grads_global_norm");
  /* In a vector group, in the second chunk, and in the tail. */
  size_t at[3] = {17, (1u << 20) + 3, BIG - 1};
  float bad[3] = {INFINITY, NAN, -INFINITY};
  for (int k = 0; k < 3; k++) {
    p.grad[at[k]] = bad[k];
    cr_assert_not(train_grads_unscale_norm(&p, 1, 1.0f, NULL), "element %zu", at[k]);
    cr_assert_not(train_grads_unscale(&p, 1, 2.0f));
    for (size_t i = 0; i < BIG; i++) p.grad[i] = pattern(i, 3);
  }
  free(p.grad);
}

/* The unscaling and the clipping applied as the optimizer reads each
 * gradient (train_grad_scale, train_optimizer_step_counted) give the bits of
 * their own passes before a plain step, and leave the gradients unwritten. */
static void folded_scaling_is_the_passes(TrainOptimizerKind kind) {
  TrainParam p[2] = {{.name = "big", .rank = 2, .dims = {1, (int64_t)BIG}, .count = BIG},
                     {.name = "small", .rank = 1, .dims = {5}, .count = 5}};
  TrainParam q[2];
  memcpy(q, p, sizeof p);
  const float scale = 1000.0f; /* not a power of two: unscaling rounds */
  for (int k = 0; k < 2; k++) {
    size_t n = p[k].count;
    p[k].value = malloc(n * sizeof(float));
    p[k].grad = malloc(n * sizeof(float));
    q[k].value = malloc(n * sizeof(float));
    q[k].grad = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
      q[k].value[i] = p[k].value[i] = pattern(i, 5u + (uint32_t)k) * 50.0f;
      q[k].grad[i] = p[k].grad[i] = pattern(i, 11u + (uint32_t)k) * scale;
    }
  }
  TrainOptimizerConfig c = train_optimizer_defaults(kind);
  if (kind == TRAIN_OPT_SGD) c.momentum = 0.9, c.weight_decay = 0.01;
  TrainOptimizer *passes = train_optimizer_new(&c, p, 2, NULL), *folded = train_optimizer_new(&c, q, 2, NULL);
  double norm_p, norm_q;
  cr_assert(train_grads_unscale_norm(p, 2, scale, &norm_p));
  cr_assert(train_grads_measure_unscaled(q, 2, scale, &norm_q));
  cr_assert_eq(norm_p, norm_q, "the same norm, %.17g and %.17g", norm_p, norm_q);
  double max_norm = norm_p / 3; /* clips */
  train_grads_clip_measured(p, 2, max_norm, norm_p);
  train_optimizer_step(passes, p, 2, 1e-3);
  TrainGradScale gs = train_grad_scale(scale, max_norm, norm_q);
  cr_assert_lt(gs.clip, 1.0f);
  OrionValuesFit fit[2] = {{.limit = INFINITY}, {.limit = INFINITY}};
  train_optimizer_step_counted(folded, q, 2, 1e-3, &gs, fit);
  for (int k = 0; k < 2; k++) {
    size_t bytes = p[k].count * sizeof(float);
    cr_assert_eq(memcmp(p[k].value, q[k].value, bytes), 0, "%s", p[k].name);
    for (uint32_t s = 0; s < train_optimizer_slots(passes); s++)
      cr_assert_eq(memcmp(train_optimizer_slot(passes, (size_t)k, s), train_optimizer_slot(folded, (size_t)k, s),
                          bytes), 0, "%s slot %u", p[k].name, s);
    size_t changed = 0;
    for (size_t i = 0; i < q[k].count; i++) changed += q[k].grad[i] != pattern(i, 11u + (uint32_t)k) * scale;
    cr_assert_eq(changed, 0, "the gradients were only read");
  }
  train_optimizer_free(passes);
  train_optimizer_free(folded);
  for (int k = 0; k < 2; k++) {
    free(p[k].value);
    free(p[k].grad);
    free(q[k].value);
    free(q[k].grad);
  }
}

Test(optim_passes, adamw_unscales_and_clips_as_it_reads_with_the_passes_bits) {
  folded_scaling_is_the_passes(TRAIN_OPT_ADAMW);
}

Test(optim_passes, sgd_unscales_and_clips_as_it_reads_with_the_passes_bits) {
  folded_scaling_is_the_passes(TRAIN_OPT_SGD);
}

TestSuite(conversion);

/* The vectorised fp32 -> fp16 conversion (F16C when the CPU has it) gives
 * fp16_from_float's bits: every 65537th bit pattern (all exponents, both
 * signs, NaN payloads), each fp16 rounding boundary and its neighbours, in
 * arrays whose length is no multiple of 8. */
Test(conversion, the_array_conversion_is_the_scalar_one) {
  enum { N = 65536 + 3 * 2048 * 2 + 5 };
  float *src = malloc(N * sizeof *src);
  uint16_t *out = malloc(N * sizeof *out);
  size_t n = 0;
  for (uint64_t u = 0; u < (1ull << 32); u += 65537) {
    uint32_t bits = (uint32_t)u;
    memcpy(&src[n++], &bits, sizeof bits);
  }
  for (uint32_t h = 0; h < 0x7C00; h += 8) { /* halfway between fp16 neighbours, and one float step either side */
    float mid = (fp16_to_float((uint16_t)h) + fp16_to_float((uint16_t)(h + 1))) / 2;
    src[n++] = mid;
    src[n++] = -nextafterf(mid, 0);
    src[n++] = nextafterf(mid, INFINITY);
  }
  cr_assert_leq(n, N);
  fp16_from_float_array(out, src, n);
  for (size_t i = 0; i < n; i++) cr_assert_eq(out[i], fp16_from_float(src[i]), "element %zu (%a)", i, (double)src[i]);
  free(src);
  free(out);
}
