/*
 * orion-run: runs a compiled program (a .anepkg, or a directory holding a
 * model.mil) on a backend of the registry (orion/backend.h; the CPU
 * reference backend by default): inputs from .npy files, outputs written as
 * NAME.npy. Parses options and calls the runtime library.
 *
 * Exit codes: 0 success, 1 the program or its inputs are wrong, 2 usage, 3 out of memory.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_options.h"
#include "tool_memory.h"
#include "orion-run.h"
#include "orion/ane_check.h"
#include "orion/backend.h"
#include "orion/lora_names.h"
#include "orion/npy.h"
#include "orion/pkg_paths.h"
#include "orion/runtime.h"
#include "orion/temporaries.h"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

#define MAX_BINDINGS 64

typedef struct Options {
  const char *program;
  const char *function;
  const char *output_dir;
  const char *adapter;
  const char *backend;
  OrionBackendOptions backend_options; /* the ane backend's limits */
  const char *input_names[MAX_BINDINGS];
  const char *input_files[MAX_BINDINGS];
  uint32_t ninputs;
  OrionNumerics numerics;
  uint32_t repeat;
  bool verify;
  bool verbose;
  bool simulate; /* report what would fail on the ANE before running */
  bool check_finite;
  bool profile;
  bool json; /* the report as one JSON object on stdout */
} Options;

enum {
  OPT_INPUT = 1, OPT_OUTPUT_DIR, OPT_ADAPTER, OPT_FUNCTION, OPT_NUMERICS, OPT_BACKEND, OPT_REPEAT, OPT_CHECK_FINITE,
  OPT_PROFILE, OPT_JSON, OPT_NO_VERIFY, OPT_NO_ANE_CHECKS, OPT_COMPILE_BUDGET, OPT_RESIDENT_CAP, OPT_VERBOSE, OPT_HELP,
  OPT_VERSION,
};

static const CliOption run_options[] = {
    {OPT_INPUT, 0, "input", CLI_VALUE, 0, " NAME=FILE.npy",
     "an input, by its .oir name (repeat for each input);\n"
     "fp32 data is accepted for fp16 inputs and converted",
     "NAME=FILE.npy"},
    {OPT_OUTPUT_DIR, 0, "output-dir", CLI_VALUE, 0, " DIR",
     "where outputs are written as NAME.npy, made if missing (default:\n"
     "PROGRAM.out in the current directory, PROGRAM the program's\n"
     "directory name without .anepkg; never the current directory itself)",
     NULL},
    {OPT_ADAPTER, 0, "adapter", CLI_VALUE, 0, " FILE",
     "a LoRA adapter (safetensors, PEFT names: MODULE.lora_A/B)\n"
     "for a program compiled with orionc --lora; LoRA inputs it\n"
     "does not cover, or all without --adapter, get zeros",
     "a file"},
    {OPT_FUNCTION, 0, "function", CLI_VALUE, 0, " NAME", "the function to run (default: the first)", NULL},
    {OPT_NUMERICS, 0, "numerics", CLI_VALUE, CLI_WORD, "=MODE",
     "ane (default: fp16 storage, each op's result rounded\n"
     "to fp16, overflow to inf) or fp32",
     "a value, e.g. --numerics=fp32"},
    {OPT_BACKEND, 0, "backend", CLI_VALUE, CLI_WORD, " B",
     "cpu (default: the CPU reference backend), check (the CPU\n"
     "backend run fused and one op at a time, outputs required\n"
     "to be bit-identical) or ane (macOS only)",
     "a backend name"},
    {OPT_COMPILE_BUDGET, 0, "ane-compile-budget", CLI_VALUE, 0, " N",
     "the ane backend's compiles per process (default:\n"
     "$ORION_ANE_COMPILE_BUDGET, else the constraint table's)",
     "a count from 1 to 1000000"},
    {OPT_RESIDENT_CAP, 0, "ane-resident-cap", CLI_VALUE, 0, " N",
     "the ane backend's loaded programs at once (default:\n"
     "$ORION_ANE_RESIDENT_CAP, else the constraint table's)",
     "a count from 1 to 1000000"},
    {OPT_REPEAT, 0, "repeat", CLI_VALUE, 0, " N", "run N times and print the time per run",
     "a count from 1 to 1000000"},
    {OPT_CHECK_FINITE, 0, "check-finite", CLI_NO_VALUE, 0, NULL,
     "stop at the first inf or NaN an op produces (or an input\n"
     "holds): an error naming the op, its MIL statement, the\n"
     "value and the element (ane numerics show fp16 overflow)",
     NULL},
    {OPT_PROFILE, 0, "profile", CLI_NO_VALUE, 0, NULL,
     "time every op; after the runs, print the time per op\n"
     "kind and the 10 slowest statements to stderr (use\n"
     "--repeat N for stable figures)",
     NULL},
    {OPT_JSON, 0, "json", CLI_NO_VALUE, 0, NULL,
     "print the run's report (timings, the profile, the outputs\n"
     "written) as one JSON object on standard output",
     NULL},
    {OPT_NO_VERIFY, 0, "no-verify", CLI_NO_VALUE, 0, NULL,
     "do not verify the package's checksums (nor warn that a model directory has none)", NULL},
    {OPT_NO_ANE_CHECKS, 0, "no-ane-checks", CLI_NO_VALUE, 0, NULL,
     "run even if the program would fail on the ANE (by default\n"
     "ops it rejects, unequal or too small I/O surfaces and\n"
     "binding-order problems are errors naming the constraint;\n"
     "on the ane backend, nor are the statements its device\n"
     "refuses moved to the CPU)",
     NULL},
    {OPT_VERBOSE, 'v', NULL, CLI_NO_VALUE, 0, NULL, "print progress", NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
    {OPT_VERSION, 0, "version", CLI_NO_VALUE, 0, NULL, "show the version", NULL},
};

static const CliSpec run_spec = {
    .program = "orion-run",
    .usage = "usage: orion-run [options] PROGRAM --input NAME=FILE.npy ...\n"
             "       orion-run patch PACKAGE --weights FILE.safetensors ...  (see orion-run patch --help)\n"
             "       orion-run plot LOG.jsonl -o FILE.svg  (see orion-run plot --help)\n"
             "       orion-run train PACKAGE --data FILE --steps N --lr LR ...  (see orion-run train --help)\n"
             "       orion-run generate PACKAGE --tokenizer PATH --prompt TEXT ...  (see orion-run generate --help)\n"
             "       orion-run probe [--backend ane] [--chip NAME] [-o FILE]  (see orion-run probe --help)\n",
    .description = "Runs a compiled orion program (a .anepkg package, or a directory holding a\n"
                   "model.mil and its weights) on a backend (by default the CPU reference backend).\n",
    .options = run_options,
    .noptions = sizeof run_options / sizeof *run_options,
    .epilogue = "exit status: 0 success, 1 errors in the program or its inputs, 2 usage error, 3 out of memory\n",
    .help_column = 25,
};

#define usage_error(...) cli_usage_error("orion-run", __VA_ARGS__)

int orion_run_take_ane_limit(const char *program, const char *option, const char *v, uint32_t *out) {
  char *end = (char *)(uintptr_t)v;
  errno = 0;
  unsigned long n = v[0] >= '0' && v[0] <= '9' ? strtoul(v, &end, 10) : 0;
  if (!n || *end || errno || n > 1000000)
    return cli_usage_error(program, "%s needs a count from 1 to 1000000 (not '%s')", option, v);
  *out = (uint32_t)n;
  return -1;
}

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  (void)spelling;
  Options *o = ctx;
  switch (id) {
  case OPT_HELP: cli_print_help(&run_spec, stdout); return EXIT_OK;
  case OPT_VERSION: printf("orion-run %s\n", ORION_VERSION); return EXIT_OK;
  case OPT_INPUT: {
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1]) return usage_error("'%s' is not NAME=FILE.npy", v);
    if (o->ninputs >= MAX_BINDINGS) return usage_error("too many inputs (limit is %d)", MAX_BINDINGS);
    char *name = xstrdup(v);
    name[eq - v] = 0;
    o->input_names[o->ninputs] = name;
    o->input_files[o->ninputs++] = eq + 1;
    return -1;
  }
  case OPT_ADAPTER:
    if (o->adapter) return usage_error("%s", "only one --adapter");
    o->adapter = v;
    return -1;
  case OPT_OUTPUT_DIR: o->output_dir = v; return -1;
  case OPT_FUNCTION: o->function = v; return -1;
  case OPT_NUMERICS:
    if (!strcmp(v, "ane")) o->numerics = ORION_NUMERICS_ANE;
    else if (!strcmp(v, "fp32")) o->numerics = ORION_NUMERICS_FP32;
    else return usage_error("unknown numerics '%s' (expected ane or fp32)", v);
    return -1;
  case OPT_BACKEND: o->backend = v; return -1;
  case OPT_COMPILE_BUDGET:
    return orion_run_take_ane_limit("orion-run", "--ane-compile-budget", v, &o->backend_options.compile_budget);
  case OPT_RESIDENT_CAP:
    return orion_run_take_ane_limit("orion-run", "--ane-resident-cap", v, &o->backend_options.resident_cap);
  case OPT_REPEAT: {
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 1 || n > 1000000) return usage_error("--repeat needs a count from 1 to 1000000 (not '%s')", v);
    o->repeat = (uint32_t)n;
    return -1;
  }
  case OPT_CHECK_FINITE: o->check_finite = true; return -1;
  case OPT_PROFILE: o->profile = true; return -1;
  case OPT_JSON: o->json = true; return -1;
  case OPT_NO_ANE_CHECKS: o->simulate = false; return -1;
  case OPT_NO_VERIFY: o->verify = false; return -1;
  case OPT_VERBOSE: o->verbose = true; return -1;
  default: return -1;
  }
}

static int take_operand(void *ctx, const char *v) {
  return cli_one_operand(&run_spec, "program", &((Options *)ctx)->program, v);
}

/* Returns -1 to continue, or an exit code. */
static int parse_options(int argc, char **argv, Options *o) {
  *o = (Options){.output_dir = NULL, .backend = "cpu", .numerics = ORION_NUMERICS_ANE, .repeat = 1, .verify = true,
                 .simulate = true};
  int rc = cli_parse(&run_spec, argc, argv, take_option, take_operand, o);
  if (rc < 0 && !o->program) rc = usage_error("%s", "no program");
  return rc;
}

static void put_shape(StrBuf *sb, OrionDType dt, uint32_t rank, const int64_t *dims) {
  sb_printf(sb, "%s[", orion_dtype_name(dt));
  for (uint32_t i = 0; i < rank; i++) sb_printf(sb, "%s%lld", i ? "," : "", (long long)dims[i]);
  sb_putc(sb, ']');
}

/* Loads input `info` from its .npy, converting fp32 data for fp16 inputs. */
static bool load_input(const OrionTensorInfo *info, const char *file, OrionTensor *t, Diag *d) {
  NpyArray a;
  if (!npy_read(file, &a, d)) return false;
  OrionDType want = info->dtype;
  bool shape_ok = a.rank == info->rank;
  for (uint32_t i = 0; shape_ok && i < a.rank; i++) shape_ok = a.dims[i] == info->dims[i];
  if (!shape_ok) {
    StrBuf got, exp;
    sb_init(&got);
    sb_init(&exp);
    put_shape(&got, a.dtype, a.rank, a.dims);
    put_shape(&exp, want, info->rank, info->dims);
    diag_error(d, (SrcSpan){0}, "input '%s' ('%s') is %s, but the program takes %s", info->name, file, got.data,
               exp.data);
    sb_free(&got);
    sb_free(&exp);
    npy_free(&a);
    return false;
  }
  if (a.dtype != want) {
    if (!(a.dtype == ORION_DT_FP32 && want == ORION_DT_FP16)) {
      diag_error(d, (SrcSpan){0}, "input '%s' ('%s') holds %s data, but the program takes %s", info->name, file,
                 orion_dtype_name(a.dtype), orion_dtype_name(want));
      npy_free(&a);
      return false;
    }
    NpyArray c;
    bool ok = npy_convert(&a, want, &c, d);
    npy_free(&a);
    if (!ok) return false;
    a = c;
  }
  *t = (OrionTensor){.dtype = info->dtype, .rank = a.rank, .data = a.data};
  memcpy(t->dims, a.dims, sizeof(int64_t) * a.rank);
  return true;
}

/* The ANE's failure modes (orion/ane_check.h), checked before a run so that
 * what runs here does not fail on the device for a known reason. A backend
 * that runs on the CPU what its device refuses statement by statement (the
 * ane backend) is refused only the rest, with a remark per statement moved. */
static bool check_ane(const OrionBackend *b, const OrionProgram *p, uint32_t fn, Diag *d) {
  OrionAneCheckOptions check = {.cpu_placement = orion_backend_caps(b).places_refused_on_cpu};
  if (orion_ane_check(p, fn, &check, d)) return true;
  diag_note(d, (SrcSpan){0}, "--no-ane-checks runs it anyway on the CPU");
  return false;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* PROGRAM.out for a program at .../PROGRAM(.anepkg), in the current directory. */
static char *default_output_dir_of(const char *program) {
  size_t n = strlen(program);
  while (n > 1 && program[n - 1] == '/') n--;
  size_t start = n;
  while (start > 0 && program[start - 1] != '/') start--;
  size_t len = n - start;
  if (len > 7 && !strncmp(program + n - 7, ".anepkg", 7)) len -= 7;
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "%.*s.out", (int)len, program + start);
  return sb.data;
}

/* Makes dir and its missing parents; an existing directory is fine. *made
 * is the outermost directory it made (NULL: none), for removal if the
 * outputs cannot all be written; registered as a temporary until then, so
 * that a signal or running out of memory removes it too (orion/temporaries.h). */
static bool make_output_dir(const char *dir, char **made, Diag *d) {
  char *path = xstrdup(dir);
  bool ok = true;
  *made = NULL;
  for (char *p = path + 1; ok; p++) {
    bool end = *p == 0;
    if (*p != '/' && !end) continue;
    *p = 0;
    struct stat st;
    if (stat(path, &st) != 0) {
      /* Copied and registered before the mkdir: running out of memory
       * right after it must still find the directory to remove. */
      bool outermost = !*made;
      if (outermost) {
        *made = xstrdup(path);
        temp_track(*made);
      }
      if (mkdir(path, 0777) != 0) {
        int err = errno;
        if (outermost) { /* not ours after all (or not made) */
          temp_untrack(*made);
          free(*made);
          *made = NULL;
        }
        if (err != EEXIST) {
          diag_error(d, (SrcSpan){0}, "cannot make the output directory '%s': %s", path, strerror(err));
          ok = false;
        }
      }
    } else if (!S_ISDIR(st.st_mode)) {
      diag_error(d, (SrcSpan){0}, "the output directory '%s' is not a directory ('%s' is a file)", dir, path);
      ok = false;
    }
    if (end) break;
    *p = '/';
  }
  free(path);
  return ok;
}

/* No output may replace a file orion-run reads (an --input or the
 * --adapter): checked for every output before any is written. */
static bool outputs_spare_inputs(const Options *o, const char *const *names, uint32_t n, Diag *d) {
  bool ok = true;
  for (uint32_t i = 0; i < n; i++) {
    StrBuf path;
    sb_init(&path);
    sb_printf(&path, "%s/%s.npy", o->output_dir, names[i]);
    struct stat out;
    if (stat(path.data, &out) == 0)
      for (uint32_t k = 0; k <= o->ninputs; k++) {
        const char *in = k < o->ninputs ? o->input_files[k] : o->adapter;
        struct stat st;
        if (in && stat(in, &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino) {
          diag_error(d, (SrcSpan){0}, "output '%s' would overwrite '%s', which this run reads; give another --output-dir",
                     names[i], in);
          ok = false;
          break;
        }
      }
    sb_free(&path);
  }
  return ok;
}

/* A temporary output file a killed run left (orion/temporaries.h). */
static void say_leftover(void *ctx, const char *path, long maker_pid) {
  (void)ctx;
  fprintf(stderr, "orion-run: removed %s (left by process %ld, which is gone)\n", path, maker_pid);
}

int main(int argc, char **argv) {
  /* Past a file size limit (ulimit -f) writes fail with EFBIG and are
   * reported; the default action would kill the process mid-write. */
  signal(SIGXFSZ, SIG_IGN);
  /* SIGINT, SIGTERM: no partial output, patch temporary or verify copy stays. */
  temp_cleanup_on_signals();
  tool_memory_init("orion-run", NULL, NULL); /* out of memory: the same removal as a signal's */
  if (argc > 1 && !strcmp(argv[1], "patch")) return orion_run_patch(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "plot")) return orion_run_plot(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "train")) return orion_run_train(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "generate")) return orion_run_generate(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "probe")) return orion_run_probe(argc - 1, argv + 1);
  Options o;
  int rc = parse_options(argc, argv, &o);
  if (rc >= 0) { /* a usage error (or --help) after some --input: their names are ours */
    for (uint32_t k = 0; k < o.ninputs; k++) free((char *)(uintptr_t)o.input_names[k]);
    return rc;
  }

  SourceSet sources;
  srcset_init(&sources);
  Diag d;
  diag_init(&d, &sources);
  d.program = "orion-run";
  rc = EXIT_INPUT;
  OrionProgram *p = NULL;
  OrionBackend *backend = NULL;
  OrionExec *exec = NULL;
  OrionTensor inputs[MAX_BINDINGS] = {{0}}, outputs[MAX_BINDINGS] = {{0}};
  uint32_t nin = 0, nout = 0;
  const char *output_names[MAX_BINDINGS] = {NULL};
  char *output_files[MAX_BINDINGS] = {NULL};
  char *default_output_dir = NULL, *made_dir = NULL;
  Arena out_arena; /* names of joined outputs */
  arena_init(&out_arena);

  backend = orion_backend_open(o.backend, &o.backend_options, &d);
  if (!backend) {
    rc = EXIT_USAGE; /* a backend this build does not have is a wrong command line */
    goto done;
  }
  if (o.verbose) {
    char about[2048];
    bool has = orion_backend_describe(backend, about, sizeof about);
    fprintf(stderr, "orion-run: backend %s%s%s\n", orion_backend_name(backend), has ? ": " : "", has ? about : "");
    if (orion_backend_device(backend, about, sizeof about))
      fprintf(stderr, "orion-run: backend %s device: %s\n", orion_backend_name(backend), about);
  }
  OrionOpenOptions oo = {.verify_checksums = o.verify};
  if (o.verbose) fprintf(stderr, "orion-run: opening %s\n", o.program);
  p = orion_open(o.program, &oo, &d);
  if (!p) goto done;
  /* Not silently unverified: a package's checksums were checked; a bare
   * model directory has none to check. */
  if (o.verify && pkg_dir_kind(o.program) == PKG_DIR_BARE)
    diag_warning(&d, (SrcSpan){0}, "'%s' is a model directory without a manifest: nothing in it could be verified "
                 "(--no-verify runs it without this warning)", o.program);
  uint32_t fn = 0;
  if (o.function) {
    fn = orion_function_find(p, o.function);
    if (fn == UINT32_MAX) {
      StrBuf names;
      sb_init(&names);
      for (uint32_t i = 0; i < orion_function_count(p); i++)
        sb_printf(&names, "%s'%s'", i ? ", " : "", orion_function_name(p, i));
      diag_error(&d, (SrcSpan){0}, "'%s' has no function '%s' (it has %s)", o.program, o.function, names.data);
      sb_free(&names);
      goto done;
    }
  }
  nin = orion_input_count(p, fn);
  nout = orion_output_count(p, fn);
  if (nin > MAX_BINDINGS || nout > MAX_BINDINGS) {
    diag_error(&d, (SrcSpan){0}, "the program has more than %d inputs or outputs", MAX_BINDINGS);
    goto done;
  }
  /* Every input given once, no input the program lacks. */
  bool ok = true;
  for (uint32_t k = 0; k < o.ninputs; k++) {
    bool known = false;
    for (uint32_t i = 0; i < nin; i++) known |= !strcmp(orion_input(p, fn, i)->name, o.input_names[k]);
    if (!known) {
      diag_error(&d, (SrcSpan){0}, "the program has no input '%s'", o.input_names[k]);
      ok = false;
    }
    for (uint32_t j = 0; j < k; j++)
      if (!strcmp(o.input_names[j], o.input_names[k])) {
        diag_error(&d, (SrcSpan){0}, "input '%s' is given twice", o.input_names[k]);
        ok = false;
      }
  }
  bool bound[MAX_BINDINGS] = {false};
  if (o.adapter && !orion_run_bind_adapter(p, fn, o.adapter, inputs, bound, &d)) goto done;
  for (uint32_t i = 0; i < nin; i++) {
    const OrionTensorInfo *info = orion_input(p, fn, i);
    const char *file = NULL;
    if (bound[i]) {
      for (uint32_t k = 0; k < o.ninputs; k++)
        if (!strcmp(o.input_names[k], info->name)) {
          diag_error(&d, (SrcSpan){0}, "input '%s' is given both by --input and by the adapter", info->name);
          ok = false;
        }
      continue;
    }
    for (uint32_t k = 0; k < o.ninputs; k++)
      if (!strcmp(o.input_names[k], info->name)) file = o.input_files[k];
    if (!file && orion_lora_is_input(info->name)) continue; /* zeros below */
    if (!file) {
      StrBuf shape;
      sb_init(&shape);
      put_shape(&shape, info->dtype, info->rank, info->dims);
      diag_error(&d, (SrcSpan){0}, "missing input '%s' (%s): give --input %s=FILE.npy", info->name, shape.data,
                 info->name);
      sb_free(&shape);
      ok = false;
      continue;
    }
    if (ok && !load_input(info, file, &inputs[i], &d)) ok = false;
  }
  if (!ok) goto done;
  orion_run_zero_lora_inputs(p, fn, inputs, bound);

  if (o.simulate && !check_ane(backend, p, fn, &d)) goto done;
  /* Past --no-ane-checks the device judges: nothing is moved to the CPU for the table's rules either. */
  OrionPrepareOptions po = {.numerics = o.numerics, .check_finite = o.check_finite, .profile = o.profile,
                            .keep_refused_on_device = !o.simulate};
  exec = orion_backend_prepare(backend, p, fn, &po, &d);
  if (!exec) goto done;
  double best = 0, total = 0;
  for (uint32_t r = 0; r < o.repeat; r++) {
    double t0 = now_ms();
    /* The first run allocates the outputs; the others write into them. */
    if (!(r == 0 ? orion_exec_run_alloc(exec, inputs, outputs, &d) : orion_exec_run(exec, inputs, outputs, &d)))
      goto done;
    double ms = now_ms() - t0;
    total += ms;
    best = r == 0 || ms < best ? ms : best;
  }
  if (o.repeat > 1 && !o.json)
    fprintf(stderr, "orion-run: %u runs, %.3f ms per run on average, %.3f ms best\n", o.repeat, total / o.repeat, best);
  if (o.profile && !o.json) {
    uint32_t n = orion_exec_profile_count(exec);
    OrionStmtTime *entries = xcalloc(n + 1, sizeof *entries);
    for (uint32_t i = 0; i < n; i++) entries[i] = *orion_exec_profile_stmt(exec, i);
    orion_run_print_profile("profile", entries, n, &sources, o.repeat, NULL, NULL);
    free(entries);
  }

  if (!o.output_dir) o.output_dir = default_output_dir = default_output_dir_of(o.program);
  /* An output split-concat split into parts is written whole, under its own name. */
  const char *out_names[MAX_BINDINGS];
  for (uint32_t i = 0; i < nout; i++) out_names[i] = orion_output(p, fn, i)->name;
  if (!orion_run_join_output_groups(o.program, orion_function_name(p, fn), outputs, out_names, &nout, &out_arena, &d))
    goto done;
  /* The manifest reader refuses such names already; a bare directory's come
   * from its MIL. Checked before any file is written. */
  for (uint32_t i = 0; i < nout; i++) {
    char why[128];
    bool name_ok = pkg_name_ok(out_names[i], PKG_NAME_PLAIN, why, sizeof why);
    for (uint32_t j = 0; name_ok && j < i; j++)
      if (!strcmp(out_names[i], out_names[j])) name_ok = !snprintf(why, sizeof why, "is the name of another output too");
    if (!name_ok) {
      diag_error(&d, (SrcSpan){0}, "output '%s' cannot be written to '%s': its name %s", out_names[i], o.output_dir, why);
      goto done;
    }
  }
  if (!outputs_spare_inputs(&o, out_names, nout, &d)) goto done;
  /* Made only now, when nothing but the writes is left to fail; running out
   * of memory before they are all done removes what was made. */
  if (!make_output_dir(o.output_dir, &made_dir, &d)) goto done;
  for (uint32_t i = 0; i < nout; i++) {
    NpyArray a = {.dtype = outputs[i].dtype, .rank = outputs[i].rank, .data = outputs[i].data};
    memcpy(a.dims, outputs[i].dims, sizeof(int64_t) * outputs[i].rank);
    uint64_t n = 1;
    for (uint32_t k = 0; k < a.rank; k++) n *= (uint64_t)a.dims[k];
    a.nbytes = (size_t)(n * orion_dtype_size(a.dtype));
    StrBuf path;
    sb_init(&path);
    sb_printf(&path, "%s/%s.npy", o.output_dir, out_names[i]);
    leftovers_clean_beside(path.data, &(LeftoverReport){.fn = say_leftover}); /* of a killed run */
    bool wrote = npy_write(path.data, &a, &d);
    if (wrote && o.verbose) fprintf(stderr, "orion-run: wrote %s\n", path.data);
    output_names[i] = out_names[i];
    output_files[i] = path.data; /* freed below */
    if (!wrote) {
      if (made_dir) remove_tree(made_dir);
      goto done;
    }
  }
  if (made_dir) temp_untrack(made_dir); /* complete: the outputs' own now */
  if (o.json) {
    OrionRunReport report = {.program = o.program, .function = orion_function_name(p, fn),
                             .backend = orion_backend_name(backend), .numerics_fp32 = o.numerics == ORION_NUMERICS_FP32,
                             .runs = o.repeat, .total_ms = total, .best_ms = best, .outputs = outputs,
                             .output_names = output_names, .output_files = (const char *const *)output_files, .noutputs = nout,
                             .exec = o.profile ? exec : NULL, .sources = &sources};
    char *text = orion_run_report_json(&report);
    puts(text);
    free(text);
  }
  rc = EXIT_OK;
done:
  for (uint32_t i = 0; i < MAX_BINDINGS; i++) {
    free(inputs[i].data);
    orion_tensor_free(&outputs[i]);
  }
  for (uint32_t k = 0; k < o.ninputs; k++) free((char *)(uintptr_t)o.input_names[k]);
  for (uint32_t i = 0; i < MAX_BINDINGS; i++) free(output_files[i]);
  if (o.verbose && backend) { /* what the run used (the ane backend: its program cache and compile budget) */
    char used[2048];
    if (orion_backend_usage(backend, used, sizeof used))
      fprintf(stderr, "orion-run: backend %s used: %s\n", orion_backend_name(backend), used);
  }
  orion_exec_release(exec);
  orion_backend_close(backend);
  orion_close(p);
  arena_free(&out_arena);
  if (made_dir) temp_untrack(made_dir);
  free(made_dir);
  free(default_output_dir);
  srcset_free(&sources);
  return rc;
}
