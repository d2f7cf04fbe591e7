/*
 * The option parser every tool uses (driver/cli_options.c): both spellings of
 * a value, switches without one, exact names, single-dash words, bundles,
 * operands in order, "--", the messages of usage errors and the --help layout.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <string.h>

#include "cli_options.h"

enum { NUM = 1, BACKEND, PROFILE, VERIFY, OUT, VERB, WERROR, O0, OLEVEL, LIMIT, LORA, OLD };

static const CliOption options[] = {
    {NUM, 0, "numerics", CLI_VALUE, CLI_WORD, "=MODE", "ane or fp32", "a value, e.g. --numerics=fp32"},
    {BACKEND, 0, "backend", CLI_VALUE, 0, " B", "cpu or check", "a backend name"},
    {PROFILE, 0, "profile", CLI_NO_VALUE, 0, NULL, "time every op;\nthe second line", NULL},
    {VERIFY, 0, "verify", CLI_OPTIONAL_VALUE, 0, "[=SOURCE]", "check", NULL},
    {OUT, 'o', NULL, CLI_VALUE, 0, " PATH", "where", "a path"},
    {VERB, 'v', NULL, CLI_NO_VALUE, 0, NULL, "progress", NULL},
    {WERROR, 0, "Werror", CLI_NO_VALUE, CLI_SINGLE_DASH, NULL, "warnings are errors", NULL},
    {O0, 0, "O0", CLI_NO_VALUE, CLI_SINGLE_DASH, NULL, "level 0", NULL},
    {OLEVEL, 0, "O", CLI_ATTACHED_VALUE, CLI_SINGLE_DASH | CLI_HIDDEN, NULL, "", NULL},
    {LIMIT, 0, "ferror-limit", CLI_VALUE, CLI_SINGLE_DASH, "=N", "stop after N errors", NULL},
    {LORA, 0, "lora", CLI_VALUE, 0, "=PATTERN:RANK[:ALPHA]", "adapters", NULL},
    {OLD, 0, "old-spelling", CLI_NO_VALUE, CLI_HIDDEN, NULL, "", NULL},
};

static const CliSpec spec = {
    .program = "tool",
    .usage = "usage: tool [options] FILE\n",
    .description = "Does things.\n",
    .options = options,
    .noptions = sizeof options / sizeof *options,
    .epilogue = "exit status: 0 or 2\n",
    .help_column = 20,
};

typedef struct Got {
  int id;
  const char *value;
  char spelling[128];
} Got;

/* argv of "tool" and args (NULL-terminated); returns argc. */
static int make_argv(const char **args, char **argv) {
  static char tool[] = "tool";
  argv[0] = tool;
  int argc = 1;
  while (args[argc - 1]) {
    argv[argc] = (char *)(uintptr_t)args[argc - 1];
    argc++;
  }
  return argc;
}

/* Parses argv (NULL-terminated, without argv[0]) to the end or the first error. */
static int parse(const char **args, Got *got, int max) {
  char *argv[32];
  int argc = make_argv(args, argv);
  CliParser p;
  cli_parser_init(&p, &spec, argc, argv);
  int n = 0, id;
  const char *v;
  while (n < max && (id = cli_next(&p, &v)) != CLI_END) {
    got[n].id = id;
    got[n].value = v;
    snprintf(got[n].spelling, sizeof got[n].spelling, "%s", cli_spelling(&p));
    n++;
    if (id == CLI_ERROR) break;
  }
  cli_parser_free(&p);
  return n;
}

Test(cli_options, both_spellings_of_a_value) {
  Got g[8];
  int n = parse((const char *[]){"--numerics=fp32", "--numerics", "ane", "--backend", "--odd", NULL}, g, 8);
  cr_assert_eq(n, 3);
  cr_assert_eq(g[0].id, NUM);
  cr_assert_str_eq(g[0].value, "fp32");
  cr_assert_eq(g[1].id, NUM);
  cr_assert_str_eq(g[1].value, "ane");
  cr_assert_eq(g[2].id, BACKEND);
  cr_assert_str_eq(g[2].value, "--odd"); /* a separate value is taken as it is */
}

Test(cli_options, optional_value_only_with_equals) {
  Got g[8];
  int n = parse((const char *[]){"--verify", "x.oir", "--verify=s.oir", NULL}, g, 8);
  cr_assert_eq(n, 3);
  cr_assert_eq(g[0].id, VERIFY);
  cr_assert_null(g[0].value);
  cr_assert_eq(g[1].id, CLI_OPERAND);
  cr_assert_str_eq(g[1].value, "x.oir");
  cr_assert_str_eq(g[2].value, "s.oir");
}

Test(cli_options, operands_in_order_and_argv_untouched) {
  const char *args[] = {"a", "-v", "b", "--", "-c", "--profile", NULL};
  char *argv[7];
  argv[0] = (char *)(uintptr_t) "tool";
  for (int i = 1; i < 7; i++) argv[i] = (char *)(uintptr_t)args[i - 1];
  Got g[8];
  CliParser p;
  cli_parser_init(&p, &spec, 7, argv);
  int n = 0, id;
  const char *v;
  while ((id = cli_next(&p, &v)) != CLI_END) g[n].id = id, g[n++].value = v;
  cli_parser_free(&p);
  cr_assert_eq(n, 5);
  int want[] = {CLI_OPERAND, VERB, CLI_OPERAND, CLI_OPERAND, CLI_OPERAND};
  const char *values[] = {"a", NULL, "b", "-c", "--profile"};
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(g[i].id, want[i], "argument %d", i);
    if (values[i]) cr_assert_str_eq(g[i].value, values[i]);
  }
  for (int i = 1; i < 7; i++) cr_assert_str_eq(argv[i], args[i - 1]); /* not permuted */
}

Test(cli_options, short_options_bundle_and_attach) {
  Got g[8];
  int n = parse((const char *[]){"-vo", "out", "-oX", "-", "-o", "-", NULL}, g, 8);
  cr_assert_eq(n, 5);
  cr_assert_eq(g[0].id, VERB);
  cr_assert_eq(g[1].id, OUT);
  cr_assert_str_eq(g[1].value, "out");
  cr_assert_str_eq(g[2].value, "X");
  cr_assert_eq(g[3].id, CLI_OPERAND);
  cr_assert_str_eq(g[3].value, "-");
  cr_assert_eq(g[4].id, OUT);
  cr_assert_str_eq(g[4].value, "-");
}

Test(cli_options, single_dash_words) {
  Got g[8];
  int n = parse((const char *[]){"-Werror", "-O0", "-O3", "-ferror-limit=5", "-ferror-limit", "7", "-v", NULL}, g, 8);
  cr_assert_eq(n, 6);
  cr_assert_eq(g[0].id, WERROR);
  cr_assert_str_eq(g[0].spelling, "-Werror");
  cr_assert_eq(g[1].id, O0);
  cr_assert_eq(g[2].id, OLEVEL);
  cr_assert_str_eq(g[2].value, "3");
  cr_assert_eq(g[3].id, LIMIT);
  cr_assert_str_eq(g[3].value, "5");
  cr_assert_eq(g[4].id, LIMIT);
  cr_assert_str_eq(g[4].value, "7");
  cr_assert_eq(g[5].id, VERB);
}

Test(cli_options, parses_twice_in_one_process) {
  Got g[4];
  cr_assert_eq(parse((const char *[]){"-vv", NULL}, g, 4), 2);
  cr_assert_eq(parse((const char *[]){"x", "--profile", NULL}, g, 4), 2);
  cr_assert_eq(g[0].id, CLI_OPERAND);
  cr_assert_eq(g[1].id, PROFILE);
}

static void redirect(void) { cr_redirect_stderr(); }

Test(cli_options, unknown_option_suggests, .init = redirect) {
  Got g[4];
  cr_assert_eq(parse((const char *[]){"--numerix", "fp32", NULL}, g, 4), 1);
  cr_assert_eq(g[0].id, CLI_ERROR);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: unknown option '--numerix'\n"
                          "tool: note: did you mean '--numerics'?\n"
                          "Try 'tool --help' for more information.\n");
}

Test(cli_options, hidden_options_are_not_suggested, .init = redirect) {
  Got g[4];
  cr_assert_eq(parse((const char *[]){"--old-spelin", NULL}, g, 4), 1);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: unknown option '--old-spelin'\nTry 'tool --help' for more information.\n");
}

Test(cli_options, abbreviation_is_unknown, .init = redirect) {
  Got g[4];
  cr_assert_eq(parse((const char *[]){"--prof", NULL}, g, 4), 1);
  cr_assert_eq(g[0].id, CLI_ERROR);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: unknown option '--prof'\n"
                          "tool: note: did you mean '--profile'?\n"
                          "Try 'tool --help' for more information.\n");
}

Test(cli_options, switch_rejects_a_value, .init = redirect) {
  Got g[4];
  cr_assert_eq(parse((const char *[]){"--profile=1", NULL}, g, 4), 1);
  cr_assert_eq(g[0].id, CLI_ERROR);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: --profile takes no value ('--profile=1')\n"
                          "Try 'tool --help' for more information.\n");
}

Test(cli_options, empty_value_is_missing, .init = redirect) {
  Got g[4];
  cr_assert_eq(parse((const char *[]){"--backend=", NULL}, g, 4), 1);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: --backend= needs a backend name\nTry 'tool --help' for more information.\n");
}

Test(cli_options, word_value_is_not_a_file, .init = redirect) {
  Got g[4];
  cr_assert_eq(parse((const char *[]){"--numerics", "model.anepkg", NULL}, g, 4), 1);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: --numerics needs a value, e.g. --numerics=fp32\n"
                          "Try 'tool --help' for more information.\n");
}

Test(cli_options, missing_value_at_the_end, .init = redirect) {
  Got g[4];
  cr_assert_eq(parse((const char *[]){"x", "-o", NULL}, g, 4), 2);
  cr_assert_eq(g[1].id, CLI_ERROR);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: -o needs a path\nTry 'tool --help' for more information.\n");
}

Test(cli_options, misspelt_single_dash_word, .init = redirect) {
  Got g[4];
  cr_assert_eq(parse((const char *[]){"-Werorr", NULL}, g, 4), 1);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: unknown option '-Werorr'\n"
                          "tool: note: did you mean '-Werror'?\n"
                          "Try 'tool --help' for more information.\n");
}

Test(cli_options, help_from_the_table, .init = cr_redirect_stdout) {
  cli_print_help(&spec, stdout);
  fflush(stdout);
  cr_assert_stdout_eq_str("usage: tool [options] FILE\n"
                          "\n"
                          "Does things.\n"
                          "\n"
                          "options:\n"
                          "  --numerics=MODE   ane or fp32\n"
                          "  --backend B       cpu or check\n"
                          "  --profile         time every op;\n"
                          "                    the second line\n"
                          "  --verify[=SOURCE]\n" /* two spaces at least, or the text goes below */
                          "                    check\n"
                          "  -o PATH           where\n"
                          "  -v                progress\n"
                          "  -Werror           warnings are errors\n"
                          "  -O0               level 0\n"
                          "  -ferror-limit=N   stop after N errors\n"
                          "  --lora=PATTERN:RANK[:ALPHA]\n"
                          "                    adapters\n"
                          "\n"
                          "exit status: 0 or 2\n");
}

/* cli_parse: the loop every tool runs, through its two handlers. */
typedef struct Taken {
  int n;
  char log[512];
  int stop_at; /* the option that ends the parse with status 7 (0: none) */
} Taken;

static int take_option(void *ctx, int id, const char *value, const char *spelling) {
  Taken *t = ctx;
  size_t len = strlen(t->log);
  snprintf(t->log + len, sizeof t->log - len, "[%d %s %s]", id, spelling, value ? value : "-");
  t->n++;
  return id == t->stop_at ? 7 : -1;
}

static int take_operand(void *ctx, const char *operand) {
  Taken *t = ctx;
  size_t len = strlen(t->log);
  snprintf(t->log + len, sizeof t->log - len, "(%s)", operand);
  t->n++;
  return -1;
}

static int parse_all(const char **args, Taken *t) {
  char *argv[32];
  int argc = make_argv(args, argv);
  return cli_parse(&spec, argc, argv, take_option, take_operand, t);
}

Test(cli_options, parse_calls_the_handlers_in_order) {
  Taken t = {0};
  int rc = parse_all((const char *[]){"--backend=cpu", "a.oir", "--numerics", "fp32", "-ferror-limit=3", "-o", "x",
                                      "--", "-v", NULL},
                     &t);
  cr_assert_eq(rc, -1);
  cr_assert_eq(t.n, 6);
  /* The spelling is the option's name as given, without its value. */
  cr_assert_str_eq(t.log, "[2 --backend cpu](a.oir)[1 --numerics fp32][10 -ferror-limit 3][5 -o x](-v)");
}

Test(cli_options, parse_stops_at_a_handlers_status) {
  Taken t = {.stop_at = PROFILE};
  int rc = parse_all((const char *[]){"--profile", "--numerics=ane", NULL}, &t);
  cr_assert_eq(rc, 7);
  cr_assert_eq(t.n, 1);
}

Test(cli_options, parse_usage_error_is_status_2, .init = redirect) {
  Taken t = {0};
  int rc = parse_all((const char *[]){"-v", "--profile=1", "b", NULL}, &t);
  cr_assert_eq(rc, 2);
  cr_assert_eq(t.n, 1);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: --profile takes no value ('--profile=1')\n"
                          "Try 'tool --help' for more information.\n");
}

Test(cli_options, one_operand_then_a_usage_error, .init = redirect) {
  const char *slot = NULL;
  cr_assert_eq(cli_one_operand(&spec, "package", &slot, "a.anepkg"), -1);
  cr_assert_str_eq(slot, "a.anepkg");
  cr_assert_eq(cli_one_operand(&spec, "package", &slot, "b.anepkg"), 2);
  cr_assert_str_eq(slot, "a.anepkg");
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: more than one package ('b.anepkg')\n"
                          "Try 'tool --help' for more information.\n");
}

static int count_option(void *ctx, int id, const char *value, const char *spelling) {
  (void)value, (void)spelling;
  int *n = ctx;
  *n += id == VERB;
  return -1;
}

Test(cli_options, exactly_one_operand_with_the_options_passed_on, .init = redirect) {
  char *argv[8];
  const char *slot = NULL;
  int verbs = 0;
  int argc = make_argv((const char *[]){"-v", "a.anepkg", "-v", NULL}, argv);
  cr_assert_eq(cli_parse_one_operand(&spec, argc, argv, count_option, &verbs, "package", &slot, "no package"), -1);
  cr_assert_str_eq(slot, "a.anepkg");
  cr_assert_eq(verbs, 2);
  slot = NULL;
  argc = make_argv((const char *[]){"a.anepkg", "b.anepkg", NULL}, argv);
  cr_assert_eq(cli_parse_one_operand(&spec, argc, argv, count_option, &verbs, "package", &slot, "no package"), 2);
  slot = NULL;
  argc = make_argv((const char *[]){"-v", NULL}, argv);
  cr_assert_eq(cli_parse_one_operand(&spec, argc, argv, count_option, &verbs, "package", &slot, "no package"), 2);
  cr_assert_null(slot);
  fflush(stderr);
  cr_assert_stderr_eq_str("tool: error: more than one package ('b.anepkg')\n"
                          "Try 'tool --help' for more information.\n"
                          "tool: error: no package\n"
                          "Try 'tool --help' for more information.\n");
}
