/*
 * orion-tokenize: text to token ids and back with a tokenizer (GPT-2 BPE
 * files, a SentencePiece model), and what a tokenizer holds. The library
 * is orion/tokenizer.h; see docs/tokenizers.md.
 * Exit codes: 0 success, 1 a bad tokenizer or input, 2 usage, 3 out of memory.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_options.h"
#include "orion-tokenize.h"
#include "orion/tokenizer.h"
#include "tool_memory.h"

#define PROGRAM "orion-tokenize"

enum { OPT_TOKENIZER = 1, OPT_FILE, OPT_OUTPUT, OPT_JSON, OPT_SPECIAL, OPT_HELP, OPT_VERSION };

static const CliOption tokenize_options[] = {
    {OPT_TOKENIZER, 't', "tokenizer", CLI_VALUE, 0, " PATH",
     "the tokenizer: a directory with vocab.json + merges.txt or\n"
     "encoder.json + vocab.bpe (GPT-2 BPE), or tokenizer.model\n"
     "(SentencePiece), or one of those files",
     "a tokenizer path"},
    {OPT_FILE, 'f', "file", CLI_VALUE, 0, " FILE",
     "encode: the text of FILE instead of TEXT ('-': standard input);\n"
     "decode: the ids in FILE, separated by white space", "a file"},
    {OPT_OUTPUT, 'o', "output", CLI_VALUE, 0, " OUT",
     "encode: write the ids to OUT instead of printing them:\n"
     "OUT.bin raw little-endian uint16 (the token files of\n"
     "orion-run train --data; an id above 65535 is an error),\n"
     "OUT.npy a 1-D int32 .npy; replaced atomically",
     "a file ending in .bin or .npy"},
    {OPT_JSON, 0, "json", CLI_NO_VALUE, 0, NULL, "encode, info: print one JSON object", NULL},
    {OPT_SPECIAL, 0, "special", CLI_NO_VALUE, 0, NULL,
     "encode: special tokens written in the text (<|endoftext|>)\n"
     "become their ids (default: ordinary text, as gpt-3-encoder)",
     NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
    {OPT_VERSION, 0, "version", CLI_NO_VALUE, 0, NULL, "show the version", NULL},
};

static const CliSpec tokenize_spec = {
    .program = PROGRAM,
    .usage = "usage: orion-tokenize --tokenizer PATH encode TEXT|-\n"
             "       orion-tokenize --tokenizer PATH encode --file FILE [--output OUT.bin|OUT.npy]\n"
             "       orion-tokenize --tokenizer PATH decode ID...\n"
             "       orion-tokenize --tokenizer PATH info\n"
             "       orion-tokenize train ...\n",
    .description = "Encodes text into token ids (printed separated by spaces), decodes ids into\n"
                   "text (its exact bytes, nothing added), or shows a tokenizer's kind, vocabulary\n"
                   "size and special ids. Invalid UTF-8 is encoded as its bytes, never dropped.\n",
    .options = tokenize_options,
    .noptions = sizeof tokenize_options / sizeof *tokenize_options,
    .epilogue = "exit status: 0 success, 1 a bad tokenizer, text or id, 2 usage error, 3 out of memory\n",
    .help_column = 24,
};

typedef struct TokenizeArgs {
  const char *tokenizer, *file, *output, *command;
  bool json, special;
  const char **operands; /* after the command */
  int noperands;
} TokenizeArgs;

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  (void)spelling;
  TokenizeArgs *a = ctx;
  switch (id) {
  case OPT_HELP: cli_print_help(&tokenize_spec, stdout); return 0;
  case OPT_VERSION: printf(PROGRAM " %s\n", ORION_VERSION); return 0;
  case OPT_TOKENIZER: a->tokenizer = v; return -1;
  case OPT_FILE: a->file = v; return -1;
  case OPT_OUTPUT: a->output = v; return -1;
  case OPT_JSON: a->json = true; return -1;
  case OPT_SPECIAL: a->special = true; return -1;
  default: return -1;
  }
}

static int take_operand(void *ctx, const char *v) {
  TokenizeArgs *a = ctx;
  if (!a->command) a->command = v;
  else a->operands[a->noperands++] = v;
  return -1;
}

static bool read_input(const char *path, char **data, size_t *len) {
  const char *err = NULL;
  bool ok = strcmp(path, "-") == 0 ? read_fd(STDIN_FILENO, SIZE_MAX / 2, data, len, &err)
                                   : read_file(path, SIZE_MAX / 2, data, len, &err);
  if (!ok) fprintf(stderr, PROGRAM ": error: cannot read %s: %s\n", strcmp(path, "-") ? path : "standard input", err);
  return ok;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The ids as raw little-endian uint16, llama2.c's and llm.c's token files:
 * a wider id cannot be written, and is named rather than truncated. */
static bool encode_uint16(const int32_t *ids, size_t n, const char *path, StrBuf *out) {
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] > 65535) {
      fprintf(stderr, PROGRAM ": error: %s: id %d (token %zu) does not fit a .bin token file's uint16; write .npy\n",
              path, ids[i], i);
      return false;
    }
    sb_putc(out, (char)(ids[i] & 0xff));
    sb_putc(out, (char)(ids[i] >> 8));
  }
  return true;
}

/* The ids as numpy writes a 1-D int32 array (format 1.0, the header padded
 * with numpy's growth spaces and to 64 bytes, as runtime/npy.c writes it; the
 * tokenizer tools link no runtime). */
static void encode_npy(const int32_t *ids, size_t n, StrBuf *out) {
  enum { PREAMBLE = 10, ALIGN = 64, GROWTH_DIGITS = 21 };
  StrBuf h;
  sb_init(&h);
  sb_printf(&h, "{'descr': '<i4', 'fortran_order': False, 'shape': (%zu,), }", n);
  char digits[24];
  for (int i = snprintf(digits, sizeof digits, "%zu", n); i < GROWTH_DIGITS; i++) sb_putc(&h, ' ');
  for (size_t pad = ALIGN - (PREAMBLE + h.len + 1) % ALIGN; pad; pad--) sb_putc(&h, ' ');
  sb_putc(&h, '\n');
  sb_puts(out, "\x93NUMPY");
  sb_putc(out, 1);
  sb_putc(out, 0);
  sb_putc(out, (char)(h.len & 0xff));
  sb_putc(out, (char)(h.len >> 8));
  sb_putn(out, h.data, h.len);
  sb_free(&h);
  for (size_t i = 0; i < n; i++) {
    uint32_t v = (uint32_t)ids[i];
    for (int b = 0; b < 4; b++) sb_putc(out, (char)((v >> (8 * b)) & 0xff));
  }
}

static int write_token_file(const char *path, const int32_t *ids, size_t n) {
  StrBuf out;
  sb_init(&out);
  bool ok = true;
  if (ends_with(path, ".npy")) encode_npy(ids, n, &out);
  else ok = encode_uint16(ids, n, path, &out);
  const char *err = NULL;
  if (ok && !write_file_atomic(path, out.data, out.len, &err)) {
    fprintf(stderr, PROGRAM ": error: cannot write %s: %s\n", path, err);
    ok = false;
  }
  sb_free(&out);
  return ok ? 0 : 1;
}

static int run_encode(const TokenizeArgs *a, const OrionTokenizer *t, Diag *d) {
  if (a->noperands > 1) return cli_usage_error(PROGRAM, "encode takes one text ('%s' is a second)", a->operands[1]);
  if (a->file && a->noperands) return cli_usage_error(PROGRAM, "encode takes a text or --file, not both");
  if (!a->file && !a->noperands) return cli_usage_error(PROGRAM, "encode needs a text, '-' or --file FILE");
  if (a->output && a->json) return cli_usage_error(PROGRAM, "--output writes the ids to a file; --json prints them: not both");
  char *data = NULL;
  size_t len = 0;
  const char *source = a->file ? a->file : a->operands[0];
  if (a->file || strcmp(source, "-") == 0) {
    if (!read_input(source, &data, &len)) return 1;
  } else {
    data = xstrdup(source);
    len = strlen(source);
  }
  int32_t *ids = NULL;
  size_t n = 0;
  bool ok = orion_tokenizer_encode_flags(t, data, len, a->special ? ORION_ENCODE_SPECIAL : 0, &ids, &n, d);
  free(data);
  if (!ok) return 1;
  if (a->output) {
    int rc = write_token_file(a->output, ids, n);
    free(ids);
    return rc;
  }
  StrBuf out;
  sb_init(&out);
  sb_puts(&out, a->json ? "{\"ids\":[" : "");
  for (size_t i = 0; i < n; i++) sb_printf(&out, "%s%d", i ? (a->json ? "," : " ") : "", ids[i]);
  sb_printf(&out, a->json ? "],\"count\":%zu}\n" : "\n", n);
  fwrite(out.data, 1, out.len, stdout);
  sb_free(&out);
  free(ids);
  return 0;
}

/* An id as written: a decimal integer in int32's range; false if it is none. */
static bool parse_id(const char *s, size_t len, int32_t *id) {
  char buf[32];
  if (len == 0 || len >= sizeof buf) return false;
  memcpy(buf, s, len);
  buf[len] = 0;
  char *end;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  if (*end || errno || v < INT32_MIN || v > INT32_MAX) return false;
  *id = (int32_t)v;
  return true;
}

static int run_decode(const TokenizeArgs *a, const OrionTokenizer *t, Diag *d) {
  if (a->file && a->noperands) return cli_usage_error(PROGRAM, "decode takes ids or --file, not both");
  if (!a->file && !a->noperands) return cli_usage_error(PROGRAM, "decode needs ids or --file FILE");
  int32_t *ids = xmalloc(sizeof(int32_t) * (size_t)(a->noperands + 1));
  size_t n = 0;
  int rc = 0;
  if (a->file) {
    char *data = NULL;
    size_t len = 0;
    if (!read_input(a->file, &data, &len)) rc = 1;
    uint32_t cap = 1;
    for (size_t i = 0; rc == 0 && i < len;) {
      while (i < len && strchr(" \t\r\n", data[i])) i++;
      size_t s = i;
      while (i < len && !strchr(" \t\r\n", data[i])) i++;
      if (i == s) break;
      if (n == cap) xgrow((void **)&ids, sizeof(int32_t), &cap, (uint32_t)n + 1);
      if (!parse_id(data + s, i - s, &ids[n++])) {
        fprintf(stderr, PROGRAM ": error: %s: '%.*s' is not an id\n", a->file, (int)(i - s), data + s);
        rc = 1;
      }
    }
    free(data);
  } else {
    for (int i = 0; i < a->noperands && rc == 0; i++)
      if (!parse_id(a->operands[i], strlen(a->operands[i]), &ids[n++]))
        rc = cli_usage_error(PROGRAM, "'%s' is not an id (a decimal integer)", a->operands[i]);
  }
  if (rc == 0) {
    char *text = NULL;
    size_t len = 0;
    if (orion_tokenizer_decode(t, ids, n, &text, &len, d)) fwrite(text, 1, len, stdout);
    else rc = 1;
    free(text);
  }
  free(ids);
  return rc;
}

static int run_info(const TokenizeArgs *a, const OrionTokenizer *t) {
  if (a->noperands) return cli_usage_error(PROGRAM, "info takes no operands ('%s')", a->operands[0]);
  const char *kind = orion_tokenizer_kind(t) == ORION_TOKENIZER_BPE ? "bpe" : "sentencepiece";
  if (a->json) {
    printf("{\"kind\":\"%s\",\"vocab_size\":%u,\"bos\":%d,\"eos\":%d,\"adds_bos\":%s}\n", kind,
           orion_tokenizer_vocab_size(t), orion_tokenizer_bos(t), orion_tokenizer_eos(t),
           orion_tokenizer_adds_bos(t) ? "true" : "false");
    return 0;
  }
  printf("kind %s\nvocab size %u\nbos %d\neos %d\nadds bos %s\n", kind, orion_tokenizer_vocab_size(t),
         orion_tokenizer_bos(t), orion_tokenizer_eos(t), orion_tokenizer_adds_bos(t) ? "yes" : "no");
  return 0;
}

static int run_train(int argc, char **argv) {
#ifdef ORION_HAVE_BPE_TRAIN
  return orion_tokenize_train_cmd(argc, argv);
#else
  (void)argc, (void)argv;
  return cli_usage_error(PROGRAM, "train is not built yet");
#endif
}

int main(int argc, char **argv) {
  tool_memory_init(PROGRAM, NULL, NULL);
  if (argc > 1 && strcmp(argv[1], "train") == 0) return run_train(argc - 1, argv + 1);
  TokenizeArgs a = {0};
  a.operands = xcalloc((size_t)argc, sizeof(char *));
  int rc = cli_parse(&tokenize_spec, argc, argv, take_option, take_operand, &a);
  if (rc < 0) {
    if (!a.command) rc = cli_usage_error(PROGRAM, "no command (encode, decode, info or train)");
    else if (strcmp(a.command, "train") == 0) rc = cli_usage_error(PROGRAM, "train comes first: orion-tokenize train ...");
    else if (strcmp(a.command, "encode") && strcmp(a.command, "decode") && strcmp(a.command, "info"))
      rc = cli_usage_error(PROGRAM, "unknown command '%s' (encode, decode, info or train)", a.command);
    else if (!a.tokenizer) rc = cli_usage_error(PROGRAM, "%s needs --tokenizer PATH", a.command);
    else if (a.output && strcmp(a.command, "encode"))
      rc = cli_usage_error(PROGRAM, "--output is for encode (not %s)", a.command);
    else if (a.output && !ends_with(a.output, ".bin") && !ends_with(a.output, ".npy"))
      rc = cli_usage_error(PROGRAM, "--output '%s': the name ends in .bin (uint16 tokens) or .npy (int32)", a.output);
  }
  if (rc >= 0) {
    free(a.operands);
    return rc;
  }
  Diag d;
  diag_init(&d, NULL);
  d.program = PROGRAM;
  OrionTokenizer *t = orion_tokenizer_open(a.tokenizer, &d);
  if (!t) rc = 1;
  else if (strcmp(a.command, "encode") == 0) rc = run_encode(&a, t, &d);
  else if (strcmp(a.command, "decode") == 0) rc = run_decode(&a, t, &d);
  else rc = run_info(&a, t);
  orion_tokenizer_free(t);
  free(a.operands);
  return rc;
}
