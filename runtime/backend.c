/*
 * The backend registry and the calls above the vtable (orion/backend.h):
 * selection by name, the checks every backend would otherwise repeat
 * (options against caps), the bookkeeping of prepared functions that lets
 * a weight update reach all of them, and the one-call weight update.
 */
#include "orion/backend.h"

#include <stdlib.h>
#include <string.h>

/* The registry, in a fixed order: the default first. */
static const OrionBackendVtable *const registry[] = {
    &orion_backend_cpu,
    &orion_backend_check,
    &orion_backend_ane,
};
#define NREGISTRY (sizeof registry / sizeof *registry)

struct OrionBackend {
  const OrionBackendVtable *vt;
  void *impl;
  OrionExec *execs; /* prepared and not released, newest first */
};

struct OrionExec {
  OrionBackend *b;
  void *impl;
  OrionProgram *prog;
  uint32_t fn;
  OrionExec *prev, *next;
};

uint32_t orion_backend_registry_count(void) { return (uint32_t)NREGISTRY; }

const OrionBackendVtable *orion_backend_registry_get(uint32_t i) { return i < NREGISTRY ? registry[i] : NULL; }

const OrionBackendVtable *orion_backend_find(const char *name) {
  for (size_t i = 0; i < NREGISTRY; i++)
    if (!strcmp(registry[i]->name, name)) return registry[i];
  return NULL;
}

char *orion_backend_available_names(void) {
  StrBuf sb;
  sb_init(&sb);
  char why[256];
  for (size_t i = 0; i < NREGISTRY; i++)
    if (registry[i]->available(why, sizeof why)) sb_printf(&sb, "%s%s", sb.len ? ", " : "", registry[i]->name);
  char *names = xstrdup(sb.data ? sb.data : "");
  sb_free(&sb);
  return names;
}

OrionBackend *orion_backend_open(const char *name, const OrionBackendOptions *opt, Diag *d) {
  const OrionBackendVtable *vt = orion_backend_find(name);
  char *names = orion_backend_available_names();
  char why[256] = "";
  if (!vt) {
    diag_error(d, (SrcSpan){0}, "unknown backend '%s' (backends built in: %s)", name, names);
  } else if (!vt->available(why, sizeof why)) {
    diag_error(d, (SrcSpan){0}, "%s; backends built in: %s", why, names);
    vt = NULL;
  }
  free(names);
  return vt ? orion_backend_open_vtable(vt, opt, d) : NULL;
}

OrionBackend *orion_backend_open_vtable(const OrionBackendVtable *vt, const OrionBackendOptions *opt, Diag *d) {
  OrionBackendOptions defaults = {0};
  void *impl = vt->open(opt ? opt : &defaults, d);
  if (!impl) return NULL;
  OrionBackend *b = xcalloc(1, sizeof *b);
  b->vt = vt;
  b->impl = impl;
  return b;
}

void orion_backend_close(OrionBackend *b) {
  if (!b) return;
  while (b->execs) orion_exec_release(b->execs);
  b->vt->close(b->impl);
  free(b);
}

const char *orion_backend_name(const OrionBackend *b) { return b->vt->name; }

OrionBackendCaps orion_backend_caps(const OrionBackend *b) { return b->vt->caps(b->impl); }

bool orion_backend_describe(const OrionBackend *b, char *out, size_t len) {
  if (len) out[0] = '\0';
  if (!b->vt->describe || !len) return false;
  b->vt->describe(b->impl, out, len);
  return out[0] != '\0';
}

bool orion_backend_usage(const OrionBackend *b, char *out, size_t len) {
  if (len) out[0] = '\0';
  if (!b->vt->usage || !len) return false;
  b->vt->usage(b->impl, out, len);
  return out[0] != '\0';
}

bool orion_backend_device(const OrionBackend *b, char *out, size_t len) {
  if (len) out[0] = '\0';
  if (!b->vt->device || !len) return false;
  b->vt->device(b->impl, out, len);
  return out[0] != '\0';
}

uint64_t orion_backend_compiles(const OrionBackend *b) { return b->vt->compiles ? b->vt->compiles(b->impl) : 0; }

OrionReloadStrategy orion_backend_auto_strategy(const OrionBackend *b) {
  uint32_t s = b->vt->caps(b->impl).update_strategies;
  if (s & (1u << ORION_RELOAD_REMAP)) return ORION_RELOAD_REMAP;
  /* The cheapest first, the order of the ane backend's self-test (docs/ane-backend.md). */
  static const OrionReloadStrategy order[] = {ORION_RELOAD_RELOAD_FILES, ORION_RELOAD_PATCH_DATA, ORION_RELOAD_INPUTS};
  for (size_t i = 0; i < sizeof order / sizeof *order; i++)
    if (s & (1u << order[i])) return order[i];
  return ORION_RELOAD_RECOMPILE;
}

const char *orion_reload_strategy_name(OrionReloadStrategy s) {
  switch (s) {
  case ORION_RELOAD_AUTO: return "auto";
  case ORION_RELOAD_REMAP: return "remap";
  case ORION_RELOAD_RELOAD_FILES: return "reload-files";
  case ORION_RELOAD_RECOMPILE: return "recompile";
  case ORION_RELOAD_INPUTS: return "inputs";
  case ORION_RELOAD_PATCH_DATA: return "patch-data";
  }
  return "unknown";
}

bool orion_backend_supports(OrionBackend *b, const OrionProgram *p, uint32_t fn, Diag *d) {
  return b->vt->supports(b->impl, p, fn, d);
}

OrionExec *orion_backend_prepare(OrionBackend *b, OrionProgram *p, uint32_t fn, const OrionPrepareOptions *opt,
                                 Diag *d) {
  OrionPrepareOptions defaults = {.numerics = ORION_NUMERICS_ANE};
  if (!opt) opt = &defaults;
  OrionBackendCaps caps = b->vt->caps(b->impl);
  bool ok = true;
  if (opt->numerics == ORION_NUMERICS_FP32 && !caps.numerics_fp32) {
    diag_error(d, (SrcSpan){0}, "the %s backend has no fp32 numerics (it computes as the ANE does)", b->vt->name);
    ok = false;
  }
  if (opt->profile && !caps.profiling) {
    diag_error(d, (SrcSpan){0}, "the %s backend cannot profile statements", b->vt->name);
    ok = false;
  }
  if (opt->check_finite && !caps.check_finite) {
    diag_error(d, (SrcSpan){0}, "the %s backend cannot check results for inf and NaN", b->vt->name);
    ok = false;
  }
  if (fn >= orion_function_count(p)) {
    diag_error(d, (SrcSpan){0}, "function index %u out of range (the program has %u)", fn, orion_function_count(p));
    ok = false;
  }
  if (!ok) return NULL;
  void *impl = b->vt->prepare(b->impl, p, fn, opt, d);
  if (!impl) return NULL;
  OrionExec *e = xcalloc(1, sizeof *e);
  *e = (OrionExec){.b = b, .impl = impl, .prog = p, .fn = fn, .next = b->execs};
  if (b->execs) b->execs->prev = e;
  b->execs = e;
  return e;
}

bool orion_exec_run(OrionExec *e, const OrionTensor *in, const OrionTensor *out, Diag *d) {
  return e->b->vt->run(e->impl, in, out, d);
}

size_t orion_tensor_dtype_size(MilDType t) {
  switch (t) {
  case MIL_DT_FP16: return 2;
  case MIL_DT_FP32: case MIL_DT_INT32: return 4;
  case MIL_DT_BOOL: return sizeof(bool);
  default: return 0;
  }
}

void orion_tensor_free(OrionTensor *t) {
  if (!t) return;
  free(t->data);
  memset(t, 0, sizeof *t);
}

bool orion_exec_run_alloc(OrionExec *e, const OrionTensor *in, OrionTensor *out, Diag *d) {
  uint32_t n = orion_output_count(e->prog, e->fn);
  for (uint32_t i = 0; i < n; i++) {
    const OrionTensorInfo *info = orion_output(e->prog, e->fn, i);
    size_t es = orion_tensor_dtype_size(info->dtype);
    out[i] = (OrionTensor){.dtype = info->dtype, .rank = info->rank};
    memcpy(out[i].dims, info->dims, sizeof(int64_t) * info->rank);
    out[i].data = xcalloc(info->bytes && es ? (size_t)(info->bytes / es) : 1, es ? es : 1);
  }
  if (orion_exec_run(e, in, out, d)) return true;
  for (uint32_t i = 0; i < n; i++) orion_tensor_free(&out[i]);
  return false;
}

OrionProgram *orion_exec_program(const OrionExec *e) { return e->prog; }
uint32_t orion_exec_function(const OrionExec *e) { return e->fn; }
uint32_t orion_exec_profile_count(const OrionExec *e) { return e->b->vt->profile_count(e->impl); }
const OrionStmtTime *orion_exec_profile_stmt(const OrionExec *e, uint32_t i) {
  return e->b->vt->profile_stmt(e->impl, i);
}
void orion_exec_profile_reset(OrionExec *e) { e->b->vt->profile_reset(e->impl); }

void orion_exec_release(OrionExec *e) {
  if (!e) return;
  if (e->prev) e->prev->next = e->next;
  else e->b->execs = e->next;
  if (e->next) e->next->prev = e->prev;
  e->b->vt->release(e->impl);
  free(e);
}

bool orion_backend_update_weights(OrionBackend *b, OrionProgram *p, const OrionOpenOptions *opt, bool *changed,
                                  Diag *d) {
  OrionOpenOptions defaults = ORION_OPEN_OPTIONS_DEFAULT;
  if (!opt) opt = &defaults;
  if (changed) *changed = false;
  OrionBackendCaps caps = b->vt->caps(b->impl);
  if (opt->reload != ORION_RELOAD_AUTO && !(caps.update_strategies & (1u << opt->reload))) {
    static const char *const names[] = {"auto", "remapping the weight file", "loading the compiled program again",
                                        "recompiling", "binding weights as inputs"};
    diag_error(d, (SrcSpan){0}, "the %s backend cannot update weights by %s", b->vt->name, names[opt->reload]);
    return false;
  }
  if (opt->reload == ORION_RELOAD_INPUTS) return true; /* nothing is baked in: the caller binds new buffers */
  bool moved = false;
  OrionOpenOptions remap = *opt;
  remap.reload = ORION_RELOAD_REMAP;
  if (!orion_reload_weights(p, &remap, &moved, d)) return false;
  if (!moved) return true;
  /* The old mapping still holds: a function that fails to move keeps
   * reading it, and then every function moves back. */
  OrionExec *failed = NULL;
  for (OrionExec *e = b->execs; e && !failed; e = e->next)
    if (e->prog == p && !b->vt->weights_changed(e->impl, d)) failed = e;
  if (failed) {
    orion_reload_weights_undo(p);
    for (OrionExec *e = b->execs;; e = e->next) {
      if (e->prog == p) b->vt->weights_changed(e->impl, d);
      if (e == failed) break;
    }
    diag_note(d, (SrcSpan){0}, "the program keeps its previous weights");
    return false;
  }
  orion_release_retired_weights(p);
  if (changed) *changed = true;
  return true;
}

bool orion_backend_write_weights(OrionBackend *b, OrionProgram *p, const OrionWeightValues *v, uint32_t n, Diag *d) {
  if (!orion_write_weights(p, v, n, d)) return false;
  bool ok = true;
  for (OrionExec *e = b->execs; e; e = e->next)
    if (e->prog == p && !b->vt->weights_changed(e->impl, d)) {
      diag_note(d, (SrcSpan){0}, "the %s backend could not take up the new weights of '%s'", b->vt->name,
                orion_function_name(p, e->fn));
      ok = false;
    }
  return ok;
}
