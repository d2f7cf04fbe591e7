/*
 * The option table parser of the orion tools (cli_options.h): getopt_long
 * does the splitting (bundles, --opt=value and --opt value, "--"); this file
 * adds what it lacks: exact names instead of abbreviations, single-dash words
 * (-Werror, -O0, -ferror-limit=N, mapped to a getopt short option that takes
 * the rest of the word as its value), empty and misplaced values, messages
 * with did-you-mean, and the --help text.
 */
#define _GNU_SOURCE /* getopt_long */
#include "cli_options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long's value for table entry i; short options keep their letter. */
#define LONG_VAL(i) (256 + (int)(i))

static bool is_single_dash(const CliOption *o) { return o->name && (o->flags & CLI_SINGLE_DASH); }

void cli_parser_init(CliParser *p, const CliSpec *spec, int argc, char **argv) {
  *p = (CliParser){.spec = spec, .argc = argc, .next = 0};
  p->argv = xcalloc((size_t)argc + 1, sizeof *p->argv);
  for (int i = 0; i < argc; i++) p->argv[i] = argv[i];
  p->longopts = xcalloc(spec->noptions + 1, sizeof *p->longopts);
  /* "-": operands are returned in order (argv is not permuted, POSIXLY_CORRECT
   * does not matter); ":": a missing value is reported as ':'. */
  p->shortopts = xcalloc(2 * spec->noptions + 3, 1);
  size_t ns = 0, nl = 0;
  p->shortopts[ns++] = '-';
  p->shortopts[ns++] = ':';
  for (uint32_t i = 0; i < spec->noptions; i++) {
    const CliOption *o = &spec->options[i];
    if (is_single_dash(o)) {
      /* The first letter as a short option taking the rest of the word. */
      if (!strchr(p->shortopts + 2, o->name[0])) {
        p->shortopts[ns++] = o->name[0];
        p->shortopts[ns++] = ':';
      }
      continue;
    }
    if (o->short_name) {
      if (strchr(p->shortopts + 2, o->short_name)) ice("option letter '%c' used twice", o->short_name);
      p->shortopts[ns++] = o->short_name;
      if (o->value == CLI_VALUE) p->shortopts[ns++] = ':';
    }
    if (o->name)
      p->longopts[nl++] = (struct option){o->name,
                                          o->value == CLI_VALUE            ? required_argument
                                          : o->value == CLI_OPTIONAL_VALUE ? optional_argument
                                                                           : no_argument,
                                          NULL, LONG_VAL(i)};
  }
}

void cli_parser_free(CliParser *p) {
  free(p->argv);
  free(p->longopts);
  free(p->shortopts);
  p->argv = NULL;
  p->longopts = NULL;
  p->shortopts = NULL;
}

const char *cli_spelling(const CliParser *p) { return p->spelling; }

static void spell(CliParser *p, const char *prefix, const char *text, size_t n) {
  snprintf(p->spelling, sizeof p->spelling, "%s%.*s", prefix, (int)n, text);
}

static void spell_short(CliParser *p, int letter) { snprintf(p->spelling, sizeof p->spelling, "-%c", letter); }

/* "--name" of "--name=value". */
static void spell_long(CliParser *p, const char *elem) {
  const char *eq = strchr(elem, '=');
  spell(p, "", elem, eq ? (size_t)(eq - elem) : strlen(elem));
}

/* `abbreviates`: the option an abbreviation stands for (getopt_long's guess), or NULL. */
static int unknown_option(const CliSpec *spec, const char *spelling, const CliOption *abbreviates) {
  fprintf(stderr, "%s: error: unknown option '%s'\n", spec->program, spelling);
  if (abbreviates) {
    fprintf(stderr, "%s: note: did you mean '--%s'?\n", spec->program, abbreviates->name);
    fprintf(stderr, "Try '%s --help' for more information.\n", spec->program);
    return 2;
  }
  Suggestion s;
  suggestion_init(&s, spelling);
  char names[128][64];
  uint32_t n = 0;
  for (uint32_t i = 0; i < spec->noptions && n < 127; i++) {
    const CliOption *o = &spec->options[i];
    if (o->flags & CLI_HIDDEN) continue;
    if (o->name) {
      snprintf(names[n], sizeof names[n], "%s%s", is_single_dash(o) ? "-" : "--", o->name);
      suggestion_consider(&s, names[n++]);
    }
    if (o->short_name) {
      snprintf(names[n], sizeof names[n], "-%c", o->short_name);
      suggestion_consider(&s, names[n++]);
    }
  }
  if (s.best) fprintf(stderr, "%s: note: did you mean '%s'?\n", spec->program, s.best);
  fprintf(stderr, "Try '%s --help' for more information.\n", spec->program);
  return 2;
}

int cli_unknown_option(const CliSpec *spec, const char *spelling) { return unknown_option(spec, spelling, NULL); }

static int missing_value(CliParser *p, const CliOption *o) {
  cli_usage_error(p->spec->program, "%s needs %s", p->spelling, o->needs ? o->needs : "a value");
  return CLI_ERROR;
}

static bool is_word(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
      return false;
  return true;
}

/* The checks on a value getopt found: empty, or not the name it should be. */
static int accept_value(CliParser *p, const CliOption *o, const char *value, bool separate, const char **out) {
  *out = value;
  if (!value) return o->value == CLI_VALUE ? missing_value(p, o) : o->id;
  if (!*value && !(o->flags & CLI_EMPTY_OK)) return missing_value(p, o);
  if (separate && (o->flags & CLI_WORD) && !is_word(value)) return missing_value(p, o);
  return o->id;
}

/* A single-dash word: the letter getopt returned and the rest of the word. */
static int single_dash(CliParser *p, char letter, const char *rest, bool separate, const char **value) {
  const CliSpec *spec = p->spec;
  char word[128];
  if (separate) rest = ""; /* "-W x": the word is "-W"; x was not its value */
  snprintf(word, sizeof word, "%c%s", letter, rest);
  const char *eq = strchr(word, '=');
  size_t base = eq ? (size_t)(eq - word) : strlen(word);
  const CliOption *attached = NULL;
  for (uint32_t i = 0; i < spec->noptions; i++) {
    const CliOption *o = &spec->options[i];
    if (!is_single_dash(o)) continue;
    size_t n = strlen(o->name);
    if (o->value == CLI_NO_VALUE && !strcmp(word, o->name)) {
      spell(p, "-", word, strlen(word));
      *value = NULL;
      return o->id;
    }
    if (o->value == CLI_VALUE && n == base && !strncmp(word, o->name, n)) {
      spell(p, "-", word, eq ? base + 1 : base);
      if (eq) return accept_value(p, o, rest + (eq - word), false, value); /* rest is word without its letter */
      /* -ferror-limit N */
      const char *next = p->next < p->argc ? p->argv[p->next] : NULL;
      if (next) p->next++;
      return accept_value(p, o, next, true, value);
    }
    if (o->value == CLI_ATTACHED_VALUE && !strncmp(word, o->name, n) && (!attached || n > strlen(attached->name)))
      attached = o;
  }
  if (attached) {
    spell(p, "-", word, strlen(word));
    return accept_value(p, attached, rest + strlen(attached->name) - 1, false, value); /* into argv, not word */
  }
  spell(p, "-", word, base);
  cli_unknown_option(spec, p->spelling);
  return CLI_ERROR;
}

static const CliOption *by_short(const CliSpec *spec, int c) {
  for (uint32_t i = 0; i < spec->noptions; i++)
    if (spec->options[i].short_name == c && !is_single_dash(&spec->options[i])) return &spec->options[i];
  return NULL;
}

int cli_next(CliParser *p, const char **value) {
  const CliSpec *spec = p->spec;
  *value = NULL;
  p->spelling[0] = 0;
  if (p->options_done) {
    if (p->next >= p->argc) return CLI_END;
    *value = p->argv[p->next++];
    return CLI_OPERAND;
  }
  int saved_opterr = opterr;
  opterr = 0;
  optind = p->next; /* 0 on the first call: getopt starts afresh */
  int start = p->next ? p->next : 1;
  int c = getopt_long(p->argc, p->argv, p->shortopts, p->longopts, NULL);
  opterr = saved_opterr;
  p->next = optind;
  if (c == -1) {
    p->options_done = true; /* the end, or "--": what follows are operands */
    return cli_next(p, value);
  }
  if (c == 1) {
    *value = optarg;
    return CLI_OPERAND;
  }
  /* Where the option was: with a separate value, the argument before it. */
  bool separate = optarg && optind >= 2 && optarg == p->argv[optind - 1];
  const char *elem = p->argv[separate ? optind - 2 : optind - 1];
  if (c == '?' || c == ':') {
    int opt = optopt;
    if (opt >= 256) { /* a long option: a value it does not take, or none where it needs one */
      const CliOption *o = &spec->options[opt - 256];
      elem = p->argv[optind - 1];
      spell_long(p, elem);
      if (strcmp(p->spelling + 2, o->name)) return unknown_option(spec, p->spelling, o), CLI_ERROR;
      if (c == ':') return missing_value(p, o);
      cli_usage_error(spec->program, "%s takes no value ('%s')", p->spelling, elem);
      return CLI_ERROR;
    }
    if (opt == 0) { /* an unknown (or abbreviated) long option */
      spell_long(p, p->argv[optind - 1]);
      cli_unknown_option(spec, p->spelling);
      return CLI_ERROR;
    }
    const CliOption *o = by_short(spec, opt);
    spell_short(p, opt);
    if (c == ':' && o) return missing_value(p, o);
    if (c == ':') { /* "-W" alone: a single-dash word without its rest */
      cli_unknown_option(spec, p->spelling);
      return CLI_ERROR;
    }
    /* "-numerics": the whole word, so that did-you-mean can see it. */
    const char *word = p->argv[start < p->argc ? start : p->argc - 1];
    if (word[0] == '-' && word[1] == opt && word[2]) spell_long(p, word);
    cli_unknown_option(spec, p->spelling);
    return CLI_ERROR;
  }
  if (c >= 256) {
    const CliOption *o = &spec->options[c - 256];
    spell_long(p, elem);
    /* getopt_long takes unambiguous abbreviations; names are exact here. */
    if (strncmp(elem, "--", 2) || strcmp(p->spelling + 2, o->name)) return unknown_option(spec, p->spelling, o), CLI_ERROR;
    if (optarg && !separate) spell(p, "", elem, strlen(o->name) + 3); /* "--backend=" */
    return accept_value(p, o, optarg, separate, value);
  }
  const CliOption *o = by_short(spec, c);
  if (!o) return single_dash(p, (char)c, optarg, separate, value);
  spell_short(p, c);
  return accept_value(p, o, optarg, separate, value);
}

int cli_parse(const CliSpec *spec, int argc, char **argv, CliOptionHandler *on_option, CliOperandHandler *on_operand,
              void *ctx) {
  CliParser p;
  cli_parser_init(&p, spec, argc, argv);
  int rc = -1, id;
  const char *v;
  while (rc < 0 && (id = cli_next(&p, &v)) != CLI_END) {
    if (id == CLI_ERROR) rc = 2;
    else if (id == CLI_OPERAND) rc = on_operand(ctx, v);
    else {
      char name[sizeof p.spelling];
      snprintf(name, sizeof name, "%s", p.spelling);
      name[strcspn(name, "=")] = '\0';
      rc = on_option(ctx, id, v, name);
    }
  }
  cli_parser_free(&p);
  return rc;
}

int cli_one_operand(const CliSpec *spec, const char *what, const char **slot, const char *operand) {
  if (*slot) return cli_usage_error(spec->program, "more than one %s ('%s')", what, operand);
  *slot = operand;
  return -1;
}

/* cli_parse_one_operand's context: the caller's option handler and its ctx, and where the operand goes. */
typedef struct OneOperand {
  const CliSpec *spec;
  CliOptionHandler *on_option;
  void *ctx;
  const char *what;
  const char **slot;
} OneOperand;

static int one_option(void *ctx, int id, const char *value, const char *spelling) {
  OneOperand *o = ctx;
  return o->on_option(o->ctx, id, value, spelling);
}

static int one_operand(void *ctx, const char *operand) {
  OneOperand *o = ctx;
  return cli_one_operand(o->spec, o->what, o->slot, operand);
}

int cli_parse_one_operand(const CliSpec *spec, int argc, char **argv, CliOptionHandler *on_option, void *ctx,
                          const char *what, const char **slot, const char *missing) {
  OneOperand o = {.spec = spec, .on_option = on_option, .ctx = ctx, .what = what, .slot = slot};
  int rc = cli_parse(spec, argc, argv, one_option, one_operand, &o);
  if (rc >= 0) return rc;
  if (!*slot) return cli_usage_error(spec->program, "%s", missing);
  return -1;
}

/* ---- --help ---- */

static void left_column(const CliOption *o, StrBuf *sb) {
  if (o->short_name && !is_single_dash(o)) sb_printf(sb, "-%c%s", o->short_name, o->name ? ", " : "");
  if (o->name) sb_printf(sb, "%s%s", is_single_dash(o) ? "-" : "--", o->name);
  if (o->value_name) sb_puts(sb, o->value_name);
}

void cli_print_help(const CliSpec *spec, FILE *out) {
  fputs(spec->usage, out);
  fprintf(out, "\n%s\noptions:\n", spec->description);
  StrBuf left;
  sb_init(&left);
  for (uint32_t i = 0; i < spec->noptions; i++) {
    const CliOption *o = &spec->options[i];
    if (o->flags & CLI_HIDDEN) continue;
    left.len = 0;
    left_column(o, &left);
    int col = spec->help_column;
    /* Two spaces before the text at least, else the text starts below. */
    if (2 + (int)left.len + 2 <= col) fprintf(out, "  %-*s", col - 2, left.data);
    else fprintf(out, "  %s\n%*s", left.data, col, "");
    for (const char *h = o->help; *h;) {
      const char *nl = strchr(h, '\n');
      size_t n = nl ? (size_t)(nl - h) : strlen(h);
      fprintf(out, "%.*s\n", (int)n, h);
      if (!nl) break;
      h = nl + 1;
      fprintf(out, "%*s", col, "");
    }
  }
  sb_free(&left);
  if (spec->epilogue) fprintf(out, "\n%s", spec->epilogue);
}

bool cli_value_double(const char *v, double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (!*v || *end || errno || !isfinite(x)) return false;
  *out = x;
  return true;
}

bool cli_value_count(const char *v, uint64_t *out) {
  if (!(v[0] >= '0' && v[0] <= '9')) return false;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end || errno) return false;
  *out = x;
  return true;
}
