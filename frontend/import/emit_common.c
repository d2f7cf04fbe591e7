/*
 * The pieces of a converted .oir that both families write the same way: a
 * param line, the block functions' names and params, the layer functions
 * around each family's norms and MLP (grouped-query attention where the
 * model has fewer key/value heads), decode's attention over the KV cache,
 * the entries' signatures and the logits.
 */
#include "hf_import.h"

#include <math.h>
#include <string.h>

static void put_dims(StrBuf *sb, uint32_t rank, const int64_t *dims) {
  sb_putc(sb, '[');
  for (uint32_t i = 0; i < rank; i++) sb_printf(sb, "%s%lld", i ? "," : "", (long long)dims[i]);
  sb_putc(sb, ']');
}

void hf_put_param(StrBuf *sb, const HfPlan *p, const char *name, uint32_t rank, const int64_t *dims,
                  const char *file, const char *key) {
  sb_printf(sb, "  param %s: %s", name, p->dtype);
  put_dims(sb, rank, dims);
  sb_printf(sb, " = safetensors(\"%s%s\", \"%s\");\n", p->weights_dir, file, key);
}

void hf_block_name(StrBuf *sb, const HfPlan *p, const char *family, int64_t T, uint32_t v) {
  if (T > 0) sb_printf(sb, "%s_block_%lld", family, (long long)T);
  else sb_printf(sb, "%s_block_decode", family);
  /* Shard copies: _b, _c, ... (a model in one file has one copy). */
  if (v > 0) sb_printf(sb, "_%c", (char)('a' + v % 26));
  if (v >= 26) sb_printf(sb, "%u", v / 26);
}

void hf_put_block_params(StrBuf *sb, const HfPlan *p, uint32_t v) {
  uint32_t layer = 0;
  while (p->variant[layer] != v) layer++;
  for (uint32_t r = 0; r < p->nroles; r++) {
    StrBuf key;
    sb_init(&key);
    sb_printf(&key, "%s{scope}.%s", p->prefix, p->roles[r].name);
    hf_put_param(sb, p, p->roles[r].name, p->roles[r].rank, p->roles[r].dims, p->layer_files[layer * p->nroles + r],
                 key.data);
    sb_free(&key);
  }
}

void hf_put_decode_attention(StrBuf *sb, const HfPlan *p, const char *q, const char *k, const char *v) {
  const HfModel *m = p->m;
  StrBuf scale;
  sb_init(&scale);
  sb_put_double(&scale, 1.0 / sqrt((double)m->head_dim));
  sb_printf(sb,
            "  // Attention over the cache (slots masked by `mask`) and over this token's own key and value:\n"
            "  // one softmax in two parts (the maximum of both, the sum of both), so the cache is only read\n"
            "  // and nothing is concatenated. The caller writes new k/v into slot `pos` after the run.\n"
            "  const scale: %s[] = %s;\n"
            "  s_cache_raw = matmul(%s, ck, transpose_y=true);\n"
            "  s_cache_scaled = mul(s_cache_raw, scale);\n"
            "  s_cache = add(s_cache_scaled, mask);\n"
            "  s_self_raw = matmul(%s, %s, transpose_y=true);\n"
            "  s_self = mul(s_self_raw, scale);\n"
            "  s_cache_max = reduce_max(s_cache, axes=[-1], keep_dims=true);\n"
            "  s_max = maximum(s_cache_max, s_self);\n"
            "  s_cache_c = sub(s_cache, s_max);\n"
            "  p_cache = exp(s_cache_c);\n"
            "  s_self_c = sub(s_self, s_max);\n"
            "  p_self = exp(s_self_c);\n"
            "  z_cache = reduce_sum(p_cache, axes=[-1], keep_dims=true);\n"
            "  z = add(z_cache, p_self);\n"
            "  o_cache = matmul(p_cache, cv);\n"
            "  o_self = mul(p_self, %s);\n"
            "  o_sum = add(o_cache, o_self);\n"
            "  o = div(o_sum, z);\n"
            "  att_m = reshape(o, shape=[1, 1, %lld]);\n",
            p->dtype, scale.data, q, q, k, v, (long long)(m->heads * m->head_dim));
  sb_free(&scale);
}

void hf_put_logits(StrBuf *sb, const HfPlan *p, const char *hidden, const char *head, int64_t T) {
  const HfModel *m = p->m;
  bool cast = strcmp(p->dtype, "fp32") != 0;
  sb_printf(sb, "  // The vocabulary projection%s.\n", cast ? ", cast to fp32 for the caller" : "");
  sb_printf(sb, "  %s: %s[1,%lld,%lld] = linear(%s, %s);\n", cast ? "logits_d" : "logits", p->dtype, (long long)T,
            (long long)m->vocab, hidden, head);
  if (cast) sb_puts(sb, "  logits = cast(logits_d, dtype=\"fp32\");\n");
}

void hf_put_decode_signature(StrBuf *sb, const HfPlan *p) {
  const HfModel *m = p->m;
  long long KVH = m->kv_heads, HD = m->head_dim, C = p->ctx;
  sb_printf(sb,
            "// Decode: one token at position `pos`. The caller owns the cache (slot j holds position j)\n"
            "// and the mask (0 for filled slots, -30000 for the others), and after the run writes\n"
            "// new.L.k/v into slot `pos` and sets mask[pos] = 0.\n"
            "func decode(token: int32[1,1], pos: int32[1], mask: %s[1,1,1,%lld]",
            p->dtype, C);
  for (int64_t l = 0; l < m->layers; l++)
    sb_printf(sb, ", cache.%lld.k: %s[1,%lld,%lld,%lld], cache.%lld.v: %s[1,%lld,%lld,%lld]", (long long)l, p->dtype,
              KVH, C, HD, (long long)l, p->dtype, KVH, C, HD);
  sb_puts(sb, ") {\n");
}

void hf_put_prefill_signature(StrBuf *sb, int64_t T) {
  long long t = T;
  sb_printf(sb,
            "// Prefill of %lld tokens (the prompt padded at the end): logits at every position and\n"
            "// every layer's keys and values for the cache.\n"
            "func prefill_%lld(tokens: int32[1,%lld]) {\n",
            t, t, t);
}

/* k or v [1,KVH,T,HD] repeated for the query heads sharing it (Hugging
 * Face's repeat_kv: head h reads key/value head h / G), into NAME: a
 * broadcasting multiply by ones, since the ANE rejects this concat (ANE001). */
static void put_repeat_kv(StrBuf *sb, const HfPlan *p, const char *t, const char *name, int64_t T) {
  const HfModel *m = p->m;
  long long KVH = m->kv_heads, HD = m->head_dim, n = T;
  sb_printf(sb,
            "  %s_5 = reshape(%s, shape=[1, %lld, 1, %lld, %lld]);\n"
            "  %s_rep = mul(%s_5, kv_repeat);\n"
            "  %s = reshape(%s_rep, shape=[1, %lld, %lld, %lld]);\n",
            t, t, KVH, n, HD, t, t, name, t, (long long)m->heads, n, HD);
}

/* The layer over T tokens: causal attention over its own keys and values. */
static void put_prefill_block(StrBuf *sb, const HfPlan *p, const HfLayerWriter *w, int64_t T, uint32_t v) {
  const HfModel *m = p->m;
  long long E = m->dim, HD = m->head_dim, t = T;
  sb_printf(sb, "// One %s layer over %lld tokens: %s.\n// Returns the hidden state and %s.\nfunc ", w->title, t,
            w->prefill_summary, w->prefill_returns);
  hf_block_name(sb, p, w->family, T, v);
  sb_printf(sb, "(x: %s[1,%lld,%lld]", p->dtype, t, E);
  if (w->rope) sb_printf(sb, ", cos: %s[%lld,%lld], sin: %s[%lld,%lld]", p->dtype, t, HD, p->dtype, t, HD);
  sb_puts(sb, ") {\n");
  hf_put_block_params(sb, p, v);
  sb_putc(sb, '\n');
  w->put_attention_input(sb, p, T);
  const char *k = w->key, *vv = "vh";
  if (m->heads != m->kv_heads) {
    long long G = m->heads / m->kv_heads;
    sb_printf(sb, "  // Grouped-query attention: each key/value head serves %lld query heads.\n"
                  "  const kv_repeat: %s[1,1,%lld,1,1] = 1.0;\n",
              G, p->dtype, G);
    put_repeat_kv(sb, p, w->key, "k_all", T);
    put_repeat_kv(sb, p, "vh", "v_all", T);
    k = "k_all";
    vv = "v_all";
  }
  sb_printf(sb,
            "  att = sdpa(%s, %s, %s, causal=true);\n"
            "  att_t = transpose(att, perm=[0, 2, 1, 3]);\n"
            "  att_m = reshape(att_t, shape=[1, %lld, %lld]);\n",
            w->query, k, vv, t, (long long)(m->heads * HD));
  w->put_block_tail(sb, p);
  sb_printf(sb, "  return y, %s, vh;\n}\n\n", w->key);
}

/* The layer for one token at position `pos`, attending over the KV cache. */
static void put_decode_block(StrBuf *sb, const HfPlan *p, const HfLayerWriter *w, uint32_t v) {
  const HfModel *m = p->m;
  long long E = m->dim, KVH = m->kv_heads, HD = m->head_dim, C = p->ctx, G = m->heads / m->kv_heads;
  sb_printf(sb,
            "// One %s layer for one token at position `pos`, attending over the KV cache.\n"
            "// Returns the hidden state and %s.\nfunc ",
            w->title, w->decode_returns);
  hf_block_name(sb, p, w->family, 0, v);
  sb_printf(sb, "(x: %s[1,1,%lld]", p->dtype, E);
  if (w->rope) sb_printf(sb, ", cos: %s[1,%lld], sin: %s[1,%lld]", p->dtype, HD, p->dtype, HD);
  sb_printf(sb, ", mask: %s[1,1,1,%lld], ck: %s[1,%lld,%lld,%lld], cv: %s[1,%lld,%lld,%lld]) {\n", p->dtype, C,
            p->dtype, KVH, C, HD, p->dtype, KVH, C, HD);
  hf_put_block_params(sb, p, v);
  sb_putc(sb, '\n');
  w->put_attention_input(sb, p, 1);
  const char *q = w->query;
  if (w->grouped_decode_query) {
    sb_printf(sb,
              "  // The %lld query heads of each key/value head side by side: the cache is read as it is.\n"
              "  qg = reshape(%s, shape=[1, %lld, %lld, %lld]);\n",
              G, w->query, KVH, G, HD);
    q = "qg";
  }
  hf_put_decode_attention(sb, p, q, w->key, "vh");
  w->put_block_tail(sb, p);
  sb_printf(sb, "  return y, %s, vh;\n}\n\n", w->key);
}

void hf_put_layer_blocks(StrBuf *sb, const HfPlan *p, const HfLayerWriter *w) {
  for (uint32_t b = 0; b < p->nseqs; b++)
    for (uint32_t v = 0; v < p->nvariants; v++) put_prefill_block(sb, p, w, p->seqs[b], v);
  for (uint32_t v = 0; v < p->nvariants; v++) put_decode_block(sb, p, w, v);
}
