/*
 * Internal to the Hugging Face importer: the model read from config.json,
 * where each tensor lives, and the .oir writers of the two families.
 */
#ifndef ORION_HF_IMPORT_H
#define ORION_HF_IMPORT_H

#include "orion/convert.h"

#include <cjson/cJSON.h>

typedef enum HfFamily { HF_GPT2, HF_LLAMA } HfFamily;

typedef struct HfModel {
  HfFamily family;
  int64_t vocab, dim, layers, heads, kv_heads, head_dim, hidden, positions;
  double eps;
  double rope_theta;      /* llama */
  const char *activation; /* the .oir op: "gelu" with gelu_mode, "relu", "silu" */
  const char *gelu_mode;  /* "tanh" or "exact" */
  bool tied;              /* the vocabulary projection is the embedding */
} HfModel;

/* config.json text -> model; `name` prefixes messages ("config.json"). */
bool hf_parse_config(const char *name, const char *text, size_t len, HfModel *m, char *err, size_t errlen);

/* printf into err; returns false. */
bool hf_fail(char *err, size_t errlen, const char *fmt, ...) ORION_PRINTF(3, 4);

/* ---- tensors: which file holds a key, and its shape ---- */

typedef struct HfTensors {
  char *dir;       /* the model directory, as given */
  cJSON *index;    /* model.safetensors.index.json, or NULL for one model.safetensors */
  cJSON *weight_map;
} HfTensors;

bool hf_tensors_open(HfTensors *t, const char *dir, char *err, size_t errlen);
void hf_tensors_close(HfTensors *t);
bool hf_tensor_exists(HfTensors *t, const char *key);
/* The file (inside the model directory) holding `key`, after checking its
 * shape is dims[0..rank) and its dtype a float one; NULL after a message. */
const char *hf_tensor_file(HfTensors *t, const char *key, uint32_t rank, const int64_t *dims, char *err,
                           size_t errlen);

/* ---- the .oir ---- */

#define HF_MAX_ROLES 16

/* One tensor of a block (per layer) or of the model. */
typedef struct HfRole {
  const char *name; /* the param's name in the .oir ("ln_1.weight") */
  uint32_t rank;
  int64_t dims[2];
} HfRole;

/* What a family's writer needs: the model, the block's tensors and, per
 * layer, which file holds each (sharded models: layers in different shards
 * get their own copy of the block function, one per distinct file set). */
typedef struct HfPlan {
  const HfModel *m;
  const char *dtype;       /* "fp16" or "fp32" */
  const char *weights_dir; /* the model directory relative to the .oir's ("" or ".../") */
  const char *prefix;      /* of every key but lm_head's: "transformer.", "model." or "" */
  const char *layer_path;  /* "h" or "layers": instance L is "h.L" */
  HfRole roles[HF_MAX_ROLES];
  uint32_t nroles;
  const char *global_files[HF_MAX_ROLES]; /* the model's own tensors, in the family's order */
  const char **layer_files; /* [layers][nroles] */
  uint32_t *variant;        /* per layer: which copy of the block */
  uint32_t nvariants;
  int64_t seqs[CONVERT_MAX_BUCKETS];
  uint32_t nseqs;
  int64_t ctx;
} HfPlan;

/* "  param NAME: D[dims] = safetensors("DIR/FILE", "KEY");" */
void hf_put_param(StrBuf *sb, const HfPlan *p, const char *name, uint32_t rank, const int64_t *dims,
                  const char *file, const char *key);
/* The name of block variant v for a bucket ("gpt2_block_16", "llama_block_decode_b"). */
void hf_block_name(StrBuf *sb, const HfPlan *p, const char *family, int64_t T, uint32_t v);
/* A block function's params (variant v: the files of its first layer). */
void hf_put_block_params(StrBuf *sb, const HfPlan *p, uint32_t v);
/* Decode attention of q [1,KVH,G,HD] (G = query heads per key/value head)
 * against the cache ck/cv [1,KVH,C,HD] under mask [1,1,1,C] and this
 * token's k/v [1,KVH,1,HD], in two softmax parts; defines `att_m` [1,1,H*HD]. */
void hf_put_decode_attention(StrBuf *sb, const HfPlan *p, const char *q, const char *k, const char *v);
/* The decode entry's header comment and signature, up to its opening
 * brace: token, pos, mask [1,1,1,C] and each layer's cache [1,KVH,C,HD]. */
void hf_put_decode_signature(StrBuf *sb, const HfPlan *p);
/* The vocabulary projection of `hidden` by `head` ([V, dim]) into the
 * output `logits` [1,T,V], cast to fp32 when the activations are fp16. */
void hf_put_logits(StrBuf *sb, const HfPlan *p, const char *hidden, const char *head, int64_t T);

/* What a family's layer functions differ in: hf_put_layer_blocks writes the
 * rest, the same for both (signature, params, causal or cached attention,
 * return of the hidden state and the key and value for the cache). */
typedef struct HfLayerWriter {
  const char *family;          /* the block functions' prefix: "gpt2" (gpt2_block_16) */
  const char *title;           /* in their comments: "GPT-2" */
  const char *prefill_summary; /* "pre-norm causal attention and MLP, each with a residual" */
  const char *prefill_returns; /* what besides the hidden state: "the layer's keys and values (...)" */
  const char *decode_returns;  /* "this token's key and value" */
  bool rope;                   /* cos and sin inputs after x */
  /* Decode's query regrouped as qg [1,KVH,G,HD], so the cache is read as it is. */
  bool grouped_decode_query;
  const char *query, *key;     /* what put_attention_input defines besides the value vh ("qh", "kh") */
  /* The norm and projections to q, k and v heads, for T tokens (1: decode). */
  void (*put_attention_input)(StrBuf *sb, const HfPlan *p, int64_t T);
  /* From att_m [1,T,H*HD]: the output projection, the residual and the MLP, into y. */
  void (*put_block_tail)(StrBuf *sb, const HfPlan *p);
} HfLayerWriter;

/* Every block function: one per prefill bucket and shard variant, then decode's per variant. */
void hf_put_layer_blocks(StrBuf *sb, const HfPlan *p, const HfLayerWriter *w);
/* A prefill entry's header comment and signature, up to its opening brace. */
void hf_put_prefill_signature(StrBuf *sb, int64_t T);

void hf_write_gpt2(StrBuf *sb, const HfPlan *p);
void hf_write_llama(StrBuf *sb, const HfPlan *p);

#endif
