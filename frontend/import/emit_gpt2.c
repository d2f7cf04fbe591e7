/*
 * The .oir of a GPT-2 model: a block function per prefill bucket and one for
 * decode (per shard set), called once per layer as h.0, h.1, ..., and the
 * entries prefill_T and decode of docs/generation.md. GPT-2's Conv1D weights
 * are stored [in, out], so projections are matmul(x, W) plus the bias: the
 * file's tensors are used as they are, never transposed copies.
 */
#include "hf_import.h"

/* Layer norm, the q/k/v projection and the heads, for T tokens (1: decode). */
static void put_attention_input(StrBuf *sb, const HfPlan *p, int64_t T) {
  const HfModel *m = p->m;
  long long H = m->heads, HD = m->head_dim, t = T;
  sb_printf(sb,
            "  // Attention: one [in, out] projection (Conv1D) gives q, k and v, split into %lld heads.\n"
            "  n1 = layer_norm(x, ln_1.weight, ln_1.bias, epsilon=",
            H);
  sb_put_double(sb, m->eps);
  sb_printf(sb,
            ");\n"
            "  qkv_raw = matmul(n1, attn.c_attn.weight);\n"
            "  qkv = add(qkv_raw, attn.c_attn.bias);\n"
            "  q, k, v = split(qkv, axis=-1, num_splits=3);\n"
            "  q4 = reshape(q, shape=[1, %lld, %lld, %lld]);\n"
            "  k4 = reshape(k, shape=[1, %lld, %lld, %lld]);\n"
            "  v4 = reshape(v, shape=[1, %lld, %lld, %lld]);\n"
            "  qh: %s[1,%lld,%lld,%lld] = transpose(q4, perm=[0, 2, 1, 3]);\n"
            "  kh = transpose(k4, perm=[0, 2, 1, 3]);\n"
            "  vh = transpose(v4, perm=[0, 2, 1, 3]);\n",
            t, H, HD, t, H, HD, t, H, HD, p->dtype, H, t, HD);
}

/* The attention's output projection, the residual and the MLP. */
static void put_block_tail(StrBuf *sb, const HfPlan *p) {
  const HfModel *m = p->m;
  sb_puts(sb,
          "  proj_raw = matmul(att_m, attn.c_proj.weight);\n"
          "  proj = add(proj_raw, attn.c_proj.bias);\n"
          "  h = add(x, proj);\n"
          "\n"
          "  // MLP.\n"
          "  n2 = layer_norm(h, ln_2.weight, ln_2.bias, epsilon=");
  sb_put_double(sb, m->eps);
  sb_puts(sb,
          ");\n"
          "  fc_raw = matmul(n2, mlp.c_fc.weight);\n"
          "  fc = add(fc_raw, mlp.c_fc.bias);\n");
  if (m->gelu_mode) sb_printf(sb, "  act = gelu(fc, mode=\"%s\");\n", m->gelu_mode);
  else sb_printf(sb, "  act = %s(fc);\n", m->activation);
  sb_puts(sb,
          "  down_raw = matmul(act, mlp.c_proj.weight);\n"
          "  down = add(down_raw, mlp.c_proj.bias);\n"
          "  y = add(h, down);\n");
}

static void put_globals(StrBuf *sb, const HfPlan *p) {
  const HfModel *m = p->m;
  StrBuf key;
  const char *names[] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias", "lm_head.weight"};
  int64_t dims[][2] = {{m->vocab, m->dim}, {m->positions, m->dim}, {m->dim, 0}, {m->dim, 0}, {m->vocab, m->dim}};
  uint32_t ranks[] = {2, 2, 1, 1, 2};
  for (int i = 0; i < (m->tied ? 4 : 5); i++) {
    sb_init(&key);
    sb_printf(&key, "%s%s", i == 4 ? "" : p->prefix, names[i]);
    hf_put_param(sb, p, names[i], ranks[i], dims[i], p->global_files[i], key.data);
    sb_free(&key);
  }
}

static void put_layers(StrBuf *sb, const HfPlan *p, int64_t T, const char *extra) {
  for (int64_t l = 0; l < p->m->layers; l++) {
    sb_printf(sb, "  x.%lld, %s.%lld.k, %s.%lld.v = call ", (long long)l + 1, T ? "kv" : "new", (long long)l,
              T ? "kv" : "new", (long long)l);
    hf_block_name(sb, p, "gpt2", T, p->variant[l]);
    sb_printf(sb, "(x.%lld%s", (long long)l, extra);
    if (!T) sb_printf(sb, ", cache.%lld.k, cache.%lld.v", (long long)l, (long long)l);
    sb_printf(sb, ") as %s.%lld;\n", p->layer_path, (long long)l);
  }
}

static void put_return(StrBuf *sb, const HfPlan *p, bool decode) {
  sb_puts(sb, "  return logits");
  for (int64_t l = 0; l < p->m->layers; l++)
    sb_printf(sb, ", %s.%lld.k, %s.%lld.v", decode ? "new" : "kv", (long long)l, decode ? "new" : "kv", (long long)l);
  sb_puts(sb, ";\n}\n");
}

static void put_final(StrBuf *sb, const HfPlan *p, int64_t T) {
  sb_printf(sb, "  hidden = layer_norm(x.%lld, ln_f.weight, ln_f.bias, epsilon=", (long long)p->m->layers);
  sb_put_double(sb, p->m->eps);
  sb_puts(sb, ");\n");
  hf_put_logits(sb, p, "hidden", p->m->tied ? "wte.weight" : "lm_head.weight", T);
}

static void put_entries(StrBuf *sb, const HfPlan *p) {
  const HfModel *m = p->m;
  long long E = m->dim;
  for (uint32_t b = 0; b < p->nseqs; b++) {
    long long T = p->seqs[b];
    hf_put_prefill_signature(sb, T);
    put_globals(sb, p);
    sb_printf(sb,
              "\n"
              "  tok = gather(wte.weight, tokens, axis=0);\n"
              "  positions = slice(wpe.weight, begin=[0, 0], end=[%lld, %lld]);\n"
              "  x.0: %s[1,%lld,%lld] = add(tok, positions);\n",
              T, E, p->dtype, T, E);
    put_layers(sb, p, T, "");
    put_final(sb, p, T);
    put_return(sb, p, false);
    sb_putc(sb, '\n');
  }
  hf_put_decode_signature(sb, p);
  put_globals(sb, p);
  sb_printf(sb,
            "\n"
            "  tok = gather(wte.weight, token, axis=0);\n"
            "  position = gather(wpe.weight, pos, axis=0);\n"
            "  x.0: %s[1,1,%lld] = add(tok, position);\n",
            p->dtype, E);
  put_layers(sb, p, 0, ", mask");
  put_final(sb, p, 1);
  put_return(sb, p, true);
}

static const HfLayerWriter gpt2_layers = {
    .family = "gpt2",
    .title = "GPT-2",
    .prefill_summary = "pre-norm causal attention and MLP, each with a residual",
    .prefill_returns = "the layer's keys and values (the KV cache rows)",
    .decode_returns = "this token's key and value",
    .query = "qh",
    .key = "kh",
    .put_attention_input = put_attention_input,
    .put_block_tail = put_block_tail,
};

void hf_write_gpt2(StrBuf *sb, const HfPlan *p) {
  hf_put_layer_blocks(sb, p, &gpt2_layers);
  put_entries(sb, p);
}
