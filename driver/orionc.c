/*
 * orionc: the orion compiler driver. Turns the command line into
 * OrionCompileOptions, calls the compile library (orion/compile.h) and
 * prints what it returns; no compiler logic lives here. Killed by SIGINT or
 * SIGTERM, it removes the package directory it was writing; it removes what
 * a compile killed harder left beside the package, and --clean removes such
 * leftovers on request (orion/temporaries.h).
 *
 * Exit codes: 0 success, 1 errors in the input, 2 usage errors, 3 out of memory.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_options.h"
#include "tool_memory.h"
#include "orion/cache.h"
#include "orion/compile.h"
#include "orion/pass_plugin.h"
#include "orion/temporaries.h"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

#define MAX_OPERANDS 64

/* The command line: the compile's options (those that shape the package
 * parsed by the library, in the form the manifest records) and what orionc
 * itself does with the result. */
typedef struct Options {
  OrionCompileArgs args;
  const char *input;
  const char *output;
  bool emit_given;
  bool time_phases;
  bool verbose;
  bool werror;
  bool no_warnings;
  bool no_cache;
  const char *cache_dir;
  uint32_t error_limit;
  bool list_passes;
  bool json; /* --summary as JSON */
  bool clean; /* --clean: the operands are directories, not the input */
  const char *operands[MAX_OPERANDS]; /* as given */
  uint32_t noperands;
  const char *train_contract;
  char *spelt[ORION_COMPILE_MAX_ARGS]; /* the compile options as args.c reads them */
  uint32_t nspelt;
} Options;

enum {
  OPT_OUTPUT = 1, OPT_EMIT, OPT_TARGET, OPT_CHIP, OPT_O0, OPT_O1, OPT_O, OPT_PASSES, OPT_LIST_PASSES, OPT_PRINT_AFTER,
  OPT_PRINT_AFTER_ALL, OPT_VERIFY_EACH, OPT_TIME_PASSES, OPT_LOAD_PASS, OPT_FP16_RANGE_GUARD, OPT_LORA, OPT_ALLOW,
  OPT_NO_LINT, OPT_INLINE, OPT_LEGALIZE, OPT_SUMMARY, OPT_JSON, OPT_NO_WEIGHT_CHECK, OPT_CLAMP_FP16,
  OPT_WEIGHTS_OVERRIDE, OPT_WEIGHT_OVERRIDE, OPT_NO_DEDUP, OPT_CACHE_DIR, OPT_NO_CACHE, OPT_TIME, OPT_VERBOSE,
  OPT_WERROR, OPT_NO_WARNINGS, OPT_ERROR_LIMIT, OPT_CLEAN, OPT_TRAIN_CONTRACT, OPT_TRAIN, OPT_TRAINABLE, OPT_FROZEN,
  OPT_GATHER_GRAD,
  OPT_HELP, OPT_VERSION,
};

static const CliOption orionc_options[] = {
    {OPT_OUTPUT, 'o', NULL, CLI_VALUE, 0, " PATH",
     "write the package (a directory, default: FILE with .anepkg), or\n"
     "with --emit, the text, to PATH ('-': standard output); written atomically",
     "a path"},
    {OPT_EMIT, 0, "emit", CLI_VALUE, CLI_WORD, "=KIND",
     "what to produce instead of a package:\n"
     "  oir   the canonical .oir of the verified graph\n"
     "  mil   the MIL program text (weights laid out in memory)\n"
     "  dot   a Graphviz drawing of the graph (after the passes)\n"
     "  none  check only (passes and constraints, nothing written)",
     "a value, e.g. --emit=mil"},
    {OPT_TARGET, 0, "target", CLI_VALUE, CLI_WORD, "=T", "ios18 (default: program(1.3)), ios17 or ios16 (program(1.0))",
     "a value, e.g. --target=ios18"},
    {OPT_CHIP, 0, "chip", CLI_VALUE, CLI_WORD, "=NAME",
     "the ANE generation: m1, m2, m3, m4 or m5 (docs/constraints.md);\n"
     "its newest dialect is the default --target (a newer one is an\n"
     "error); its SRAM budget and minimum surface replace the target's\n"
     "(recorded in the manifest as Chip)",
     "a value, e.g. --chip=m4"},
    {OPT_O0, 0, "O0", CLI_NO_VALUE, CLI_SINGLE_DASH, NULL, "legalization only: the passes the ANE needs", NULL},
    {OPT_O1, 0, "O1", CLI_NO_VALUE, CLI_SINGLE_DASH, NULL,
     "legalization plus clean-ups and ANE-friendly lowerings (default)", NULL},
    {OPT_O, 0, "O", CLI_ATTACHED_VALUE, CLI_SINGLE_DASH | CLI_HIDDEN, "LEVEL", "", "a level, e.g. -O1"},
    {OPT_PASSES, 0, "passes", CLI_VALUE, CLI_EMPTY_OK, "=A,B,(C,D)",
     "run exactly these passes (a group in parentheses repeats\n"
     "until nothing changes); see --list-passes",
     NULL},
    {OPT_LIST_PASSES, 0, "list-passes", CLI_NO_VALUE, 0, NULL, "list the passes and pipelines, then exit", NULL},
    {OPT_PRINT_AFTER, 0, "print-after", CLI_VALUE, 0, "=PASS",
     "print the IR (as .oir) after PASS, or after every pass with 'all'", "a pass name"},
    {OPT_PRINT_AFTER_ALL, 0, "print-after-all", CLI_NO_VALUE, CLI_HIDDEN, NULL, "", NULL},
    {OPT_VERIFY_EACH, 0, "verify-each", CLI_NO_VALUE, 0, NULL,
     "verify the IR after every pass, naming the pass that broke it", NULL},
    {OPT_TIME_PASSES, 0, "time-passes", CLI_NO_VALUE, 0, NULL, "print the time spent in each pass", NULL},
    {OPT_LOAD_PASS, 0, "load-pass", CLI_VALUE, 0, "=LIB.so", "load passes from a plugin (see docs/writing-a-pass.md)",
     "a file"},
    {OPT_FP16_RANGE_GUARD, 0, "fp16-range-guard", CLI_NO_VALUE, 0, NULL,
     "clip fp16 results that can overflow (for training)", NULL},
    {OPT_LORA, 0, "lora", CLI_VALUE, 0, "=PATTERN:RANK[:ALPHA]",
     "LoRA adapters as inputs: every linear layer whose weight\n"
     "(or module: the name without .weight) matches the glob\n"
     "PATTERN gets fp16 inputs MODULE.lora_A [RANK, in] and\n"
     "MODULE.lora_B [out, RANK] (PEFT's layout), adding\n"
     "ALPHA/RANK * x A^T B^T (ALPHA defaults to RANK); repeatable.\n"
     "With --train the adapters train, not the params (fp32\n"
     "layers get fp32 adapters; docs/lora.md)",
     "PATTERN:RANK[:ALPHA]"},
    {OPT_ALLOW, 0, "allow", CLI_VALUE, 0, "=ANE0NN",
     "compile even though the program violates this ANE constraint\n"
     "(the violations are reported as warnings); repeatable",
     "a constraint id, e.g. --allow=ANE016"},
    {OPT_NO_LINT, 0, "no-lint", CLI_NO_VALUE, 0, NULL,
     "do not check the legalized program against the constraint table", NULL},
    {OPT_INLINE, 0, "inline", CLI_NO_VALUE, 0, NULL, "with --emit=oir: expand function calls first", NULL},
    {OPT_LEGALIZE, 0, "legalize", CLI_NO_VALUE, 0, NULL,
     "with --emit=oir: print the graph after the pass pipeline,\n"
     "as it goes to MIL emission",
     NULL},
    {OPT_SUMMARY, 0, "summary", CLI_NO_VALUE, 0, NULL,
     "print functions, inputs, outputs, weights and op counts\n"
     "(of the graph with calls expanded)",
     NULL},
    {OPT_JSON, 0, "json", CLI_NO_VALUE, 0, NULL, "with --summary: print it as one JSON object", NULL},
    {OPT_NO_WEIGHT_CHECK, 0, "no-weight-check", CLI_NO_VALUE, 0, NULL,
     "do not open the safetensors/npy files that params name\n"
     "(only with --emit=oir or --emit=none)",
     NULL},
    {OPT_CLAMP_FP16, 0, "clamp-fp16", CLI_NO_VALUE, 0, NULL,
     "clamp weights beyond fp16's range (warning) instead of failing", NULL},
    {OPT_WEIGHTS_OVERRIDE, 0, "weights-override", CLI_VALUE, 0, "=FILE.safetensors",
     "take the weights named by the file's keys (inlined names,\n"
     "as in the manifest) from it instead of their sources",
     "a file"},
    {OPT_WEIGHT_OVERRIDE, 0, "weight-override", CLI_VALUE, 0, "=NAME=FILE.npy",
     "the same for one weight from a .npy file", "NAME=FILE.npy"},
    {OPT_NO_DEDUP, 0, "no-dedup", CLI_NO_VALUE, 0, NULL,
     "store every weight in a blob of its own, even one tensor read\n"
     "twice (tied) and equal consts (by default only those share)",
     NULL},
    {OPT_TRAIN, 0, "train", CLI_OPTIONAL_VALUE, 0, "[=FUNC]",
     "differentiate the scalar fp32 output 'loss' of FUNC (default:\n"
     "the one function with an output 'loss') and write a training\n"
     "package: its forward and backward programs, one weight file,\n"
     "the training contract (docs/training.md)",
     "a function"},
    {OPT_TRAINABLE, 0, "trainable", CLI_VALUE, 0, "=GLOB",
     "with --train: train only the params matching GLOB (fnmatch,\n"
     "repeatable; each must match a float param)",
     "a glob"},
    {OPT_FROZEN, 0, "frozen", CLI_VALUE, 0, "=GLOB",
     "with --train: do not train the params matching GLOB\n"
     "(repeatable; each must match a float param)",
     "a glob"},
    {OPT_GATHER_GRAD, 0, "gather-grad", CLI_VALUE, 0, "=onehot|rows",
     "with --train: an embedding's gradient (a gather of a param's\n"
     "rows by an input) as its rows, which orion-run train adds in\n"
     "(rows, the default: tokens x dim values), or as a one-hot\n"
     "matmul in the backward (onehot: vocabulary x tokens x dim)",
     "a form"},
    {OPT_TRAIN_CONTRACT, 0, "train-contract", CLI_VALUE, 0, "=FILE.json",
     "record this training contract in the package (Training in the\n"
     "manifest: which functions are the forward and the backward,\n"
     "how they connect; docs/training.md), checked against them",
     "a file"},
    {OPT_CACHE_DIR, 0, "cache-dir", CLI_VALUE, 0, "=DIR",
     "the compile cache (default: $ORION_CACHE_DIR, else\n"
     "$XDG_CACHE_HOME/orion or ~/.cache/orion); a package whose\n"
     "graph, options, source and weight files are unchanged is\n"
     "copied from there instead of written again; at most\n"
     "$ORION_CACHE_MAX_BYTES (default 4 GiB), least recently used\n"
     "entries go first",
     "a directory"},
    {OPT_NO_CACHE, 0, "no-cache", CLI_NO_VALUE, 0, NULL, "neither read nor fill the compile cache", NULL},
    {OPT_TIME, 0, "time", CLI_NO_VALUE, 0, NULL, "print the time of each phase", NULL},
    {OPT_VERBOSE, 'v', NULL, CLI_NO_VALUE, 0, NULL, "print progress", NULL},
    {OPT_WERROR, 0, "Werror", CLI_NO_VALUE, CLI_SINGLE_DASH, NULL, "treat warnings as errors", NULL},
    {OPT_NO_WARNINGS, 'w', NULL, CLI_NO_VALUE, 0, NULL,
     "do not print warnings, nor remarks such as the ANE's\n"
     "binding order",
     NULL},
    {OPT_ERROR_LIMIT, 0, "ferror-limit", CLI_VALUE, CLI_SINGLE_DASH, "=N", "stop after N errors (default 20; 0 = no limit)",
     "a number"},
    {OPT_CLEAN, 0, "clean", CLI_NO_VALUE, 0, NULL,
     "instead of compiling, remove what killed orion writers left\n"
     "in the directories given as operands (default: that of -o,\n"
     "else the current one) and in the compile cache, naming each:\n"
     "only temporaries (NAME.tmp-XXXXXX, NAME.tmp.XXXXXX,\n"
     "NAME.verify-XXXXXX, orion-verify-XXXXXX) whose marker\n"
     "NAME.owner names a process that is gone; a compile into\n"
     "-o PATH does the same for PATH's own leftovers first",
     NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
    {OPT_VERSION, 0, "version", CLI_NO_VALUE, 0, NULL, "show the version", NULL},
};

static const CliSpec orionc_spec = {
    .program = "orionc",
    .usage = "usage: orionc [options] FILE.oir\n"
           "       orionc --clean [-o PATH] [DIR...]\n",
    .description = "Compiles an orion graph (.oir) for Apple's Neural Engine into a package\n"
                   "(MIL program text, an Apple-format weight file and a manifest).\n",
    .options = orionc_options,
    .noptions = sizeof orionc_options / sizeof *orionc_options,
    .epilogue = "FILE may be '-' for standard input (then -o or --emit is required).\n"
                "environment: ORION_VERIFY_EACH=1 acts as --verify-each\n"
                "exit status: 0 success, 1 errors in the input, 2 usage error, 3 out of memory\n",
    .help_column = 23,
};

#define usage_error(...) cli_usage_error("orionc", __VA_ARGS__)

/* The options that shape the package, in the spelling compiler/args.c
 * parses and the manifest records ("--target=ios18", "-O0"). */
static const char *compile_arg_spelling(int id, const char *value, StrBuf *sb) {
  const char *name = NULL;
  for (size_t i = 0; i < sizeof orionc_options / sizeof *orionc_options; i++)
    if (orionc_options[i].id == id) name = orionc_options[i].name;
  switch (id) {
  case OPT_O0:
  case OPT_O1: sb_printf(sb, "-%s", name); break;
  case OPT_O: sb_printf(sb, "-O%s", value); break;
  case OPT_FP16_RANGE_GUARD:
  case OPT_NO_LINT:
  case OPT_NO_DEDUP:
  case OPT_CLAMP_FP16: sb_printf(sb, "--%s", name); break;
  case OPT_TRAIN:
    if (value) sb_printf(sb, "--%s=%s", name, value);
    else sb_printf(sb, "--%s", name);
    break;
  case OPT_TRAINABLE:
  case OPT_FROZEN:
  case OPT_GATHER_GRAD:
  case OPT_TARGET:
  case OPT_CHIP:
  case OPT_PASSES:
  case OPT_LORA:
  case OPT_LOAD_PASS:
  case OPT_ALLOW:
  case OPT_WEIGHTS_OVERRIDE:
  case OPT_WEIGHT_OVERRIDE: sb_printf(sb, "--%s=%s", name, value); break;
  default: return NULL;
  }
  return sb->data;
}

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  (void)spelling;
  Options *o = ctx;
  OrionCompileOptions *c = &o->args.options;
  StrBuf arg;
  sb_init(&arg);
  if (compile_arg_spelling(id, v, &arg)) {
    /* The compile args point into it: kept until the end. */
    if (o->nspelt >= ORION_COMPILE_MAX_ARGS) {
      sb_free(&arg);
      return usage_error("too many options (limit is %d)", ORION_COMPILE_MAX_ARGS);
    }
    o->spelt[o->nspelt++] = arg.data;
    char err[512];
    OrionArgStatus st = orion_compile_args_parse(&o->args, arg.data, err, sizeof err);
    if (st == ORION_ARG_INVALID) return usage_error("%s", err);
    if (st == ORION_ARG_NOT_MINE) ice("orionc option '%s' is not a compile option", arg.data);
    return -1;
  }
  sb_free(&arg);
  switch (id) {
  case OPT_HELP: cli_print_help(&orionc_spec, stdout); return EXIT_OK;
  case OPT_VERSION: printf("orionc %s\n", ORION_VERSION); return EXIT_OK;
  case OPT_OUTPUT: o->output = v; return -1;
  case OPT_EMIT: {
    static const char *const kinds[] = {"package", "oir", "mil", "none", "dot"};
    static const OrionCompileEmit emits[] = {ORION_EMIT_PACKAGE, ORION_EMIT_OIR, ORION_EMIT_MIL, ORION_EMIT_NONE,
                                             ORION_EMIT_DOT};
    for (int k = 0; k < 5; k++)
      if (!strcmp(v, kinds[k])) {
        c->emit = emits[k];
        return -1;
      }
    return usage_error("unknown --emit kind '%s' (expected oir, mil, dot or none)", v);
  }
  case OPT_LIST_PASSES: o->list_passes = true; return -1;
  case OPT_PRINT_AFTER: c->passes.print_after = v; return -1;
  case OPT_PRINT_AFTER_ALL: c->passes.print_after = "all"; return -1;
  case OPT_VERIFY_EACH: c->passes.verify_each = true; return -1;
  case OPT_TIME_PASSES: c->passes.time_passes = true; return -1;
  case OPT_INLINE: c->inline_calls = true; return -1;
  case OPT_LEGALIZE: c->legalize = true; return -1;
  case OPT_SUMMARY: c->summary = true; return -1;
  case OPT_JSON: o->json = true; return -1;
  case OPT_NO_WEIGHT_CHECK: c->check_weights = false; return -1;
  case OPT_NO_CACHE: o->no_cache = true; return -1;
  case OPT_CLEAN: o->clean = true; return -1;
  case OPT_CACHE_DIR: o->cache_dir = v; return -1;
  case OPT_TRAIN_CONTRACT: o->train_contract = v; return -1;
  case OPT_TIME: o->time_phases = true; return -1;
  case OPT_VERBOSE: o->verbose = true; return -1;
  case OPT_WERROR: o->werror = true; return -1;
  case OPT_NO_WARNINGS: o->no_warnings = true; return -1;
  case OPT_ERROR_LIMIT: {
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 0 || n > 1000000) return usage_error("invalid error limit '%s'", v);
    o->error_limit = (uint32_t)n;
    return -1;
  }
  default: return -1;
  }
}

static int take_operand(void *ctx, const char *v) {
  Options *o = ctx;
  if (o->noperands >= MAX_OPERANDS) return usage_error("too many operands (limit is %d)", MAX_OPERANDS);
  o->operands[o->noperands++] = v;
  return -1;
}

/* Returns -1 to continue, or an exit code. */
static int parse_options(int argc, char **argv, Options *o) {
  *o = (Options){.error_limit = DEFAULT_ERROR_LIMIT};
  orion_compile_args_init(&o->args);
  OrionCompileOptions *c = &o->args.options;
  /* The test suite verifies after every pass on every compile it makes. */
  const char *ve = getenv("ORION_VERIFY_EACH");
  c->passes.verify_each = ve && *ve && strcmp(ve, "0") != 0;
  int rc = cli_parse(&orionc_spec, argc, argv, take_option, take_operand, o);
  if (rc >= 0) return rc;
  if (o->clean) return -1;
  if (o->noperands > 1) return usage_error("more than one input file ('%s')", o->operands[1]);
  o->input = o->noperands ? o->operands[0] : NULL;
  o->noperands = 0;
  if (o->list_passes) return -1;
  {
    Diag d;
    diag_init(&d, NULL);
    char err[512];
    if (!orion_compile_options_resolve(c, &d, err, sizeof err)) return err[0] ? usage_error("%s", err) : EXIT_USAGE;
  }
  c->report_notes = o->verbose;
  if (!o->input) return usage_error("%s", "no input file");
  if (o->output && c->emit == ORION_EMIT_NONE) return usage_error("%s", "-o and --emit=none contradict each other");
  if (o->output && !strcmp(o->output, "-") && c->emit == ORION_EMIT_PACKAGE)
    return usage_error("%s", "-o - writes text to standard output; a package is a directory (give -o DIR, or --emit)");
  if ((c->inline_calls || c->legalize) && c->emit != ORION_EMIT_OIR)
    return usage_error("%s", "--inline and --legalize go with --emit=oir");
  if (o->json && !c->summary) return usage_error("%s", "--json goes with --summary");
  if (c->train && o->train_contract)
    return usage_error("%s", "--train makes the training contract; --train-contract gives one: use one of them");
  if (!c->train && (c->autodiff.ntrainable || c->autodiff.nfrozen))
    return usage_error("%s", "--trainable and --frozen go with --train");
  if (!c->train && o->args.gather_grad) return usage_error("%s goes with --train", o->args.gather_grad);
  c->summary_json = o->json;
  if (!c->check_weights && (c->emit == ORION_EMIT_PACKAGE || c->emit == ORION_EMIT_MIL))
    return usage_error("%s", "--no-weight-check cannot be used when weights are written");
  if (c->emit == ORION_EMIT_PACKAGE && !o->output && !strcmp(o->input, "-"))
    return usage_error("%s", "reading standard input needs -o PATH");
  return -1;
}

static void free_spelt(Options *o) {
  for (uint32_t i = 0; i < o->nspelt; i++) free(o->spelt[i]);
  o->nspelt = 0;
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

/* -v and --time: what the library reports, on stderr. */
static void print_progress(void *ctx, const char *message) {
  fprintf(stderr, "orionc: %s\n", message);
}

static void print_phase(void *ctx, const char *name, double ms) {
  fprintf(stderr, "orionc: %-16s %9.2f ms\n", name, ms);
}

static void print_timing(void *ctx, const char *detail) {
  fprintf(stderr, "orionc:   %s\n", detail);
}

/* What a clean-up removed, one line each: on stdout for --clean (it is the
 * result), on stderr before a compile (a remark beside its own output). */
static void say_removed(void *ctx, const char *path, long maker_pid) {
  fprintf(ctx, "orionc: removed %s (left by process %ld, which is gone)\n", path, maker_pid);
}

/* orionc --clean: the leftovers in each directory, then in the compile cache. */
static int clean(const Options *o) {
  const char *dirs[MAX_OPERANDS + 2];
  uint32_t n = 0;
  char *out_dir = NULL, *cache_dir = NULL;
  for (uint32_t i = 0; i < o->noperands; i++) dirs[n++] = o->operands[i];
  if (!n && o->output) {
    out_dir = xstrdup(o->output);
    size_t len = strlen(out_dir);
    while (len > 1 && out_dir[len - 1] == '/') out_dir[--len] = 0;
    char *slash = strrchr(out_dir, '/');
    if (slash) *(slash == out_dir ? slash + 1 : slash) = 0;
    dirs[n++] = slash ? out_dir : ".";
  }
  if (!n) dirs[n++] = ".";
  if (!o->no_cache) dirs[n++] = cache_dir = o->cache_dir ? xstrdup(o->cache_dir) : compile_cache_default_dir();
  LeftoverReport report = {.fn = say_removed, .ctx = stdout};
  uint32_t removed = 0;
  for (uint32_t i = 0; i < n; i++) removed += leftovers_clean(dirs[i], NULL, &report);
  if (!removed) {
    printf("orionc: nothing to remove in");
    for (uint32_t i = 0; i < n; i++) printf("%s %s", i ? (i + 1 == n ? " or" : ",") : "", dirs[i]);
    printf("\n");
  }
  free(out_dir);
  free(cache_dir);
  return EXIT_OK;
}

int main(int argc, char **argv) {
  /* A file size limit (ulimit -f) then fails the write with EFBIG, which is
   * reported and cleaned up, instead of killing the compiler mid-package. */
  signal(SIGXFSZ, SIG_IGN);
  temp_cleanup_on_signals(); /* SIGINT, SIGTERM: the temporary package goes first */
  tool_memory_init("orionc", NULL, NULL); /* out of memory: the same removal as a signal's */
  Options o;
  int rc = parse_options(argc, argv, &o);
  if (rc < 0 && o.clean) rc = clean(&o);
  if (rc >= 0) {
    orion_compile_args_free(&o.args);
    free_spelt(&o);
    return rc;
  }
  OrionCompileOptions *c = &o.args.options;
  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  d.warnings_as_errors = o.werror;
  d.suppress_warnings = o.no_warnings;
  d.error_limit = o.error_limit;
  c->hooks = (OrionCompileHooks){.progress = o.verbose ? print_progress : NULL,
                                 .phase = o.time_phases ? print_phase : NULL,
                                 .timing = o.time_phases ? print_timing : NULL};
  char *package_path = NULL, *cache_dir = NULL;
  PkgTraining *training = NULL;
  OrionCompileResult result = {0};
  rc = EXIT_USAGE;
  if (!orion_compile_load_plugins(c->plugins, c->nplugins, &d)) goto done;
  if (o.train_contract) {
    rc = EXIT_INPUT;
    if (!orion_train_contract_read_json(o.train_contract, &training, &d)) goto done;
    c->training = training;
  }
  if (o.list_passes) {
    for (uint32_t i = 0; i < pass_count(); i++) printf("%-20s %s\n", pass_at(i)->name, pass_at(i)->description);
    printf("\npipelines:\n  -O0  %s\n  -O1  %s\n", passes_pipeline("O0"), passes_pipeline("O1"));
    rc = EXIT_OK;
    goto done;
  }
  if (c->emit == ORION_EMIT_PACKAGE) {
    package_path = o.output ? xstrdup(o.output) : default_package_path(o.input);
    cache_dir = o.no_cache ? NULL : o.cache_dir ? xstrdup(o.cache_dir) : compile_cache_default_dir();
    c->cache_dir = cache_dir;
    /* What a killed compile into the same place left (orion/temporaries.h). */
    leftovers_clean_beside(package_path, &(LeftoverReport){.fn = say_removed, .ctx = stderr});
    const char *max = getenv("ORION_CACHE_MAX_BYTES");
    if (max && *max) c->cache_max_bytes = strtoull(max, NULL, 10);
  }
  bool ok = orion_compile_file(o.input, c, package_path, &result, &d);
  rc = result.status == ORION_COMPILE_OPTIONS_ERROR ? EXIT_USAGE : EXIT_INPUT;
  if (!ok) goto done;
  if (c->emit == ORION_EMIT_OIR || c->emit == ORION_EMIT_MIL || c->emit == ORION_EMIT_DOT) {
    const char *err;
    const StrBuf *text = &result.text;
    if (o.output && strcmp(o.output, "-")) {
      leftovers_clean_beside(o.output, &(LeftoverReport){.fn = say_removed, .ctx = stderr}); /* PATH.tmp.XXXXXX */
      if (!write_file_atomic(o.output, text->data ? text->data : "", text->len, &err)) {
        fprintf(stderr, "orionc: error: cannot write '%s': %s\n", o.output, err);
        goto done;
      }
    } else {
      fwrite(text->data ? text->data : "", 1, text->len, stdout);
    }
  }
  if (result.summary.len) fwrite(result.summary.data, 1, result.summary.len, stdout);
  rc = EXIT_OK;
done:
  orion_compile_result_free(&result);
  orion_compile_args_free(&o.args);
  free_spelt(&o);
  free(package_path);
  free(cache_dir);
  package_training_free(training);
  srcset_free(&sources);
  return rc;
}
