/*
 * The .oir of a llama model: RMSNorm, rotary embeddings in Hugging Face's
 * rotate_half layout from rope_cos/rope_sin params (prefill slices rows
 * 0..T-1, decode gathers row `pos`), grouped-query attention, SwiGLU MLP;
 * a block function per prefill bucket and one for decode (per shard set),
 * called as layers.0, layers.1, ..., and the entries of docs/generation.md.
 */
#include "hf_import.h"

static void put_eps(StrBuf *sb, const HfPlan *p) { sb_put_double(sb, p->m->eps); }

/* t [1,heads,T,HD] -> rope(t) into NAME: t * cos + rotate_half(t) * sin,
 * with rotate_half(t) = [-t_hi, t_lo] as the 2x2 rotation `half_turn` applied
 * to the halves (a concat would make the keys an output group the caller
 * reassembles: the ANE rejects it, and split-concat cuts it in two). */
static void put_rope(StrBuf *sb, const HfPlan *p, const char *t, const char *name, int64_t heads, int64_t T) {
  long long HD = p->m->head_dim, half = HD / 2, h = heads, n = T;
  sb_printf(sb,
            "  %s_halves = reshape(%s, shape=[1, %lld, %lld, 2, %lld]);\n"
            "  %s_turned = matmul(half_turn, %s_halves);\n"
            "  %s_rot = reshape(%s_turned, shape=[1, %lld, %lld, %lld]);\n"
            "  %s_cos = mul(%s, cos);\n"
            "  %s_sin = mul(%s_rot, sin);\n"
            "  %s = add(%s_cos, %s_sin);\n",
            t, t, h, n, half, t, t, t, t, h, n, HD, t, t, t, t, name, t, t);
}

/* RMSNorm, the projections to heads and RoPE, for T tokens. */
static void put_attention_input(StrBuf *sb, const HfPlan *p, int64_t T) {
  const HfModel *m = p->m;
  long long H = m->heads, KVH = m->kv_heads, HD = m->head_dim, t = T;
  sb_printf(sb, "  // Attention: %lld query heads, %lld key/value heads of %lld, rotary positions.\n", H, KVH, HD);
  sb_printf(sb, "  const half_turn: %s[2,2] = [[0, -1], [1, 0]];\n", p->dtype);
  sb_puts(sb, "  n1 = rms_norm(x, input_layernorm.weight, epsilon=");
  put_eps(sb, p);
  sb_printf(sb,
            ");\n"
            "  q = linear(n1, self_attn.q_proj.weight);\n"
            "  k = linear(n1, self_attn.k_proj.weight);\n"
            "  v = linear(n1, self_attn.v_proj.weight);\n"
            "  q4 = reshape(q, shape=[1, %lld, %lld, %lld]);\n"
            "  k4 = reshape(k, shape=[1, %lld, %lld, %lld]);\n"
            "  v4 = reshape(v, shape=[1, %lld, %lld, %lld]);\n"
            "  qh: %s[1,%lld,%lld,%lld] = transpose(q4, perm=[0, 2, 1, 3]);\n"
            "  kh: %s[1,%lld,%lld,%lld] = transpose(k4, perm=[0, 2, 1, 3]);\n"
            "  vh = transpose(v4, perm=[0, 2, 1, 3]);\n",
            t, H, HD, t, KVH, HD, t, KVH, HD, p->dtype, H, t, HD, p->dtype, KVH, t, HD);
  sb_puts(sb, "  // RoPE: x * cos + rotate_half(x) * sin, rotate_half = [-x_hi, x_lo] as a quarter turn of the halves.\n");
  put_rope(sb, p, "qh", "qr", m->heads, T);
  put_rope(sb, p, "kh", "kr", m->kv_heads, T);
}

static void put_block_tail(StrBuf *sb, const HfPlan *p) {
  const HfModel *m = p->m;
  sb_puts(sb,
          "  o_proj = linear(att_m, self_attn.o_proj.weight);\n"
          "  h = add(x, o_proj);\n"
          "\n"
          "  // SwiGLU MLP.\n"
          "  n2 = rms_norm(h, post_attention_layernorm.weight, epsilon=");
  put_eps(sb, p);
  sb_puts(sb,
          ");\n"
          "  gate = linear(n2, mlp.gate_proj.weight);\n"
          "  up = linear(n2, mlp.up_proj.weight);\n");
  if (m->gelu_mode) sb_printf(sb, "  gate_act = gelu(gate, mode=\"%s\");\n", m->gelu_mode);
  else sb_printf(sb, "  gate_act = %s(gate);\n", m->activation);
  sb_puts(sb,
          "  gated = mul(gate_act, up);\n"
          "  down = linear(gated, mlp.down_proj.weight);\n"
          "  y = add(h, down);\n");
}

static void put_globals(StrBuf *sb, const HfPlan *p) {
  const HfModel *m = p->m;
  const char *names[] = {"embed_tokens.weight", "norm.weight", "lm_head.weight"};
  int64_t dims[][2] = {{m->vocab, m->dim}, {m->dim, 0}, {m->vocab, m->dim}};
  uint32_t ranks[] = {2, 1, 2};
  for (int i = 0; i < (m->tied ? 2 : 3); i++) {
    StrBuf key;
    sb_init(&key);
    sb_printf(&key, "%s%s", i == 2 ? "" : p->prefix, names[i]);
    hf_put_param(sb, p, names[i], ranks[i], dims[i], p->global_files[i], key.data);
    sb_free(&key);
  }
  /* One row per cache slot: no position at or beyond the cache's length is ever run. */
  sb_printf(sb, "  param rope.cos: %s[%lld,%lld] = rope_cos(theta=", p->dtype, (long long)p->ctx,
            (long long)m->head_dim);
  sb_put_double(sb, m->rope_theta);
  sb_printf(sb, ");\n  param rope.sin: %s[%lld,%lld] = rope_sin(theta=", p->dtype, (long long)p->ctx,
            (long long)m->head_dim);
  sb_put_double(sb, m->rope_theta);
  sb_puts(sb, ");\n");
}

static void put_layers(StrBuf *sb, const HfPlan *p, int64_t T) {
  for (int64_t l = 0; l < p->m->layers; l++) {
    const char *kv = T ? "kv" : "new";
    sb_printf(sb, "  x.%lld, %s.%lld.k, %s.%lld.v = call ", (long long)l + 1, kv, (long long)l, kv, (long long)l);
    hf_block_name(sb, p, "llama", T, p->variant[l]);
    sb_printf(sb, "(x.%lld, cos, sin", (long long)l);
    if (!T) sb_printf(sb, ", mask, cache.%lld.k, cache.%lld.v", (long long)l, (long long)l);
    sb_printf(sb, ") as %s.%lld;\n", p->layer_path, (long long)l);
  }
  sb_printf(sb, "  hidden = rms_norm(x.%lld, norm.weight, epsilon=", (long long)p->m->layers);
  put_eps(sb, p);
  sb_puts(sb, ");\n");
  hf_put_logits(sb, p, "hidden", p->m->tied ? "embed_tokens.weight" : "lm_head.weight", T ? T : 1);
  sb_puts(sb, "  return logits");
  for (int64_t l = 0; l < p->m->layers; l++) {
    const char *kv = T ? "kv" : "new";
    sb_printf(sb, ", %s.%lld.k, %s.%lld.v", kv, (long long)l, kv, (long long)l);
  }
  sb_puts(sb, ";\n}\n");
}

static void put_entries(StrBuf *sb, const HfPlan *p) {
  const HfModel *m = p->m;
  long long HD = m->head_dim, E = m->dim;
  for (uint32_t b = 0; b < p->nseqs; b++) {
    long long T = p->seqs[b];
    hf_put_prefill_signature(sb, T);
    put_globals(sb, p);
    sb_printf(sb,
              "\n"
              "  x.0: %s[1,%lld,%lld] = gather(embed_tokens.weight, tokens, axis=0);\n"
              "  cos = slice(rope.cos, begin=[0, 0], end=[%lld, %lld]);\n"
              "  sin = slice(rope.sin, begin=[0, 0], end=[%lld, %lld]);\n",
              p->dtype, T, E, T, HD, T, HD);
    put_layers(sb, p, T);
    sb_putc(sb, '\n');
  }
  hf_put_decode_signature(sb, p);
  put_globals(sb, p);
  sb_printf(sb,
            "\n"
            "  x.0: %s[1,1,%lld] = gather(embed_tokens.weight, token, axis=0);\n"
            "  cos = gather(rope.cos, pos, axis=0);\n"
            "  sin = gather(rope.sin, pos, axis=0);\n",
            p->dtype, E);
  put_layers(sb, p, 0);
}

static const HfLayerWriter llama_layers = {
    .family = "llama",
    .title = "llama",
    .prefill_summary = "RMSNorm, causal attention with RoPE, SwiGLU MLP",
    .prefill_returns = "the layer's keys (after RoPE) and values",
    .decode_returns = "this token's key (after RoPE) and value",
    .rope = true,
    .grouped_decode_query = true,
    .query = "qr",
    .key = "kr",
    .put_attention_input = put_attention_input,
    .put_block_tail = put_block_tail,
};

void hf_write_llama(StrBuf *sb, const HfPlan *p) {
  hf_put_layer_blocks(sb, p, &llama_layers);
  put_entries(sb, p);
}
