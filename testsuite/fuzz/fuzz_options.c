/*
 * libFuzzer target for the tools' option parser (driver/cli_options.c): the
 * input, split at NUL bytes, is an argument vector, parsed to the end against
 * a table with every kind of option (values, optional values, switches, short
 * options, single-dash words, hidden ones). Beyond memory safety: every result
 * is an id of the table, an operand or an error (which ends the parse); every
 * value and operand points into the arguments themselves (never into the
 * parser's buffers); the arguments are not reordered; a parse ends.
 */
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { NUM = 1, BACKEND, PROFILE, VERIFY, OUT, VERB, WERROR, O0, OLEVEL, LIMIT, EMPTY, HIDDEN, LAST = HIDDEN };

static const CliOption options[] = {
    {NUM, 0, "numerics", CLI_VALUE, CLI_WORD, "=MODE", "", NULL},
    {BACKEND, 'b', "backend", CLI_VALUE, 0, " B", "", "a backend name"},
    {PROFILE, 0, "profile", CLI_NO_VALUE, 0, NULL, "", NULL},
    {VERIFY, 0, "verify", CLI_OPTIONAL_VALUE, 0, "[=S]", "", NULL},
    {OUT, 'o', NULL, CLI_VALUE, 0, " PATH", "", NULL},
    {VERB, 'v', NULL, CLI_NO_VALUE, 0, NULL, "", NULL},
    {WERROR, 0, "Werror", CLI_NO_VALUE, CLI_SINGLE_DASH, NULL, "", NULL},
    {O0, 0, "O0", CLI_NO_VALUE, CLI_SINGLE_DASH, NULL, "", NULL},
    {OLEVEL, 0, "O", CLI_ATTACHED_VALUE, CLI_SINGLE_DASH | CLI_HIDDEN, NULL, "", NULL},
    {LIMIT, 0, "ferror-limit", CLI_VALUE, CLI_SINGLE_DASH, "=N", "", NULL},
    {EMPTY, 0, "passes", CLI_VALUE, CLI_EMPTY_OK, "=P", "", NULL},
    {HIDDEN, 0, "old", CLI_NO_VALUE, CLI_HIDDEN, NULL, "", NULL},
};

static const CliSpec spec = {
    .program = "fuzz",
    .usage = "usage: fuzz\n",
    .description = "\n",
    .options = options,
    .noptions = sizeof options / sizeof *options,
    .help_column = 20,
};

#define MAX_ARGS 32

static bool inside_an_argument(const char *v, char *const *argv, int argc) {
  for (int i = 1; i < argc; i++)
    if (v >= argv[i] && v <= argv[i] + strlen(argv[i])) return true;
  return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = 0;
  char tool[] = "fuzz";
  char *argv[MAX_ARGS + 1] = {tool}, *copy[MAX_ARGS + 1];
  int argc = 1;
  for (size_t i = 0; i <= size && argc < MAX_ARGS;) {
    argv[argc++] = text + i;
    i += strlen(text + i) + 1;
  }
  memcpy(copy, argv, sizeof argv);
  CliParser p;
  cli_parser_init(&p, &spec, argc, argv);
  int id, steps = 0;
  const char *v;
  while ((id = cli_next(&p, &v)) != CLI_END) {
    if (++steps > (int)size + argc + 1) abort(); /* each call consumes an argument or a letter of a bundle */
    if (id == CLI_ERROR) break;
    if (id != CLI_OPERAND && (id < 1 || id > LAST)) abort();
    if ((id == CLI_OPERAND || v) && !inside_an_argument(v, argv, argc)) abort();
    if (id == CLI_OPERAND && !v) abort();
    (void)cli_spelling(&p);
  }
  cli_parser_free(&p);
  if (memcmp(copy, argv, sizeof argv) != 0) abort();
  free(text);
  return 0;
}
