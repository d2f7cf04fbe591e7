/*
 * The generation program contract (docs/generation.md), checked on a loaded
 * program before anything is prepared: decode fixes the shape (layers, KV
 * heads, head size, cache length, vocabulary, activation dtype) and every
 * prefill bucket must agree with it. A package that does not follow the
 * contract gets one error naming the entry and the tensor at fault.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion/generate.h"

#define NO_SPAN ((SrcSpan){0})
#define CONTRACT "docs/generation.md"

/* "fp32[1,2,?,16]": a negative (free) dimension shown as '?'. */
static void type_text(char *buf, size_t cap, MilDType t, uint32_t rank, const int64_t *dims) {
  int k = snprintf(buf, cap, "%s[", mil_dtype_name(t));
  for (uint32_t i = 0; i < rank && k > 0 && (size_t)k < cap; i++)
    k += dims[i] < 0 ? snprintf(buf + k, cap - (size_t)k, "%s?", i ? "," : "")
                     : snprintf(buf + k, cap - (size_t)k, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (k > 0 && (size_t)k < cap) snprintf(buf + k, cap - (size_t)k, "]");
}

static const OrionTensorInfo *find_tensor(const OrionProgram *p, uint32_t fn, bool input, const char *name) {
  uint32_t n = input ? orion_input_count(p, fn) : orion_output_count(p, fn);
  for (uint32_t i = 0; i < n; i++) {
    const OrionTensorInfo *t = input ? orion_input(p, fn, i) : orion_output(p, fn, i);
    if (!strcmp(t->name, name)) return t;
  }
  return NULL;
}

/* The tensor `name` of entry fn with exactly the type given (dims[i] < 0:
 * any size, returned through dims); NULL after the error. */
static const OrionTensorInfo *expect(const OrionProgram *p, uint32_t fn, bool input, const char *name, MilDType t,
                                     uint32_t rank, int64_t *dims, Diag *d) {
  const char *entry = orion_function_name(p, fn), *kind = input ? "input" : "output";
  const OrionTensorInfo *info = find_tensor(p, fn, input, name);
  if (!info) {
    diag_error(d, NO_SPAN, "'%s' has no %s '%s' (the generation contract, " CONTRACT ")", entry, kind, name);
    return NULL;
  }
  bool ok = info->dtype == t && info->rank == rank;
  for (uint32_t i = 0; ok && i < rank; i++) ok = dims[i] < 0 ? info->dims[i] > 0 : info->dims[i] == dims[i];
  if (!ok) {
    char got[96], want[96];
    type_text(got, sizeof got, info->dtype, info->rank, info->dims);
    type_text(want, sizeof want, t, rank, dims);
    diag_error(d, NO_SPAN, "'%s' %s '%s' is %s, the contract wants %s", entry, kind, name, got, want);
    return NULL;
  }
  for (uint32_t i = 0; i < rank; i++) dims[i] = info->dims[i];
  return info;
}

static uint32_t output_index(const OrionProgram *p, uint32_t fn, const char *name) {
  for (uint32_t i = 0; i < orion_output_count(p, fn); i++)
    if (!strcmp(orion_output(p, fn, i)->name, name)) return i;
  return UINT32_MAX;
}

/* Entry fn's logits, fp32[1,T,V], as one output or as the output group
 * `logits` along its last axis. *vocab < 0: any V (set here). */
static bool check_logits(const OrionProgram *p, const Package *manifest, uint32_t fn, int64_t t, int64_t *vocab,
                         OrionGenLogits *l, Diag *d) {
  const char *entry = orion_function_name(p, fn);
  const PkgGroup *g = NULL;
  if (!find_tensor(p, fn, false, "logits") && manifest) {
    const PkgFunction *f = package_function(manifest, entry);
    if (f) g = package_output_group(f, "logits");
  }
  if (!g) {
    int64_t dims[3] = {1, t, *vocab};
    if (!expect(p, fn, false, "logits", MIL_DT_FP32, 3, dims, d)) return false;
    l->nparts = 1, l->output[0] = output_index(p, fn, "logits"), l->width[0] = (uint32_t)dims[2];
    *vocab = dims[2];
    return true;
  }
  if (g->axis != 2)
    return diag_error(d, NO_SPAN, "'%s' output group 'logits' joins its parts along axis %u; the contract wants the "
                      "vocabulary axis (2)", entry, g->axis), false;
  if (g->nparts > ORION_GEN_MAX_LOGIT_PARTS)
    return diag_error(d, NO_SPAN, "'%s' output group 'logits' has %u parts (at most %u)", entry, g->nparts,
                      ORION_GEN_MAX_LOGIT_PARTS), false;
  int64_t total = 0;
  for (uint32_t k = 0; k < g->nparts; k++) {
    int64_t dims[3] = {1, t, -1};
    if (!expect(p, fn, false, g->parts[k], MIL_DT_FP32, 3, dims, d)) return false;
    l->output[k] = output_index(p, fn, g->parts[k]), l->width[k] = (uint32_t)dims[2];
    total += dims[2];
  }
  if (*vocab >= 0 && total != *vocab)
    return diag_error(d, NO_SPAN, "'%s' output group 'logits' has %lld columns; decode's vocabulary is %lld", entry,
                      (long long)total, (long long)*vocab), false;
  l->nparts = g->nparts, *vocab = total;
  return true;
}

/* The bucket length of "prefill_T", 0 when the name is not one. */
static uint32_t bucket_length(const char *name) {
  if (strncmp(name, "prefill_", 8)) return 0;
  const char *s = name + 8;
  if (*s < '1' || *s > '9') return 0;
  char *end;
  unsigned long t = strtoul(s, &end, 10);
  return *end || t > 1u << 20 ? 0 : (uint32_t)t;
}

/* decode's shape; the layers are cache.0.k, cache.1.k, ... up to the first missing. */
static bool check_decode(const OrionProgram *p, const Package *manifest, uint32_t fn, OrionGenShape *s, Diag *d) {
  int64_t tok[2] = {1, 1}, pos[1] = {1};
  if (!expect(p, fn, true, "token", MIL_DT_INT32, 2, tok, d) || !expect(p, fn, true, "pos", MIL_DT_INT32, 1, pos, d))
    return false;
  const OrionTensorInfo *m = find_tensor(p, fn, true, "mask");
  if (!m) return diag_error(d, NO_SPAN, "'decode' has no input 'mask' (the generation contract, " CONTRACT ")"), false;
  if (m->dtype != MIL_DT_FP16 && m->dtype != MIL_DT_FP32)
    return diag_error(d, NO_SPAN, "'decode' input 'mask' is %s, the contract wants fp16 or fp32",
                      mil_dtype_name(m->dtype)), false;
  int64_t mask[4] = {1, 1, 1, -1};
  if (!expect(p, fn, true, "mask", m->dtype, 4, mask, d)) return false;
  s->dtype = m->dtype, s->context = (uint32_t)mask[3];
  int64_t vocab = -1;
  if (!check_logits(p, manifest, fn, 1, &vocab, &s->decode_logits, d)) return false;
  s->vocab = (uint32_t)vocab;
  if (!find_tensor(p, fn, true, "cache.0.k"))
    return diag_error(d, NO_SPAN, "'decode' has no input 'cache.0.k' (the generation contract, " CONTRACT ")"), false;
  int64_t cache[4] = {1, -1, mask[3], -1};
  char name[64];
  for (s->layers = 0;; s->layers++) {
    snprintf(name, sizeof name, "cache.%u.k", s->layers);
    if (!find_tensor(p, fn, true, name)) break;
    for (int kv = 0; kv < 2; kv++) {
      snprintf(name, sizeof name, "cache.%u.%c", s->layers, "kv"[kv]);
      if (!expect(p, fn, true, name, s->dtype, 4, cache, d)) return false;
      int64_t row[4] = {1, cache[1], 1, cache[3]};
      snprintf(name, sizeof name, "new.%u.%c", s->layers, "kv"[kv]);
      if (!expect(p, fn, false, name, s->dtype, 4, row, d)) return false;
    }
  }
  s->kv_heads = (uint32_t)cache[1], s->head_dim = (uint32_t)cache[3];
  uint32_t want_in = 3 + 2 * s->layers, want_out = s->decode_logits.nparts + 2 * s->layers;
  if (orion_input_count(p, fn) != want_in || orion_output_count(p, fn) != want_out)
    return diag_error(d, NO_SPAN,
                      "'decode' has %u inputs and %u outputs; for %u layers the contract has %u and %u "
                      "(token, pos, mask, cache.L.k/v; logits, new.L.k/v)",
                      orion_input_count(p, fn), orion_output_count(p, fn), s->layers, want_in, want_out), false;
  return true;
}

static bool check_prefill(const OrionProgram *p, const Package *manifest, uint32_t fn, uint32_t t,
                          const OrionGenShape *s, OrionGenLogits *logits, Diag *d) {
  const char *entry = orion_function_name(p, fn);
  if (t > s->context)
    return diag_error(d, NO_SPAN, "'%s' is longer than decode's cache (%u slots)", entry, s->context), false;
  int64_t tokens[2] = {1, t}, vocab = s->vocab;
  if (!expect(p, fn, true, "tokens", MIL_DT_INT32, 2, tokens, d) || !check_logits(p, manifest, fn, t, &vocab, logits, d))
    return false;
  char name[64];
  for (uint32_t l = 0; l < s->layers; l++)
    for (int kv = 0; kv < 2; kv++) {
      int64_t dims[4] = {1, s->kv_heads, t, s->head_dim};
      snprintf(name, sizeof name, "kv.%u.%c", l, "kv"[kv]);
      if (!expect(p, fn, false, name, s->dtype, 4, dims, d)) return false;
    }
  uint32_t want_out = logits->nparts + 2 * s->layers;
  if (orion_input_count(p, fn) != 1 || orion_output_count(p, fn) != want_out)
    return diag_error(d, NO_SPAN, "'%s' has %u inputs and %u outputs; for %u layers the contract has 1 and %u "
                      "(tokens; logits, kv.L.k/v)",
                      entry, orion_input_count(p, fn), orion_output_count(p, fn), s->layers, want_out), false;
  return true;
}

bool orion_gen_check_contract(const OrionProgram *p, const Package *manifest, OrionGenShape *shape, Diag *d) {
  OrionGenShape s = {0};
  s.decode_fn = orion_function_find(p, "decode");
  if (s.decode_fn == UINT32_MAX)
    return diag_error(d, NO_SPAN, "the package has no 'decode' entry (the generation contract, " CONTRACT ")"), false;
  if (!check_decode(p, manifest, s.decode_fn, &s, d)) return false;
  const uint32_t max_buckets = ORION_GEN_MAX_BUCKETS;
  for (uint32_t fn = 0; fn < orion_function_count(p); fn++) {
    uint32_t t = bucket_length(orion_function_name(p, fn));
    if (!t) continue;
    if (s.nbuckets == max_buckets)
      return diag_error(d, NO_SPAN, "more than %u prefill buckets", max_buckets), false;
    OrionGenLogits l;
    if (!check_prefill(p, manifest, fn, t, &s, &l, d)) return false;
    uint32_t i = s.nbuckets++;
    for (; i > 0 && s.buckets[i - 1] > t; i--) {
      s.buckets[i] = s.buckets[i - 1], s.bucket_fn[i] = s.bucket_fn[i - 1];
      s.bucket_logits[i] = s.bucket_logits[i - 1];
    }
    s.buckets[i] = t, s.bucket_fn[i] = fn, s.bucket_logits[i] = l;
  }
  if (!s.nbuckets)
    return diag_error(d, NO_SPAN, "the package has no 'prefill_T' entry (the generation contract, " CONTRACT ")"),
           false;
  *shape = s;
  return true;
}
