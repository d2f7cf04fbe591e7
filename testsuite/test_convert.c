/*
 * orion-convert against PyTorch: the fixture models of testsuite/generate/
 * (make_hf_fixtures.py: GPT-2 with the transformer. prefix and a tied head;
 * llama with grouped-query attention, tied; llama sharded with a separate
 * head) converted, compiled and run on the CPU backend through the program
 * contract of docs/generation.md, this file playing the caller: prefill, the
 * KV rows copied into the cache, the mask set, decode token by token.
 *
 * Asserted: prefill logits and every decode step's within 1e-4 of PyTorch
 * relative to the logits' scale (max|d| / max|ref|) in fp32 numerics; the
 * same in ane numerics of an fp16 package within ANE_TOLERANCE (see
 * docs/generation.md, "Correctness"); decode's logits at t equal prefill's
 * at t, and from an empty cache at 0; the greedy 32-token continuation
 * identical in fp32 numerics; each weight stored once for all entries.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/backend.h"
#include "orion/compile.h"
#include "orion/convert.h"
#include "orion/fp16.h"
#include "orion/manifest.h"
#include "orion/npy.h"

#define MODELS ORION_SOURCE_ROOT "/testsuite/generate/models"
#define FP32_TOLERANCE 1e-4
/* ane numerics round every op's result to fp16 (relative step 2^-11, about
 * 4.9e-4) through two layers of some 40 ops each: measured 1.9e-3 to 2.8e-3
 * (prefill) and 2.9e-3 to 4.0e-3 (decode steps); the bound, about 20 fp16
 * steps of the logits' scale, leaves room for other kernels' summation
 * orders, while a wrong mask, position or head layout is off by order 1. */
#define ANE_TOLERANCE 1e-2
#define PROMPT_LEN 8 /* the fixtures' decode.npy starts after 8 cached tokens */
#define GREEDY_STEPS 32
#define MASKED -30000.0f

static char dir[] = "/tmp/orion-convert-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(dir)); }
static void teardown(void) { remove_tree(dir); }

TestSuite(convert, .init = setup, .fini = teardown);

static const char *text_of(const StrBuf *sb) { return sb->data ? sb->data : ""; }

static char *path_in(const char *name) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%s/%s", dir, name);
  return sb.data;
}

/* Converts MODELS/model with buckets 8 and 32 and a 64-token cache and
 * compiles the result; returns the package's path. */
static char *convert_and_compile(const char *model, bool fp32) {
  StrBuf name;
  sb_init(&name);
  sb_printf(&name, "%s_%s.oir", model, fp32 ? "fp32" : "fp16");
  char *oir = path_in(name.data);
  ConvertOptions opt = {.output = oir, .seqs = {32, 8}, .nseqs = 2, .ctx = 64, .fp32 = fp32};
  StrBuf src;
  sb_init(&src);
  sb_printf(&src, "%s/%s", MODELS, model);
  opt.model_dir = src.data;
  StrBuf text;
  sb_init(&text);
  char err[1024];
  cr_assert(convert_model(&opt, &text, err, sizeof err), "%s", err);
  const char *why;
  cr_assert(write_file_atomic(oir, text.data, text.len, &why), "%s", why);
  sb_free(&text);
  sb_free(&src);

  name.len = 0;
  sb_printf(&name, "%s_%s.anepkg", model, fp32 ? "fp32" : "fp16");
  char *pkg = path_in(name.data);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  Diag d;
  StrBuf msgs;
  sb_init(&msgs);
  diag_init(&d, NULL);
  d.capture = &msgs;
  d.suppress_warnings = true;
  OrionCompileResult r;
  cr_assert(orion_compile_file(oir, &o, pkg, &r, &d), "%s", text_of(&msgs));
  orion_compile_result_free(&r);
  sb_free(&msgs);
  sb_free(&name);
  free(oir);
  return pkg;
}

static NpyArray fixture(const char *model, const char *file) {
  StrBuf path;
  sb_init(&path);
  sb_printf(&path, "%s/%s/%s.npy", MODELS, model, file);
  NpyArray a;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(npy_read(path.data, &a, &d), "%s", path.data);
  sb_free(&path);
  return a;
}

/* One entry, prepared, with a buffer per input and output. */
typedef struct Entry {
  OrionProgram *p;
  uint32_t fn;
  OrionExec *exec;
  OrionTensor *in, *out;
  uint32_t nin, nout;
} Entry;

static OrionTensor tensor_for(const OrionTensorInfo *t) {
  OrionTensor x = {.dtype = t->dtype, .rank = t->rank};
  memcpy(x.dims, t->dims, sizeof x.dims);
  x.data = calloc(1, t->bytes);
  cr_assert_not_null(x.data);
  return x;
}

static void entry_open(Entry *e, OrionProgram *p, OrionBackend *b, const char *name, OrionNumerics numerics) {
  Diag d;
  StrBuf msgs;
  sb_init(&msgs);
  diag_init(&d, NULL);
  d.capture = &msgs;
  e->p = p;
  e->fn = orion_function_find(p, name);
  cr_assert_neq(e->fn, UINT32_MAX, "no function %s", name);
  OrionPrepareOptions po = {.numerics = numerics};
  e->exec = orion_backend_prepare(b, p, e->fn, &po, &d);
  cr_assert_not_null(e->exec, "%s", text_of(&msgs));
  e->nin = orion_input_count(p, e->fn);
  e->nout = orion_output_count(p, e->fn);
  e->in = calloc(e->nin, sizeof *e->in);
  e->out = calloc(e->nout, sizeof *e->out);
  for (uint32_t i = 0; i < e->nin; i++) e->in[i] = tensor_for(orion_input(p, e->fn, i));
  for (uint32_t i = 0; i < e->nout; i++) e->out[i] = tensor_for(orion_output(p, e->fn, i));
  sb_free(&msgs);
}

static void entry_close(Entry *e) {
  for (uint32_t i = 0; i < e->nin; i++) free(e->in[i].data);
  for (uint32_t i = 0; i < e->nout; i++) free(e->out[i].data);
  free(e->in);
  free(e->out);
}

static OrionTensor *input(Entry *e, const char *name) {
  for (uint32_t i = 0; i < e->nin; i++)
    if (!strcmp(orion_input(e->p, e->fn, i)->name, name)) return &e->in[i];
  cr_assert_fail("no input %s", name);
  return NULL;
}

static OrionTensor *output(Entry *e, const char *name) {
  for (uint32_t i = 0; i < e->nout; i++)
    if (!strcmp(orion_output(e->p, e->fn, i)->name, name)) return &e->out[i];
  cr_assert_fail("no output %s", name);
  return NULL;
}

static void entry_run(Entry *e) {
  Diag d;
  StrBuf msgs;
  sb_init(&msgs);
  diag_init(&d, NULL);
  d.capture = &msgs;
  cr_assert(orion_exec_run(e->exec, e->in, e->out, &d), "%s", text_of(&msgs));
  sb_free(&msgs);
}

static size_t elem_size(const OrionTensor *t) { return t->dtype == MIL_DT_FP16 ? 2 : 4; }

static void set_float(OrionTensor *t, size_t i, float v) {
  if (t->dtype == MIL_DT_FP16) ((uint16_t *)t->data)[i] = fp16_from_float(v);
  else ((float *)t->data)[i] = v;
}

/* The caller's side of the contract: one model's prefill and decode entries,
 * its cache and mask. */
typedef struct Session {
  Entry prefill_short, prefill_long, decode;
  int64_t layers, vocab;
} Session;

static void session_open(Session *s, OrionProgram *p, OrionBackend *b, OrionNumerics numerics) {
  entry_open(&s->prefill_short, p, b, "prefill_8", numerics);
  entry_open(&s->prefill_long, p, b, "prefill_32", numerics);
  entry_open(&s->decode, p, b, "decode", numerics);
  s->layers = 0;
  for (uint32_t i = 0; i < s->decode.nin; i++)
    if (!strncmp(orion_input(p, s->decode.fn, i)->name, "cache.", 6)) s->layers++;
  s->layers /= 2;
  s->vocab = output(&s->decode, "logits")->dims[2];
}

static void session_close(Session *s) {
  entry_close(&s->prefill_short);
  entry_close(&s->prefill_long);
  entry_close(&s->decode);
}

static void set_tokens(OrionTensor *t, const int32_t *ids, int64_t n) {
  memset(t->data, 0, (size_t)t->dims[1] * 4); /* padding: id 0 */
  memcpy(t->data, ids, (size_t)n * 4);
}

/* Rows 0..n-1 of each kv.L.* into the cache, mask[0..n-1] = 0, the rest masked. */
static void fill_cache(Session *s, Entry *prefill, int64_t n) {
  OrionTensor *mask = input(&s->decode, "mask");
  for (int64_t j = 0; j < mask->dims[3]; j++) set_float(mask, (size_t)j, j < n ? 0.0f : MASKED);
  for (int64_t l = 0; l < s->layers; l++)
    for (int kv = 0; kv < 2; kv++) {
      char src_name[64], dst_name[64];
      snprintf(src_name, sizeof src_name, "kv.%lld.%c", (long long)l, kv ? 'v' : 'k');
      snprintf(dst_name, sizeof dst_name, "cache.%lld.%c", (long long)l, kv ? 'v' : 'k');
      const OrionTensor *src = output(prefill, src_name);
      OrionTensor *dst = input(&s->decode, dst_name);
      memset(dst->data, 0, (size_t)(dst->dims[1] * dst->dims[2] * dst->dims[3]) * elem_size(dst));
      size_t row = (size_t)src->dims[3] * elem_size(src);
      for (int64_t h = 0; h < src->dims[1]; h++)
        for (int64_t j = 0; j < n; j++)
          memcpy((char *)dst->data + (size_t)(h * dst->dims[2] + j) * row,
                 (const char *)src->data + (size_t)(h * src->dims[2] + j) * row, row);
    }
}

/* One decode step at `pos`; then new.L.* into slot pos and mask[pos] = 0.
 * Returns decode's logits (valid until the next step). */
static const float *decode_step(Session *s, int32_t token, int32_t pos) {
  Entry *e = &s->decode;
  ((int32_t *)input(e, "token")->data)[0] = token;
  ((int32_t *)input(e, "pos")->data)[0] = pos;
  entry_run(e);
  for (int64_t l = 0; l < s->layers; l++)
    for (int kv = 0; kv < 2; kv++) {
      char src_name[64], dst_name[64];
      snprintf(src_name, sizeof src_name, "new.%lld.%c", (long long)l, kv ? 'v' : 'k');
      snprintf(dst_name, sizeof dst_name, "cache.%lld.%c", (long long)l, kv ? 'v' : 'k');
      const OrionTensor *src = output(e, src_name);
      OrionTensor *dst = input(e, dst_name);
      size_t row = (size_t)src->dims[3] * elem_size(src);
      for (int64_t h = 0; h < src->dims[1]; h++)
        memcpy((char *)dst->data + (size_t)(h * dst->dims[2] + pos) * row, (const char *)src->data + (size_t)h * row,
               row);
    }
  set_float(input(e, "mask"), (size_t)pos, 0.0f);
  return output(e, "logits")->data;
}

/* max|got - want| / max|want| over n values. */
static double relative_error(const float *got, const float *want, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)got[i] - (double)want[i]));
    scale = fmax(scale, fabs((double)want[i]));
  }
  return diff / scale;
}

static int64_t argmax(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

/* Everything the contract promises, for one model in one numerics mode. */
static void check_model(const char *model, bool fp32) {
  char *pkg = convert_and_compile(model, fp32);
  Diag d;
  StrBuf msgs;
  sb_init(&msgs);
  SourceSet sources;
  srcset_init(&sources);
  diag_init(&d, &sources);
  d.capture = &msgs;
  OrionProgram *p = orion_open(pkg, NULL, &d);
  cr_assert_not_null(p, "%s", text_of(&msgs));
  OrionBackend *b = orion_backend_open("cpu", NULL, &d);
  cr_assert_not_null(b, "%s", text_of(&msgs));
  Session s;
  session_open(&s, p, b, fp32 ? ORION_NUMERICS_FP32 : ORION_NUMERICS_ANE);
  double tol = fp32 ? FP32_TOLERANCE : ANE_TOLERANCE;
  NpyArray seq = fixture(model, "seq"), prefill = fixture(model, "prefill"), decode = fixture(model, "decode");
  NpyArray prompt = fixture(model, "prompt"), greedy = fixture(model, "greedy");
  int64_t N = seq.dims[0], V = s.vocab;
  cr_assert_eq(prefill.dims[1], V);

  /* The whole sequence in the 32-token bucket (padded). */
  set_tokens(input(&s.prefill_long, "tokens"), seq.data, N);
  entry_run(&s.prefill_long);
  const float *all = output(&s.prefill_long, "logits")->data;
  double err = relative_error(all, prefill.data, (size_t)(N * V));
  cr_assert(err <= tol, "%s %s: prefill logits off by %g (tolerance %g)", model, fp32 ? "fp32" : "ane", err, tol);

  /* The first 8 tokens cached, the rest one at a time. */
  set_tokens(input(&s.prefill_short, "tokens"), seq.data, PROMPT_LEN);
  entry_run(&s.prefill_short);
  fill_cache(&s, &s.prefill_short, PROMPT_LEN);
  double worst = 0, worst_vs_prefill = 0;
  for (int64_t t = PROMPT_LEN; t < N; t++) {
    const float *got = decode_step(&s, ((const int32_t *)seq.data)[t], (int32_t)t);
    worst = fmax(worst, relative_error(got, (const float *)decode.data + (t - PROMPT_LEN) * V, (size_t)V));
    worst_vs_prefill = fmax(worst_vs_prefill, relative_error(got, all + t * V, (size_t)V));
  }
  cr_assert(worst <= tol, "%s %s: decode logits off by %g (tolerance %g)", model, fp32 ? "fp32" : "ane", worst, tol);
  cr_assert(worst_vs_prefill <= tol, "%s %s: decode and prefill logits differ by %g (tolerance %g)", model,
            fp32 ? "fp32" : "ane", worst_vs_prefill, tol);

  /* Decode alone from an empty cache (every slot masked) gives prefill's first row. */
  fill_cache(&s, &s.prefill_short, 0);
  err = relative_error(decode_step(&s, ((const int32_t *)seq.data)[0], 0), all, (size_t)V);
  cr_assert(err <= tol, "%s %s: decode at position 0 differs from prefill by %g", model, fp32 ? "fp32" : "ane", err);

  if (fp32) { /* greedy: the prompt's prefill, then 31 decode steps */
    int64_t n = prompt.dims[0];
    set_tokens(input(&s.prefill_short, "tokens"), prompt.data, n);
    entry_run(&s.prefill_short);
    fill_cache(&s, &s.prefill_short, n);
    int32_t next = (int32_t)argmax((const float *)output(&s.prefill_short, "logits")->data + (n - 1) * V, V);
    for (int64_t i = 0; i < GREEDY_STEPS; i++) {
      cr_assert_eq(next, ((const int32_t *)greedy.data)[i], "%s: greedy token %lld is %d, PyTorch's %d", model,
                   (long long)i, next, ((const int32_t *)greedy.data)[i]);
      if (i + 1 < GREEDY_STEPS) next = (int32_t)argmax(decode_step(&s, next, (int32_t)(n + i)), V);
    }
  }
  npy_free(&seq);
  npy_free(&prefill);
  npy_free(&decode);
  npy_free(&prompt);
  npy_free(&greedy);
  session_close(&s);
  orion_backend_close(b);
  orion_close(p);
  cr_assert_eq(msgs.len, 0, "%s", text_of(&msgs));
  sb_free(&msgs);
  srcset_free(&sources);
  free(pkg);
}

Test(convert, gpt2_fp32, .timeout = 120) { check_model("gpt2", true); }
Test(convert, gpt2_ane, .timeout = 120) { check_model("gpt2", false); }
Test(convert, llama_gqa_tied_fp32, .timeout = 120) { check_model("llama_tied", true); }
Test(convert, llama_gqa_tied_ane, .timeout = 120) { check_model("llama_tied", false); }
Test(convert, llama_sharded_separate_head_fp32, .timeout = 120) { check_model("llama_sharded", true); }
Test(convert, llama_sharded_separate_head_ane, .timeout = 120) { check_model("llama_sharded", false); }

/* The entries share one weight set: a param has the same blob in every entry
 * that declares it, and weight.bin holds nothing but the distinct blobs. */
Test(convert, entries_share_one_weight_set) {
  char *pkg = convert_and_compile("llama_sharded", false);
  Package pk;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_read(pkg, &pk, &d));
  cr_assert_eq(pk.nfunctions, 3);
  uint64_t offsets[1024], stored = 64; /* the file header */
  uint32_t noffsets = 0, shared = 0;
  for (uint32_t f = 0; f < pk.nfunctions; f++)
    for (uint32_t w = 0; w < pk.functions[f].nweights; w++) {
      const PkgTensor *t = &pk.functions[f].weights[w];
      /* The compiler's own constants (a causal mask per bucket) are not params. */
      for (uint32_t g = 0; g < f && !strstr(t->name, "causal_mask"); g++)
        for (uint32_t v = 0; v < pk.functions[g].nweights; v++)
          if (!strcmp(pk.functions[g].weights[v].name, t->name)) {
            cr_assert_eq(pk.functions[g].weights[v].offset, t->offset, "%s is stored twice", t->name);
            shared++;
            g = f; /* counted once */
            break;
          }
      bool seen = false;
      for (uint32_t i = 0; i < noffsets && !seen; i++) seen = offsets[i] == t->offset;
      if (!seen) {
        cr_assert_lt(noffsets, 1024);
        offsets[noffsets++] = t->offset;
        stored += 64 + (t->bytes + 63) / 64 * 64; /* a metadata record, the data 64-byte aligned */
      }
    }
  /* 23 params (9 per layer, embedding, norm, head, two RoPE tables), in 3 entries. */
  cr_assert_eq(shared, 2 * 23, "%u params shared between entries", shared);
  cr_assert_leq(pk.weights_size, stored, "weight.bin %llu bytes, its distinct blobs %llu",
                (unsigned long long)pk.weights_size, (unsigned long long)stored);
  package_free(&pk);
  free(pkg);
}
