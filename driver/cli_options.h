/*
 * The command-line parser of every orion tool: a table of options per tool,
 * parsed with libc's getopt_long, and the --help text printed from the same
 * table (the man pages are made from that text, scripts/gen_man.py).
 *
 * The conventions, the same in every tool:
 *   --opt=VALUE and --opt VALUE both give an option its value; an optional
 *   value (--verify[=SOURCE]) only with '='; an option without a value
 *   rejects one (--profile=yes is an error);
 *   long names are matched exactly, never abbreviated;
 *   short options may be bundled (-vw) and take a value attached or next (-oX, -o X);
 *   single-dash words (-Werror, -O0, -ferror-limit=N) are options of their own;
 *   "--" ends the options; "-" is an operand (standard input or output);
 *   an unknown option is a usage error with a did-you-mean note.
 * Usage errors are printed as "TOOL: error: ..." (cli_usage_error) and
 * give exit status 2.
 */
#ifndef ORION_CLI_OPTIONS_H
#define ORION_CLI_OPTIONS_H

#include "orion/support.h"

typedef enum CliValueKind {
  CLI_NO_VALUE,       /* a switch: --profile */
  CLI_VALUE,          /* --opt=VALUE or --opt VALUE */
  CLI_OPTIONAL_VALUE, /* --opt or --opt=VALUE */
  CLI_ATTACHED_VALUE, /* single-dash, the value right after the name: -O0 */
} CliValueKind;

/* Flags of an option. */
enum {
  CLI_EMPTY_OK = 1,  /* an empty value (--opt=) is a value; otherwise it is missing */
  CLI_WORD = 2,      /* the value is a name (letters, digits, '-', '_'): a next argument
                      * that is not one (a file) is not taken, the value is missing */
  CLI_HIDDEN = 4,    /* accepted but not in --help (an old spelling) */
  CLI_SINGLE_DASH = 8, /* spelt with one dash: -Werror, -ferror-limit=N */
};

typedef struct CliOption {
  int id;              /* what cli_next returns for it (> 0) */
  char short_name;     /* 'o' for -o, or 0 */
  const char *name;    /* the long name without dashes, or NULL for a short option only */
  CliValueKind value;
  unsigned flags;
  const char *value_name; /* in --help: "MODE" gives --numerics=MODE */
  /* In --help, wrapped by hand: lines after the first are continuation lines. */
  const char *help;
  /* "a backend name": what "--opt needs ..." says when the value is missing
   * (default: "a value"). */
  const char *needs;
} CliOption;

/* A tool's command line: its options and its --help text around them. */
typedef struct CliSpec {
  const char *program;     /* "orion-run" or "orion-run patch": message prefix */
  const char *usage;       /* "usage: ..." lines, ending in a newline */
  const char *description; /* the paragraph under it, ending in a newline */
  const CliOption *options;
  uint32_t noptions;
  const char *epilogue;    /* after the options (environment, exit status), ending in a newline */
  int help_column;         /* where the help text starts (the option column is padded to it) */
} CliSpec;

/* Parsing state: the arguments are copied (argv itself is never reordered). */
typedef struct CliParser {
  const CliSpec *spec;
  int argc;
  char **argv; /* the copy: argv[0] and the arguments */
  struct option *longopts;
  char *shortopts;
  int next;         /* getopt's optind, kept between calls */
  bool options_done; /* "--" seen: the rest are operands */
  /* The argument as the user spelt it (for messages): "--backend=", "-o". */
  char spelling[128];
} CliParser;

/* What cli_next returns besides an option's id. */
enum {
  CLI_END = 0,      /* no more arguments */
  CLI_OPERAND = -1, /* a non-option argument, in `value` */
  CLI_ERROR = -2,   /* a usage error, printed already: exit with status 2 */
};

void cli_parser_init(CliParser *p, const CliSpec *spec, int argc, char **argv);
void cli_parser_free(CliParser *p);
/* The next option (its id, the value in *value or NULL), operand or end.
 * Uses getopt_long, whose state is process-wide: one parser at a time; it is
 * reset at each call and opterr is restored after. */
int cli_next(CliParser *p, const char **value);
/* The option (or operand) last returned, spelt as given: "--backend=", "-o",
 * "--numerics" (without the value when it came separately). */
const char *cli_spelling(const CliParser *p);

/* What a tool does with one option (its id, its value or NULL, and its name
 * as spelt without the value: "--steps", "-o") or one operand: -1 to go on,
 * or the exit status to end with. */
typedef int CliOptionHandler(void *ctx, int id, const char *value, const char *spelling);
typedef int CliOperandHandler(void *ctx, const char *operand);

/* The whole command line through the handlers, in order: -1 when every
 * argument was taken, or the exit status (2 after a usage error, printed
 * already; a handler's own status as it returned it). The values point into
 * argv. */
int cli_parse(const CliSpec *spec, int argc, char **argv, CliOptionHandler *on_option, CliOperandHandler *on_operand,
              void *ctx);

/* The usual operand handler's body: the first operand goes into *slot, a
 * second one is "PROGRAM: error: more than one WHAT ('x')" (returns 2). */
int cli_one_operand(const CliSpec *spec, const char *what, const char **slot, const char *operand);

/* cli_parse for a command of exactly one operand (a subcommand's package or
 * log): it goes into *slot; a second one is cli_one_operand's error, none at
 * all the usage error `missing` ("no package"). Returns as cli_parse does. */
int cli_parse_one_operand(const CliSpec *spec, int argc, char **argv, CliOptionHandler *on_option, void *ctx,
                          const char *what, const char **slot, const char *missing);

/* Option values: a finite decimal or hex float (all of v), and a whole
 * number of digits only (no sign, no spaces) that fits *out. False when v is
 * not one; the caller reports it in its own words. */
bool cli_value_double(const char *v, double *out);
bool cli_value_count(const char *v, uint64_t *out);

/* The --help text of the table. */
void cli_print_help(const CliSpec *spec, FILE *out);
/* Prints "PROGRAM: error: unknown option 'x'" with "note: did you mean
 * '--y'?" and returns 2 (for options rejected after parsing). */
int cli_unknown_option(const CliSpec *spec, const char *spelling);

#endif
