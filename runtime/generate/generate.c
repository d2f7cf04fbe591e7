/*
 * The decode loop over a package in the generation contract: every prefill
 * bucket and decode prepared once, every tensor they read or write allocated
 * once. decode's inputs are bound to the same buffers on every run; the cache
 * and the mask are among them, so a step only writes its new key/value rows
 * (KVH rows of HD elements per layer and k/v) and one mask element.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/stat.h>

#include "orion/fp16.h"
#include "orion/generate.h"

#define NO_SPAN ((SrcSpan){0})
#define MASKED (-30000.0f)

typedef struct GenBucket {
  OrionExec *exec;
  OrionTensor *out; /* logits, kv.L.k/v in the entry's output order (allocated at first use) */
  uint32_t *kv;     /* output indices: kv.L.k = kv[2L], kv.L.v = kv[2L+1] */
} GenBucket;

struct OrionGen {
  OrionProgram *prog;
  bool own_prog, own_backend;
  OrionBackend *backend;
  OrionGenShape shape;
  size_t elem; /* bytes of one D element */
  GenBucket buckets[16];
  OrionExec *decode;
  OrionTensor *din, *dout;  /* decode's inputs and outputs, in its order */
  uint32_t nin, nout;
  uint32_t in_token, in_pos, in_mask, *in_cache;  /* cache.L.k = in_cache[2L] */
  uint32_t *out_new;                              /* new.L.k = out_new[2L] */
  float *decode_logits;     /* with logits in parts: one buffer the parts are bound into */
  float *row;               /* with logits in parts: prefill's last row, joined */
  int32_t *tokens;          /* the prefill input, largest bucket long */
  const float *logits;      /* the next token's */
  uint32_t position;
  OrionGenTimings timings;
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint32_t index_of(const OrionProgram *p, uint32_t fn, bool input, const char *name) {
  uint32_t n = input ? orion_input_count(p, fn) : orion_output_count(p, fn);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp((input ? orion_input(p, fn, i) : orion_output(p, fn, i))->name, name)) return i;
  return UINT32_MAX; /* not reached after the contract check */
}

/* Caller-owned, zeroed tensors for every input or output of fn. */
static OrionTensor *alloc_tensors(const OrionProgram *p, uint32_t fn, bool input, uint32_t *count) {
  uint32_t n = input ? orion_input_count(p, fn) : orion_output_count(p, fn);
  OrionTensor *t = xcalloc(n, sizeof *t);
  for (uint32_t i = 0; i < n; i++) {
    const OrionTensorInfo *info = input ? orion_input(p, fn, i) : orion_output(p, fn, i);
    t[i].dtype = info->dtype, t[i].rank = info->rank;
    memcpy(t[i].dims, info->dims, sizeof t[i].dims);
    t[i].data = xcalloc(1, info->bytes ? info->bytes : 1);
  }
  *count = n;
  return t;
}

static void free_tensors(OrionTensor *t, uint32_t n) {
  for (uint32_t i = 0; t && i < n; i++) free(t[i].data);
  free(t);
}

static void set_mask(OrionGen *g, uint32_t slot, float v) {
  void *m = g->din[g->in_mask].data;
  if (g->shape.dtype == MIL_DT_FP16) ((uint16_t *)m)[slot] = fp16_from_float(v);
  else ((float *)m)[slot] = v;
}

void orion_gen_reset(OrionGen *g) {
  for (uint32_t j = 0; j < g->shape.context; j++) set_mask(g, j, MASKED);
  g->position = 0, g->logits = NULL;
  g->timings = (OrionGenTimings){0};
}

static bool prepare_all(OrionGen *g, const OrionPrepareOptions *po, Diag *d) {
  OrionProgram *p = g->prog;
  const OrionGenShape *s = &g->shape;
  for (uint32_t b = 0; b < s->nbuckets; b++) {
    GenBucket *k = &g->buckets[b];
    if (!(k->exec = orion_backend_prepare(g->backend, p, s->bucket_fn[b], po, d))) return false;
    k->kv = xcalloc(2 * s->layers, sizeof *k->kv);
  }
  if (!(g->decode = orion_backend_prepare(g->backend, p, s->decode_fn, po, d))) return false;
  g->din = alloc_tensors(p, s->decode_fn, true, &g->nin);
  g->dout = alloc_tensors(p, s->decode_fn, false, &g->nout);
  g->in_token = index_of(p, s->decode_fn, true, "token");
  g->in_pos = index_of(p, s->decode_fn, true, "pos");
  g->in_mask = index_of(p, s->decode_fn, true, "mask");
  const OrionGenLogits *dl = &s->decode_logits;
  if (dl->nparts > 1) { /* the parts [1,1,V_i] are consecutive slices of one [V] buffer: no join per step */
    g->decode_logits = xcalloc(s->vocab, sizeof *g->decode_logits);
    for (uint32_t k = 0, at = 0; k < dl->nparts; at += dl->width[k++]) {
      free(g->dout[dl->output[k]].data);
      g->dout[dl->output[k]].data = g->decode_logits + at;
    }
  }
  g->row = xcalloc(s->vocab, sizeof *g->row);
  g->in_cache = xcalloc(2 * s->layers, sizeof *g->in_cache);
  g->out_new = xcalloc(2 * s->layers, sizeof *g->out_new);
  char name[64];
  for (uint32_t l = 0; l < 2 * s->layers; l++) {
    snprintf(name, sizeof name, "cache.%u.%c", l / 2, "kv"[l % 2]);
    g->in_cache[l] = index_of(p, s->decode_fn, true, name);
    snprintf(name, sizeof name, "new.%u.%c", l / 2, "kv"[l % 2]);
    g->out_new[l] = index_of(p, s->decode_fn, false, name);
    for (uint32_t b = 0; b < s->nbuckets; b++) {
      snprintf(name, sizeof name, "kv.%u.%c", l / 2, "kv"[l % 2]);
      g->buckets[b].kv[l] = index_of(p, s->bucket_fn[b], false, name);
    }
  }
  g->tokens = xcalloc(s->buckets[s->nbuckets - 1], sizeof *g->tokens);
  return true;
}

/* The manifest of a package (false after reporting); a bare directory has none. */
static bool read_manifest(const char *path, Package *pkg, bool *have, Diag *d) {
  *have = false;
  if (!path) return true;
  char *manifest = xmalloc(strlen(path) + sizeof PACKAGE_MANIFEST + 1);
  sprintf(manifest, "%s/%s", path, PACKAGE_MANIFEST);
  struct stat st;
  bool exists = stat(manifest, &st) == 0;
  free(manifest);
  if (!exists) return true;
  return *have = package_read(path, pkg, d);
}

OrionGen *orion_gen_open_program(OrionProgram *p, const char *package, const OrionGenOptions *opt, Diag *d) {
  OrionGenOptions none = {0};
  if (!opt) opt = &none;
  Package pkg;
  bool have;
  if (!read_manifest(package, &pkg, &have, d)) return NULL;
  OrionGen *g = xcalloc(1, sizeof *g);
  g->prog = p;
  bool fits = orion_gen_check_contract(p, have ? &pkg : NULL, &g->shape, d);
  if (have) package_free(&pkg);
  if (!fits) goto fail;
  g->elem = orion_tensor_dtype_size(g->shape.dtype);
  g->backend = opt->backend;
  if (!g->backend) {
    g->backend = orion_backend_open(opt->backend_name ? opt->backend_name : "cpu", &opt->backend_options, d);
    if (!g->backend) goto fail;
    g->own_backend = true;
  }
  OrionPrepareOptions po = {.numerics = opt->numerics};
  if (!prepare_all(g, &po, d)) goto fail;
  orion_gen_reset(g);
  return g;
fail:
  orion_gen_close(g);
  return NULL;
}

OrionGen *orion_gen_open(const char *path, const OrionGenOptions *opt, Diag *d) {
  OrionProgram *p = orion_open(path, NULL, d);
  if (!p) return NULL;
  OrionGen *g = orion_gen_open_program(p, path, opt, d);
  if (!g) {
    orion_close(p);
    return NULL;
  }
  g->own_prog = true;
  return g;
}

void orion_gen_close(OrionGen *g) {
  if (!g) return;
  for (uint32_t b = 0; b < g->shape.nbuckets; b++) {
    GenBucket *k = &g->buckets[b];
    orion_exec_release(k->exec);
    if (k->out) free_tensors(k->out, orion_output_count(g->prog, g->shape.bucket_fn[b]));
    free(k->kv);
  }
  orion_exec_release(g->decode);
  if (g->decode_logits) /* the parts point into it */
    for (uint32_t k = 0; k < g->shape.decode_logits.nparts; k++) g->dout[g->shape.decode_logits.output[k]].data = NULL;
  free(g->decode_logits), free(g->row);
  free_tensors(g->din, g->nin);
  free_tensors(g->dout, g->nout);
  free(g->in_cache), free(g->out_new), free(g->tokens);
  if (g->own_backend) orion_backend_close(g->backend);
  if (g->own_prog) orion_close(g->prog);
  free(g);
}

const OrionGenShape *orion_gen_shape(const OrionGen *g) { return &g->shape; }
uint32_t orion_gen_position(const OrionGen *g) { return g->position; }
const float *orion_gen_logits(const OrionGen *g) { return g->logits; }
OrionGenTimings orion_gen_timings(const OrionGen *g) { return g->timings; }

const OrionTensor *orion_gen_decode_inputs(const OrionGen *g, uint32_t *n) {
  *n = g->nin;
  return g->din;
}

/* Rows [0, n) of a [1, KVH, T, HD] kv output into slots [0, n) of a
 * [1, KVH, C, HD] cache: one contiguous block per head. */
static void copy_rows(const OrionGen *g, void *cache, const void *kv, uint32_t t, uint32_t n) {
  size_t row = (size_t)g->shape.head_dim * g->elem;
  for (uint32_t h = 0; h < g->shape.kv_heads; h++)
    memcpy((char *)cache + (size_t)h * g->shape.context * row, (const char *)kv + (size_t)h * t * row, n * row);
}

bool orion_gen_prefill(OrionGen *g, const int32_t *ids, uint32_t n, Diag *d) {
  const OrionGenShape *s = &g->shape;
  uint32_t largest = s->buckets[s->nbuckets - 1];
  if (!n) return diag_error(d, NO_SPAN, "the prompt is empty (prefill needs at least one token)"), false;
  if (n > largest)
    return diag_error(d, NO_SPAN, "the prompt has %u tokens, more than the largest prefill bucket (prefill_%u)", n,
                      largest), false;
  for (uint32_t i = 0; i < n; i++)
    if (ids[i] < 0 || (uint32_t)ids[i] >= s->vocab)
      return diag_error(d, NO_SPAN, "prompt token %u is id %d, outside the vocabulary (0 to %u)", i, ids[i],
                        s->vocab - 1), false;
  uint32_t b = 0;
  while (s->buckets[b] < n) b++;
  GenBucket *k = &g->buckets[b];
  uint32_t t = s->buckets[b], nout = 0;
  orion_gen_reset(g);
  if (!k->out) k->out = alloc_tensors(g->prog, s->bucket_fn[b], false, &nout);
  double t0 = now_ms();
  memset(g->tokens, 0, t * sizeof *g->tokens);
  memcpy(g->tokens, ids, n * sizeof *ids);
  OrionTensor in = {.dtype = MIL_DT_INT32, .rank = 2, .dims = {1, t}, .data = g->tokens};
  if (!orion_exec_run(k->exec, &in, k->out, d)) return false;
  for (uint32_t l = 0; l < 2 * s->layers; l++)
    copy_rows(g, g->din[g->in_cache[l]].data, k->out[k->kv[l]].data, t, n);
  for (uint32_t j = 0; j < n; j++) set_mask(g, j, 0.0f);
  g->position = n;
  const OrionGenLogits *l = &s->bucket_logits[b];
  if (l->nparts == 1) g->logits = (const float *)k->out[l->output[0]].data + (size_t)(n - 1) * s->vocab;
  else {
    for (uint32_t j = 0, at = 0; j < l->nparts; at += l->width[j++])
      memcpy(g->row + at, (const float *)k->out[l->output[j]].data + (size_t)(n - 1) * l->width[j],
             l->width[j] * sizeof *g->row);
    g->logits = g->row;
  }
  g->timings = (OrionGenTimings){.prompt_tokens = n, .prefill_bucket = t, .prefill_ms = now_ms() - t0};
  return true;
}

bool orion_gen_step(OrionGen *g, int32_t token, Diag *d) {
  const OrionGenShape *s = &g->shape;
  if (!g->position) return diag_error(d, NO_SPAN, "a decode step before the prefill"), false;
  if (g->position >= s->context)
    return diag_error(d, NO_SPAN, "the KV cache is full: all %u positions hold tokens (the package's context length)",
                      s->context), false;
  if (token < 0 || (uint32_t)token >= s->vocab)
    return diag_error(d, NO_SPAN, "token id %d is outside the vocabulary (0 to %u)", token, s->vocab - 1), false;
  double t0 = now_ms();
  *(int32_t *)g->din[g->in_token].data = token;
  *(int32_t *)g->din[g->in_pos].data = (int32_t)g->position;
  if (!orion_exec_run(g->decode, g->din, g->dout, d)) return false;
  for (uint32_t l = 0; l < 2 * s->layers; l++) {
    const OrionTensor *row = &g->dout[g->out_new[l]];
    size_t bytes = (size_t)s->head_dim * g->elem;
    for (uint32_t h = 0; h < s->kv_heads; h++)
      memcpy((char *)g->din[g->in_cache[l]].data + ((size_t)h * s->context + g->position) * bytes,
             (const char *)row->data + h * bytes, bytes);
  }
  set_mask(g, g->position, 0.0f);
  g->position++;
  g->logits = g->decode_logits ? g->decode_logits : g->dout[s->decode_logits.output[0]].data;
  g->timings.decode_steps++;
  g->timings.decode_ms += now_ms() - t0;
  return true;
}
