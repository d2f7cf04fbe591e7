/*
 * orionc: the orion compiler driver. Parses options and calls the libraries;
 * no compiler logic lives here.
 *
 * Exit codes: 0 success, 1 errors in the input, 2 usage errors.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orion/cache.h"
#include "orion/constraints.h"
#include "orion/frontend.h"
#include "orion/package.h"
#include "orion/pass_plugin.h"
#include "orion/passes.h"
#include "orion/patch.h"
#include "orion/weights.h"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

typedef enum Emit { EMIT_PACKAGE, EMIT_OIR, EMIT_MIL, EMIT_NONE, EMIT_DOT } Emit;

typedef struct Options {
  const char *input;
  const char *output;
  Emit emit;
  bool emit_given;
  bool inline_calls;
  bool legalize;
  bool summary;
  bool check_weights;
  bool werror;
  bool no_warnings;
  bool time_phases;
  bool verbose;
  bool clamp_fp16;
  bool no_dedup;
  bool no_cache;
  const char *cache_dir;
  const char *override_files[64], *override_names[64]; /* --weights-override, --weight-override */
  uint32_t noverrides;
  /* The options that shape the package, recorded in its manifest so that
   * `orion-run patch --verify` can compile the same program again. */
  LoraSpec lora[32];
  char *lora_patterns[32];
  const char *compile_args[128];
  uint32_t ncompile_args;
  MilTarget target;
  bool target_given;
  const char *chip; /* --chip: its numbers replace the target's defaults */
  uint64_t min_surface_bytes; /* of the target or chip, for the package */
  uint32_t error_limit;
  PassManagerOptions pm;
  const char *plugins[16];
  uint32_t nplugins;
  const char *allow[32]; /* constraint ids whose violations do not stop the compile */
  uint32_t nallow;
  bool no_lint;
  bool list_passes;
} Options;

static void usage(FILE *out) {
  fputs("usage: orionc [options] FILE.oir\n"
        "\n"
        "Compiles an orion graph (.oir) for Apple's Neural Engine into a package\n"
        "(MIL program text, an Apple-format weight file and a manifest).\n"
        "\n"
        "options:\n"
        "  -o PATH              write the package (a directory, default: FILE with .anepkg), or\n"
        "                       with --emit, the text, to PATH; written atomically\n"
        "  --emit=KIND          what to produce instead of a package:\n"
        "                         oir   the canonical .oir of the verified graph\n"
        "                         mil   the MIL program text (weights laid out in memory)\n"
        "                         dot   a Graphviz drawing of the graph (after the passes)\n"
        "                         none  check only (passes and constraints, nothing written)\n"
        "  --target=T           ios18 (default: program(1.3)), ios17 or ios16 (program(1.0))\n"
        "  --chip=NAME          the ANE generation: m1, m2, m3, m4 or m5 (docs/constraints.md);\n"
        "                       its newest dialect is the default --target (a newer one is an\n"
        "                       error); its SRAM budget and minimum surface replace the target's\n"
        "                       (recorded in the manifest as Chip)\n"
        "  -O0                  legalization only: the passes the ANE needs\n"
        "  -O1                  legalization plus clean-ups and ANE-friendly lowerings (default)\n"
        "  --passes=A,B,(C,D)   run exactly these passes (a group in parentheses repeats\n"
        "                       until nothing changes); see --list-passes\n"
        "  --list-passes        list the passes and pipelines, then exit\n"
        "  --print-after=PASS   print the IR (as .oir) after PASS, or after every pass with 'all'\n"
        "  --verify-each        verify the IR after every pass, naming the pass that broke it\n"
        "  --time-passes        print the time spent in each pass\n"
        "  --load-pass=LIB.so   load passes from a plugin (see docs/writing-a-pass.md)\n"
        "  --fp16-range-guard   clip fp16 results that can overflow (for training)\n"
        "  --lora=PATTERN:RANK[:ALPHA]\n"
        "                       LoRA adapters as inputs: every linear layer whose weight\n"
        "                       (or module: the name without .weight) matches the glob\n"
        "                       PATTERN gets fp16 inputs MODULE.lora_A [RANK, in] and\n"
        "                       MODULE.lora_B [out, RANK] (PEFT's layout), adding\n"
        "                       ALPHA/RANK * x A^T B^T (ALPHA defaults to RANK); repeatable\n"
        "  --allow=ANE0NN       compile even though the program violates this ANE constraint\n"
        "                       (the violations are reported as warnings); repeatable\n"
        "  --no-lint            do not check the legalized program against the constraint table\n"
        "  --inline             with --emit=oir: expand function calls first\n"
        "  --legalize           with --emit=oir: print the graph after the pass pipeline,\n"
        "                       as it goes to MIL emission\n"
        "  --summary            print functions, inputs, outputs, weights and op counts\n"
        "                       (of the graph with calls expanded)\n"
        "  --no-weight-check    do not open the safetensors/npy files that params name\n"
        "                       (only with --emit=oir or --emit=none)\n"
        "  --clamp-fp16         clamp weights beyond fp16's range (warning) instead of failing\n"
        "  --weights-override=FILE.safetensors\n"
        "                       take the weights named by the file's keys (inlined names,\n"
        "                       as in the manifest) from it instead of their sources\n"
        "  --weight-override=NAME=FILE.npy\n"
        "                       the same for one weight from a .npy file\n"
        "  --no-dedup           store every weight separately, even identical ones, so each\n"
        "                       can be patched on its own (orion-run patch, training)\n"
        "  --cache-dir=DIR      the compile cache (default: $ORION_CACHE_DIR, else\n"
        "                       $XDG_CACHE_HOME/orion or ~/.cache/orion); a package whose\n"
        "                       graph, options, source and weight files are unchanged is\n"
        "                       copied from there instead of written again; at most\n"
        "                       $ORION_CACHE_MAX_BYTES (default 4 GiB), least recently used\n"
        "                       entries go first\n"
        "  --no-cache           neither read nor fill the compile cache\n"
        "  --time               print the time of each phase\n"
        "  -v                   print progress\n"
        "  -Werror              treat warnings as errors\n"
        "  -w                   do not print warnings\n"
        "  -ferror-limit=N      stop after N errors (default 20; 0 = no limit)\n"
        "  -h, --help           show this help\n"
        "  --version            show the version\n"
        "\n"
        "FILE may be '-' for standard input (then -o or --emit is required).\n"
        "environment: ORION_VERIFY_EACH=1 acts as --verify-each\n"
        "exit status: 0 success, 1 errors in the input, 2 usage error\n",
        out);
}

#define usage_error(...) cli_usage_error("orionc", __VA_ARGS__)

/* Options naming files are recorded with absolute paths. */
static void record_arg(Options *o, const char *a, const char *path) {
  if (o->ncompile_args >= sizeof o->compile_args / sizeof *o->compile_args) return;
  char *abs = path ? realpath(path, NULL) : NULL;
  if (!abs) {
    o->compile_args[o->ncompile_args++] = xstrdup(a);
    return;
  }
  size_t n = (size_t)(path - a) + strlen(abs) + 1;
  char *s = xmalloc(n);
  snprintf(s, n, "%.*s%s", (int)(path - a), a, abs);
  free(abs);
  o->compile_args[o->ncompile_args++] = s;
}

/* Returns -1 to continue, or an exit code. */
static int parse_options(int argc, char **argv, Options *o) {
  *o = (Options){.check_weights = true, .error_limit = DEFAULT_ERROR_LIMIT, .target = MIL_IOS18};
  o->pm.pipeline = "O1";
  /* The test suite verifies after every pass on every compile it makes. */
  const char *ve = getenv("ORION_VERIFY_EACH");
  o->pm.verify_each = ve && *ve && strcmp(ve, "0") != 0;
  bool only_files = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_files || a[0] != '-' || !strcmp(a, "-")) {
      if (o->input) return usage_error("more than one input file ('%s')", a);
      o->input = a;
    } else if (!strcmp(a, "--")) {
      only_files = true;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return EXIT_OK;
    } else if (!strcmp(a, "--version")) {
      printf("orionc %s\n", ORION_VERSION);
      return EXIT_OK;
    } else if (!strncmp(a, "--emit=", 7)) {
      static const char *const kinds[] = {"package", "oir", "mil", "none", "dot"};
      o->emit_given = false;
      for (int k = 0; k < 5; k++)
        if (!strcmp(a + 7, kinds[k])) {
          o->emit = (Emit)k;
          o->emit_given = true;
        }
      if (!o->emit_given) return usage_error("unknown --emit kind '%s' (expected oir, mil, dot or none)", a + 7);
    } else if (!strcmp(a, "--chip")) {
      return usage_error("%s needs a value, e.g. --chip=m4", a);
    } else if (!strcmp(a, "--emit") || !strcmp(a, "--target")) {
      return usage_error("%s needs a value, e.g. %s", a, a[2] == 'e' ? "--emit=mil" : "--target=ios18");
    } else if (!strncmp(a, "--target=", 9)) {
      if (!mil_target_from_name(a + 9, &o->target))
        return usage_error("unknown target '%s' (expected ios16, ios17 or ios18)", a + 9);
      o->target_given = true;
      record_arg(o, a, NULL);
    } else if (!strncmp(a, "--chip=", 7)) {
      o->chip = a + 7; /* checked against the constraint table below */
      record_arg(o, a, NULL);
    } else if (!strcmp(a, "-o")) {
      if (++i >= argc) return usage_error("%s needs a path", a);
      o->output = argv[i];
    } else if (!strcmp(a, "-O0") || !strcmp(a, "-O1")) {
      o->pm.pipeline = a + 1;
      record_arg(o, a, NULL);
    } else if (!strncmp(a, "-O", 2)) {
      return usage_error("unknown optimization level '%s' (expected -O0 or -O1)", a);
    } else if (!strncmp(a, "--passes=", 9)) {
      o->pm.passes = a + 9;
      record_arg(o, a, NULL);
    } else if (!strcmp(a, "--list-passes")) {
      o->list_passes = true;
    } else if (!strncmp(a, "--print-after=", 14)) {
      o->pm.print_after = a + 14;
    } else if (!strcmp(a, "--print-after-all")) {
      o->pm.print_after = "all";
    } else if (!strcmp(a, "--verify-each")) {
      o->pm.verify_each = true;
    } else if (!strcmp(a, "--time-passes")) {
      o->pm.time_passes = true;
    } else if (!strncmp(a, "--lora=", 7)) {
      const char *v = a + 7, *colon = strchr(v, ':');
      if (o->pm.pass_options.nlora >= 32) return usage_error("%s", "too many --lora options (limit is 32)");
      char *end = NULL;
      long rank = colon ? strtol(colon + 1, &end, 10) : 0;
      double alpha = (double)rank;
      if (end && *end == ':') {
        char *aend;
        alpha = strtod(end + 1, &aend);
        if (aend == end + 1 || *aend || !(alpha > 0) || alpha > 1e6) return usage_error("invalid LoRA alpha in '%s'", a);
        end = aend;
      }
      if (!colon || colon == v || !end || *end || rank < 1 || rank > 4096)
        return usage_error("'%s' is not --lora=PATTERN:RANK[:ALPHA] (RANK from 1 to 4096)", a);
      uint32_t k = o->pm.pass_options.nlora++;
      o->lora_patterns[k] = strndup(v, (size_t)(colon - v));
      o->lora[k] = (LoraSpec){.pattern = o->lora_patterns[k], .rank = (uint32_t)rank, .alpha = alpha};
      o->pm.pass_options.lora = o->lora;
      record_arg(o, a, NULL);
    } else if (!strcmp(a, "--fp16-range-guard")) {
      o->pm.pass_options.fp16_range_guard = true;
      record_arg(o, a, NULL);
    } else if (!strncmp(a, "--load-pass=", 12)) {
      if (o->nplugins >= 16) return usage_error("%s", "too many --load-pass options (limit is 16)");
      o->plugins[o->nplugins++] = a + 12;
      record_arg(o, a, a + 12);
    } else if (!strncmp(a, "--allow=", 8)) {
      if (o->nallow >= 32) return usage_error("%s", "too many --allow options (limit is 32)");
      o->allow[o->nallow++] = a + 8;
      record_arg(o, a, NULL);
    } else if (!strcmp(a, "--no-lint")) {
      o->no_lint = true;
      record_arg(o, a, NULL);
    } else if (!strcmp(a, "--inline")) {
      o->inline_calls = true;
    } else if (!strcmp(a, "--legalize")) {
      o->legalize = true;
    } else if (!strcmp(a, "--summary")) {
      o->summary = true;
    } else if (!strcmp(a, "--no-weight-check")) {
      o->check_weights = false;
    } else if (!strcmp(a, "--no-cache")) {
      o->no_cache = true;
    } else if (!strncmp(a, "--cache-dir=", 12)) {
      if (!a[12]) return usage_error("%s needs a directory", a);
      o->cache_dir = a + 12;
    } else if (!strcmp(a, "--no-dedup")) {
      o->no_dedup = true;
      record_arg(o, a, NULL);
    } else if (!strcmp(a, "--clamp-fp16")) {
      o->clamp_fp16 = true;
      record_arg(o, a, NULL);
    } else if (!strncmp(a, "--weights-override=", 19) || !strncmp(a, "--weight-override=", 18)) {
      bool npy = a[8] == '-';
      const char *v = a + (npy ? 18 : 19), *eq = npy ? strchr(v, '=') : NULL;
      if (npy && (!eq || eq == v || !eq[1])) return usage_error("'%s' is not --weight-override=NAME=FILE.npy", a);
      if (!npy && !*v) return usage_error("%s needs a file", a);
      if (o->noverrides >= 64) return usage_error("%s", "too many weight overrides (limit is 64)");
      o->override_names[o->noverrides] = npy ? strndup(v, (size_t)(eq - v)) : NULL;
      o->override_files[o->noverrides++] = npy ? eq + 1 : v;
      record_arg(o, a, npy ? eq + 1 : v);
    } else if (!strcmp(a, "--time")) {
      o->time_phases = true;
    } else if (!strcmp(a, "-v")) {
      o->verbose = true;
    } else if (!strcmp(a, "-Werror")) {
      o->werror = true;
    } else if (!strcmp(a, "-w")) {
      o->no_warnings = true;
    } else if (!strncmp(a, "-ferror-limit=", 14)) {
      char *end;
      long n = strtol(a + 14, &end, 10);
      if (!a[14] || *end || n < 0 || n > 1000000) return usage_error("invalid error limit '%s'", a + 14);
      o->error_limit = (uint32_t)n;
    } else {
      return usage_error("unknown option '%s'", a);
    }
  }
  if (o->list_passes) return -1;
  if (o->chip) {
    /* The chip names its newest dialect: the default target, and a limit on an explicit one. */
    Diag d;
    diag_init(&d, NULL);
    ConstraintTable *t = constraints_builtin(&d);
    if (!t) return EXIT_USAGE;
    const ConstraintChip *chip = constraints_chip(t, o->chip);
    int rc = -1;
    if (!chip) {
      StrBuf known;
      sb_init(&known);
      constraints_chip_names(t, &known);
      rc = usage_error("unknown chip '%s' (expected %s)", o->chip, known.data ? known.data : "none");
      sb_free(&known);
    } else if (!o->target_given) {
      o->target = chip->target;
    } else if (o->target > chip->target) {
      rc = usage_error("--target=%s is newer than %s supports (at most %s)", mil_target_name(o->target), o->chip,
                       mil_target_name(chip->target));
    }
    constraints_free(t);
    if (rc >= 0) return rc;
  }
  if (!o->input) return usage_error("%s", "no input file");
  if (o->output && o->emit == EMIT_NONE) return usage_error("%s", "-o and --emit=none contradict each other");
  if ((o->inline_calls || o->legalize) && o->emit != EMIT_OIR) return usage_error("%s", "--inline and --legalize go with --emit=oir");
  if (!o->check_weights && (o->emit == EMIT_PACKAGE || o->emit == EMIT_MIL))
    return usage_error("%s", "--no-weight-check cannot be used when weights are written");
  if (o->emit == EMIT_PACKAGE && !o->output && !strcmp(o->input, "-")) return usage_error("%s", "reading standard input needs -o PATH");
  return -1;
}

/* "512 B", "14.2 KiB", "27.04 MiB": sizes people read at a glance. */
static const char *human_bytes(uint64_t n, char *buf, size_t len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (n < 1024) {
    snprintf(buf, len, "%llu B", (unsigned long long)n);
    return buf;
  }
  double v = (double)n / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, len, "%.2f %s", v, units[u]);
  return buf;
}

static void print_summary(IrModule *m, const char *input, FILE *out) {
  uint32_t nfuncs = 0;
  for (IrFuncId f = 1; f < m->nfuncs; f++) nfuncs += !m->funcs[f].dead;
  fprintf(out, "%s: %u function%s\n", input, nfuncs, nfuncs == 1 ? "" : "s");
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    IrFunc *fn = ir_func(m, f);
    if (fn->dead) continue;
    uint64_t nparams = 0, elements = 0, bytes = 0, nconsts = 0;
    for (uint32_t i = 0; i < fn->ndecls; i++) {
      IrValue *v = ir_value(m, fn->decls[i]);
      if (v->kind != VK_PARAM) {
        nconsts++;
        continue;
      }
      nparams++;
      elements += ir_type_elements(&v->type);
      bytes += ir_type_elements(&v->type) * ir_dtype_size(v->type.dtype);
    }
    char size[32];
    fprintf(out, "func %s: %u input%s, %u output%s, %u ops, %llu params (%llu weights, %s), %llu consts\n", fn->name,
            fn->ninputs, fn->ninputs == 1 ? "" : "s", fn->noutputs, fn->noutputs == 1 ? "" : "s", fn->nops,
            (unsigned long long)nparams, (unsigned long long)elements, human_bytes(bytes, size, sizeof size),
            (unsigned long long)nconsts);
    StrBuf sb;
    sb_init(&sb);
    for (uint32_t i = 0; i < fn->ninputs; i++) {
      IrValue *v = ir_value(m, fn->inputs[i]);
      sb.len = 0;
      ir_type_print(&sb, &v->type);
      fprintf(out, "  input  %s: %s\n", v->name, sb.data);
    }
    for (uint32_t i = 0; i < fn->noutputs; i++) {
      IrValue *v = ir_value(m, fn->outputs[i].value);
      sb.len = 0;
      ir_type_print(&sb, &v->type);
      fprintf(out, "  output %s: %s\n", fn->outputs[i].name, sb.data);
    }
    uint32_t counts[OP_COUNT] = {0};
    IR_FOR_EACH_OP(m, f, op) counts[ir_op(m, op)->kind]++;
    sb.len = 0;
    for (int k = 0; k < OP_COUNT; k++)
      if (counts[k]) sb_printf(&sb, "%s%s %u", sb.len ? ", " : "", ir_op_info((IrOpKind)k)->name, counts[k]);
    if (sb.len) fprintf(out, "  ops: %s\n", sb.data);
    sb_free(&sb);
  }
}

/* Phase timing for --time. */
typedef struct Clock {
  bool on;
  struct timespec last;
} Clock;

static double elapsed_ms(struct timespec a, struct timespec b) {
  return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

static void phase(Clock *c, const char *name) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (c->on && name) fprintf(stderr, "orionc: %-16s %9.2f ms\n", name, elapsed_ms(c->last, now));
  c->last = now;
}

static void progress(const Options *o, const char *fmt, ...) ORION_PRINTF(2, 3);
static void progress(const Options *o, const char *fmt, ...) {
  if (!o->verbose) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("orionc: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* Checks the legalized program against the ANE constraint table. Findings
 * go through the diagnostics module (so -w and -Werror apply) as one line
 * each, `message [ANE001]`; orion-lint shows the full entries. Violations of
 * error severity stop the compile unless --allow names their rule, which
 * turns them into warnings. */
static bool check_constraints(const Options *o, IrModule *m, SourceSet *sources, Diag *d, uint32_t *errors,
                              uint32_t *warnings) {
  ConstraintTable *t = constraints_builtin(d);
  if (!t) return false;
  /* The package writer pads small surfaces, so for a compile ANE004 is news, not a problem. */
  static const LintSeverityOverride overrides[] = {{"ANE004", DIAG_NOTE}};
  LintOptions lo = {.target = o->target, .chip = o->chip, .allow = NULL, .overrides = overrides, .noverrides = 1};
  LintOptions check = {.target = o->target, .chip = o->chip, .allow = o->allow, .nallow = o->nallow};
  if (!lint_options_check(t, &check, d)) {
    constraints_free(t);
    return false;
  }
  LintReport r;
  lint_report_init(&r, sources);
  lint_ir(t, m, &lo, &r);
  lint_report_sort(&r);
  *errors = *warnings = 0;
  for (uint32_t i = 0; i < r.n; i++) {
    const LintFinding *f = &r.items[i];
    DiagLevel level = f->severity;
    for (uint32_t k = 0; k < o->nallow; k++)
      if (level == DIAG_ERROR && !strcmp(o->allow[k], f->rule->id)) level = DIAG_WARNING;
    if (level == DIAG_NOTE && !o->verbose) continue;
    uint32_t before = d->nerrors + d->nwarnings;
    diag_report(d, level, f->span, "%s [%s]", f->message, f->rule->id);
    if (level == DIAG_ERROR) (*errors)++;
    else if (level == DIAG_WARNING) (*warnings)++;
    if (d->nerrors + d->nwarnings > before)
      diag_note(d, f->span, "'orion-lint --explain %s' describes the constraint and its workaround", f->rule->id);
  }
  if (*errors)
    diag_error(d, (SrcSpan){0}, "the program violates %u ANE constraint%s; --allow=ID compiles it anyway", *errors,
               *errors == 1 ? "" : "s");
  lint_report_free(&r);
  constraints_free(t);
  return !diag_has_errors(d);
}

/* FILE.oir -> FILE.anepkg (in the current directory's terms). */
static char *default_package_path(const char *input) {
  size_t n = strlen(input);
  const char *dot = strrchr(input, '.'), *slash = strrchr(input, '/');
  if (dot && (!slash || dot > slash)) n = (size_t)(dot - input);
  char *p = xmalloc(n + sizeof ".anepkg");
  memcpy(p, input, n);
  memcpy(p + n, ".anepkg", sizeof ".anepkg");
  return p;
}

/* What parse_options allocated (also after a usage error found late, e.g. --chip's). */
static void options_free(Options *o) {
  for (uint32_t i = 0; i < o->ncompile_args; i++) free((void *)(uintptr_t)o->compile_args[i]);
  for (uint32_t i = 0; i < o->noverrides; i++) free((void *)(uintptr_t)o->override_names[i]);
  for (uint32_t i = 0; i < o->pm.pass_options.nlora; i++) free(o->lora_patterns[i]);
}

int main(int argc, char **argv) {
  /* A file size limit (ulimit -f) then fails the write with EFBIG, which is
   * reported and cleaned up, instead of killing the compiler mid-package. */
  signal(SIGXFSZ, SIG_IGN);
  Options o;
  int rc = parse_options(argc, argv, &o);
  if (rc >= 0) {
    options_free(&o);
    return rc;
  }

  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  d.warnings_as_errors = o.werror;
  d.suppress_warnings = o.no_warnings;
  d.error_limit = o.error_limit;
  Clock clock = {.on = o.time_phases};
  phase(&clock, NULL);

  rc = EXIT_INPUT;
  StrBuf text;
  sb_init(&text);
  char *package_path = NULL;
  char *summary = NULL;
  size_t summary_len = 0;
  uint32_t lint_errors = 0, lint_warnings = 0;
  IrModule *m = NULL;
  rc = EXIT_USAGE;
  for (uint32_t i = 0; i < o.nplugins; i++)
    if (!passes_load_plugin(o.plugins[i], &d)) goto done;
  if (o.list_passes) {
    for (uint32_t i = 0; i < pass_count(); i++) printf("%-20s %s\n", pass_at(i)->name, pass_at(i)->description);
    printf("\npipelines:\n  -O0  %s\n  -O1  %s\n", passes_pipeline("O0"), passes_pipeline("O1"));
    rc = EXIT_OK;
    goto done;
  }
  if (!passes_check_spec(&o.pm, &d)) goto done;
  {
    /* The SRAM budget and the minimum surface the passes plan for are the
     * target's, or the chip's with --chip, from the constraint table. */
    ConstraintTable *table = constraints_builtin(&d);
    if (!table) goto done;
    const ConstraintChip *chip = o.chip ? constraints_chip(table, o.chip) : NULL;
    ConstraintTarget target = chip ? constraints_chip_target(table, chip, o.target) : *constraints_target(table, o.target);
    if (target.sram_budget_bytes <= UINT32_MAX) o.pm.pass_options.target_sram_bytes = (uint32_t)target.sram_budget_bytes;
    o.pm.pass_options.target_min_surface_bytes = target.min_surface_bytes;
    o.min_surface_bytes = target.min_surface_bytes;
    constraints_free(table);
  }
  rc = EXIT_INPUT;
  progress(&o, "parsing %s", o.input);
  m = oir_parse_file(o.input, &d);
  phase(&clock, "parse+verify");
  if (!m) goto done;
  if (o.emit == EMIT_OIR && !o.inline_calls && !o.legalize) ir_print_module(m, &text);
  PassCtx inline_ctx = {.d = &d};
  if (!pass_inline(m, &inline_ctx) || !ir_verify(m, &d)) goto done;
  phase(&clock, "inline");
  for (uint32_t i = 0; i < o.noverrides; i++)
    if (!weights_override(m, o.override_names[i], o.override_files[i], &d)) goto done;
  if (o.check_weights && !weights_check_sources(m, &d)) goto done;
  phase(&clock, "weight check");
  if (o.summary) { /* printed after the emitted text */
    FILE *mem = open_memstream(&summary, &summary_len);
    if (mem) {
      print_summary(m, o.input, mem);
      fclose(mem);
    }
  }
  if (o.emit == EMIT_OIR && o.inline_calls && !o.legalize) ir_print_module(m, &text);
  if (o.emit == EMIT_DOT) {
    if (!passes_run(m, &o.pm, &d)) goto done;
    ir_print_dot(m, &text);
  } else if (o.emit == EMIT_OIR) {
    if (o.legalize) {
      if (!passes_run(m, &o.pm, &d)) goto done;
      ir_print_module(m, &text);
    }
  } else if (o.emit == EMIT_NONE) {
    /* A full check: the passes and the constraints, without writing anything. */
    if (!passes_run(m, &o.pm, &d)) goto done;
    if (!o.no_lint && !check_constraints(&o, m, &sources, &d, &lint_errors, &lint_warnings)) goto done;
  } else {
    progress(&o, "running the %s pipeline", o.pm.passes ? "given" : o.pm.pipeline);
    if (!passes_run(m, &o.pm, &d)) goto done;
    phase(&clock, "passes");
    if (!o.no_lint && !check_constraints(&o, m, &sources, &d, &lint_errors, &lint_warnings)) goto done;
    phase(&clock, "constraints");
    PackageStats stats = {0};
    PackageOptions po = {.target = o.target, .chip = o.chip, .min_surface_bytes = o.min_surface_bytes,
                         .source_name = o.input, .warnings = d.nwarnings,
                         .weights = {.clamp_fp16 = o.clamp_fp16}, .stats = &stats, .keep_duplicate_weights = o.no_dedup,
                         .compile_args = o.compile_args, .ncompile_args = o.ncompile_args,
                         .lint_checked = !o.no_lint, .lint_errors = lint_errors, .lint_warnings = lint_warnings};
    const SourceFile *src = srcset_get(&sources, 1);
    po.source_text = src ? src->text : "";
    po.source_len = src ? src->len : 0;
    if (o.emit == EMIT_MIL) {
      progress(&o, "emitting MIL");
      if (!package_emit_mil(m, &po, &text, &d)) goto done;
      phase(&clock, "emit");
      if (o.time_phases)
        fprintf(stderr, "orionc:   weights        %9.2f ms (%llu bytes)\norionc:   mil text       %9.2f ms\n",
                stats.weights_ms, (unsigned long long)stats.weight_bytes, stats.mil_ms);
    } else {
      package_path = o.output ? xstrdup(o.output) : default_package_path(o.input);
      char *cache_dir = o.no_cache ? NULL : o.cache_dir ? xstrdup(o.cache_dir) : compile_cache_default_dir();
      char key[COMPILE_CACHE_KEY_LEN + 1];
      bool served = false;
      if (cache_dir) {
        compile_cache_key(m, &po, o.plugins, o.nplugins, key);
        served = compile_cache_fetch(cache_dir, key, package_path, &d);
        phase(&clock, "cache lookup");
      }
      if (served) {
        if (o.time_phases) fprintf(stderr, "orionc:   served from the compile cache (%s/%s.anepkg)\n", cache_dir, key);
        progress(&o, "wrote %s (copied from the compile cache)", package_path);
        free(cache_dir);
        goto written;
      }
      if (diag_has_errors(&d)) {
        free(cache_dir);
        goto done;
      }
      progress(&o, "writing %s", package_path);
      if (!package_write(m, package_path, &po, &d)) {
        free(cache_dir);
        goto done;
      }
      phase(&clock, "package");
      if (cache_dir) {
        const char *max = getenv("ORION_CACHE_MAX_BYTES");
        uint64_t limit = max && *max ? strtoull(max, NULL, 10) : COMPILE_CACHE_DEFAULT_MAX_BYTES;
        if (!compile_cache_store(cache_dir, key, package_path, limit)) progress(&o, "not stored in the compile cache %s", cache_dir);
        phase(&clock, "cache store");
      }
      free(cache_dir);
      if (o.time_phases)
        fprintf(stderr,
                "orionc:   weights        %9.2f ms (%llu bytes)\norionc:   mil text       %9.2f ms\n"
                "orionc:   manifest       %9.2f ms\norionc:   write          %9.2f ms\n",
                stats.weights_ms, (unsigned long long)stats.weight_bytes, stats.mil_ms, stats.manifest_ms, stats.write_ms);
      progress(&o, "wrote %s", package_path);
    }
  }
written:
  if (diag_has_errors(&d)) goto done;
  if (o.emit == EMIT_OIR || o.emit == EMIT_MIL || o.emit == EMIT_DOT) {
    const char *err;
    if (o.output) {
      if (!write_file_atomic(o.output, text.data ? text.data : "", text.len, &err)) {
        fprintf(stderr, "orionc: error: cannot write '%s': %s\n", o.output, err);
        goto done;
      }
    } else {
      fwrite(text.data ? text.data : "", 1, text.len, stdout);
    }
  }
  if (summary) fwrite(summary, 1, summary_len, stdout);
  rc = EXIT_OK;
done:
  options_free(&o);
  free(summary);
  free(package_path);
  sb_free(&text);
  ir_module_free(m);
  srcset_free(&sources);
  return rc;
}
