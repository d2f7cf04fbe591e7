/*
 * The decode loop (runtime/generate/) on testsuite/generate/tiny_gen.oir,
 * a 2-layer model in the generation contract: greedy prefill + decode
 * against a prefill over the whole sequence at every position (fp32
 * numerics, logits within 1e-4 of their scale), the bucket choice, reset,
 * the cache never copied (a recording backend sees the same buffers bound
 * on every decode run), the errors of a full cache and a long prompt, and
 * the contract checker's messages on small packages that break it.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/compile.h"
#include "orion/fp16.h"
#include "orion/generate.h"

#define TINY ORION_SOURCE_ROOT "/testsuite/generate/tiny_gen.oir"
#define V 61
#define C 16

static char dir[] = "/tmp/orion-generate-XXXXXX";
static SourceSet sources;
static StrBuf msgs;
static Diag d;

static void setup(void) {
  cr_assert_not_null(mkdtemp(dir));
  srcset_init(&sources);
  sb_init(&msgs);
  diag_init(&d, &sources);
  d.capture = &msgs;
  d.suppress_warnings = true;
}
static void teardown(void) {
  remove_tree(dir);
  sb_free(&msgs);
  srcset_free(&sources);
}

TestSuite(generate, .init = setup, .fini = teardown);

static const char *text_of(const StrBuf *sb) { return sb->data ? sb->data : ""; }

static char *path_in(const char *name) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%s/%s", dir, name);
  return sb.data;
}

static char *compile(const char *oir, const char *name) {
  char *out = path_in(name);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  OrionCompileResult r;
  cr_assert(orion_compile_file(oir, &o, out, &r, &d), "%s", text_of(&msgs));
  orion_compile_result_free(&r);
  sb_free(&msgs); /* the compiler's notes */
  sb_init(&msgs);
  return out;
}

static char *compile_text(const char *text, const char *name) {
  char *oir = path_in("src.oir");
  FILE *f = fopen(oir, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  char *pkg = compile(oir, name);
  free(oir);
  return pkg;
}

static int32_t argmax(const float *x, uint32_t n) {
  uint32_t b = 0;
  for (uint32_t i = 1; i < n; i++)
    if (x[i] > x[b]) b = i;
  return (int32_t)b;
}

/* Every row of prefill_16's logits over the 16 tokens. */
static float *prefill_all(OrionProgram *p, int32_t *seq) {
  OrionBackend *b = orion_backend_open("cpu", NULL, &d);
  cr_assert_not_null(b, "%s", text_of(&msgs));
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_FP32};
  OrionExec *e = orion_backend_prepare(b, p, orion_function_find(p, "prefill_16"), &po, &d);
  cr_assert_not_null(e, "%s", text_of(&msgs));
  OrionTensor in = {.dtype = MIL_DT_INT32, .rank = 2, .dims = {1, C}, .data = seq};
  OrionTensor out[5];
  cr_assert(orion_exec_run_alloc(e, &in, out, &d), "%s", text_of(&msgs));
  float *logits = xmalloc(sizeof(float) * C * V);
  memcpy(logits, out[0].data, sizeof(float) * C * V);
  for (int i = 0; i < 5; i++) orion_tensor_free(&out[i]);
  orion_exec_release(e);
  orion_backend_close(b);
  return logits;
}

static float scale_of(const float *x, uint32_t n) {
  float m = 0;
  for (uint32_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
  return m;
}

/* Greedy from a prompt of n tokens until the cache is full: the
 * generated ids are the whole-sequence prefill's argmax at each position,
 * and each step's logits are that prefill's row. */
static void check_greedy(uint32_t n, uint32_t want_bucket) {
  char *pkg = compile(TINY, "tiny.anepkg");
  OrionProgram *p = orion_open(pkg, NULL, &d);
  cr_assert_not_null(p, "%s", text_of(&msgs));
  OrionGenOptions o = {.numerics = ORION_NUMERICS_FP32};
  OrionGen *g = orion_gen_open_program(p, pkg, &o, &d);
  cr_assert_not_null(g, "%s", text_of(&msgs));
  int32_t seq[C] = {3, 17, 42, 5, 9, 60, 1, 0};
  float rows[C][V];
  cr_assert(orion_gen_prefill(g, seq, n, &d), "%s", text_of(&msgs));
  cr_assert_eq(orion_gen_timings(g).prefill_bucket, want_bucket);
  cr_assert_eq(orion_gen_position(g), n);
  for (uint32_t pos = n;; pos++) {
    memcpy(rows[pos - 1], orion_gen_logits(g), sizeof rows[0]);
    if (pos == C) break;
    seq[pos] = argmax(orion_gen_logits(g), V);
    cr_assert(orion_gen_step(g, seq[pos], &d), "%s", text_of(&msgs));
  }
  cr_assert_eq(orion_gen_timings(g).decode_steps, C - n);
  float *all = prefill_all(p, seq);
  for (uint32_t t = n - 1; t < C; t++) {
    const float *want = all + (size_t)t * V;
    float tol = 1e-4f * scale_of(want, V);
    for (uint32_t i = 0; i < V; i++)
      cr_assert(fabsf(rows[t][i] - want[i]) <= tol, "position %u logit %u: decode %g, prefill %g", t, i,
                (double)rows[t][i], (double)want[i]);
    if (t + 1 < C) cr_assert_eq(seq[t + 1], argmax(want, V), "position %u", t + 1);
  }
  /* past the cache */
  cr_assert_not(orion_gen_step(g, seq[C - 1], &d));
  cr_assert_str_eq(text_of(&msgs),
                   "orionc: error: the KV cache is full: all 16 positions hold tokens (the package's context length)\n");
  free(all);
  orion_gen_close(g);
  orion_close(p);
  free(pkg);
}

Test(generate, greedy_decode_equals_prefill_bucket_16) { check_greedy(5, 16); }
Test(generate, greedy_decode_equals_prefill_bucket_4) { check_greedy(3, 4); }
Test(generate, greedy_decode_from_a_full_bucket) { check_greedy(4, 4); }

Test(generate, reset_gives_the_same_logits) {
  char *pkg = compile(TINY, "tiny.anepkg");
  OrionGen *g = orion_gen_open(pkg, NULL, &d);
  cr_assert_not_null(g, "%s", text_of(&msgs));
  int32_t prompt[3] = {8, 9, 10};
  float first[V];
  cr_assert(orion_gen_prefill(g, prompt, 3, &d));
  cr_assert(orion_gen_step(g, 11, &d));
  memcpy(first, orion_gen_logits(g), sizeof first);
  cr_assert(orion_gen_step(g, 12, &d));
  orion_gen_reset(g);
  cr_assert_eq(orion_gen_position(g), 0);
  cr_assert(orion_gen_prefill(g, prompt, 3, &d));
  cr_assert(orion_gen_step(g, 11, &d));
  cr_assert_arr_eq(orion_gen_logits(g), first, sizeof first);
  orion_gen_close(g);
  free(pkg);
}

Test(generate, prompt_errors) {
  char *pkg = compile(TINY, "tiny.anepkg");
  OrionGen *g = orion_gen_open(pkg, NULL, &d);
  cr_assert_not_null(g, "%s", text_of(&msgs));
  int32_t ids[17] = {0};
  cr_assert_not(orion_gen_prefill(g, ids, 17, &d));
  cr_assert_not(orion_gen_prefill(g, ids, 0, &d));
  ids[2] = 61;
  cr_assert_not(orion_gen_prefill(g, ids, 3, &d));
  cr_assert_not(orion_gen_step(g, 1, &d));
  cr_assert_str_eq(text_of(&msgs),
                   "orionc: error: the prompt has 17 tokens, more than the largest prefill bucket (prefill_16)\n"
                   "orionc: error: the prompt is empty (prefill needs at least one token)\n"
                   "orionc: error: prompt token 2 is id 61, outside the vocabulary (0 to 60)\n"
                   "orionc: error: a decode step before the prefill\n");
  orion_gen_close(g);
  free(pkg);
}

/* tiny_gen.oir rewritten: with fp16 activations (D = fp16: every fp32
 * made fp16, the logits cast back to fp32 as the contract wants), or with
 * its classifier tiled in two (a concat, which split-concat turns into the
 * output group `logits` of two parts). */
static char *variant(bool fp16, const char *name) {
  char *text;
  size_t len;
  const char *why;
  cr_assert(read_file(TINY, 1 << 20, &text, &len, &why), "%s", why);
  StrBuf sb;
  sb_init(&sb);
  for (const char *p = text; *p;) {
    const char *lg = strstr(p, "logits: fp32["), *f32 = strstr(p, "fp32");
    if (lg && lg == f32 - 8) { /* "logits: fp32[DIMS] = linear(f, wte);" */
      const char *dims = lg + 13, *end = strchr(dims, ']'), *semi = strchr(end, ';');
      sb_putn(&sb, p, (size_t)(lg - p));
      if (fp16)
        sb_printf(&sb, "lg16 = linear(f, wte);\n  logits: fp32[%.*s] = cast(lg16, dtype=\"fp32\")", (int)(end - dims),
                  dims);
      else
        sb_printf(&sb, "w_lo = slice(wte, begin=[0, 0], end=[30, 32]);\n  w_hi = slice(wte, begin=[30, 0], end=[61, 32]);\n"
                       "  l_lo = linear(f, w_lo);\n  l_hi = linear(f, w_hi);\n"
                       "  logits: fp32[%.*s] = concat(l_lo, l_hi, axis=-1)", (int)(end - dims), dims);
      p = semi;
    } else if (f32 && fp16) {
      sb_putn(&sb, p, (size_t)(f32 - p));
      sb_puts(&sb, "fp16");
      p = f32 + 4;
    } else if (lg) {
      sb_putn(&sb, p, (size_t)(lg - p));
      p = lg;
    } else {
      sb_puts(&sb, p);
      break;
    }
  }
  free(text);
  char *pkg = compile_text(sb.data, name);
  sb_free(&sb);
  return pkg;
}

static char *fp16_variant(void) { return variant(true, "tiny16.anepkg"); }

/* The logits in two parts (an output group): the same ids and logits as
 * tiny_gen's one output, the parts bound into one buffer. */
Test(generate, logits_in_an_output_group) {
  char *plain = compile(TINY, "tiny.anepkg"), *tiled = variant(false, "tiled.anepkg");
  OrionGenOptions o = {.numerics = ORION_NUMERICS_FP32};
  OrionGen *a = orion_gen_open(plain, &o, &d), *b = orion_gen_open(tiled, &o, &d);
  cr_assert(a && b, "%s", text_of(&msgs));
  cr_assert_eq(orion_gen_shape(a)->decode_logits.nparts, 1);
  const OrionGenLogits *dl = &orion_gen_shape(b)->decode_logits;
  cr_assert_eq(dl->nparts, 2);
  cr_assert_eq(dl->width[0], 30);
  cr_assert_eq(dl->width[1], 31);
  cr_assert_eq(orion_gen_shape(b)->bucket_logits[1].nparts, 2);
  int32_t prompt[5] = {3, 17, 42, 5, 9};
  cr_assert(orion_gen_prefill(a, prompt, 5, &d) && orion_gen_prefill(b, prompt, 5, &d), "%s", text_of(&msgs));
  const float *first = NULL;
  for (int step = 0; step < 8; step++) {
    const float *x = orion_gen_logits(a), *y = orion_gen_logits(b);
    float tol = 1e-5f * scale_of(x, V);
    for (uint32_t i = 0; i < V; i++) cr_assert(fabsf(x[i] - y[i]) <= tol, "step %d logit %u", step, i);
    int32_t next = argmax(x, V);
    cr_assert_eq(next, argmax(y, V));
    cr_assert(orion_gen_step(a, next, &d) && orion_gen_step(b, next, &d), "%s", text_of(&msgs));
    if (!first) first = orion_gen_logits(b);
    cr_assert_eq(orion_gen_logits(b), first); /* the one buffer, every step */
  }
  orion_gen_close(a), orion_gen_close(b);
  free(plain), free(tiled);
}

/* D = fp16 in ane numerics: the mask holds fp16 bits, the cache fp16 rows,
 * and decode's logits follow prefill's within fp16 rounding (the two
 * compute attention differently: measured 1.7e-3 of the scale; the bound
 * is 1e-2). */
Test(generate, fp16_cache_and_mask) {
  char *pkg = fp16_variant();
  OrionProgram *p = orion_open(pkg, NULL, &d);
  cr_assert_not_null(p, "%s", text_of(&msgs));
  OrionGen *g = orion_gen_open_program(p, pkg, NULL, &d);
  cr_assert_not_null(g, "%s", text_of(&msgs));
  cr_assert_eq(orion_gen_shape(g)->dtype, MIL_DT_FP16);
  int32_t seq[C] = {3, 17, 42, 5, 9};
  float rows[C][V];
  cr_assert(orion_gen_prefill(g, seq, 5, &d), "%s", text_of(&msgs));
  uint32_t n;
  const OrionTensor *in = orion_gen_decode_inputs(g, &n);
  const OrionTensor *mask = NULL;
  for (uint32_t i = 0; i < n; i++)
    if (in[i].rank == 4 && in[i].dims[2] == 1) mask = &in[i];
  cr_assert_not_null(mask);
  cr_assert_eq(mask->dtype, MIL_DT_FP16);
  const uint16_t *m = mask->data;
  cr_assert(fp16_to_float(fp16_from_float(-30000.0f)) == -30000.0f);
  for (uint32_t j = 0; j < C; j++) cr_assert_eq(m[j], j < 5 ? 0 : fp16_from_float(-30000.0f), "mask[%u]", j);
  for (uint32_t pos = 5;; pos++) {
    memcpy(rows[pos - 1], orion_gen_logits(g), sizeof rows[0]);
    if (pos == C) break;
    seq[pos] = argmax(orion_gen_logits(g), V);
    cr_assert(orion_gen_step(g, seq[pos], &d), "%s", text_of(&msgs));
  }
  for (uint32_t j = 0; j < C; j++) cr_assert_eq(m[j], 0, "mask[%u]", j);
  OrionBackend *b = orion_backend_open("cpu", NULL, &d);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  OrionExec *e = orion_backend_prepare(b, p, orion_function_find(p, "prefill_16"), &po, &d);
  cr_assert_not_null(e, "%s", text_of(&msgs));
  OrionTensor tin = {.dtype = MIL_DT_INT32, .rank = 2, .dims = {1, C}, .data = seq};
  OrionTensor out[5];
  cr_assert(orion_exec_run_alloc(e, &tin, out, &d), "%s", text_of(&msgs));
  float worst = 0;
  for (uint32_t t = 4; t < C; t++) {
    const float *want = (const float *)out[0].data + (size_t)t * V;
    float scale = scale_of(want, V);
    for (uint32_t i = 0; i < V; i++) worst = fmaxf(worst, fabsf(rows[t][i] - want[i]) / scale);
  }
  cr_assert_lt(worst, 1e-2f, "decode's fp16 logits are %g of the scale from prefill's", (double)worst);
  for (int i = 0; i < 5; i++) orion_tensor_free(&out[i]);
  orion_exec_release(e);
  orion_backend_close(b);
  orion_gen_close(g);
  orion_close(p);
  free(pkg);
}

/* ---- the cache is bound in place: a backend that records decode's inputs ---- */

typedef struct Recorder {
  void *decode_exec;
  uint32_t runs;
  const void *data[8];
  bool same;
} Recorder;
static Recorder rec;

static void *rec_prepare(void *impl, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt, Diag *dg) {
  void *e = orion_backend_cpu.prepare(impl, p, fn, opt, dg);
  if (fn == orion_function_find(p, "decode")) rec.decode_exec = e;
  return e;
}

static bool rec_run(void *exec, const OrionTensor *in, const OrionTensor *out, Diag *dg) {
  if (exec == rec.decode_exec) {
    for (int i = 0; i < 7; i++) {
      if (rec.runs && rec.data[i] != in[i].data) rec.same = false;
      rec.data[i] = in[i].data;
    }
    rec.runs++;
  }
  return orion_backend_cpu.run(exec, in, out, dg);
}

Test(generate, cache_is_never_copied) {
  char *pkg = compile(TINY, "tiny.anepkg");
  OrionBackendVtable vt = orion_backend_cpu;
  vt.name = "recorder", vt.prepare = rec_prepare, vt.run = rec_run;
  rec = (Recorder){.same = true};
  OrionBackend *b = orion_backend_open_vtable(&vt, NULL, &d);
  cr_assert_not_null(b, "%s", text_of(&msgs));
  OrionGenOptions o = {.backend = b};
  OrionGen *g = orion_gen_open(pkg, &o, &d);
  cr_assert_not_null(g, "%s", text_of(&msgs));
  int32_t prompt[2] = {1, 2};
  cr_assert(orion_gen_prefill(g, prompt, 2, &d));
  for (int i = 0; i < 6; i++) cr_assert(orion_gen_step(g, argmax(orion_gen_logits(g), V), &d));
  cr_assert_eq(rec.runs, 6);
  cr_assert(rec.same, "decode ran on other buffers than at its first run");
  uint32_t n;
  const OrionTensor *in = orion_gen_decode_inputs(g, &n);
  cr_assert_eq(n, 7);
  for (uint32_t i = 0; i < n; i++) cr_assert_eq(in[i].data, rec.data[i]);
  orion_gen_close(g);
  orion_backend_close(b);
  free(pkg);
}

/* ---- the contract checker ---- */

/* A small package in (or out of) the contract: cache.1.k has `slots` slots;
 * without decode when `with_decode` is false. The graphs are trivial. */
static char *contract_package(int slots, bool with_decode, bool with_prefill) {
  StrBuf sb;
  sb_init(&sb);
  if (with_decode)
    sb_printf(&sb,
              "func decode(token: int32[1,1], pos: int32[1], mask: fp32[1,1,1,16], cache.0.k: fp32[1,2,16,16],\n"
              "            cache.0.v: fp32[1,2,16,16], cache.1.k: fp32[1,2,%d,16], cache.1.v: fp32[1,2,16,16]) {\n"
              "  param wte: fp32[61,32] = normal(seed=1);\n"
              "  te: fp32[1,1,32] = gather(wte, token, axis=0);\n"
              "  logits = linear(te, wte);\n"
              "  r = reshape(te, shape=[1, 2, 1, 16]);\n"
              "  return logits, new.0.k = r, new.0.v = r, new.1.k = r, new.1.v = r;\n"
              "}\n",
              slots);
  if (with_prefill)
    sb_printf(&sb, "func prefill_4(tokens: int32[1,4]) {\n"
                   "  param wte: fp32[61,32] = normal(seed=1);\n"
                   "  te: fp32[1,4,32] = gather(wte, tokens, axis=0);\n"
                   "  logits = linear(te, wte);\n"
                   "  r4 = reshape(te, shape=[1, 4, 2, 16]);\n"
                   "  r = transpose(r4, perm=[0, 2, 1, 3]);\n"
                   "  return logits, kv.0.k = r, kv.0.v = r, kv.1.k = r, kv.1.v = r;\n"
                   "}\n");
  char *pkg = compile_text(sb.data, "contract.anepkg");
  sb_free(&sb);
  return pkg;
}

static void expect_contract_error(char *pkg, const char *want) {
  OrionProgram *p = orion_open(pkg, NULL, &d);
  cr_assert_not_null(p, "%s", text_of(&msgs));
  sb_free(&msgs);
  sb_init(&msgs);
  OrionGenShape s;
  if (!want) {
    cr_assert(orion_gen_check_contract(p, NULL, &s, &d), "%s", text_of(&msgs));
    cr_assert_eq(s.layers, 2);
    cr_assert_eq(s.kv_heads, 2);
    cr_assert_eq(s.head_dim, 16);
    cr_assert_eq(s.context, 16);
    cr_assert_eq(s.vocab, 61);
    cr_assert_eq(s.nbuckets, 1);
    cr_assert_eq(s.buckets[0], 4);
  } else {
    cr_assert_not(orion_gen_check_contract(p, NULL, &s, &d));
    cr_assert_str_eq(text_of(&msgs), want);
  }
  orion_close(p);
  free(pkg);
}

Test(generate, contract_accepts_a_small_package) { expect_contract_error(contract_package(16, true, true), NULL); }

Test(generate, contract_missing_decode) {
  expect_contract_error(contract_package(16, false, true),
                        "orionc: error: the package has no 'decode' entry (the generation contract, "
                        "docs/generation.md)\n");
}

Test(generate, contract_missing_prefill) {
  expect_contract_error(contract_package(16, true, false),
                        "orionc: error: the package has no 'prefill_T' entry (the generation contract, "
                        "docs/generation.md)\n");
}

Test(generate, contract_mismatched_cache_shape) {
  expect_contract_error(contract_package(8, true, true),
                        "orionc: error: 'decode' input 'cache.1.k' is fp32[1,2,8,16], the contract wants "
                        "fp32[1,2,16,16]\n");
}

Test(generate, open_reports_the_contract) {
  char *pkg = contract_package(16, false, true);
  cr_assert_null(orion_gen_open(pkg, NULL, &d));
  cr_assert(strstr(text_of(&msgs), "no 'decode' entry"), "%s", text_of(&msgs));
  free(pkg);
}

/* ---- stop strings over streamed pieces ---- */

static void push_all(OrionStopMatcher *m, const char *const *pieces, int n, StrBuf *out, int *stopped_at) {
  *stopped_at = -1;
  for (int i = 0; i < n; i++)
    if (orion_stop_push(m, pieces[i], strlen(pieces[i]), out) && *stopped_at < 0) *stopped_at = i;
  if (*stopped_at < 0) orion_stop_finish(m, out);
}

Test(generate, stop_string_spanning_pieces) {
  const char *stops[] = {"<end>", "xyz"};
  const char *pieces[] = {"hello <", "e", "nd> never"};
  OrionStopMatcher m;
  orion_stop_init(&m, stops, 2);
  StrBuf out;
  sb_init(&out);
  int at;
  push_all(&m, pieces, 3, &out, &at);
  cr_assert_eq(at, 2);
  cr_assert_eq(m.found, 0);
  sb_putc(&out, '\0');
  cr_assert_str_eq(out.data, "hello ");
  orion_stop_free(&m);
  sb_free(&out);
}

Test(generate, stop_prefix_that_does_not_complete_is_released) {
  const char *stops[] = {"<end>"};
  const char *pieces[] = {"a <e", "x> b <en"};
  OrionStopMatcher m;
  orion_stop_init(&m, stops, 1);
  StrBuf out;
  sb_init(&out);
  cr_assert_not(orion_stop_push(&m, pieces[0], strlen(pieces[0]), &out));
  cr_assert_eq(out.len, 2); /* "a " shown, "<e" held back */
  int at;
  push_all(&m, pieces + 1, 1, &out, &at);
  cr_assert_eq(at, -1);
  sb_putc(&out, '\0');
  cr_assert_str_eq(out.data, "a <ex> b <en");
  orion_stop_free(&m);
  sb_free(&out);
}

Test(generate, earliest_stop_string_wins) {
  const char *stops[] = {"cd", "bc"};
  OrionStopMatcher m;
  orion_stop_init(&m, stops, 2);
  StrBuf out;
  sb_init(&out);
  cr_assert(orion_stop_push(&m, "abcd", 4, &out));
  cr_assert_eq(m.found, 1);
  cr_assert_eq(out.len, 1);
  cr_assert(orion_stop_push(&m, "more", 4, &out)); /* ignored after the stop */
  cr_assert_eq(out.len, 1);
  orion_stop_free(&m);
  sb_free(&out);
}
