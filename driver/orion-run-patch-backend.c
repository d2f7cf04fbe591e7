/*
 * `orion-run patch --backend B` on a device backend: the patch goes through
 * the backend's weight-update strategy (issue 15), as a program that a
 * running process holds would take it. The package is opened and every
 * function prepared (compiled) before the patch; after the patch has
 * written the package's files (atomically, as without --backend),
 * orion_backend_update_weights maps the new weights and the backend applies
 * its strategy (on the ane backend the self-test's choice: reload-files and
 * patch-data compile nothing, recompile compiles again).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion-run.h"
#include "tool_memory.h"

static void release_all(PatchOnBackend *pb) {
  for (uint32_t i = 0; i < pb->nexecs; i++) orion_exec_release(pb->execs[i]);
  free(pb->execs);
  pb->execs = NULL;
  pb->nexecs = 0;
}

/* Opens package on an opened backend and prepares every function. */
static bool open_prepared(OrionBackend *b, const char *package, OrionProgram **prog, OrionExec ***execs, Diag *d) {
  *execs = NULL;
  *prog = orion_open(package, NULL, d);
  if (!*prog) return false;
  uint32_t n = orion_function_count(*prog);
  *execs = xcalloc(n + 1, sizeof **execs);
  OrionPrepareOptions po = {.numerics = ORION_NUMERICS_ANE};
  for (uint32_t fn = 0; fn < n; fn++)
    if (!((*execs)[fn] = orion_backend_prepare(b, *prog, fn, &po, d))) return false;
  return true;
}

bool patch_backend_open(PatchOnBackend *pb, const char *backend, const OrionBackendOptions *options,
                        const char *package, Diag *d) {
  *pb = (PatchOnBackend){0};
  pb->backend = orion_backend_open(backend, options, d);
  if (!pb->backend) return false;
  bool ok = open_prepared(pb->backend, package, &pb->program, &pb->execs, d);
  if (pb->program) pb->nexecs = orion_function_count(pb->program);
  return ok;
}

bool patch_backend_update(PatchOnBackend *pb, bool verbose, Diag *d) {
  uint64_t before = orion_backend_compiles(pb->backend);
  bool changed = false;
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  if (!orion_backend_update_weights(pb->backend, pb->program, &oo, &changed, d)) {
    diag_note(d, (SrcSpan){0}, "the package's files are patched; the %s backend's program in this process is not",
              orion_backend_name(pb->backend));
    return false;
  }
  /* Asked after the update: a first update runs the ane backend's self-test, which makes the choice. */
  uint64_t compiles = orion_backend_compiles(pb->backend) - before;
  /* The strategy's origin: on the ane backend, the self-test's choice made now or read from its cache. */
  char about[2048];
  if (verbose && orion_backend_describe(pb->backend, about, sizeof about))
    fprintf(stderr, "orion-run: backend %s: %s\n", orion_backend_name(pb->backend), about);
  if (verbose)
    fprintf(stderr, "orion-run: backend %s: %s by %s, %llu compile%s\n", orion_backend_name(pb->backend),
            changed ? "weights updated" : "no new weights to update",
            orion_reload_strategy_name(orion_backend_auto_strategy(pb->backend)), (unsigned long long)compiles,
            compiles == 1 ? "" : "s");
  return true;
}

/* Runs function fn of each on the same probe input; false (after saying which output) when any bit differs. */
static bool same_on_probe(OrionExec *updated, OrionExec *fresh, OrionProgram *p, uint32_t fn, const char *backend,
                          Diag *d) {
  uint32_t nin = orion_input_count(p, fn), nout = orion_output_count(p, fn);
  OrionTensor *in = xcalloc(nin + 1, sizeof *in), *a = xcalloc(nout + 1, sizeof *a), *b = xcalloc(nout + 1, sizeof *b);
  uint64_t state = 1;
  for (uint32_t i = 0; i < nin; i++) orion_run_fill_probe_input(&in[i], orion_input(p, fn, i), &state);
  bool ok = orion_exec_run_alloc(updated, in, a, d) && orion_exec_run_alloc(fresh, in, b, d);
  for (uint32_t i = 0; ok && i < nout; i++) {
    const OrionTensorInfo *info = orion_output(p, fn, i);
    if (memcmp(a[i].data, b[i].data, (size_t)info->bytes)) {
      diag_error(d, (SrcSpan){0}, "--verify: output '%s' of function '%s' of the updated program on the %s backend "
                 "differs from a fresh compile's (the backend's weight-update strategy is wrong here)", info->name,
                 orion_function_name(p, fn), backend);
      ok = false;
    }
  }
  for (uint32_t i = 0; i < nin; i++) free(in[i].data);
  for (uint32_t i = 0; i < nout; i++) {
    orion_tensor_free(&a[i]);
    orion_tensor_free(&b[i]);
  }
  free(in);
  free(a);
  free(b);
  return ok;
}

bool patch_backend_verify(PatchOnBackend *pb, const char *package, const char *backend,
                          const OrionBackendOptions *options, Diag *d) {
  /* A new instance: the first one's program cache would hand back the updated program itself. */
  OrionBackend *fresh_backend = orion_backend_open(backend, options, d);
  OrionProgram *fresh = NULL;
  OrionExec **execs = NULL;
  bool ok = fresh_backend && open_prepared(fresh_backend, package, &fresh, &execs, d);
  for (uint32_t fn = 0; ok && fn < pb->nexecs; fn++)
    ok = same_on_probe(pb->execs[fn], execs[fn], pb->program, fn, backend, d);
  if (ok)
    printf("%s: verified on the %s backend: the updated program's outputs are bit-identical to a fresh compile's\n",
           package, backend);
  for (uint32_t fn = 0; fresh && fn < orion_function_count(fresh); fn++) orion_exec_release(execs[fn]);
  free(execs);
  orion_backend_close(fresh_backend);
  orion_close(fresh);
  return ok;
}

void patch_backend_close(PatchOnBackend *pb) {
  release_all(pb);
  orion_backend_close(pb->backend);
  orion_close(pb->program);
  *pb = (PatchOnBackend){0};
}
