/*
 * `orion-tokenize train`: learns a GPT-2 byte-level BPE from text files and
 * writes it in Hugging Face's format (vocab.json + merges.txt), which
 * `orion-tokenize --tokenizer DIR` and orion_tokenizer_open read back.
 * Parses options and reads the files; the learning is orion_bpe_train.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_options.h"
#include "orion-tokenize.h"
#include "orion/tokenizer.h"

/* One training file may be large (a corpus), but not without bound. */
#define MAX_TRAIN_FILE_BYTES ((size_t)1 << 30)

enum { OPT_VOCAB_SIZE = 1, OPT_MIN_FREQUENCY, OPT_OUTPUT, OPT_PROGRESS, OPT_HELP };

static const CliOption train_options[] = {
    {OPT_VOCAB_SIZE, 0, "vocab-size", CLI_VALUE, 0, " N",
     "ids in the vocabulary: 256 bytes, the merges and\n"
     "<|endoftext|> (at least 257; required)",
     "a number"},
    {OPT_MIN_FREQUENCY, 0, "min-frequency", CLI_VALUE, 0, " F",
     "pairs seen fewer than F times are never merged\n"
     "(default: 2); training stops early when none is left",
     "a number"},
    {OPT_OUTPUT, 'o', "output", CLI_VALUE, 0, " DIR",
     "the directory for vocab.json and merges.txt (made if\n"
     "missing; the files are replaced atomically; required)",
     "a directory"},
    {OPT_PROGRESS, 0, "progress", CLI_NO_VALUE, 0, NULL, "a line on standard error every 2000 merges", NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
};

static const CliSpec train_spec = {
    .program = "orion-tokenize train",
    .usage = "usage: orion-tokenize train --vocab-size N [options] TEXT_FILE... -o DIR\n",
    .description = "Learns a GPT-2 byte-level BPE from the text files (- reads standard input):\n"
                   "GPT-2's pre-tokenizer splits them into words, then the most frequent pair\n"
                   "of adjacent tokens is merged until the vocabulary is full (ties go to the\n"
                   "pair whose bytes sort first). The same texts give the same files.\n",
    .options = train_options,
    .noptions = sizeof train_options / sizeof *train_options,
    .epilogue = "exit status: 0 success, 1 unreadable text or unwritable output, 2 usage error\n",
    .help_column = 25,
};

#define usage_error(...) cli_usage_error("orion-tokenize train", __VA_ARGS__)

typedef struct TrainArgs {
  const char **files;
  size_t nfiles;
  const char *output;
  bool have_vocab_size;
  OrionBpeTrainOptions opt;
} TrainArgs;

static bool parse_count(const char *v, uint32_t *out) {
  uint64_t n;
  if (!cli_value_count(v, &n) || n > UINT32_MAX) return false;
  *out = (uint32_t)n;
  return true;
}

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  TrainArgs *a = ctx;
  switch (id) {
  case OPT_HELP: cli_print_help(&train_spec, stdout); return 0;
  case OPT_VOCAB_SIZE:
    if (!parse_count(v, &a->opt.vocab_size) || a->opt.vocab_size < 257)
      return usage_error("%s needs a number of at least 257 (256 bytes and <|endoftext|>), not '%s'", spelling, v);
    a->have_vocab_size = true;
    return -1;
  case OPT_MIN_FREQUENCY:
    if (!parse_count(v, &a->opt.min_frequency) || a->opt.min_frequency < 1)
      return usage_error("%s needs a number of at least 1, not '%s'", spelling, v);
    return -1;
  case OPT_OUTPUT: a->output = v; return -1;
  case OPT_PROGRESS: a->opt.progress = true; return -1;
  default: return -1;
  }
}

static int take_operand(void *ctx, const char *v) {
  TrainArgs *a = ctx;
  a->files = xrealloc(a->files, (a->nfiles + 1) * sizeof *a->files);
  a->files[a->nfiles++] = v;
  return -1;
}

static int parse(int argc, char **argv, TrainArgs *a) {
  *a = (TrainArgs){.opt = {.min_frequency = 2}};
  int rc = cli_parse(&train_spec, argc, argv, take_option, take_operand, a);
  if (rc >= 0) return rc;
  if (!a->have_vocab_size) return usage_error("%s", "no --vocab-size");
  if (!a->output) return usage_error("%s", "no output directory (-o DIR)");
  if (a->nfiles == 0) return usage_error("%s", "no text files to learn from");
  size_t stdin_uses = 0;
  for (size_t i = 0; i < a->nfiles; i++) stdin_uses += strcmp(a->files[i], "-") == 0;
  if (stdin_uses > 1) return usage_error("%s", "standard input (-) named more than once");
  return -1;
}

int orion_tokenize_train_cmd(int argc, char **argv) {
  TrainArgs a;
  int rc = parse(argc, argv, &a);
  if (rc >= 0) {
    free(a.files);
    return rc;
  }
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  d.program = "orion-tokenize";
  char **texts = xcalloc(a.nfiles, sizeof *texts);
  size_t *lens = xcalloc(a.nfiles, sizeof *lens);
  rc = 1;
  for (size_t i = 0; i < a.nfiles; i++) {
    const char *err;
    bool from_stdin = strcmp(a.files[i], "-") == 0;
    bool ok = from_stdin ? read_fd(STDIN_FILENO, MAX_TRAIN_FILE_BYTES, &texts[i], &lens[i], &err)
                         : read_file(a.files[i], MAX_TRAIN_FILE_BYTES, &texts[i], &lens[i], &err);
    if (!ok) {
      diag_error(&d, (SrcSpan){0}, "cannot read '%s': %s", from_stdin ? "<stdin>" : a.files[i], err);
      goto done;
    }
  }
  if (orion_bpe_train((const char *const *)texts, lens, a.nfiles, &a.opt, a.output, &d)) rc = 0;
done:
  for (size_t i = 0; i < a.nfiles; i++) free(texts[i]);
  free(texts);
  free(lens);
  free(a.files);
  srcset_free(&sources);
  return rc;
}
