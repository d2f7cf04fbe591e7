/*
 * orionc: the orion compiler driver. Turns the command line into
 * OrionCompileOptions, calls the compile library (orion/compile.h) and
 * prints what it returns; no compiler logic lives here. Killed by SIGINT or
 * SIGTERM, it removes the package directory it was writing.
 *
 * Exit codes: 0 success, 1 errors in the input, 2 usage errors.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/cache.h"
#include "orion/compile.h"
#include "orion/pass_plugin.h"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

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

/* Returns -1 to continue, or an exit code. */
static int parse_options(int argc, char **argv, Options *o) {
  *o = (Options){.error_limit = DEFAULT_ERROR_LIMIT};
  orion_compile_args_init(&o->args);
  OrionCompileOptions *c = &o->args.options;
  /* The test suite verifies after every pass on every compile it makes. */
  const char *ve = getenv("ORION_VERIFY_EACH");
  c->passes.verify_each = ve && *ve && strcmp(ve, "0") != 0;
  bool only_files = false;
  char err[512];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_files || a[0] != '-' || !strcmp(a, "-")) {
      if (o->input) return usage_error("more than one input file ('%s')", a);
      o->input = a;
      continue;
    }
    OrionArgStatus st = orion_compile_args_parse(&o->args, a, err, sizeof err);
    if (st == ORION_ARG_INVALID) return usage_error("%s", err);
    if (st == ORION_ARG_TAKEN) continue;
    if (!strcmp(a, "--")) {
      only_files = true;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return EXIT_OK;
    } else if (!strcmp(a, "--version")) {
      printf("orionc %s\n", ORION_VERSION);
      return EXIT_OK;
    } else if (!strncmp(a, "--emit=", 7)) {
      static const char *const kinds[] = {"package", "oir", "mil", "none", "dot"};
      static const OrionCompileEmit emits[] = {ORION_EMIT_PACKAGE, ORION_EMIT_OIR, ORION_EMIT_MIL, ORION_EMIT_NONE,
                                               ORION_EMIT_DOT};
      o->emit_given = false;
      for (int k = 0; k < 5; k++)
        if (!strcmp(a + 7, kinds[k])) {
          c->emit = emits[k];
          o->emit_given = true;
        }
      if (!o->emit_given) return usage_error("unknown --emit kind '%s' (expected oir, mil, dot or none)", a + 7);
    } else if (!strcmp(a, "--chip")) {
      return usage_error("%s needs a value, e.g. --chip=m4", a);
    } else if (!strcmp(a, "--emit") || !strcmp(a, "--target")) {
      return usage_error("%s needs a value, e.g. %s", a, a[2] == 'e' ? "--emit=mil" : "--target=ios18");
    } else if (!strcmp(a, "-o")) {
      if (++i >= argc) return usage_error("%s needs a path", a);
      o->output = argv[i];
    } else if (!strcmp(a, "--list-passes")) {
      o->list_passes = true;
    } else if (!strncmp(a, "--print-after=", 14)) {
      c->passes.print_after = a + 14;
    } else if (!strcmp(a, "--print-after-all")) {
      c->passes.print_after = "all";
    } else if (!strcmp(a, "--verify-each")) {
      c->passes.verify_each = true;
    } else if (!strcmp(a, "--time-passes")) {
      c->passes.time_passes = true;
    } else if (!strcmp(a, "--inline")) {
      c->inline_calls = true;
    } else if (!strcmp(a, "--legalize")) {
      c->legalize = true;
    } else if (!strcmp(a, "--summary")) {
      c->summary = true;
    } else if (!strcmp(a, "--no-weight-check")) {
      c->check_weights = false;
    } else if (!strcmp(a, "--no-cache")) {
      o->no_cache = true;
    } else if (!strncmp(a, "--cache-dir=", 12)) {
      if (!a[12]) return usage_error("%s needs a directory", a);
      o->cache_dir = a + 12;
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
  {
    Diag d;
    diag_init(&d, NULL);
    if (!orion_compile_options_resolve(c, &d, err, sizeof err)) return err[0] ? usage_error("%s", err) : EXIT_USAGE;
  }
  c->report_notes = o->verbose;
  if (!o->input) return usage_error("%s", "no input file");
  if (o->output && c->emit == ORION_EMIT_NONE) return usage_error("%s", "-o and --emit=none contradict each other");
  if ((c->inline_calls || c->legalize) && c->emit != ORION_EMIT_OIR)
    return usage_error("%s", "--inline and --legalize go with --emit=oir");
  if (!c->check_weights && (c->emit == ORION_EMIT_PACKAGE || c->emit == ORION_EMIT_MIL))
    return usage_error("%s", "--no-weight-check cannot be used when weights are written");
  if (c->emit == ORION_EMIT_PACKAGE && !o->output && !strcmp(o->input, "-"))
    return usage_error("%s", "reading standard input needs -o PATH");
  return -1;
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

/* The temporary package directory being written, for removal on SIGINT or
 * SIGTERM: the library reports it through its temp_dir hook. */
typedef struct Interrupt {
  pthread_mutex_t lock;
  char *temp_dir; /* NULL when there is none */
  sigset_t signals;
} Interrupt;

static void track_temp_dir(void *ctx, const char *path) {
  Interrupt *in = ctx;
  pthread_mutex_lock(&in->lock);
  free(in->temp_dir);
  in->temp_dir = path ? xstrdup(path) : NULL;
  pthread_mutex_unlock(&in->lock);
}

/* Waits for the signal, removes the temporary directory, then ends the
 * process by the same signal (so the shell sees 130 or 143, as before).
 * The lock stays held: the compile cannot report a new directory after. */
static void *await_interrupt(void *ctx) {
  Interrupt *in = ctx;
  int sig;
  if (sigwait(&in->signals, &sig) != 0) return NULL;
  pthread_mutex_lock(&in->lock);
  orion_compile_cleanup(in->temp_dir);
  signal(sig, SIG_DFL);
  pthread_sigmask(SIG_UNBLOCK, &in->signals, NULL);
  raise(sig);
  _exit(128 + sig); /* not reached */
}

/* Blocks SIGINT and SIGTERM in every thread (the library's included, which
 * inherit the mask) and hands them to one that cleans up. A signal ignored
 * from the start (SIGINT in a shell's background job) stays ignored. */
static void catch_interrupts(Interrupt *in) {
  *in = (Interrupt){.lock = PTHREAD_MUTEX_INITIALIZER};
  sigemptyset(&in->signals);
  static const int caught[] = {SIGINT, SIGTERM};
  bool any = false;
  for (size_t i = 0; i < sizeof caught / sizeof *caught; i++) {
    struct sigaction now;
    if (sigaction(caught[i], NULL, &now) == 0 && now.sa_handler == SIG_IGN) continue;
    sigaddset(&in->signals, caught[i]);
    any = true;
  }
  pthread_t t;
  if (!any) return;
  if (pthread_sigmask(SIG_BLOCK, &in->signals, NULL) == 0 && pthread_create(&t, NULL, await_interrupt, in) == 0)
    pthread_detach(t);
  else
    pthread_sigmask(SIG_UNBLOCK, &in->signals, NULL); /* then a signal kills as it always did */
}

int main(int argc, char **argv) {
  /* A file size limit (ulimit -f) then fails the write with EFBIG, which is
   * reported and cleaned up, instead of killing the compiler mid-package. */
  signal(SIGXFSZ, SIG_IGN);
  static Interrupt interrupt; /* the waiting thread may use it until the process ends */
  catch_interrupts(&interrupt);
  Options o;
  int rc = parse_options(argc, argv, &o);
  if (rc >= 0) {
    orion_compile_args_free(&o.args);
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
                                 .timing = o.time_phases ? print_timing : NULL,
                                 .temp_dir = track_temp_dir, .ctx = &interrupt};
  char *package_path = NULL, *cache_dir = NULL;
  OrionCompileResult result = {0};
  rc = EXIT_USAGE;
  if (!orion_compile_load_plugins(c->plugins, c->nplugins, &d)) goto done;
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
    const char *max = getenv("ORION_CACHE_MAX_BYTES");
    if (max && *max) c->cache_max_bytes = strtoull(max, NULL, 10);
  }
  bool ok = orion_compile_file(o.input, c, package_path, &result, &d);
  rc = result.status == ORION_COMPILE_OPTIONS_ERROR ? EXIT_USAGE : EXIT_INPUT;
  if (!ok) goto done;
  if (c->emit == ORION_EMIT_OIR || c->emit == ORION_EMIT_MIL || c->emit == ORION_EMIT_DOT) {
    const char *err;
    const StrBuf *text = &result.text;
    if (o.output) {
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
  track_temp_dir(&interrupt, NULL);
  orion_compile_args_free(&o.args);
  free(package_path);
  free(cache_dir);
  srcset_free(&sources);
  return rc;
}
