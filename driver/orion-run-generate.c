/*
 * `orion-run generate`: text (or ids) from a package in the generation
 * contract. Parses the options, turns the prompt into ids (the tokenizer's
 * calls are behind generate_text.h), then prefill, sample, step until EOS, a
 * stop string, --max-tokens or the end of the KV cache, streaming the text
 * as it comes; the loop and the sampler are the generation library's
 * (orion/generate.h, orion/sample.h). docs/generation.md has the details.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "generate_text.h"
#include "orion-run.h"
#include "orion/generate.h"
#include "orion/sample.h"

enum {
  OPT_TOKENIZER = 1, OPT_PROMPT, OPT_PROMPT_FILE, OPT_IDS, OPT_PRINT_IDS, OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_TOP_K,
  OPT_TOP_P, OPT_MIN_P, OPT_REPEAT_PENALTY, OPT_REPEAT_LAST_N, OPT_SEED, OPT_STOP, OPT_IGNORE_EOS, OPT_EOS,
  OPT_NUMERICS, OPT_BACKEND, OPT_COMPILE_BUDGET, OPT_RESIDENT_CAP, OPT_JSON, OPT_HELP,
};

#define DEFAULT_MAX_TOKENS 128
#define MAX_STOPS 16

static const CliOption generate_options[] = {
    {OPT_TOKENIZER, 0, "tokenizer", CLI_VALUE, 0, " PATH",
     "the tokenizer: a directory (or file) with vocab.json +\n"
     "merges.txt, encoder.json + vocab.bpe, or tokenizer.model",
     "a path"},
    {OPT_PROMPT, 0, "prompt", CLI_VALUE, CLI_EMPTY_OK, " TEXT", "the prompt (needs --tokenizer)", "a text"},
    {OPT_PROMPT_FILE, 0, "prompt-file", CLI_VALUE, 0, " FILE", "the prompt, read from a file (needs --tokenizer)",
     "a file"},
    {OPT_IDS, 0, "ids", CLI_VALUE, 0, " LIST", "the prompt as token ids, e.g. 1,2,3 (no tokenizer needed)",
     "a list of ids"},
    {OPT_PRINT_IDS, 0, "print-ids", CLI_NO_VALUE, 0, NULL,
     "print the generated ids rather than text (the default\n"
     "without --tokenizer)",
     NULL},
    {OPT_MAX_TOKENS, 'n', "max-tokens", CLI_VALUE, 0, " N", "generate at most N tokens (default: 128)", "a number"},
    {OPT_TEMPERATURE, 0, "temperature", CLI_VALUE, 0, " T", "sampling temperature; 0 is greedy (default: 0.8)",
     "a number"},
    {OPT_TOP_K, 0, "top-k", CLI_VALUE, 0, " K", "keep the K most likely tokens; 0 = all (default: 40)", "a number"},
    {OPT_TOP_P, 0, "top-p", CLI_VALUE, 0, " P",
     "keep the fewest most likely tokens whose probability reaches\n"
     "P; 1 = all (default: 0.95)",
     "a number"},
    {OPT_MIN_P, 0, "min-p", CLI_VALUE, 0, " P",
     "drop tokens less likely than P times the most likely one;\n"
     "0 = none (default: 0.05)",
     "a number"},
    {OPT_REPEAT_PENALTY, 0, "repeat-penalty", CLI_VALUE, 0, " R",
     "penalise the last --repeat-last-n tokens: positive logits\n"
     "divided by R, negative ones multiplied; 1 = off (default: 1)",
     "a number"},
    {OPT_REPEAT_LAST_N, 0, "repeat-last-n", CLI_VALUE, 0, " N", "tokens the repeat penalty looks at (default: 64)",
     "a number"},
    {OPT_SEED, 0, "seed", CLI_VALUE, 0, " S", "the sampler's seed (default: 0)", "a number"},
    {OPT_STOP, 0, "stop", CLI_VALUE, 0, " STRING",
     "stop when the text contains STRING (not printed); repeatable\n"
     "(needs --tokenizer)",
     "a string"},
    {OPT_IGNORE_EOS, 0, "ignore-eos", CLI_NO_VALUE, 0, NULL, "go on past the end-of-text token", NULL},
    {OPT_EOS, 0, "eos", CLI_VALUE, 0, " ID", "the end-of-text id (default: the tokenizer's; none without)",
     "an id"},
    {OPT_NUMERICS, 0, "numerics", CLI_VALUE, CLI_WORD, " MODE",
     "ane (default: fp16 results as on the device) or fp32", "ane or fp32"},
    {OPT_BACKEND, 0, "backend", CLI_VALUE, CLI_WORD, " NAME", "the backend (default: cpu)", "a backend name"},
    ORION_RUN_ANE_LIMIT_OPTIONS(OPT_COMPILE_BUDGET, OPT_RESIDENT_CAP),
    {OPT_JSON, 0, "json", CLI_NO_VALUE, 0, NULL,
     "print one JSON object at the end (ids, text, timings, stop\n"
     "reason) instead of streaming",
     NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
};

static const CliSpec generate_spec = {
    .program = "orion-run generate",
    .usage = "usage: orion-run generate PACKAGE --tokenizer PATH --prompt TEXT [options]\n"
             "       orion-run generate PACKAGE --ids 1,2,3 [options]\n",
    .description = "Generates text from a package in the generation contract (prefill_T buckets\n"
                   "and decode, as orion-convert writes them): prefills the prompt with the\n"
                   "smallest bucket that holds it, then decodes token by token with the KV cache\n"
                   "bound in place, sampling each token, and streams the text. Stops at the\n"
                   "end-of-text token, a --stop string, --max-tokens, or the end of the KV cache.\n"
                   "Prints the prompt tokens, prefill and decode tokens/s on stderr at the end.\n"
                   "docs/generation.md has the details.\n",
    .options = generate_options,
    .noptions = sizeof generate_options / sizeof *generate_options,
    .epilogue = "exit status: 0 success, 1 errors (package, tokenizer, prompt), 2 usage error\n",
    .help_column = 26,
};

#define usage_error(...) cli_usage_error("orion-run generate", __VA_ARGS__)

typedef struct GenArgs {
  const char *package, *tokenizer, *prompt, *prompt_file, *ids, *backend;
  bool print_ids, ignore_eos, json;
  uint64_t max_tokens;
  int64_t eos; /* -1: the tokenizer's */
  OrionSamplerOptions sampling;
  OrionNumerics numerics;
  OrionBackendOptions backend_options; /* the ane backend's limits */
  const char *stops[MAX_STOPS];
  uint32_t nstops;
} GenArgs;

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  GenArgs *a = ctx;
  OrionSamplerOptions *s = &a->sampling;
  double x;
  uint64_t n;
  switch (id) {
  case OPT_HELP: cli_print_help(&generate_spec, stdout); return 0;
  case OPT_TOKENIZER: a->tokenizer = v; return -1;
  case OPT_PROMPT: a->prompt = v; return -1;
  case OPT_PROMPT_FILE: a->prompt_file = v; return -1;
  case OPT_IDS: a->ids = v; return -1;
  case OPT_PRINT_IDS: a->print_ids = true; return -1;
  case OPT_IGNORE_EOS: a->ignore_eos = true; return -1;
  case OPT_JSON: a->json = true; return -1;
  case OPT_BACKEND: a->backend = v; return -1;
  case OPT_COMPILE_BUDGET:
    return orion_run_take_ane_limit("orion-run generate", "--ane-compile-budget", v, &a->backend_options.compile_budget);
  case OPT_RESIDENT_CAP:
    return orion_run_take_ane_limit("orion-run generate", "--ane-resident-cap", v, &a->backend_options.resident_cap);
  case OPT_STOP:
    if (!*v) return usage_error("%s", "--stop needs a non-empty string");
    if (a->nstops == MAX_STOPS) return usage_error("too many --stop (limit is %d)", MAX_STOPS);
    a->stops[a->nstops++] = v;
    return -1;
  case OPT_NUMERICS:
    if (strcmp(v, "ane") && strcmp(v, "fp32")) return usage_error("--numerics is ane or fp32, not '%s'", v);
    a->numerics = !strcmp(v, "fp32") ? ORION_NUMERICS_FP32 : ORION_NUMERICS_ANE;
    return -1;
  case OPT_TEMPERATURE: case OPT_TOP_P: case OPT_MIN_P: case OPT_REPEAT_PENALTY:
    if (!cli_value_double(v, &x) || x < 0) return usage_error("%s needs a number of at least 0 (not '%s')", spelling, v);
    if ((id == OPT_TOP_P || id == OPT_MIN_P) && x > 1) return usage_error("%s is between 0 and 1 (not '%s')", spelling, v);
    if (id == OPT_REPEAT_PENALTY && x == 0) return usage_error("%s must be above 0", spelling);
    if (id == OPT_TEMPERATURE) s->temperature = x;
    else if (id == OPT_TOP_P) s->top_p = x;
    else if (id == OPT_MIN_P) s->min_p = x;
    else s->repeat_penalty = x;
    return -1;
  case OPT_MAX_TOKENS: case OPT_TOP_K: case OPT_REPEAT_LAST_N: case OPT_SEED: case OPT_EOS:
    if (!cli_value_count(v, &n)) return usage_error("%s needs a whole number (not '%s')", spelling, v);
    if (id != OPT_SEED && n > INT32_MAX) return usage_error("%s is at most %d", spelling, INT32_MAX);
    if (id == OPT_MAX_TOKENS && n == 0) return usage_error("%s must be at least 1", spelling);
    if (id == OPT_MAX_TOKENS) a->max_tokens = n;
    else if (id == OPT_TOP_K) s->top_k = (uint32_t)n;
    else if (id == OPT_REPEAT_LAST_N) s->repeat_last_n = (uint32_t)n;
    else if (id == OPT_SEED) s->seed = n;
    else a->eos = (int64_t)n;
    return -1;
  default: return -1;
  }
}

static int parse(int argc, char **argv, GenArgs *a) {
  *a = (GenArgs){.max_tokens = DEFAULT_MAX_TOKENS, .eos = -1, .backend = "cpu", .sampling = orion_sampler_defaults()};
  int rc = cli_parse_one_operand(&generate_spec, argc, argv, take_option, a, "package", &a->package, "no package");
  if (rc >= 0) return rc;
  int prompts = !!a->prompt + !!a->prompt_file + !!a->ids;
  if (prompts != 1)
    return usage_error("%s", prompts ? "give one of --prompt, --prompt-file and --ids"
                                     : "no prompt (--prompt TEXT, --prompt-file FILE or --ids LIST)");
  if (!a->tokenizer && !a->ids) return usage_error("%s needs --tokenizer", a->prompt ? "--prompt" : "--prompt-file");
  if (!a->tokenizer && a->nstops) return usage_error("%s", "--stop needs --tokenizer (stop strings match text)");
  if (!a->tokenizer) a->print_ids = true;
  return -1;
}

/* "1,2,3" or "1 2 3" into ids. */
static bool parse_ids(const char *s, int32_t **ids, size_t *n, Diag *d) {
  size_t cap = 16, k = 0;
  int32_t *v = xmalloc(cap * sizeof *v);
  const char *p = s;
  while (*p) {
    while (*p == ',' || *p == ' ') p++;
    if (!*p) break;
    char *end;
    errno = 0;
    long x = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
    if (x < 0 || errno || x > INT32_MAX || (*end && *end != ',' && *end != ' ')) {
      diag_error(d, (SrcSpan){0}, "--ids: '%s' is not a list of token ids (whole numbers, e.g. 1,2,3)", s);
      free(v);
      return false;
    }
    if (k == cap) v = xrealloc(v, (cap *= 2) * sizeof *v);
    v[k++] = (int32_t)x;
    p = end;
  }
  if (!k) {
    diag_error(d, (SrcSpan){0}, "%s", "--ids: the list is empty");
    free(v);
    return false;
  }
  *ids = v, *n = k;
  return true;
}

typedef enum StopReason { STOP_EOS, STOP_STRING, STOP_LENGTH, STOP_CONTEXT } StopReason;
static const char *const stop_names[] = {"eos", "stop", "length", "context"};

typedef struct GenRun {
  int32_t *prompt, *all; /* all: prompt then generated (the sampler's history) */
  size_t nprompt, nall;
  StrBuf text;           /* what was shown (or would have been, with --json) */
  StopReason reason;
  int stop_index;
  OrionGenTimings t;
} GenRun;

static void emit(const GenArgs *a, const char *s, size_t n) {
  if (a->json || !n) return;
  fwrite(s, 1, n, stdout);
  fflush(stdout);
}

/* Passes a token's text through the stop matcher to the output. */
static bool show_text(const GenArgs *a, GenText *tx, OrionStopMatcher *m, int32_t id, GenRun *r) {
  StrBuf piece, shown;
  sb_init(&piece), sb_init(&shown);
  gen_text_push(tx, id, &piece);
  bool stopped = orion_stop_push(m, piece.data ? piece.data : "", piece.len, &shown);
  emit(a, shown.data, shown.len);
  sb_putn(&r->text, shown.data ? shown.data : "", shown.len);
  sb_free(&piece), sb_free(&shown);
  return stopped;
}

static bool generate(const GenArgs *a, OrionGen *g, GenText *tx, int32_t eos, GenRun *r, Diag *d) {
  const OrionGenShape *shape = orion_gen_shape(g);
  if (!orion_gen_prefill(g, r->prompt, (uint32_t)r->nprompt, d)) return false;
  OrionSampler *s = orion_sampler_new(&a->sampling, shape->vocab);
  OrionStopMatcher m;
  orion_stop_init(&m, a->stops, a->nstops);
  r->all = xmalloc((r->nprompt + a->max_tokens + 1) * sizeof *r->all);
  memcpy(r->all, r->prompt, r->nprompt * sizeof *r->prompt);
  r->nall = r->nprompt;
  bool ok = true;
  for (uint64_t made = 0;;) {
    int32_t next = orion_sampler_sample(s, orion_gen_logits(g), r->all, r->nall);
    if (next == eos && !a->ignore_eos) {
      r->reason = STOP_EOS;
      break;
    }
    r->all[r->nall++] = next, made++;
    if (tx && !a->print_ids) {
      if (show_text(a, tx, &m, next, r)) {
        r->reason = STOP_STRING, r->stop_index = m.found;
        break;
      }
    } else if (!a->json) {
      printf("%s%d", made > 1 ? " " : "", next);
      fflush(stdout);
    }
    if (made == a->max_tokens) {
      r->reason = STOP_LENGTH;
      break;
    }
    if (orion_gen_position(g) == shape->context) { /* the cache holds every slot: the documented end */
      r->reason = STOP_CONTEXT;
      break;
    }
    if (!(ok = orion_gen_step(g, next, d))) break;
  }
  if (ok && tx && !a->print_ids && r->reason != STOP_STRING) {
    StrBuf tail, shown;
    sb_init(&tail), sb_init(&shown);
    gen_text_finish(tx, &tail);
    if (!orion_stop_push(&m, tail.data ? tail.data : "", tail.len, &shown)) orion_stop_finish(&m, &shown);
    else r->reason = STOP_STRING, r->stop_index = m.found;
    emit(a, shown.data, shown.len);
    sb_putn(&r->text, shown.data ? shown.data : "", shown.len);
    sb_free(&tail), sb_free(&shown);
  }
  if (ok && !a->json && (a->print_ids || r->text.len)) putchar('\n');
  r->t = orion_gen_timings(g);
  orion_stop_free(&m);
  orion_sampler_free(s);
  return ok;
}

static double per_s(uint32_t n, double ms) { return ms > 0 ? n / (ms / 1e3) : 0; }

static void print_stats(const GenRun *r) {
  size_t made = r->nall - r->nprompt;
  fprintf(stderr, "orion-run generate: prompt %u tokens, prefill %.2f ms (%.2f tokens/s, bucket %u)\n",
          r->t.prompt_tokens, r->t.prefill_ms, per_s(r->t.prompt_tokens, r->t.prefill_ms), r->t.prefill_bucket);
  fprintf(stderr, "orion-run generate: decode %u runs, %.2f ms (%.2f tokens/s); %zu tokens generated, stop: %s\n",
          r->t.decode_steps, r->t.decode_ms, per_s(r->t.decode_steps, r->t.decode_ms), made, stop_names[r->reason]);
}

static cJSON *id_array(const int32_t *ids, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
  return a;
}

static void print_json(const GenArgs *a, const GenRun *r, bool text) {
  cJSON *j = cJSON_CreateObject(), *t = cJSON_CreateObject(), *s = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "package", a->package);
  cJSON_AddStringToObject(j, "backend", a->backend);
  cJSON_AddStringToObject(j, "numerics", a->numerics == ORION_NUMERICS_FP32 ? "fp32" : "ane");
  cJSON_AddItemToObject(j, "prompt_ids", id_array(r->prompt, r->nprompt));
  cJSON_AddItemToObject(j, "generated_ids", id_array(r->all + r->nprompt, r->nall - r->nprompt));
  if (text) {
    char *z = xmalloc(r->text.len + 1);
    memcpy(z, r->text.data ? r->text.data : "", r->text.len);
    z[r->text.len] = '\0';
    cJSON_AddStringToObject(j, "text", z);
    free(z);
  } else cJSON_AddNullToObject(j, "text");
  cJSON_AddStringToObject(j, "stop_reason", stop_names[r->reason]);
  if (r->reason == STOP_STRING) cJSON_AddStringToObject(j, "stop_string", a->stops[r->stop_index]);
  else cJSON_AddNullToObject(j, "stop_string");
  cJSON_AddNumberToObject(t, "prompt_tokens", r->t.prompt_tokens);
  cJSON_AddNumberToObject(t, "prefill_bucket", r->t.prefill_bucket);
  cJSON_AddNumberToObject(t, "prefill_ms", r->t.prefill_ms);
  cJSON_AddNumberToObject(t, "prefill_tokens_per_s", per_s(r->t.prompt_tokens, r->t.prefill_ms));
  cJSON_AddNumberToObject(t, "decode_runs", r->t.decode_steps);
  cJSON_AddNumberToObject(t, "decode_ms", r->t.decode_ms);
  cJSON_AddNumberToObject(t, "decode_tokens_per_s", per_s(r->t.decode_steps, r->t.decode_ms));
  cJSON_AddItemToObject(j, "timings", t);
  const OrionSamplerOptions *o = &a->sampling;
  cJSON_AddNumberToObject(s, "temperature", o->temperature);
  cJSON_AddNumberToObject(s, "top_k", o->top_k);
  cJSON_AddNumberToObject(s, "top_p", o->top_p);
  cJSON_AddNumberToObject(s, "min_p", o->min_p);
  cJSON_AddNumberToObject(s, "repeat_penalty", o->repeat_penalty);
  cJSON_AddNumberToObject(s, "repeat_last_n", o->repeat_last_n);
  cJSON_AddNumberToObject(s, "seed", (double)o->seed);
  cJSON_AddItemToObject(j, "sampling", s);
  char *out = cJSON_Print(j);
  puts(out);
  free(out);
  cJSON_Delete(j);
}

/* The prompt's ids from --ids, or the tokenizer's encoding of the text. */
static bool prompt_ids(const GenArgs *a, GenText *tx, GenRun *r, Diag *d) {
  if (a->ids) return parse_ids(a->ids, &r->prompt, &r->nprompt, d);
  char *text = NULL;
  size_t len = 0;
  const char *why = NULL;
  if (a->prompt_file) {
    if (!read_file(a->prompt_file, 1 << 26, &text, &len, &why))
      return diag_error(d, (SrcSpan){0}, "cannot read the prompt file '%s': %s", a->prompt_file, why), false;
  }
  bool ok = gen_text_encode(tx, a->prompt_file ? text : a->prompt, a->prompt_file ? len : strlen(a->prompt),
                            &r->prompt, &r->nprompt, d);
  free(text);
  if (ok && !r->nprompt) ok = (diag_error(d, (SrcSpan){0}, "%s", "the prompt encodes to no tokens"), false);
  return ok;
}

int orion_run_generate(int argc, char **argv) {
  GenArgs a;
  int rc = parse(argc, argv, &a);
  if (rc >= 0) return rc;
  RunDiag rd;
  run_diag_open(&rd, "orion-run generate");
  Diag *d = &rd.d;
  rc = 1;
  GenText *tx = NULL;
  OrionGen *g = NULL;
  GenRun r = {0};
  sb_init(&r.text);
  if (a.tokenizer && !(tx = gen_text_open(a.tokenizer, d))) goto done;
  if (!prompt_ids(&a, tx, &r, d)) goto done;
  OrionGenOptions go = {.backend_name = a.backend, .numerics = a.numerics, .backend_options = a.backend_options};
  if (!(g = orion_gen_open(a.package, &go, d))) goto done;
  if (tx && gen_text_vocab(tx) > orion_gen_shape(g)->vocab) { /* a model may pad its vocabulary, never lack ids */
    diag_error(d, (SrcSpan){0}, "the tokenizer has %u ids, more than the model's vocabulary of %u",
               gen_text_vocab(tx), orion_gen_shape(g)->vocab);
    goto done;
  }
  int32_t eos = a.eos >= 0 ? (int32_t)a.eos : tx ? gen_text_eos(tx) : -1;
  if (!generate(&a, g, tx, eos, &r, d)) goto done;
  if (a.json) print_json(&a, &r, tx && !a.print_ids);
  print_stats(&r);
  rc = 0;
done:
  orion_gen_close(g);
  gen_text_free(tx);
  free(r.prompt), free(r.all);
  sb_free(&r.text);
  run_diag_close(&rd);
  return rc;
}
