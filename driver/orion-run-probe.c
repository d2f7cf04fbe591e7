/*
 * `orion-run probe`: runs the hardware probes (orion/probe.h) on a backend
 * (the ANE by default) and writes what they found as JSON in the
 * constraint table's format, atomically, with a summary on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __APPLE__
#include <sys/sysctl.h>
#endif

#include "cli_options.h"
#include "orion-run.h"
#include "orion/probe.h"

enum {
  OPT_BACKEND = 1, OPT_CHIP, OPT_TARGET, OPT_OUTPUT, OPT_ONLY, OPT_MAX_COMPILES, OPT_MAX_WORKING_SET, OPT_RUNS,
  OPT_PACE, OPT_JSON, OPT_VERBOSE, OPT_HELP,
};

/* Past this the add-constant programs' constants stop being exact in fp16. */
#define MAX_COMPILES_LIMIT 2048u
/* The largest per-process limit OrionBackendOptions takes (orion/backend.h). */
#define LIFTED_BACKEND_LIMIT 1000000u

static const CliOption probe_options[] = {
    {OPT_BACKEND, 0, "backend", CLI_VALUE, CLI_WORD, " B",
     "the backend to probe: ane (default, macOS only) or\n"
     "cpu (the CPU reference backend, which rejects nothing:\n"
     "a try of the probes, not a measurement of a device)",
     "a backend name"},
    {OPT_CHIP, 0, "chip", CLI_VALUE, CLI_WORD, " NAME",
     "the chip's name in the table, e.g. m3 (default: the\n"
     "chip macOS reports, else 'unknown')",
     "a chip name"},
    {OPT_TARGET, 0, "target", CLI_VALUE, CLI_WORD, " T",
     "the MIL dialect of the probe programs: ios16, ios17\n"
     "or ios18 (default: the chip's in the table, else\n"
     "ios18; the newest accepted if the device refuses it)",
     "a target"},
    {OPT_OUTPUT, 'o', "output", CLI_VALUE, 0, " FILE",
     "write the JSON to FILE (atomically: nothing is left\n"
     "on failure or interruption) instead of standard\n"
     "output (-: standard output)",
     "a file"},
    {OPT_ONLY, 0, "only", CLI_VALUE, 0, " LIST",
     "run only these probes, comma-separated: dialect,\n"
     "channels, surface, concat, gelu, sram, dispatch,\n"
     "compiles",
     "a list of probes"},
    {OPT_MAX_COMPILES, 0, "max-compiles", CLI_VALUE, 0, " N",
     "the compile-budget probe stops after N programs,\n"
     "1 to 2048 (default: 200)",
     "a count"},
    {OPT_MAX_WORKING_SET, 0, "max-working-set", CLI_VALUE, 0, " BYTES",
     "the SRAM probe's largest working set (default:\n"
     "100663296, 96 MiB)",
     "a number of bytes"},
    {OPT_RUNS, 0, "runs", CLI_VALUE, 0, " N",
     "timed runs of the dispatch probe, 1 to 100000\n"
     "(default: 100)",
     "a count"},
    {OPT_PACE, 0, "pace", CLI_VALUE, 0, " MS",
     "wait MS milliseconds after each rejected program,\n"
     "for the ANE's compile service to restart (default:\n"
     "15000 on the ane backend, 0 on the others)",
     "a number of milliseconds"},
    {OPT_JSON, 0, "json", CLI_NO_VALUE, 0, NULL, "print the JSON on standard output also with -o", NULL},
    {OPT_VERBOSE, 'v', NULL, CLI_NO_VALUE, 0, NULL, "report every program tried", NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
};

static const CliSpec probe_spec = {
    .program = "orion-run probe",
    .usage = "usage: orion-run probe [options] [--backend ane] [--chip NAME] [-o FILE]\n",
    .description = "Measures what the ANE constraint table's per-chip figures come from, with\n"
                   "small programs run on the backend: the newest MIL dialect accepted (the\n"
                   "other probes use it if the chosen one is refused), the largest channel\n"
                   "count, the smallest surface, whether concat and gelu are accepted, the SRAM\n"
                   "cliff, the dispatch overhead and the compile budget. A rejection is a\n"
                   "prepare or run that fails; its error is kept. The JSON holds the chip's\n"
                   "entry for constraints/ane_constraints.json and every measurement (see\n"
                   "docs/ane-backend.md, \"Validating on a Mac\"); progress and a summary go to\n"
                   "standard error.\n",
    .options = probe_options,
    .noptions = sizeof probe_options / sizeof *probe_options,
    .epilogue = "exit status: 0 the probes ran (rejections are results), 1 they could not run or write, 2 usage error\n",
    .help_column = 25,
};

#define usage_error(...) cli_usage_error("orion-run probe", __VA_ARGS__)

typedef struct ProbeArgs {
  const char *backend, *chip, *output;
  bool target_given, pace_given, json, verbose;
  OrionProbeOptions opt;
} ProbeArgs;

static int parse_only(ProbeArgs *a, const char *v) {
  char *list = xstrdup(v), *save = NULL;
  int rc = -1;
  for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
    OrionProbeKind k;
    if (!orion_probe_from_name(w, &k)) {
      rc = usage_error("unknown probe '%s' (expected dialect, channels, surface, concat, gelu, sram, dispatch or compiles)", w);
      break;
    }
    a->opt.only |= 1u << k;
  }
  if (rc < 0 && !a->opt.only) rc = usage_error("%s", "--only needs at least one probe");
  free(list);
  return rc;
}

static bool valid_chip_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 16) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9'))) return false;
  return true;
}

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  ProbeArgs *a = ctx;
  uint64_t n;
  switch (id) {
  case OPT_HELP: cli_print_help(&probe_spec, stdout); return 0;
  case OPT_BACKEND: a->backend = v; return -1;
  case OPT_CHIP:
    if (!valid_chip_name(v))
      return usage_error("chip name '%s' must be lowercase letters and digits (at most 16, e.g. m3)", v);
    a->chip = v;
    return -1;
  case OPT_TARGET:
    if (!mil_target_from_name(v, &a->opt.target))
      return usage_error("unknown target '%s' (expected ios16, ios17 or ios18)", v);
    a->target_given = true;
    return -1;
  case OPT_OUTPUT: a->output = v; return -1;
  case OPT_ONLY: return parse_only(a, v);
  case OPT_MAX_COMPILES:
    if (!cli_value_count(v, &n) || n < 1 || n > MAX_COMPILES_LIMIT)
      return usage_error("%s needs a count from 1 to %u (not '%s')", spelling, MAX_COMPILES_LIMIT, v);
    a->opt.max_compiles = (uint32_t)n;
    return -1;
  case OPT_MAX_WORKING_SET:
    if (!cli_value_count(v, &n) || n < 24576 || n > (uint64_t)1 << 34)
      return usage_error("%s needs a number of bytes from 24576 to 17179869184 (not '%s')", spelling, v);
    a->opt.max_working_set = n;
    return -1;
  case OPT_RUNS:
    if (!cli_value_count(v, &n) || n < 1 || n > 100000)
      return usage_error("%s needs a count from 1 to 100000 (not '%s')", spelling, v);
    a->opt.dispatch_runs = (uint32_t)n;
    return -1;
  case OPT_PACE:
    if (!cli_value_count(v, &n) || n > 600000)
      return usage_error("%s needs a number of milliseconds from 0 to 600000 (not '%s')", spelling, v);
    a->opt.pace_ms = (uint32_t)n;
    a->pace_given = true;
    return -1;
  case OPT_JSON: a->json = true; return -1;
  case OPT_VERBOSE: a->verbose = true; return -1;
  default: return -1;
  }
}

static int take_operand(void *ctx, const char *v) {
  (void)ctx;
  return usage_error("unexpected operand '%s' (orion-run probe takes options only)", v);
}

/* "m3" from macOS's "Apple M3 Pro"; NULL where it cannot tell. */
static char *detect_chip(void) {
#ifdef __APPLE__
  char brand[128];
  size_t len = sizeof brand;
  if (sysctlbyname("machdep.cpu.brand_string", brand, &len, NULL, 0) != 0) return NULL;
  brand[sizeof brand - 1] = 0;
  if (strncmp(brand, "Apple M", 7) != 0) return NULL;
  char name[17] = "m";
  size_t n = 1;
  for (const char *p = brand + 7; *p >= '0' && *p <= '9' && n < 16; p++) name[n++] = *p;
  name[n] = 0;
  return n > 1 ? xstrdup(name) : NULL;
#else
  return NULL;
#endif
}

static void say_progress(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "orion-run probe: %s\n", line);
}

int orion_run_probe(int argc, char **argv) {
  ProbeArgs a = {.backend = "ane", .opt = {.target = MIL_IOS18}};
  int rc = cli_parse(&probe_spec, argc, argv, take_option, take_operand, &a);
  if (rc >= 0) return rc;
  RunDiag r;
  run_diag_open(&r, "orion-run");
  Diag *d = &r.d;
  rc = 1;
  char *detected = a.chip ? NULL : detect_chip();
  const char *chip = a.chip ? a.chip : detected ? detected : "unknown";
  size_t len;
  const char *text = constraints_builtin_text(&len);
  ConstraintTable *table = constraints_parse("ane_constraints.json", text, len, NULL, d);
  OrionBackend *b = NULL;
  OrionProbeReport report = {0};
  char *json = NULL;
  if (!table) goto done;
  const ConstraintChip *known = constraints_chip(table, chip);
  if (!a.target_given) a.opt.target = known ? known->target : MIL_IOS18;
  /* The table's smallest surface for this chip (or its target's default), for the SRAM probe run without the surface probe. */
  const ConstraintTarget *defaults = constraints_target(table, a.opt.target);
  a.opt.min_surface_bytes = known && !known->min_surface_bytes.inherited ? known->min_surface_bytes.value
                            : defaults                                  ? defaults->min_surface_bytes
                                                                        : 0;
  /* The backend's own compile budget and resident cap lifted: the compile
   * probe measures the device's limit, not orion's guard against it. */
  OrionBackendOptions lifted = {.compile_budget = LIFTED_BACKEND_LIMIT, .resident_cap = LIFTED_BACKEND_LIMIT};
  b = orion_backend_open(a.backend, &lifted, d);
  if (!b) {
    if (!strcmp(a.backend, "ane"))
      diag_note(d, (SrcSpan){0}, "'orion-run probe --backend=cpu' tries the probes on the CPU reference backend, "
                "which rejects nothing");
    goto done;
  }
  if (!known)
    fprintf(stderr, "orion-run probe: note: the table has no chip '%s'; the JSON adds it (name it with --chip)\n", chip);
  fprintf(stderr, "orion-run probe: backend %s, chip %s, programs in MIL %s <%s>\n", a.backend, chip,
          mil_program_version(a.opt.target), mil_target_name(a.opt.target));
  if (!a.pace_given && !strcmp(a.backend, "ane")) a.opt.pace_ms = 15000;
  a.opt.progress = say_progress;
  a.opt.verbose = a.verbose;
  if (!orion_probe_run(b, &a.opt, &report, d)) goto done;
  StrBuf summary;
  sb_init(&summary);
  orion_probe_report_summary(&report, &summary);
  fprintf(stderr, "orion-run probe: found\n%s", summary.data ? summary.data : "");
  sb_free(&summary);
  char date[32];
  /* SOURCE_DATE_EPOCH (reproducible-builds.org) fixes the date the sources name, as for the tests. */
  const char *epoch = getenv("SOURCE_DATE_EPOCH");
  uint64_t fixed;
  time_t now = epoch && cli_value_count(epoch, &fixed) ? (time_t)fixed : time(NULL);
  struct tm tm;
  strftime(date, sizeof date, "%Y-%m-%d", gmtime_r(&now, &tm));
  json = orion_probe_report_json(&report, table, chip, ORION_VERSION, date);
  size_t n = strlen(json);
  json[n] = 0;
  if (a.output && !strcmp(a.output, "-")) a.output = NULL; /* -o -: standard output */
  if (a.output) {
    const char *err;
    StrBuf withnl;
    sb_init(&withnl);
    sb_printf(&withnl, "%s\n", json);
    bool ok = write_file_atomic(a.output, withnl.data, withnl.len, &err);
    sb_free(&withnl);
    if (!ok) {
      diag_error(d, (SrcSpan){0}, "cannot write %s: %s", a.output, err);
      goto done;
    }
    fprintf(stderr, "orion-run probe: wrote %s\n", a.output);
  }
  if (!a.output || a.json) printf("%s\n", json);
  if (fflush(stdout) != 0) {
    diag_error(d, (SrcSpan){0}, "cannot write the standard output: %s", strerror(errno));
    goto done;
  }
  rc = 0;
done:
  free(json);
  orion_probe_report_free(&report);
  orion_backend_close(b);
  constraints_free(table);
  free(detected);
  run_diag_close(&r);
  return rc;
}
