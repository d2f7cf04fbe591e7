/*
 * The training loop (orion/train_loop.h) on testsuite/train/model/bigram.oir,
 * a model with a hand-written backward and a training contract from
 * bigram.train.json (no compiler-made gradients): loss trajectories in fp32
 * numerics against PyTorch (bigram_fixture.json, made by
 * testsuite/make_train_fixture.py), resume bit-identity, the export patched
 * back into the package, no compiles, the refusals, and fp16 overflow in
 * ane numerics (bigram16.oir).
 */
#define _XOPEN_SOURCE 700

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/compile.h"
#include "orion/npy.h"
#include "orion/patch.h"
#include "orion/train_checkpoint.h"
#include "orion/train_loop.h"

#define MODEL ORION_SOURCE_ROOT "/testsuite/train/model"
#define MAX_STEPS 64

static char dir[] = "/tmp/orion-train-loop-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(dir)); }
static void teardown(void) { remove_tree(dir); }

TestSuite(train_loop, .init = setup, .fini = teardown);

static char *path_in(const char *name) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%s/%s", dir, name);
  return sb.data;
}

static const char *text_of(const StrBuf *sb) { return sb->data ? sb->data : ""; }

/* Compiles an .oir file of MODEL with (contract != NULL) a training contract into dir/name. */
static char *compile(const char *oir, const char *contract, const char *name) {
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
  if (contract) cr_assert(orion_train_contract_read_json(contract, &t, &d), "%s", text_of(&msgs));
  o.training = t;
  OrionCompileResult r;
  cr_assert(orion_compile_file(oir, &o, out, &r, &d), "%s", text_of(&msgs));
  orion_compile_result_free(&r);
  package_training_free(t);
  sb_free(&msgs);
  return out;
}

static char *bigram(void) { return compile(MODEL "/bigram.oir", MODEL "/bigram.train.json", "bigram.anepkg"); }

typedef struct Steps {
  OrionTrainLogEntry e[MAX_STEPS];
  uint32_t n;
} Steps;

static void record(void *ctx, const OrionTrainLogEntry *e, uint64_t total) {
  (void)total;
  Steps *s = ctx;
  cr_assert_lt(s->n, MAX_STEPS);
  s->e[s->n++] = *e;
}

static void options(OrionTrainOptions *o, const char *pkg, Steps *steps) {
  orion_train_options_init(o);
  o->package = pkg;
  o->work_dir = dir;
  o->data = MODEL "/bigram_tokens.npy";
  o->numerics = ORION_NUMERICS_FP32;
  o->steps = 20;
  o->on_step = record;
  o->ctx = steps;
}

/* Runs the loop; true/false as it returned, messages in *msgs. */
static bool run(const OrionTrainOptions *o, OrionTrainReport *r, StrBuf *msgs) {
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  sb_init(msgs);
  d.capture = msgs;
  /* Each run's working copy goes into a directory of its own. */
  char *work = path_in("work-XXXXXX");
  cr_assert_not_null(mkdtemp(work));
  OrionTrainOptions copy = *o;
  copy.work_dir = work;
  bool ok = orion_train_run(&copy, r, &d);
  free(work);
  srcset_free(&sources);
  return ok;
}

static cJSON *fixture(void) {
  char *text;
  size_t len;
  const char *err;
  cr_assert(read_file(MODEL "/bigram_fixture.json", 1u << 20, &text, &len, &err), "%s", err);
  cJSON *j = cJSON_ParseWithLength(text, len);
  free(text);
  cr_assert_not_null(j);
  return j;
}

static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  cr_assert(cJSON_IsNumber(v), "fixture key %s", key);
  return v->valuedouble;
}

/* The options of a fixture run. */
static void fixture_options(const cJSON *run, OrionTrainOptions *o) {
  bool sgd = !strcmp(cJSON_GetObjectItemCaseSensitive(run, "optimizer")->valuestring, "sgd");
  o->optimizer = train_optimizer_defaults(sgd ? TRAIN_OPT_SGD : TRAIN_OPT_ADAMW);
  o->optimizer.weight_decay = num(run, "weight_decay");
  if (sgd) {
    o->optimizer.momentum = num(run, "momentum");
  } else {
    o->optimizer.beta1 = num(run, "beta1");
    o->optimizer.beta2 = num(run, "beta2");
    o->optimizer.eps = num(run, "eps");
  }
  bool cosine = !strcmp(cJSON_GetObjectItemCaseSensitive(run, "schedule")->valuestring, "cosine");
  o->schedule = (TrainSchedule){.kind = cosine ? TRAIN_SCHEDULE_COSINE : TRAIN_SCHEDULE_CONSTANT, .lr = num(run, "lr"),
                                .min_lr = num(run, "min_lr"), .warmup = (uint64_t)num(run, "warmup")};
  o->clip_grad = num(run, "clip");
  o->accum = (uint32_t)num(run, "accum");
}

Test(train_loop, trajectories_match_pytorch_in_fp32) {
  char *pkg = bigram();
  cJSON *fx = fixture();
  const cJSON *runs = cJSON_GetObjectItemCaseSensitive(fx, "runs"), *r;
  uint32_t checked = 0;
  cJSON_ArrayForEach(r, runs) {
    Steps steps = {0};
    OrionTrainOptions o;
    options(&o, pkg, &steps);
    fixture_options(r, &o);
    OrionTrainReport rep;
    StrBuf msgs;
    cr_assert(run(&o, &rep, &msgs), "%s", text_of(&msgs));
    const cJSON *losses = cJSON_GetObjectItemCaseSensitive(r, "losses");
    cr_assert_eq(steps.n, (uint32_t)cJSON_GetArraySize(losses));
    for (uint32_t s = 0; s < steps.n; s++) {
      double want = cJSON_GetArrayItem(losses, (int)s)->valuedouble, got = steps.e[s].loss;
      cr_assert_leq(fabs(got - want), 1e-4 * fabs(want), "%s step %u: loss %.9g, PyTorch %.9g",
                    cJSON_GetObjectItemCaseSensitive(r, "name")->valuestring, s + 1, got, want);
      cr_assert_eq(steps.e[s].step, s + 1);
      cr_assert_not(steps.e[s].skipped);
    }
    cr_assert_eq(rep.compiles, 0);
    cr_assert_eq(rep.weight_updates, 20, "every step updates the weights in place");
    cr_assert_eq(rep.steps_run, 20);
    cr_assert_eq(rep.tokens, 20 * 8 * o.accum);
    orion_train_report_free(&rep);
    sb_free(&msgs);
    checked++;
  }
  cr_assert_eq(checked, 3);
  cJSON_Delete(fx);
  free(pkg);
}

Test(train_loop, resume_is_bit_identical) {
  char *pkg = bigram(), *ck = path_in("ck");
  const char *const kinds[] = {"adamw", "sgd"};
  for (int k = 0; k < 2; k++) {
    remove_tree(ck);
    Steps whole = {0}, resumed = {0};
    OrionTrainOptions o;
    options(&o, pkg, &whole);
    if (k == 1) o.optimizer = train_optimizer_defaults(TRAIN_OPT_SGD), o.optimizer.momentum = 0.9;
    o.schedule = (TrainSchedule){.kind = TRAIN_SCHEDULE_COSINE, .lr = 0.05, .warmup = 2};
    o.shuffle = true;
    o.seed = 7;
    o.accum = 2;
    o.checkpoint_dir = ck;
    o.checkpoint_every = 10;
    OrionTrainReport rep;
    StrBuf msgs;
    cr_assert(run(&o, &rep, &msgs), "%s", text_of(&msgs));
    orion_train_report_free(&rep);
    sb_free(&msgs);
    OrionTrainOptions again = o;
    again.ctx = &resumed;
    again.checkpoint_dir = NULL;
    again.checkpoint_every = 0;
    char *at10 = path_in("ck/step-000000010");
    again.resume = at10;
    cr_assert(run(&again, &rep, &msgs), "%s", text_of(&msgs));
    cr_assert_eq(rep.first_step, 11);
    cr_assert_eq(resumed.n, 10);
    for (uint32_t s = 0; s < 10; s++) {
      cr_assert_eq(resumed.e[s].step, 11 + s);
      cr_assert(memcmp(&resumed.e[s].loss, &whole.e[10 + s].loss, sizeof(double)) == 0,
                "%s step %u: resumed loss %.17g, uninterrupted %.17g", kinds[k], 11 + s, resumed.e[s].loss,
                whole.e[10 + s].loss);
      cr_assert_eq(resumed.e[s].lr, whole.e[10 + s].lr);
    }
    orion_train_report_free(&rep);
    sb_free(&msgs);
    free(at10);
  }
  free(ck);
  free(pkg);
}

/* The mean forward loss over the windows of `data` of a package run as it is. */
static double package_loss(const char *pkg, const char *data) {
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  OrionProgram *p = orion_open(pkg, NULL, &d);
  cr_assert_not_null(p);
  OrionBackend *b = orion_backend_open("cpu", NULL, &d);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_FP32};
  uint32_t fn = orion_function_find(p, "fwd");
  OrionExec *e = orion_backend_prepare(b, p, fn, &po, &d);
  cr_assert_not_null(e);
  TrainDataOptions dopt = {.batch = 2, .seq = 4, .vocab = 8};
  TrainData *td;
  cr_assert(train_data_open(data, &dopt, &td, &d));
  int32_t tokens[8], targets[8];
  int64_t w = train_data_windows(td);
  uint64_t batches = (uint64_t)((w + 1) / 2);
  double sum = 0;
  for (uint64_t k = 0; k < batches; k++) {
    train_data_batch(td, k, tokens, targets);
    OrionTensor in[2], out[3];
    for (uint32_t i = 0; i < 2; i++) {
      const OrionTensorInfo *info = orion_input(p, fn, i);
      in[i] = (OrionTensor){.dtype = MIL_DT_INT32, .rank = 2, .dims = {2, 4},
                            .data = !strcmp(info->name, "tokens") ? tokens : targets};
    }
    cr_assert(orion_exec_run_alloc(e, in, out, &d));
    sum += (double)*(float *)out[0].data;
    for (uint32_t i = 0; i < 3; i++) orion_tensor_free(&out[i]);
  }
  train_data_free(td);
  orion_exec_release(e);
  orion_backend_close(b);
  orion_close(p);
  srcset_free(&sources);
  return sum / (double)batches;
}

Test(train_loop, export_patches_into_the_package) {
  char *pkg = bigram(), *exported = path_in("trained.safetensors");
  double before = package_loss(pkg, MODEL "/bigram_tokens.npy");
  Steps steps = {0};
  OrionTrainOptions o;
  options(&o, pkg, &steps);
  o.schedule.lr = 0.05;
  o.export_path = exported;
  o.eval_data = MODEL "/bigram_tokens.npy";
  OrionTrainReport rep;
  StrBuf msgs;
  cr_assert(run(&o, &rep, &msgs), "%s", text_of(&msgs));
  cr_assert(rep.has_eval);
  cr_assert(steps.e[19].has_eval, "without --eval-every, the last step evaluates");
  cr_assert_not(steps.e[18].has_eval);
  cr_assert_eq(before, package_loss(pkg, MODEL "/bigram_tokens.npy"), "training leaves the package as it was");
  Diag d;
  diag_init(&d, NULL);
  PatchSet set = {0};
  cr_assert(patch_set_add_safetensors(&set, exported, &d));
  cr_assert_eq(set.n, 2);
  cr_assert(package_patch(pkg, set.tensors, set.n, NULL, &d));
  patch_set_free(&set);
  double after = package_loss(pkg, MODEL "/bigram_tokens.npy");
  cr_assert_eq(after, rep.last_eval_loss, "the patched package computes the trained model's loss (%.17g, %.17g)",
               after, rep.last_eval_loss);
  cr_assert_lt(after, before);
  orion_train_report_free(&rep);
  sb_free(&msgs);
  free(exported);
  free(pkg);
}

static void expect_error(const OrionTrainOptions *o, const char *want) {
  OrionTrainReport rep;
  StrBuf msgs;
  cr_assert_not(run(o, &rep, &msgs));
  cr_assert(strstr(text_of(&msgs), want), "expected '%s' in:\n%s", want, text_of(&msgs));
  orion_train_report_free(&rep);
  sb_free(&msgs);
}

static char *token_file(const char *name, const int32_t *v, size_t n) {
  char *p = path_in(name);
  NpyArray a = {.dtype = ORION_DT_INT32, .rank = 1, .dims = {(int64_t)n}, .data = (void *)(uintptr_t)v,
                .nbytes = n * 4};
  Diag d;
  diag_init(&d, NULL);
  cr_assert(npy_write(p, &a, &d));
  return p;
}

Test(train_loop, refusals) {
  Steps steps = {0};
  OrionTrainOptions o;
  char *plain = compile(MODEL "/bigram.oir", NULL, "plain.anepkg");
  options(&o, plain, &steps);
  StrBuf want;
  sb_init(&want);
  sb_printf(&want, "error: '%s' has no training contract (Training in its manifest): compile the model with orionc "
            "--train, or give the forward and backward with orionc --train-contract FILE.json", plain);
  expect_error(&o, want.data);

  char *pkg = bigram();
  options(&o, pkg, &steps);
  const int32_t short_data[] = {1, 2, 3, 4};
  char *shrt = token_file("short.npy", short_data, 4);
  o.data = shrt;
  want.len = 0;
  sb_printf(&want, "error: '%s' has 4 tokens: windows of 4 tokens and the target after them need at least 5", shrt);
  expect_error(&o, want.data);

  const int32_t bad_data[] = {1, 2, 3, 9, 4, 5, 6, 7, 0, 1};
  char *bad = token_file("bad.npy", bad_data, 10);
  o.data = bad;
  want.len = 0;
  sb_printf(&want, "error: '%s': token 9 at position 3 is outside the vocabulary [0, 8)", bad);
  expect_error(&o, want.data);

  /* A checkpoint of this package does not resume another one. */
  char *ck = path_in("ck");
  options(&o, pkg, &steps);
  o.steps = 2;
  o.checkpoint_dir = ck;
  OrionTrainReport rep;
  StrBuf msgs;
  cr_assert(run(&o, &rep, &msgs), "%s", text_of(&msgs));
  orion_train_report_free(&rep);
  sb_free(&msgs);
  char *other = compile(MODEL "/bigram16.oir", MODEL "/bigram.train.json", "other.anepkg");
  options(&o, other, &steps);
  o.steps = 4;
  o.resume = ck;
  Package a, b;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_read(pkg, &a, &d) && package_read(other, &b, &d));
  char ida[24], idb[24];
  orion_train_package_id(&a, ida);
  orion_train_package_id(&b, idb);
  package_free(&a);
  package_free(&b);
  want.len = 0;
  sb_printf(&want, "checkpoint '%s/step-000000002': belongs to package '%s', not to this package '%s'", ck, ida, idb);
  expect_error(&o, want.data);
  sb_free(&want);
  free(ck);
  free(other);
  free(bad);
  free(shrt);
  free(pkg);
  free(plain);
}

Test(train_loop, ane_numerics_skip_an_overflowing_step) {
  char *pkg = compile(MODEL "/bigram16.oir", MODEL "/bigram.train.json", "b16.anepkg");
  char *exported = path_in("b16.safetensors"), *logp = path_in("b16.jsonl");
  Steps steps = {0};
  OrionTrainOptions o;
  options(&o, pkg, &steps);
  o.numerics = ORION_NUMERICS_ANE;
  o.schedule.lr = 0.05;
  o.export_path = exported;
  o.log = logp;
  OrionTrainReport rep;
  StrBuf msgs;
  cr_assert(run(&o, &rep, &msgs), "%s", text_of(&msgs));
  /* 65536 is infinite in fp16: step 1 is skipped, the scale halves, and the rest run. */
  cr_assert_eq(rep.skipped, 1);
  cr_assert(steps.e[0].skipped);
  cr_assert_eq(steps.e[0].loss_scale, 65536.0);
  cr_assert_not(steps.e[1].skipped);
  cr_assert_eq(steps.e[1].loss_scale, 32768.0);
  cr_assert_eq(rep.weight_updates, 19, "a skipped step writes no weights");
  cr_assert_eq(rep.compiles, 0);
  cr_assert_lt(steps.e[19].loss, steps.e[1].loss);
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  OrionTrainLogData log;
  cr_assert(orion_train_log_read(logp, &log, &d));
  cr_assert_eq(log.n, 20);
  cr_assert(log.entries[0].skipped);
  cr_assert_eq(log.entries[0].loss_scale, 65536.0);
  cr_assert_not(log.entries[1].skipped);
  orion_train_log_data_free(&log);
  /* Nothing non-finite reached the weights: the export holds the masters, the package's fp16 weights follow them. */
  PatchSet set = {0};
  cr_assert(patch_set_add_safetensors(&set, exported, &d));
  for (uint32_t i = 0; i < set.n; i++)
    for (uint64_t k = 0; k < set.tensors[i].nbytes / 4; k++)
      cr_assert(isfinite(((const float *)set.tensors[i].data)[k]));
  cr_assert(package_patch(pkg, set.tensors, set.n, NULL, &d), "the trained weights fit fp16");
  patch_set_free(&set);
  srcset_free(&sources);
  orion_train_report_free(&rep);
  sb_free(&msgs);
  free(logp);
  free(exported);
  free(pkg);
}

static char *float_file(const char *name, const float *v, int64_t n) {
  char *p = path_in(name);
  NpyArray a = {.dtype = ORION_DT_FP32, .rank = 1, .dims = {n}, .data = (void *)(uintptr_t)v, .nbytes = (size_t)n * 4};
  Diag d;
  diag_init(&d, NULL);
  cr_assert(npy_write(p, &a, &d));
  return p;
}

Test(train_loop, fixed_inputs) {
  char *pkg = bigram(), *shifted = compile(MODEL "/bigram_shift.oir", MODEL "/bigram.train.json", "shift.anepkg");
  const float zeros[8] = {0};
  char *zero = float_file("zero.npy", zeros, 8), *wrong = float_file("wrong.npy", zeros, 7);
  Steps plain = {0}, with = {0};
  OrionTrainOptions o;
  options(&o, pkg, &plain);
  o.steps = 6;
  OrionTrainReport rep;
  StrBuf msgs;
  cr_assert(run(&o, &rep, &msgs), "%s", text_of(&msgs));
  orion_train_report_free(&rep);
  sb_free(&msgs);
  options(&o, shifted, &with);
  o.steps = 6;
  expect_error(&o, "error: the forward input 'shift' needs a value: --input shift=FILE.npy");
  OrionTrainInputFile in = {"shift", wrong};
  o.inputs = &in;
  o.ninputs = 1;
  StrBuf want;
  sb_init(&want);
  sb_printf(&want, "error: --input shift=%s: the array does not have the input's dtype and shape", wrong);
  expect_error(&o, want.data);
  in.file = zero;
  with.n = 0;
  cr_assert(run(&o, &rep, &msgs), "%s", text_of(&msgs));
  cr_assert_eq(with.n, 6);
  for (uint32_t s = 0; s < 6; s++)
    cr_assert(memcmp(&with.e[s].loss, &plain.e[s].loss, sizeof(double)) == 0, "step %u: %.17g with shift 0, %.17g without",
              s + 1, with.e[s].loss, plain.e[s].loss);
  orion_train_report_free(&rep);
  sb_free(&msgs);
  sb_free(&want);
  free(wrong);
  free(zero);
  free(shifted);
  free(pkg);
}
