/*
 * What orion-convert refuses, with the exact message: configurations it does
 * not implement (naming the key and its value), tensors that are missing or
 * do not match config.json (naming the tensor), malformed JSON (with its
 * line and column), impossible buckets and cache lengths; and the rope_cos
 * and rope_sin initializers' values and checks.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "helpers.h"
#include "orion/convert.h"
#include "orion/fp16.h"
#include "orion/frontend.h"
#include "orion/weights.h"

#define MODELS ORION_SOURCE_ROOT "/testsuite/generate/models"

static char dir[] = "/tmp/orion-convert-errors-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(dir)); }
static void teardown(void) { remove_tree(dir); }

TestSuite(convert_errors, .init = setup, .fini = teardown);

/* A model directory in dir: this config.json and, unless NULL, a link to
 * the fixture model's weights (made once). */
static void model_dir(const char *config, const char *weights_of) {
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  const char *why;
  cr_assert(write_file_atomic(path, config, strlen(config), &why), "%s", why);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  unlink(path);
  if (weights_of) {
    char target[512];
    snprintf(target, sizeof target, "%s/%s/model.safetensors", MODELS, weights_of);
    cr_assert_eq(symlink(target, path), 0);
  }
}

/* A fixture's config.json with the keys of `changes` (a JSON object) set,
 * or removed where null (static). */
static const char *config_of(const char *model, const char *changes) {
  static char text[4096];
  char path[512];
  snprintf(path, sizeof path, "%s/%s/config.json", MODELS, model);
  char *data;
  size_t len;
  const char *why;
  cr_assert(read_file(path, 1 << 20, &data, &len, &why), "%s", why);
  cJSON *root = cJSON_ParseWithLength(data, len), *set = cJSON_Parse(changes);
  free(data);
  cr_assert(root && set);
  for (cJSON *c = set->child; c; c = c->next) {
    if (cJSON_IsNull(c)) cJSON_DeleteItemFromObjectCaseSensitive(root, c->string);
    else if (cJSON_GetObjectItemCaseSensitive(root, c->string))
      cJSON_ReplaceItemInObjectCaseSensitive(root, c->string, cJSON_Duplicate(c, true));
    else
      cJSON_AddItemToObject(root, c->string, cJSON_Duplicate(c, true));
  }
  char *out = cJSON_Print(root);
  snprintf(text, sizeof text, "%s", out);
  cJSON_free(out);
  cJSON_Delete(root);
  cJSON_Delete(set);
  return text;
}

/* Converts dir with `opt`'s lengths; returns the message (static). */
static const char *refusal(const ConvertOptions *lengths) {
  static char err[1024];
  char out[512];
  snprintf(out, sizeof out, "%s/model.oir", dir);
  ConvertOptions opt = lengths ? *lengths : (ConvertOptions){0};
  opt.model_dir = dir;
  opt.output = out;
  StrBuf text;
  sb_init(&text);
  err[0] = 0;
  cr_assert_not(convert_model(&opt, &text, err, sizeof err), "converted: %s", text.data);
  sb_free(&text);
  return err;
}

#define GPT2(changes) config_of("gpt2", changes)
#define LLAMA(changes) config_of("llama_tied", changes)

Test(convert_errors, unknown_model_type) {
  model_dir("{\"model_type\": \"bert\", \"vocab_size\": 10}", NULL);
  cr_assert_str_eq(refusal(NULL), "config.json: 'model_type' is \"bert\": orion-convert converts \"gpt2\" and "
                                  "\"llama\" models");
}

Test(convert_errors, unknown_activation) {
  model_dir(GPT2("{\"activation_function\": \"quick_gelu\"}"), "gpt2");
  cr_assert_str_eq(refusal(NULL), "config.json: 'activation_function' is \"quick_gelu\", an activation "
                                  "orion-convert does not know (it knows gelu_new, gelu_pytorch_tanh, gelu_fast, "
                                  "gelu, relu, silu and swish)");
  model_dir(LLAMA("{\"hidden_act\": 7}"), NULL);
  cr_assert_str_eq(refusal(NULL), "config.json: 'hidden_act' is 7, but it must be an activation name");
}

Test(convert_errors, rope_scaling_is_not_implemented) {
  model_dir(LLAMA("{\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}"), "llama_tied");
  cr_assert_str_eq(refusal(NULL),
                   "config.json: 'rope_scaling' is {\"type\":\"linear\",\"factor\":2}: rope scaling is not implemented");
}

Test(convert_errors, other_switches_it_does_not_implement) {
  model_dir(LLAMA("{\"attention_bias\": true}"), "llama_tied");
  cr_assert_str_eq(refusal(NULL),
                   "config.json: 'attention_bias' is true: a bias in the attention projections is not implemented");
  model_dir(GPT2("{\"scale_attn_by_inverse_layer_idx\": true}"), "gpt2");
  cr_assert_str_eq(refusal(NULL), "config.json: 'scale_attn_by_inverse_layer_idx' is true: attention scaled by the "
                                  "layer index is not implemented");
}

Test(convert_errors, missing_and_wrong_keys) {
  model_dir(GPT2("{\"n_head\": null}"), NULL);
  cr_assert_str_eq(refusal(NULL), "config.json: the key 'n_head' is missing");
  model_dir(GPT2("{\"n_embd\": \"64\"}"), NULL);
  cr_assert_str_eq(refusal(NULL), "config.json: 'n_embd' is \"64\", but it must be a positive integer (at most 16777216)");
  model_dir(GPT2("{\"n_embd\": 64.5}"), NULL);
  cr_assert_str_eq(refusal(NULL), "config.json: 'n_embd' is 64.5, but it must be a positive integer (at most 16777216)");
  model_dir(LLAMA("{\"num_key_value_heads\": 3}"), NULL);
  cr_assert_str_eq(refusal(NULL),
                   "config.json: 'num_attention_heads' (4) is not a multiple of 'num_key_value_heads' (3)");
}

Test(convert_errors, malformed_json_has_its_line_and_column) {
  model_dir("{\"model_type\": \"gpt2\",\n  \"n_embd\": 64,,\n}\n", NULL);
  cr_assert_str_eq(refusal(NULL), "config.json:2:17: malformed JSON");
  model_dir("[1, 2]", NULL);
  cr_assert_str_eq(refusal(NULL), "config.json: the top level must be an object");
  model_dir("{\"model_type\": \"gpt2\"} extra", NULL);
  cr_assert_str_eq(refusal(NULL), "config.json:1:24: malformed JSON");
}

Test(convert_errors, missing_tensor) {
  model_dir(GPT2("{\"n_layer\": 3}"), "gpt2");
  cr_assert_str_eq(refusal(NULL), "the tensor 'transformer.h.2.ln_1.weight' is missing from model.safetensors");
  model_dir(LLAMA("{\"tie_word_embeddings\": false}"), "llama_tied");
  cr_assert_str_eq(refusal(NULL), "the tensor 'lm_head.weight' is missing from model.safetensors");
  model_dir(GPT2("{\"tie_word_embeddings\": false}"), "gpt2");
  cr_assert_str_eq(refusal(NULL), "the tensor 'lm_head.weight' is missing from model.safetensors");
}

Test(convert_errors, shape_mismatch_names_the_tensor) {
  model_dir(GPT2("{\"n_inner\": 128}"), "gpt2");
  cr_assert_str_eq(refusal(NULL), "the tensor 'transformer.h.0.mlp.c_fc.weight' in model.safetensors has the shape "
                                  "[64,256], but config.json makes it [64,128]");
  model_dir(LLAMA("{\"num_key_value_heads\": 4}"), "llama_tied");
  cr_assert_str_eq(refusal(NULL), "the tensor 'model.layers.0.self_attn.k_proj.weight' in model.safetensors has the "
                                  "shape [32,64], but config.json makes it [64,64]");
}

Test(convert_errors, no_weights) {
  model_dir(GPT2("{}"), NULL);
  char want[600];
  snprintf(want, sizeof want, "%s holds neither model.safetensors nor model.safetensors.index.json", dir);
  cr_assert_str_eq(refusal(NULL), want);
}

Test(convert_errors, buckets_and_cache_length) {
  model_dir(GPT2("{}"), "gpt2");
  cr_assert_str_eq(refusal(&(ConvertOptions){.seqs = {16, 65}, .nseqs = 2}),
                   "--seq 65 is not between 1 and the model's 64 positions");
  cr_assert_str_eq(refusal(&(ConvertOptions){.seqs = {32}, .nseqs = 1, .ctx = 16}),
                   "--ctx 16 is shorter than the longest --seq (32)");
  cr_assert_str_eq(refusal(&(ConvertOptions){.ctx = 128}), "--ctx 128 is more than the model's 64 positions");
}

/* The defaults: one bucket of 128 clamped to the positions, the cache as long. */
Test(convert_errors, defaults_clamp_to_the_positions) {
  model_dir(GPT2("{}"), "gpt2");
  char out[512];
  snprintf(out, sizeof out, "%s/model.oir", dir);
  ConvertOptions opt = {.model_dir = dir, .output = out};
  StrBuf text;
  sb_init(&text);
  char err[512];
  cr_assert(convert_model(&opt, &text, err, sizeof err), "%s", err);
  cr_assert_not_null(strstr(text.data, "func prefill_64(tokens: int32[1,64])"));
  cr_assert_not_null(strstr(text.data, "mask: fp16[1,1,1,64]"));
  cr_assert_null(strstr(text.data, "prefill_128"));
  /* The weights beside the .oir: named without a directory. */
  cr_assert_not_null(strstr(text.data, "safetensors(\"model.safetensors\", \"transformer.wte.weight\")"));
  sb_free(&text);
}

/* The keys that change the program's text rather than its shapes. */
Test(convert_errors, activations_and_head_dim) {
  char out[512];
  snprintf(out, sizeof out, "%s/model.oir", dir);
  ConvertOptions opt = {.model_dir = dir, .output = out, .seqs = {8}, .nseqs = 1};
  StrBuf text;
  sb_init(&text);
  char err[512];
  model_dir(GPT2("{\"activation_function\": \"gelu\"}"), "gpt2");
  cr_assert(convert_model(&opt, &text, err, sizeof err), "%s", err);
  cr_assert_not_null(strstr(text.data, "  act = gelu(fc, mode=\"exact\");\n"));
  text.len = 0;
  model_dir(LLAMA("{\"hidden_act\": \"relu\"}"), "llama_tied");
  cr_assert(convert_model(&opt, &text, err, sizeof err), "%s", err);
  cr_assert_not_null(strstr(text.data, "  gate_act = relu(gate);\n"));
  sb_free(&text);
  model_dir(LLAMA("{\"head_dim\": 32}"), "llama_tied");
  cr_assert_str_eq(refusal(NULL), "the tensor 'model.layers.0.self_attn.q_proj.weight' in model.safetensors has the "
                                  "shape [64,64], but config.json makes it [128,64]");
}

/* A file of dir (static path). */
static const char *in_dir(const char *name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return path;
}

/* GPT2Model's keys (no "transformer."): the fixture's file with its header's keys renamed
 * (the data offsets are relative to the data, so they stay). */
Test(convert_errors, keys_without_the_prefix) {
  char *data;
  size_t len;
  const char *why;
  cr_assert(read_file(MODELS "/gpt2/model.safetensors", 1 << 24, &data, &len, &why), "%s", why);
  uint64_t hlen;
  memcpy(&hlen, data, 8);
  cJSON *h = cJSON_ParseWithLength(data + 8, (size_t)hlen);
  cr_assert_not_null(h);
  for (cJSON *t = h->child; t; t = t->next)
    if (!strncmp(t->string, "transformer.", 12)) memmove(t->string, t->string + 12, strlen(t->string + 12) + 1);
  char *header = cJSON_PrintUnformatted(h);
  StrBuf file;
  sb_init(&file);
  uint64_t n = strlen(header);
  sb_putn(&file, (const char *)&n, 8);
  sb_puts(&file, header);
  sb_putn(&file, data + 8 + hlen, len - 8 - (size_t)hlen);
  model_dir(GPT2("{}"), NULL);
  cr_assert(write_file_atomic(in_dir("model.safetensors"), file.data, file.len, &why), "%s", why);
  ConvertOptions opt = {.model_dir = dir, .output = in_dir("model.oir"), .seqs = {8}, .nseqs = 1};
  StrBuf text;
  sb_init(&text);
  char err[512];
  cr_assert(convert_model(&opt, &text, err, sizeof err), "%s", err);
  cr_assert_not_null(strstr(text.data, "safetensors(\"model.safetensors\", \"{scope}.attn.c_attn.weight\")"));
  cr_assert_not_null(strstr(text.data, "safetensors(\"model.safetensors\", \"wte.weight\")"));
  sb_free(&text);
  sb_free(&file);
  cJSON_free(header);
  cJSON_Delete(h);
  free(data);
}

/* A shard index that lists no file for a tensor. */
Test(convert_errors, index_without_a_tensor) {
  char *data;
  size_t len;
  const char *why;
  cr_assert(read_file(MODELS "/llama_sharded/model.safetensors.index.json", 1 << 20, &data, &len, &why), "%s", why);
  cJSON *index = cJSON_ParseWithLength(data, len);
  free(data);
  cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(index, "weight_map"),
                                          "model.layers.1.mlp.up_proj.weight");
  char *text = cJSON_Print(index);
  model_dir(config_of("llama_sharded", "{}"), NULL);
  cr_assert(write_file_atomic(in_dir("model.safetensors.index.json"), text, strlen(text), &why), "%s", why);
  cJSON_free(text);
  cJSON_Delete(index);
  for (int i = 1; i <= 2; i++) {
    char shard[64], target[512];
    snprintf(shard, sizeof shard, "model-0000%d-of-00002.safetensors", i);
    snprintf(target, sizeof target, "%s/llama_sharded/%s", MODELS, shard);
    cr_assert_eq(symlink(target, in_dir(shard)), 0);
  }
  cr_assert_str_eq(refusal(NULL), "the tensor 'model.layers.1.mlp.up_proj.weight' is missing "
                                  "(model.safetensors.index.json names no file for it)");
}

Test(convert_errors, check_config_entry) {
  char err[256];
  const char *good = GPT2("{}");
  cr_assert(convert_check_config("config.json", good, strlen(good), err, sizeof err), "%s", err);
  cr_assert_not(convert_check_config("x.json", "{", 1, err, sizeof err));
  cr_assert_str_eq(err, "x.json:1:1: malformed JSON");
}

/* ---- rope_cos / rope_sin ---- */

static IrModule *parse_ok(const char *src, Diag *d, StrBuf *msgs) {
  IrModule *m = oir_parse_string("rope.oir", src, strlen(src), d);
  cr_assert_not_null(m, "%s", msgs->data ? msgs->data : "");
  return m;
}

Test(convert_errors, rope_tables_hold_hugging_faces_angles) {
  const char *src = "func main(x: fp32[6,8]) {\n"
                    "  param c: fp32[6,8] = rope_cos(theta=500000);\n"
                    "  param s: fp16[6,8] = rope_sin;\n"
                    "  cs = cast(s, dtype=\"fp32\");\n"
                    "  y = mul(x, c);\n"
                    "  z = add(y, cs);\n"
                    "  return z;\n"
                    "}\n";
  SourceSet ss;
  srcset_init(&ss);
  Diag d;
  diag_init(&d, &ss);
  StrBuf msgs;
  sb_init(&msgs);
  d.capture = &msgs;
  IrModule *m = parse_ok(src, &d, &msgs);
  IrFunc *f = ir_func(m, ir_func_lookup(m, "main"));
  for (uint32_t k = 0; k < 2; k++) {
    IrValueId id = f->decls[k];
    size_t n;
    void *data = weights_materialize(m, id, NULL, &d, &n);
    cr_assert_not_null(data, "%s", msgs.data ? msgs.data : "");
    double theta = k == 0 ? 500000.0 : 10000.0;
    for (int p = 0; p < 6; p++)
      for (int i = 0; i < 8; i++) {
        double angle = p * pow(theta, -2.0 * (i % 4) / 8.0);
        if (k == 0) cr_assert_eq(((float *)data)[p * 8 + i], (float)cos(angle), "cos [%d,%d]", p, i);
        else cr_assert_eq(((uint16_t *)data)[p * 8 + i], fp16_from_double(sin(angle)), "sin [%d,%d]", p, i);
      }
    free(data);
  }
  /* The canonical form spells the source out and reads back. */
  StrBuf text;
  sb_init(&text);
  ir_print_module(m, &text);
  cr_assert_not_null(strstr(text.data, "param c: fp32[6,8] = rope_cos(theta=500000.0);"), "%s", text.data);
  cr_assert_not_null(strstr(text.data, "param s: fp16[6,8] = rope_sin(theta=10000.0);"), "%s", text.data);
  sb_free(&text);
  ir_module_free(m);
  sb_free(&msgs);
  srcset_free(&ss);
}

/* The message line of a diagnostic (the source line and caret dropped). */
static const char *first_line(const char *s) {
  static char line[512];
  snprintf(line, sizeof line, "%.*s\n", (int)strcspn(s, "\n"), s);
  return line;
}

Test(convert_errors, rope_table_checks) {
  cr_assert_str_eq(first_line(diags_of("func main(x: fp32[6,7]) {\n  param c: fp32[6,7] = rope_cos;\n  y = add(x, c);\n"
                            "  return y;\n}\n")),
                   "t.oir:2:24: error: 'rope_cos' makes a float table [positions, head_dim] with an even head_dim, "
                   "not fp32[6,7]\n");
  cr_assert_str_eq(first_line(diags_of("func main(x: fp32[6,8]) {\n  param c: fp32[6,8] = rope_sin(theta=1);\n  y = add(x, c);\n"
                            "  return y;\n}\n")),
                   "t.oir:2:39: error: theta must be greater than 1\n");
  cr_assert_str_eq(first_line(diags_of("func main(x: fp32[6,8]) {\n  param c: fp32[6,8] = rope_sin(base=2);\n  y = add(x, c);\n"
                            "  return y;\n}\n")),
                   "t.oir:2:33: error: unknown argument 'base' for weight source 'rope_sin'\n");
}
