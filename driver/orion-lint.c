/*
 * orion-lint: checks .oir graphs and .anepkg packages against the ANE
 * constraint table and reports findings as text, JSON or SARIF. Parses
 * options and calls the libraries; no checking logic lives here.
 *
 * A .oir file is checked before orionc's default pass pipeline (what a pass
 * of it will fix is a note) and after it (what is left is reported at its
 * severity, as orionc reports it); a
 * package (a directory) by its manifest, MIL text and weight file; a .mil
 * file by the checks of MIL text (and the weight files it names).
 *
 * Exit codes: 0 no finding at or above --fail-on, 1 some, 2 usage error or
 * unreadable input, 3 out of memory.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_options.h"
#include "tool_memory.h"
#include "orion/constraints.h"
#include "orion/frontend.h"
#include "orion/passes.h"

enum { EXIT_CLEAN = 0, EXIT_FINDINGS = 1, EXIT_USAGE = 2 };

typedef enum Format { FORMAT_TEXT, FORMAT_JSON, FORMAT_SARIF } Format;

/* Most --allow and --severity options. */
#define MAX_RULE_OPTIONS 256

typedef struct Options {
  const char **files;
  uint32_t nfiles;
  Format format;
  DiagLevel fail_on;
  const char *explain;
  const char *table_path;
  bool list, gen_docs;
  MilTarget target;
  bool target_given;
  const char *chip; /* --chip: its numbers replace the target's in the IR checks */
  const char *allow[MAX_RULE_OPTIONS];
  uint32_t nallow;
  LintSeverityOverride overrides[MAX_RULE_OPTIONS];
  uint32_t noverrides;
  uint32_t error_limit; /* -ferror-limit: of the messages about unreadable input (0 = none) */
  char **copies; /* of the --allow and --severity values */
  uint32_t ncopies, ncopies_cap;
} Options;

enum {
  OPT_FORMAT = 1, OPT_FAIL_ON, OPT_ALLOW, OPT_SEVERITY, OPT_TARGET, OPT_CHIP, OPT_TABLE, OPT_ERROR_LIMIT, OPT_EXPLAIN,
  OPT_LIST, OPT_GEN_DOCS, OPT_HELP, OPT_VERSION,
};

static const CliOption lint_options[] = {
    {OPT_FORMAT, 0, "format", CLI_VALUE, CLI_WORD, "=F", "text (default), json or sarif (SARIF 2.1.0)",
     "a value, e.g. --format=json"},
    {OPT_FAIL_ON, 0, "fail-on", CLI_VALUE, CLI_WORD, "=LEVEL",
     "exit 1 when a finding is at or above LEVEL:\n"
     "error (default), warning or note",
     "a value, e.g. --fail-on=warning"},
    {OPT_ALLOW, 0, "allow", CLI_VALUE, 0, "=ID[,ID...]", "drop the findings of these rules (repeatable)",
     "a rule id, e.g. --allow=ANE015"},
    {OPT_SEVERITY, 0, "severity", CLI_VALUE, 0, "=ID=LEVEL",
     "report rule ID at LEVEL: error, warning or note (repeatable)", "ID=LEVEL, e.g. --severity=ANE015=error"},
    {OPT_TARGET, 0, "target", CLI_VALUE, CLI_WORD, "=T",
     "ios18 (default), ios17 or ios16: the target data for .oir files\n"
     "(packages are checked against their own target)",
     "a value, e.g. --target=ios18"},
    {OPT_CHIP, 0, "chip", CLI_VALUE, CLI_WORD, "=NAME",
     "the ANE generation: m1, m2, m3, m4 or m5 (docs/constraints.md);\n"
     "its newest dialect is the default --target (a newer one is an\n"
     "error); its SRAM budget and minimum surface replace the target's\n"
     "in the checks of .oir and .mil files, and the chip a package\n"
     "was compiled for (its manifest's Chip) in a package's checks",
     "a value, e.g. --chip=m4"},
    {OPT_TABLE, 0, "table", CLI_VALUE, 0, "=FILE", "use this constraint table instead of the built-in one", "a file"},
    {OPT_ERROR_LIMIT, 0, "ferror-limit", CLI_VALUE, CLI_SINGLE_DASH, "=N",
     "stop reporting errors about unreadable input after N\n(default 20, 0: no limit)", "a count, e.g. -ferror-limit=50"},
    {OPT_EXPLAIN, 0, "explain", CLI_VALUE, CLI_WORD, " ID", "print everything the table says about rule ID",
     "a rule id, e.g. --explain ANE007"},
    {OPT_LIST, 0, "list", CLI_NO_VALUE, 0, NULL, "list the rules, one per line", NULL},
    {OPT_GEN_DOCS, 0, "gen-docs", CLI_NO_VALUE, 0, NULL, "print docs/constraints.md (generated from the table)", NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
    {OPT_VERSION, 0, "version", CLI_NO_VALUE, 0, NULL, "show the version", NULL},
};

static const CliSpec lint_spec = {
    .program = "orion-lint",
    .usage = "usage: orion-lint [options] FILE...\n",
    .description = "Checks orion graphs (.oir), packages (.anepkg directories) and MIL files\n"
                   "(.mil) against the ANE constraint table (ANE001..ANE020).\n",
    .options = lint_options,
    .noptions = sizeof lint_options / sizeof *lint_options,
    .epilogue = "A .oir file is checked before orionc's default pass pipeline (problems a pass of it\n"
                "fixes are notes) and after it (whatever is left is reported at its severity).\n"
                "A .mil file gets the checks of MIL text (BLOBFILE offsets into the weight files\n"
                "beside it, named matmul flags, live return names); the manifest rules need a package.\n"
                "exit status: 0 clean, 1 findings at or above --fail-on, 2 usage error or unreadable input, 3 out of memory\n",
    .help_column = 23,
};

#define usage_error(...) cli_usage_error("orion-lint", __VA_ARGS__)

/* The option strings that are split in place (--allow, --severity) are copies. */
static char *keep_copy(Options *o, const char *v) {
  char *s = xstrdup(v);
  xgrow((void **)&o->copies, sizeof *o->copies, &o->ncopies_cap, o->ncopies + 1);
  o->copies[o->ncopies++] = s;
  return s;
}

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  (void)spelling;
  Options *o = ctx;
  switch (id) {
  case OPT_HELP: cli_print_help(&lint_spec, stdout); return EXIT_CLEAN;
  case OPT_VERSION: printf("orion-lint %s\n", ORION_VERSION); return EXIT_CLEAN;
  case OPT_FORMAT: {
    static const char *const names[] = {"text", "json", "sarif"};
    int k = 0;
    while (k < 3 && strcmp(v, names[k])) k++;
    if (k == 3) return usage_error("unknown format '%s' (expected text, json or sarif)", v);
    o->format = (Format)k;
    return -1;
  }
  case OPT_FAIL_ON:
    if (!constraint_severity_from_name(v, &o->fail_on))
      return usage_error("unknown level '%s' for --fail-on (expected error, warning or note)", v);
    return -1;
  case OPT_ALLOW: {
    char *save = NULL;
    for (char *rule = strtok_r(keep_copy(o, v), ",", &save); rule; rule = strtok_r(NULL, ",", &save)) {
      if (o->nallow >= MAX_RULE_OPTIONS) return usage_error("too many --allow rules (limit is %d)", MAX_RULE_OPTIONS);
      o->allow[o->nallow++] = rule;
    }
    return -1;
  }
  case OPT_SEVERITY: {
    char *rule = keep_copy(o, v), *eq = strchr(rule, '=');
    DiagLevel level;
    if (!eq || eq == rule) return usage_error("--severity needs ID=LEVEL, e.g. --severity=ANE015=error");
    *eq = 0;
    if (!constraint_severity_from_name(eq + 1, &level))
      return usage_error("unknown level '%s' for --severity (expected error, warning or note)", eq + 1);
    if (o->noverrides >= MAX_RULE_OPTIONS) return usage_error("too many --severity options (limit is %d)", MAX_RULE_OPTIONS);
    o->overrides[o->noverrides++] = (LintSeverityOverride){rule, level};
    return -1;
  }
  case OPT_TARGET:
    if (!mil_target_from_name(v, &o->target)) return usage_error("unknown target '%s' (expected ios16, ios17 or ios18)", v);
    o->target_given = true;
    return -1;
  case OPT_CHIP: o->chip = v; return -1; /* checked against the constraint table in run() */
  case OPT_TABLE: o->table_path = v; return -1;
  case OPT_ERROR_LIMIT: {
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 0 || n > 1000000) return usage_error("invalid error limit '%s'", v);
    o->error_limit = (uint32_t)n;
    return -1;
  }
  case OPT_EXPLAIN: o->explain = v; return -1;
  case OPT_LIST: o->list = true; return -1;
  case OPT_GEN_DOCS: o->gen_docs = true; return -1;
  default: return -1;
  }
}

static int take_operand(void *ctx, const char *v) {
  Options *o = ctx;
  o->files[o->nfiles++] = v;
  return -1;
}

/* Returns -1 to continue, or an exit code. */
static int parse_options(int argc, char **argv, Options *o) {
  o->files = xcalloc((size_t)argc, sizeof *o->files);
  return cli_parse(&lint_spec, argc, argv, take_option, take_operand, o);
}

/* A .oir file: the IR checks before and after orionc's default pipeline.
 * False if the file cannot be read or parsed. */
static bool lint_oir(const ConstraintTable *t, const char *path, const LintOptions *lo, LintReport *out, Diag *d,
                     bool *failed) {
  IrModule *m = oir_parse_file(path, d);
  if (!m) return false;
  bool pipeline_failed;
  if (!lint_ir_compiled(t, m, lo, out, d, &pipeline_failed)) {
    diag_error(d, (SrcSpan){0}, "%s: the pass pipeline failed; the findings are those before it", path);
    *failed = true;
  }
  ir_module_free(m);
  return true;
}

static bool lint_pkg(const ConstraintTable *t, const char *path, const LintOptions *lo, LintReport *out, Diag *d) {
  Package pkg;
  if (!package_read(path, &pkg, d)) return false;
  bool ok = lint_package(t, &pkg, lo, out, d);
  package_free(&pkg);
  return ok;
}

/* "x.mil": MIL text, checked as the model.mil of a package. */
static bool is_mil_path(const char *path) {
  size_t n = strlen(path);
  return n > 4 && !strcmp(path + n - 4, ".mil");
}

static void print_summary(const LintReport *r) {
  uint32_t e = lint_report_count(r, DIAG_ERROR), w = lint_report_count(r, DIAG_WARNING) - e;
  uint32_t n = r->n - e - w;
  printf("%u error%s, %u warning%s, %u note%s\n", e, e == 1 ? "" : "s", w, w == 1 ? "" : "s", n, n == 1 ? "" : "s");
}

/* Diag.observe: what the readers say about an input, kept in the report. */
typedef struct Reading {
  LintReport *report;
  const char *path; /* the input being read */
} Reading;

static void keep_notice(void *ctx, DiagLevel level, SrcSpan span, const char *message) {
  Reading *rd = ctx;
  lint_report_add_notice(rd->report, level, span, rd->path, message);
}

static int run(const Options *o) {
  SourceSet ss;
  srcset_init(&ss);
  Diag d;
  diag_init(&d, &ss);
  d.program = "orion-lint";
  d.error_limit = o->error_limit;
  ConstraintTable *t = o->table_path ? constraints_load_file(o->table_path, &d) : constraints_builtin(&d);
  if (!t) {
    srcset_free(&ss);
    return EXIT_USAGE;
  }
  int status = EXIT_CLEAN;
  StrBuf out;
  sb_init(&out);
  MilTarget target = o->target;
  if (o->chip) {
    /* As orionc --chip: the chip's newest dialect is the default target and a limit on an explicit one. */
    const ConstraintChip *chip = constraints_chip(t, o->chip);
    if (!chip) {
      StrBuf known;
      sb_init(&known);
      constraints_chip_names(t, &known);
      status = usage_error("unknown chip '%s' (expected %s)", o->chip, known.data ? known.data : "none");
      sb_free(&known);
    } else if (!o->target_given) {
      target = chip->target;
    } else if (o->target > chip->target) {
      status = usage_error("--target=%s is newer than %s supports (at most %s)", mil_target_name(o->target), o->chip,
                           mil_target_name(chip->target));
    }
    if (status != EXIT_CLEAN) {
      constraints_free(t);
      srcset_free(&ss);
      return status;
    }
  }
  LintOptions lo = {.target = target,
                    .chip = o->chip,
                    .allow = o->allow,
                    .nallow = o->nallow,
                    .overrides = o->overrides,
                    .noverrides = o->noverrides};
  if (o->explain) {
    const Constraint *c = constraints_find(t, o->explain);
    if (!c) {
      status = usage_error("unknown rule '%s' (orion-lint --list shows them)", o->explain);
    } else {
      constraints_explain(t, c, &out);
    }
  } else if (o->list) {
    for (uint32_t i = 0; i < t->nrules; i++) {
      const Constraint *c = &t->rules[i];
      sb_printf(&out, "%s  %-7s  %-28s  %s\n", c->id, constraint_severity_name(c->severity), c->name, c->summary);
    }
  } else if (o->gen_docs) {
    constraints_gen_docs(t, &out);
  } else if (!o->nfiles) {
    status = usage_error("no input file");
  } else if (!lint_options_check(t, &lo, &d)) {
    status = EXIT_USAGE;
  } else {
    LintReport report;
    lint_report_init(&report, &ss);
    /* What the readers report is kept for the JSON and SARIF reports. */
    Reading reading = {&report, NULL};
    d.observe = keep_notice;
    d.observe_ctx = &reading;
    bool unreadable = false, failed = false;
    for (uint32_t i = 0; i < o->nfiles; i++) {
      const char *path = o->files[i];
      reading.path = strcmp(path, "-") ? path : "<stdin>";
      LintReport one;
      lint_report_init(&one, &ss);
      struct stat st;
      bool ok;
      if (stat(path, &st) != 0 && strcmp(path, "-")) {
        diag_error(&d, (SrcSpan){0}, "cannot read '%s': no such file or directory", path);
        ok = false;
      } else if (strcmp(path, "-") && S_ISDIR(st.st_mode)) {
        ok = lint_pkg(t, path, &lo, &one, &d);
      } else if (is_mil_path(path)) {
        ok = lint_mil_file(t, path, &lo, &one, &d);
      } else {
        ok = lint_oir(t, path, &lo, &one, &d, &failed);
      }
      unreadable |= !ok;
      /* Findings in file order, each file's sorted by position. */
      lint_report_sort(&one);
      for (uint32_t k = 0; k < one.n; k++) lint_report_add(&report, &one.items[k]);
      lint_report_free(&one);
    }
    d.observe = NULL;
    if (o->format == FORMAT_JSON) lint_format_json(&report, &out);
    else if (o->format == FORMAT_SARIF) lint_format_sarif(t, &report, &out);
    else lint_format_text(&report, &out);
    fwrite(out.data ? out.data : "", 1, out.len, stdout);
    out.len = 0;
    if (o->format == FORMAT_TEXT && report.n) print_summary(&report);
    status = unreadable ? EXIT_USAGE : failed || lint_report_count(&report, o->fail_on) ? EXIT_FINDINGS : EXIT_CLEAN;
    lint_report_free(&report);
  }
  fwrite(out.data ? out.data : "", 1, out.len, stdout);
  sb_free(&out);
  constraints_free(t);
  srcset_free(&ss);
  return status;
}

int main(int argc, char **argv) {
  tool_memory_init("orion-lint", NULL, NULL);
  Options o = {.format = FORMAT_TEXT, .fail_on = DIAG_ERROR, .target = MIL_IOS18, .error_limit = DEFAULT_ERROR_LIMIT};
  int status = parse_options(argc, argv, &o);
  if (status < 0) status = run(&o);
  free(o.files);
  for (uint32_t i = 0; i < o.ncopies; i++) free(o.copies[i]);
  free(o.copies);
  return status;
}
