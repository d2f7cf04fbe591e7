/*
 * orion-convert's library side: config.json and the tensors checked, the
 * buckets and cache length settled, then the family's .oir written with a
 * header saying what it is. Weight files are named relative to the .oir's
 * directory (as .oir paths are), so the two may move together; when the two
 * directories share nothing but the root, by their absolute path.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "hf_import.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX_BYTES (16u << 20)
#define DEFAULT_SEQ 128
#define DEFAULT_CTX 512

/* The family's per-layer tensors and its own ones (in the order its writer
 * expects them in global_files). */
static void plan_roles(HfPlan *p, const char **globals, uint32_t *nglobals, uint32_t *global_rank,
                       int64_t (*global_dims)[2]) {
  const HfModel *m = p->m;
  int64_t E = m->dim, F = m->hidden, QD = m->heads * m->head_dim, KD = m->kv_heads * m->head_dim;
#define ROLE(n, r, d0, d1) (p->roles[p->nroles++] = (HfRole){n, r, {d0, d1}})
#define GLOBAL(n, r, d0, d1)                                                                                           \
  (globals[*nglobals] = n, global_rank[*nglobals] = r, global_dims[*nglobals][0] = d0,                                \
   global_dims[*nglobals][1] = d1, ++*nglobals)
  if (m->family == HF_GPT2) {
    ROLE("ln_1.weight", 1, E, 0);
    ROLE("ln_1.bias", 1, E, 0);
    ROLE("attn.c_attn.weight", 2, E, 3 * E);
    ROLE("attn.c_attn.bias", 1, 3 * E, 0);
    ROLE("attn.c_proj.weight", 2, E, E);
    ROLE("attn.c_proj.bias", 1, E, 0);
    ROLE("ln_2.weight", 1, E, 0);
    ROLE("ln_2.bias", 1, E, 0);
    ROLE("mlp.c_fc.weight", 2, E, F);
    ROLE("mlp.c_fc.bias", 1, F, 0);
    ROLE("mlp.c_proj.weight", 2, F, E);
    ROLE("mlp.c_proj.bias", 1, E, 0);
    GLOBAL("wte.weight", 2, m->vocab, E);
    GLOBAL("wpe.weight", 2, m->positions, E);
    GLOBAL("ln_f.weight", 1, E, 0);
    GLOBAL("ln_f.bias", 1, E, 0);
  } else {
    ROLE("input_layernorm.weight", 1, E, 0);
    ROLE("self_attn.q_proj.weight", 2, QD, E);
    ROLE("self_attn.k_proj.weight", 2, KD, E);
    ROLE("self_attn.v_proj.weight", 2, KD, E);
    ROLE("self_attn.o_proj.weight", 2, E, QD);
    ROLE("post_attention_layernorm.weight", 1, E, 0);
    ROLE("mlp.gate_proj.weight", 2, F, E);
    ROLE("mlp.up_proj.weight", 2, F, E);
    ROLE("mlp.down_proj.weight", 2, E, F);
    GLOBAL("embed_tokens.weight", 2, m->vocab, E);
    GLOBAL("norm.weight", 1, E, 0);
  }
  if (!m->tied) GLOBAL("lm_head.weight", 2, m->vocab, E);
#undef ROLE
#undef GLOBAL
}

/* Finds every tensor and groups the layers by the files they read. */
static bool plan_tensors(HfPlan *p, HfTensors *t, char *err, size_t errlen) {
  const HfModel *m = p->m;
  const char *globals[HF_MAX_ROLES];
  uint32_t nglobals = 0, ranks[HF_MAX_ROLES];
  int64_t dims[HF_MAX_ROLES][2];
  plan_roles(p, globals, &nglobals, ranks, dims);
  /* Hugging Face writes the base model's keys with or without its prefix. */
  const char *prefixed = m->family == HF_GPT2 ? "transformer." : "model.";
  StrBuf key;
  sb_init(&key);
  sb_printf(&key, "%s%s", prefixed, globals[0]);
  p->prefix = hf_tensor_exists(t, key.data) ? prefixed : "";
  bool ok = true;
  for (uint32_t i = 0; ok && i < nglobals; i++) {
    key.len = 0;
    sb_printf(&key, "%s%s", strcmp(globals[i], "lm_head.weight") ? p->prefix : "", globals[i]);
    if (!(p->global_files[i] = hf_tensor_file(t, key.data, ranks[i], dims[i], err, errlen))) ok = false;
  }
  p->layer_files = xmalloc(sizeof *p->layer_files * (size_t)(m->layers * p->nroles));
  p->variant = xmalloc(sizeof *p->variant * (size_t)m->layers);
  for (int64_t l = 0; ok && l < m->layers; l++) {
    const char **files = p->layer_files + l * p->nroles;
    for (uint32_t r = 0; ok && r < p->nroles; r++) {
      key.len = 0;
      sb_printf(&key, "%s%s.%lld.%s", p->prefix, p->layer_path, (long long)l, p->roles[r].name);
      if (!(files[r] = hf_tensor_file(t, key.data, p->roles[r].rank, p->roles[r].dims, err, errlen))) ok = false;
    }
    if (!ok) break;
    p->variant[l] = p->nvariants;
    for (int64_t e = 0; e < l; e++) {
      bool same = true;
      for (uint32_t r = 0; same && r < p->nroles; r++) same = !strcmp(files[r], p->layer_files[e * p->nroles + r]);
      if (same) {
        p->variant[l] = p->variant[e];
        break;
      }
    }
    if (p->variant[l] == p->nvariants) p->nvariants++;
  }
  sb_free(&key);
  return ok;
}

static int compare_seq(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static bool plan_lengths(HfPlan *p, const ConvertOptions *opt, char *err, size_t errlen) {
  int64_t P = p->m->positions;
  if (opt->nseqs == 0) {
    p->seqs[0] = DEFAULT_SEQ < P ? DEFAULT_SEQ : P;
    p->nseqs = 1;
  } else {
    memcpy(p->seqs, opt->seqs, sizeof p->seqs);
    qsort(p->seqs, opt->nseqs, sizeof p->seqs[0], compare_seq);
    for (uint32_t i = 0; i < opt->nseqs; i++) {
      if (p->seqs[i] < 1 || p->seqs[i] > P)
        return hf_fail(err, errlen, "--seq %lld is not between 1 and the model's %lld positions",
                       (long long)p->seqs[i], (long long)P);
      if (p->nseqs == 0 || p->seqs[p->nseqs - 1] != p->seqs[i]) p->seqs[p->nseqs++] = p->seqs[i];
    }
  }
  int64_t longest = p->seqs[p->nseqs - 1];
  if (opt->ctx == 0) {
    p->ctx = P < DEFAULT_CTX ? P : DEFAULT_CTX;
    if (p->ctx < longest) p->ctx = longest;
  } else {
    p->ctx = opt->ctx;
    if (p->ctx > P)
      return hf_fail(err, errlen, "--ctx %lld is more than the model's %lld positions", (long long)p->ctx,
                     (long long)P);
    if (p->ctx < longest)
      return hf_fail(err, errlen, "--ctx %lld is shorter than the longest --seq (%lld)", (long long)p->ctx,
                     (long long)longest);
  }
  return true;
}

/* The length of the first path component of s ("a" of "a/b"). */
static size_t component(const char *s) { return strcspn(s, "/"); }

/* The directory `to` relative to the directory `from` (both absolute and
 * canonical), with a final '/' unless it is `from` itself (""). */
static char *relative_dir(const char *from, const char *to) {
  while (*from == '/') from++;
  while (*to == '/') to++;
  /* Drop the components both start with. */
  for (size_t n; *from && *to && (n = component(from)) == component(to) && !strncmp(from, to, n);) {
    from += n;
    to += n;
    while (*from == '/') from++;
    while (*to == '/') to++;
  }
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, "");
  for (size_t n; *from; from += n) {
    n = component(from);
    sb_puts(&sb, "../");
    while (from[n] == '/') n++;
  }
  if (*to) sb_printf(&sb, "%s/", to);
  return sb.data;
}

static char *weights_dir(const char *model_dir, const char *output, char *err, size_t errlen) {
  char *out = xstrdup(output);
  char model_real[PATH_MAX], out_real[PATH_MAX];
  const char *out_dir = dirname(out);
  bool ok = realpath(model_dir, model_real) && realpath(out_dir, out_real);
  if (!ok) hf_fail(err, errlen, "the directory of '%s' does not exist", output);
  free(out);
  if (!ok) return NULL;
  /* Directories with nothing in common but the root: the absolute path
   * says more than a climb of ../ to it. */
  size_t first = component(out_real + 1);
  if (first == 0 || strncmp(out_real, model_real, first + 1) || (model_real[first + 1] && model_real[first + 1] != '/')) {
    StrBuf sb;
    sb_init(&sb);
    sb_printf(&sb, "%s/", strcmp(model_real, "/") ? model_real : "");
    return sb.data;
  }
  return relative_dir(out_real, model_real);
}

static void put_header(StrBuf *sb, const HfPlan *p, const ConvertOptions *opt) {
  const HfModel *m = p->m;
  sb_printf(sb, "// Converted by orion-convert from %s (%s", opt->model_dir, m->family == HF_GPT2 ? "GPT-2" : "llama");
  sb_printf(sb, ": dim %lld, %lld layers, %lld heads", (long long)m->dim, (long long)m->layers, (long long)m->heads);
  if (m->kv_heads != m->heads) sb_printf(sb, " (%lld key/value heads)", (long long)m->kv_heads);
  sb_printf(sb, ", hidden %lld, vocabulary %lld, %lld positions).\n", (long long)m->hidden, (long long)m->vocab,
            (long long)m->positions);
  sb_printf(sb, "// Entries: ");
  for (uint32_t i = 0; i < p->nseqs; i++) sb_printf(sb, "prefill_%lld, ", (long long)p->seqs[i]);
  sb_printf(sb,
            "decode (KV cache of %lld tokens), %s; the program contract is docs/generation.md.\n"
            "// The entries share every param by name: the package holds one set of weights.\n\n",
            (long long)p->ctx, p->dtype);
}

bool convert_model(const ConvertOptions *opt, StrBuf *out, char *err, size_t errlen) {
  StrBuf path;
  sb_init(&path);
  sb_printf(&path, "%s/config.json", opt->model_dir);
  char *text;
  size_t len;
  const char *why;
  if (!read_file(path.data, CONFIG_MAX_BYTES, &text, &len, &why)) {
    hf_fail(err, errlen, "%s: %s", path.data, why);
    sb_free(&path);
    return false;
  }
  sb_free(&path);
  HfModel m;
  bool ok = hf_parse_config("config.json", text, len, &m, err, errlen);
  free(text);
  if (!ok) return false;
  HfPlan p = {.m = &m, .dtype = opt->fp32 ? "fp32" : "fp16", .layer_path = m.family == HF_GPT2 ? "h" : "layers"};
  HfTensors t;
  char *dir = NULL;
  ok = plan_lengths(&p, opt, err, errlen) && (dir = weights_dir(opt->model_dir, opt->output, err, errlen)) &&
       hf_tensors_open(&t, opt->model_dir, err, errlen);
  if (ok) {
    p.weights_dir = dir;
    ok = plan_tensors(&p, &t, err, errlen);
    if (ok) {
      put_header(out, &p, opt);
      if (m.family == HF_GPT2) hf_write_gpt2(out, &p);
      else hf_write_llama(out, &p);
    }
    hf_tensors_close(&t); /* after writing: the file names point into the index */
  }
  free(dir);
  free(p.layer_files);
  free(p.variant);
  return ok;
}
