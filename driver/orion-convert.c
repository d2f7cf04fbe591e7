/*
 * orion-convert: a Hugging Face model directory (GPT-2 or llama family) to
 * a .oir with the prefill and decode entries of docs/generation.md. Parses
 * options and calls the importer (frontend/import/); nothing else here.
 * Exit codes: 0 written, 1 the model cannot be converted (the message says
 * why), 2 usage error, 3 out of memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "tool_memory.h"
#include "orion/convert.h"

enum { OPT_OUTPUT = 1, OPT_SEQ, OPT_CTX, OPT_DTYPE, OPT_HELP, OPT_VERSION };

static const CliOption convert_options[] = {
    {OPT_OUTPUT, 'o', NULL, CLI_VALUE, 0, " FILE", "the .oir to write (required); the weight files are named\n"
                                                    "relative to its directory ('-': standard output,\n"
                                                    "relative to the current directory)",
     "a file name"},
    {OPT_SEQ, 0, "seq", CLI_VALUE, 0, "=N[,N...]",
     "prefill bucket lengths, one entry prefill_N each (repeatable;\n"
     "default 128, at most the model's positions)",
     "a length, e.g. --seq=128"},
    {OPT_CTX, 0, "ctx", CLI_VALUE, 0, "=C",
     "the KV cache's length in tokens (default: the model's positions,\n"
     "at most 512, and at least the longest --seq)",
     "a length, e.g. --ctx=512"},
    {OPT_DTYPE, 0, "dtype", CLI_VALUE, CLI_WORD, "=T", "fp16 (default) or fp32: params and activations",
     "a dtype, e.g. --dtype=fp32"},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
    {OPT_VERSION, 0, "version", CLI_NO_VALUE, 0, NULL, "show the version", NULL},
};

static const CliSpec convert_spec = {
    .program = "orion-convert",
    .usage = "usage: orion-convert MODEL_DIR -o MODEL.oir [options]\n",
    .description = "Converts a Hugging Face model directory (config.json and model.safetensors, or\n"
                   "shards with model.safetensors.index.json) of the GPT-2 or llama family into a\n"
                   ".oir whose prefill_N and decode entries share one set of weights, read from\n"
                   "the safetensors files by key (docs/generation.md). Compile it with orionc.\n",
    .options = convert_options,
    .noptions = sizeof convert_options / sizeof *convert_options,
    .epilogue = "exit status: 0 written, 1 the model cannot be converted, 2 usage error, 3 out of memory\n",
    .help_column = 22,
};

typedef struct Args {
  ConvertOptions opt;
  bool dtype_given;
} Args;

/* A positive length, or 0 after a usage error. */
static int64_t parse_length(const char *spelling, const char *text, size_t n) {
  char buf[32];
  if (n == 0 || n >= sizeof buf) goto bad;
  memcpy(buf, text, n);
  buf[n] = 0;
  char *end;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  if (*end || errno || v < 1 || v > (1 << 24) || buf[0] == '-' || buf[0] == '+' || buf[0] == ' ') goto bad;
  return v;
bad:
  cli_usage_error("orion-convert", "%s needs positive whole numbers, not '%.*s'", spelling, (int)n, text);
  return 0;
}

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  Args *a = ctx;
  switch (id) {
  case OPT_HELP: cli_print_help(&convert_spec, stdout); return 0;
  case OPT_VERSION: printf("orion-convert %s\n", ORION_VERSION); return 0;
  case OPT_OUTPUT: a->opt.output = v; return -1;
  case OPT_SEQ:
    for (const char *s = v;;) {
      size_t n = strcspn(s, ",");
      int64_t len = parse_length(spelling, s, n);
      if (!len) return 2;
      if (a->opt.nseqs == CONVERT_MAX_BUCKETS)
        return cli_usage_error("orion-convert", "at most %d --seq buckets", CONVERT_MAX_BUCKETS);
      a->opt.seqs[a->opt.nseqs++] = len;
      if (!s[n]) return -1;
      s += n + 1;
    }
  case OPT_CTX:
    a->opt.ctx = parse_length(spelling, v, strlen(v));
    return a->opt.ctx ? -1 : 2;
  case OPT_DTYPE:
    if (strcmp(v, "fp16") && strcmp(v, "fp32"))
      return cli_usage_error("orion-convert", "--dtype is fp16 or fp32, not '%s'", v);
    a->opt.fp32 = !strcmp(v, "fp32");
    return -1;
  default: return -1;
  }
}

static int take_operand(void *ctx, const char *v) {
  return cli_one_operand(&convert_spec, "model directory", &((Args *)ctx)->opt.model_dir, v);
}

int main(int argc, char **argv) {
  tool_memory_init("orion-convert", NULL, NULL);
  Args a = {0};
  int rc = cli_parse(&convert_spec, argc, argv, take_option, take_operand, &a);
  if (rc >= 0) return rc;
  if (!a.opt.model_dir) return cli_usage_error("orion-convert", "no model directory");
  if (!a.opt.output) return cli_usage_error("orion-convert", "no output file (-o MODEL.oir)");
  StrBuf text;
  sb_init(&text);
  char err[1024];
  if (!convert_model(&a.opt, &text, err, sizeof err)) {
    fprintf(stderr, "orion-convert: error: %s: %s\n", a.opt.model_dir, err);
    sb_free(&text);
    return 1;
  }
  const char *why = "write error";
  bool ok = !strcmp(a.opt.output, "-") ? fwrite(text.data, 1, text.len, stdout) == text.len && fflush(stdout) == 0
                                       : write_file_atomic(a.opt.output, text.data, text.len, &why);
  if (!ok) fprintf(stderr, "orion-convert: error: cannot write '%s': %s\n", a.opt.output, why);
  sb_free(&text);
  return ok ? 0 : 1;
}
