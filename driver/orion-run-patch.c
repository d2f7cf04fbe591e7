/*
 * `orion-run patch`: replaces weights of a compiled package in place (delta
 * patching) from safetensors or .npy files, through the backend's crash-safe
 * patcher; with --verify, checks the result against a fresh compile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_options.h"
#include "tool_memory.h"
#include "orion-run.h"
#include "orion/package.h"
#include "orion/patch.h"
#include "orion/temporaries.h"

#define MAX_SOURCES 256

enum {
  OPT_WEIGHTS = 1, OPT_WEIGHT, OPT_CLAMP, OPT_VERIFY, OPT_RECOVER, OPT_BACKEND, OPT_COMPILE_BUDGET, OPT_RESIDENT_CAP,
  OPT_VERBOSE, OPT_HELP
};

static const CliOption patch_options[] = {
    {OPT_WEIGHTS, 0, "weights", CLI_VALUE, 0, " FILE.safetensors", "new values for the weights named by its keys",
     "a file"},
    {OPT_WEIGHT, 0, "weight", CLI_VALUE, 0, " NAME=FILE.npy", "a new value for one weight", "NAME=FILE.npy"},
    {OPT_CLAMP, 0, "clamp-fp16", CLI_NO_VALUE, 0, NULL,
     "clamp values beyond fp16's range (warning) instead\n"
     "of failing",
     NULL},
    {OPT_VERIFY, 0, "verify", CLI_OPTIONAL_VALUE, 0, "[=SOURCE.oir]",
     "compile the package's source with the new weights\n"
     "from scratch and check that the patched package is\n"
     "byte-identical and computes bit-identical outputs\n"
     "(default source: the manifest's, relative to the\n"
     "current directory or to the package's); checked on\n"
     "a patched copy first, so a failure leaves the\n"
     "package as it was",
     "a source file"},
    {OPT_RECOVER, 0, "recover", CLI_NO_VALUE, 0, NULL,
     "only complete (or discard) an interrupted update\n"
     "(with -v: name each leftover file removed)",
     NULL},
    {OPT_BACKEND, 0, "backend", CLI_VALUE, CLI_WORD, " NAME",
     "cpu (default: the files only) or a device backend\n"
     "(ane): the package is compiled on it first and its\n"
     "program updated by the backend's weight-update\n"
     "strategy after the patch; with --verify, compared\n"
     "bit for bit with a fresh compile on that backend",
     "a backend name"},
    ORION_RUN_ANE_LIMIT_OPTIONS(OPT_COMPILE_BUDGET, OPT_RESIDENT_CAP),
    {OPT_VERBOSE, 'v', NULL, CLI_NO_VALUE, 0, NULL,
     "print what was done (with --backend: the weight-update\n"
     "strategy used and the compiles it took)",
     NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
};

static const CliSpec patch_spec = {
    .program = "orion-run patch",
    .usage = "usage: orion-run patch [options] PACKAGE --weights FILE.safetensors ...\n"
             "       orion-run patch [options] PACKAGE --weight NAME=FILE.npy ...\n",
    .description = "Replaces the named weights of a compiled package in place: same MIL text, same\n"
                   "blob layout, no compiler run. Every tensor is checked against the manifest\n"
                   "(name, shape, dtype, NaN, fp16 range) before anything is written; the update\n"
                   "is crash-safe (a kill at any instant leaves all old or all new weights) and\n"
                   "bumps the package's weights generation. What a killed patch left is removed\n"
                   "first: a --verify copy beside the package (named on stderr) and temporaries\n"
                   "inside it (named by --recover -v).\n",
    .options = patch_options,
    .noptions = sizeof patch_options / sizeof *patch_options,
    .epilogue = "exit status: 0 success, 1 errors (nothing written), 2 usage error, 3 out of memory\n",
    .help_column = 30,
};

#define usage_error(...) cli_usage_error("orion-run patch", __VA_ARGS__)

typedef struct PatchArgs {
  const char *package;
  const char *files[MAX_SOURCES];
  const char *npy_names[MAX_SOURCES];
  uint32_t nfiles;
  bool clamp, verify, recover, verbose;
  const char *source;
  const char *backend; /* NULL or "cpu": the files only */
  OrionBackendOptions backend_options;
} PatchArgs;

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  (void)spelling;
  PatchArgs *a = ctx;
  switch (id) {
  case OPT_HELP: cli_print_help(&patch_spec, stdout); return 0;
  case OPT_WEIGHTS:
  case OPT_WEIGHT:
    if (a->nfiles >= MAX_SOURCES) return usage_error("too many weight files (limit is %d)", MAX_SOURCES);
    if (id == OPT_WEIGHT) {
      const char *e = strchr(v, '=');
      if (!e || e == v || !e[1]) return usage_error("'%s' is not NAME=FILE.npy", v);
      char *name = xstrdup(v);
      name[e - v] = 0;
      a->npy_names[a->nfiles] = name;
      a->files[a->nfiles++] = e + 1;
    } else {
      a->files[a->nfiles++] = v;
    }
    return -1;
  case OPT_CLAMP: a->clamp = true; return -1;
  case OPT_VERIFY:
    a->verify = true;
    a->source = v;
    return -1;
  case OPT_RECOVER: a->recover = true; return -1;
  case OPT_BACKEND: a->backend = v; return -1;
  case OPT_COMPILE_BUDGET:
    return orion_run_take_ane_limit("orion-run patch", "--ane-compile-budget", v, &a->backend_options.compile_budget);
  case OPT_RESIDENT_CAP:
    return orion_run_take_ane_limit("orion-run patch", "--ane-resident-cap", v, &a->backend_options.resident_cap);
  case OPT_VERBOSE: a->verbose = true; return -1;
  default: return -1;
  }
}

static int parse(int argc, char **argv, PatchArgs *a) {
  *a = (PatchArgs){0};
  int rc = cli_parse_one_operand(&patch_spec, argc, argv, take_option, a, "package", &a->package, "no package");
  if (rc >= 0) return rc;
  if (!a->recover && !a->nfiles) return usage_error("%s", "no new weights (give --weights FILE or --weight NAME=FILE.npy)");
  if (a->recover && a->nfiles) return usage_error("%s", "--recover takes no weights");
  if (a->recover && a->backend) return usage_error("%s", "--recover takes no --backend");
  if (a->backend && !strcmp(a->backend, "cpu")) a->backend = NULL; /* the files are all the cpu backend reads */
  return -1;
}

/* Leftovers beside the package (a --verify copy of a killed run). */
static void say_leftover(void *ctx, const char *path, long maker_pid) {
  (void)ctx;
  fprintf(stderr, "orion-run: removed %s (left by process %ld, which is gone)\n", path, maker_pid);
}

/* -v with --recover: each leftover of an interrupted update that was removed. */
static void say_removed(void *ctx, const char *path) {
  (void)ctx;
  fprintf(stderr, "orion-run: removed %s (left by an interrupted weight update)\n", path);
}

/* Patches a copy of the package beside it and verifies the copy; the copy
 * is removed either way. */
static bool verify_on_a_copy(const PatchArgs *a, const PatchSet *set, const PatchOptions *po, Diag *d) {
  size_t len = strlen(a->package);
  while (len > 1 && a->package[len - 1] == '/') len--; /* beside the package, not inside: "m.anepkg/" */
  size_t n = len + 32;
  char *copy = xmalloc(n);
  snprintf(copy, n, "%.*s.verify-XXXXXX", (int)len, a->package);
  /* With its marker: a killed run leaves a recognisable leftover. */
  bool made = temp_make_dir(copy), ok = made;
  if (!ok) diag_error(d, (SrcSpan){0}, "--verify: cannot make a copy of '%s' to check: %s", a->package, strerror(errno));
  else if (!(ok = package_copy(a->package, copy)))
    diag_error(d, (SrcSpan){0}, "--verify: cannot copy '%s' to check it: %s", a->package, strerror(errno));
  Package before;
  uint64_t prior = 0;
  if (ok && (ok = package_read(copy, &before, d))) {
    prior = before.weights_generation;
    package_free(&before);
  }
  PatchStats stats;
  PatchOptions quiet = *po;
  quiet.stats = &stats;
  ok = ok && package_patch(copy, set->tensors, set->n, &quiet, d);
  if (ok) test_pause_at("verify-copy");
  if (ok && !orion_run_verify_patch(copy, a->package, a->source, a->files, a->npy_names, a->nfiles, a->verbose, d)) {
    if (prior > 0 && stats.regions)
      diag_note(d, (SrcSpan){0}, "the package had been patched before this update (generation %llu); a fresh compile "
                "takes only this update's weights from files", (unsigned long long)prior);
    ok = false;
  }
  if (made) temp_remove(copy);
  free(copy);
  return ok;
}

int orion_run_patch(int argc, char **argv) {
  PatchArgs a;
  int rc = parse(argc, argv, &a);
  if (rc >= 0) return rc;
  RunDiag rd;
  run_diag_open(&rd, "orion-run");
  Diag *d = &rd.d;
  rc = 1;
  PatchSet set = {0};
  PatchOnBackend on = {0};
  /* What a killed patch left beside the package; inside it, its own files
   * are the recovery's (package_recover, under the package's lock). */
  leftovers_clean_beside(a.package, &(LeftoverReport){.fn = say_leftover});
  if (a.recover) {
    bool did;
    PatchRemovedHook removed = {.fn = say_removed};
    if (package_recover_reporting(a.package, &did, a.verbose ? &removed : NULL, d)) {
      printf("%s: %s\n", a.package, did ? "completed an interrupted weight update" : "no interrupted weight update");
      rc = 0;
    }
    goto done;
  }
  bool ok = true;
  for (uint32_t i = 0; i < a.nfiles; i++)
    ok = (a.npy_names[i] ? patch_set_add_npy(&set, a.npy_names[i], a.files[i], d)
                         : patch_set_add_safetensors(&set, a.files[i], d)) && ok;
  if (!ok) goto done;
  /* Before anything is written: a backend that does not open (a bad name) leaves the package as it was. */
  if (a.backend && !patch_backend_open(&on, a.backend, &a.backend_options, a.package, d)) {
    if (!on.backend) rc = 2; /* a backend this build does not have is a wrong command line, as for orion-run */
    goto done;
  }
  PatchStats stats;
  PatchOptions po = {.clamp_fp16 = a.clamp, .stats = &stats};
  /* --verify checks a patched copy first, so that a failure leaves the
   * package exactly as it was; the package itself is then patched with the
   * same tensors, which gives the same bytes. */
  if (a.verify && !verify_on_a_copy(&a, &set, &po, d)) {
    diag_note(d, (SrcSpan){0}, "'%s' is unchanged", a.package);
    goto done;
  }
  Package before;
  if (!package_read(a.package, &before, d)) goto done;
  uint64_t prior = before.weights_generation;
  package_free(&before);
  if (!package_patch(a.package, set.tensors, set.n, &po, d)) goto done;
  if (!stats.regions)
    printf("%s: %u weight%s given, all already hold these values: nothing written (generation %llu)\n", a.package,
           stats.tensors, stats.tensors == 1 ? "" : "s", (unsigned long long)stats.generation);
  else
    printf("%s: %u weight%s patched, %u blob%s (%llu bytes) changed%s, generation %llu\n", a.package, stats.tensors,
           stats.tensors == 1 ? "" : "s", stats.regions, stats.regions == 1 ? "" : "s",
           (unsigned long long)stats.bytes_changed, stats.shadow ? " (whole weight file rewritten)" : "",
           (unsigned long long)stats.generation);
  if (a.verbose)
    fprintf(stderr, "orion-run: %.1f ms checking, %.1f ms writing\n", stats.validate_ms, stats.commit_ms);
  fflush(stdout);
  (void)prior;
  if (a.backend && !patch_backend_update(&on, a.verbose, d)) goto done;
  if (a.backend && a.verify && !patch_backend_verify(&on, a.package, a.backend, &a.backend_options, d)) {
    diag_note(d, (SrcSpan){0}, "'%s' is patched (its files verified); the %s backend's update of its program in this "
              "process is what differs", a.package, a.backend);
    goto done;
  }
  rc = 0;
done:
  patch_backend_close(&on);
  patch_set_free(&set);
  for (uint32_t i = 0; i < a.nfiles; i++) free((void *)(uintptr_t)a.npy_names[i]);
  run_diag_close(&rd);
  return rc;
}
