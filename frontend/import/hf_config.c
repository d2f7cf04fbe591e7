/*
 * config.json of a Hugging Face model: the keys orion-convert reads (and
 * Hugging Face's defaults for those it may leave out), and a clear refusal,
 * naming the key and its value, of everything the converter does not
 * implement: the .oir must compute what the model would, or not be written.
 */
#include "hf_import.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Larger sizes than any real model's, small enough that products of two stay
 * far from overflow. */
#define HF_MAX_SIZE (1 << 24)

bool hf_fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return false;
}

typedef struct Reader {
  const char *name; /* "config.json" */
  const cJSON *root;
  char *err;
  size_t errlen;
} Reader;

/* A value as the message quotes it: strings in quotes, numbers as written. */
static void quote_value(const cJSON *v, char *buf, size_t n) {
  char *text = cJSON_PrintUnformatted(v);
  snprintf(buf, n, "%s", text ? text : "?");
  if (strlen(buf) == n - 1 && n > 4) memcpy(buf + n - 4, "...", 4);
  cJSON_free(text);
}

static bool wrong(Reader *r, const char *key, const cJSON *v, const char *what) {
  char val[96];
  quote_value(v, val, sizeof val);
  return hf_fail(r->err, r->errlen, "%s: '%s' is %s, but it must be %s", r->name, key, val, what);
}

/* A present, non-null key, or NULL. */
static const cJSON *get(Reader *r, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->root, key);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool get_size(Reader *r, const char *key, bool required, int64_t dflt, int64_t *out) {
  const cJSON *v = get(r, key);
  if (!v) {
    if (required) return hf_fail(r->err, r->errlen, "%s: the key '%s' is missing", r->name, key);
    *out = dflt;
    return true;
  }
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
      v->valuedouble > HF_MAX_SIZE)
    return wrong(r, key, v, "a positive integer (at most 16777216)");
  *out = (int64_t)v->valuedouble;
  return true;
}

static bool get_positive(Reader *r, const char *key, double dflt, double *out) {
  const cJSON *v = get(r, key);
  if (!v) {
    *out = dflt;
    return true;
  }
  if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble))
    return wrong(r, key, v, "a positive number");
  *out = v->valuedouble;
  return true;
}

static bool get_bool(Reader *r, const char *key, bool dflt, bool *out) {
  const cJSON *v = get(r, key);
  if (!v) {
    *out = dflt;
    return true;
  }
  if (!cJSON_IsBool(v)) return wrong(r, key, v, "true or false");
  *out = cJSON_IsTrue(v);
  return true;
}

/* A switch the converter does not implement: absent, null or false only. */
static bool refuse_true(Reader *r, const char *key, const char *what) {
  const cJSON *v = get(r, key);
  if (v && !cJSON_IsFalse(v)) {
    char val[96];
    quote_value(v, val, sizeof val);
    return hf_fail(r->err, r->errlen, "%s: '%s' is %s: %s is not implemented", r->name, key, val, what);
  }
  return true;
}

/* Hugging Face's activation names (ACT2FN) that the .oir has an op for. */
static bool get_activation(Reader *r, const char *key, const char *dflt, HfModel *m) {
  static const struct {
    const char *hf, *op, *mode;
  } known[] = {
      {"gelu_new", "gelu", "tanh"}, {"gelu_pytorch_tanh", "gelu", "tanh"}, {"gelu_fast", "gelu", "tanh"},
      {"gelu", "gelu", "exact"},    {"relu", "relu", NULL},                 {"silu", "silu", NULL},
      {"swish", "silu", NULL},
  };
  const cJSON *v = get(r, key);
  const char *name = dflt;
  if (v) {
    if (!cJSON_IsString(v)) return wrong(r, key, v, "an activation name");
    name = v->valuestring;
  }
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    if (!strcmp(known[i].hf, name)) {
      m->activation = known[i].op;
      m->gelu_mode = known[i].mode;
      return true;
    }
  }
  return hf_fail(r->err, r->errlen,
                 "%s: '%s' is \"%s\", an activation orion-convert does not know (it knows gelu_new, "
                 "gelu_pytorch_tanh, gelu_fast, gelu, relu, silu and swish)",
                 r->name, key, name);
}

static bool read_gpt2(Reader *r, HfModel *m) {
  m->family = HF_GPT2;
  if (!get_size(r, "vocab_size", true, 0, &m->vocab) || !get_size(r, "n_embd", true, 0, &m->dim) ||
      !get_size(r, "n_layer", true, 0, &m->layers) || !get_size(r, "n_head", true, 0, &m->heads) ||
      !get_size(r, "n_positions", true, 0, &m->positions) ||
      !get_size(r, "n_inner", false, 4 * m->dim, &m->hidden) ||
      !get_positive(r, "layer_norm_epsilon", 1e-5, &m->eps) ||
      !get_activation(r, "activation_function", "gelu_new", m) ||
      !get_bool(r, "tie_word_embeddings", true, &m->tied) ||
      !refuse_true(r, "scale_attn_by_inverse_layer_idx", "attention scaled by the layer index") ||
      !refuse_true(r, "add_cross_attention", "cross-attention"))
    return false;
  const cJSON *scale = get(r, "scale_attn_weights");
  if (scale && !cJSON_IsTrue(scale)) return wrong(r, "scale_attn_weights", scale, "true (unscaled attention is not implemented)");
  if (m->dim % m->heads) return hf_fail(r->err, r->errlen, "%s: 'n_embd' (%lld) is not a multiple of 'n_head' (%lld)", r->name, (long long)m->dim, (long long)m->heads);
  m->kv_heads = m->heads;
  m->head_dim = m->dim / m->heads;
  return true;
}

static bool read_llama(Reader *r, HfModel *m) {
  m->family = HF_LLAMA;
  if (!get_size(r, "vocab_size", true, 0, &m->vocab) || !get_size(r, "hidden_size", true, 0, &m->dim) ||
      !get_size(r, "intermediate_size", true, 0, &m->hidden) ||
      !get_size(r, "num_hidden_layers", true, 0, &m->layers) ||
      !get_size(r, "num_attention_heads", true, 0, &m->heads) ||
      !get_size(r, "max_position_embeddings", true, 0, &m->positions) ||
      !get_size(r, "num_key_value_heads", false, m->heads, &m->kv_heads) ||
      !get_positive(r, "rms_norm_eps", 1e-6, &m->eps) || !get_positive(r, "rope_theta", 10000.0, &m->rope_theta) ||
      !get_activation(r, "hidden_act", "silu", m) || !get_bool(r, "tie_word_embeddings", false, &m->tied) ||
      !refuse_true(r, "rope_scaling", "rope scaling") ||
      !refuse_true(r, "attention_bias", "a bias in the attention projections") ||
      !refuse_true(r, "mlp_bias", "a bias in the MLP projections"))
    return false;
  if (m->dim % m->heads)
    return hf_fail(r->err, r->errlen, "%s: 'hidden_size' (%lld) is not a multiple of 'num_attention_heads' (%lld)",
                   r->name, (long long)m->dim, (long long)m->heads);
  if (!get_size(r, "head_dim", false, m->dim / m->heads, &m->head_dim)) return false;
  if (m->heads % m->kv_heads)
    return hf_fail(r->err, r->errlen,
                   "%s: 'num_attention_heads' (%lld) is not a multiple of 'num_key_value_heads' (%lld)", r->name,
                   (long long)m->heads, (long long)m->kv_heads);
  if (m->head_dim % 2)
    return hf_fail(r->err, r->errlen, "%s: the head dimension (%lld) is odd: rotary embeddings need it even",
                   r->name, (long long)m->head_dim);
  if (!(m->rope_theta > 1)) {
    const cJSON *v = get(r, "rope_theta");
    return wrong(r, "rope_theta", v, "a number greater than 1");
  }
  return true;
}

static void line_col(const char *text, size_t off, unsigned *line, unsigned *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < off; i++) {
    if (text[i] == '\n') {
      ++*line;
      *col = 1;
    } else {
      ++*col;
    }
  }
}

bool hf_parse_config(const char *name, const char *text, size_t len, HfModel *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
  if (root && end) { /* only space may follow the object */
    while ((size_t)(end - text) < len && strchr(" \t\r\n", *end) && *end) end++;
    if ((size_t)(end - text) < len) {
      cJSON_Delete(root);
      root = NULL;
    }
  }
  if (!root) {
    unsigned line, col;
    size_t off = end && end >= text && (size_t)(end - text) <= len ? (size_t)(end - text) : 0;
    line_col(text, off, &line, &col);
    return hf_fail(err, errlen, "%s:%u:%u: malformed JSON", name, line, col);
  }
  Reader r = {name, root, err, errlen};
  bool ok;
  const cJSON *type = get(&r, "model_type");
  if (!cJSON_IsObject(root)) {
    ok = hf_fail(err, errlen, "%s: the top level must be an object", name);
  } else if (!type) {
    ok = hf_fail(err, errlen, "%s: the key 'model_type' is missing", name);
  } else if (!cJSON_IsString(type)) {
    ok = wrong(&r, "model_type", type, "a string");
  } else if (!strcmp(type->valuestring, "gpt2")) {
    ok = read_gpt2(&r, m);
  } else if (!strcmp(type->valuestring, "llama")) {
    ok = read_llama(&r, m);
  } else {
    ok = hf_fail(err, errlen, "%s: 'model_type' is \"%s\": orion-convert converts \"gpt2\" and \"llama\" models",
                 name, type->valuestring);
  }
  cJSON_Delete(root);
  return ok;
}

bool convert_check_config(const char *name, const char *text, size_t len, char *err, size_t errlen) {
  HfModel m;
  return hf_parse_config(name, text, len, &m, err, errlen);
}
