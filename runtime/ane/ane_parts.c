/*
 * A function of the ane backend run in parts (ane_parts.h).
 */

#include "ane_parts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ane_partition.h"
#include "loader_internal.h"
#include "orion/mil_reader.h"
#include "orion/temporaries.h"

typedef struct AnePartsSegment {
  OrionProgram *prog;
  OrionExec *exec;    /* a CPU segment's */
  void *device_exec;  /* a device segment's, prepared on the outer backend */
  OrionTensor **out; /* per output: its value buffer */
} AnePartsSegment;

struct AneParts {
  OrionProgram *p;
  uint32_t fn;
  const MilFunc *f;
  char what[256]; /* "function 'fwd'" */
  char *mil;      /* the MIL file's text: the statements are copied from it */
  size_t mil_len;
  OrionNumerics numerics;
  AnePartition plan;
  const OrionBackendVtable *device; /* the backend the function is prepared on, called directly */
  void *device_impl;
  bool writable;                     /* the program's weights are written in place (training) */
  OrionBackend *cpu;
  SourceSet sources; /* the segments' MIL, for the device's prepare */
  Diag diag;
  StrBuf messages;
  char first_error[1024];
  AnePartsSegment *segs;
  AneValue *value_ids; /* every value a segment hands on, with its buffer */
  OrionTensor *values;
  uint32_t nvalues;
  uint32_t *input_of_param; /* f's parameter i is orion input input_of_param[i] */
};

bool ane_parts_wanted(const OrionProgram *p, uint32_t fn) {
  const MilFunc *f = orion_function_mil(p, fn);
  for (uint32_t s = 0; f && s < f->nstmts; s++)
    if (ane_partition_stmt_on_cpu(f, s)) return true;
  return false;
}

static void keep_first_error(void *ctx, DiagLevel level, SrcSpan span, const char *message) {
  (void)span;
  AneParts *a = ctx;
  if (level == DIAG_ERROR && !a->first_error[0]) snprintf(a->first_error, sizeof a->first_error, "%s", message);
}

/* The segment's error in the caller's Diag, naming the segment. */
static bool segment_failed(AneParts *a, uint32_t seg, const char *doing, Diag *d) {
  diag_error(d, (SrcSpan){0}, "the ane backend cannot %s segment %u (%s) of %s: %s", doing, seg,
             a->plan.segs[seg].on_device ? "device" : "cpu", a->what,
             a->first_error[0] ? a->first_error : "no reason given");
  a->first_error[0] = '\0';
  return false;
}

static bool write_file(const char *dir, const char *rel, const void *data, size_t len) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, rel) >= sizeof path || strstr(rel, "..")) return false;
  for (char *slash = strchr(path + strlen(dir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return false;
    *slash = '/';
  }
  FILE *out = fopen(path, "wb");
  if (!out) return false;
  bool ok = fwrite(data, 1, len, out) == len;
  return fclose(out) == 0 && ok;
}

/* Segment seg as a bare model directory: its MIL and the function's weight files as they are now. */
static bool write_segment(const AneParts *a, uint32_t seg, const char *dir) {
  StrBuf mil;
  sb_init(&mil);
  ane_partition_mil(&a->plan, seg, orion_function_program(a->p, a->fn), a->f, a->mil, &mil);
  bool ok = write_file(dir, "model.mil", mil.data, mil.len);
  sb_free(&mil);
  for (uint32_t i = 0; ok && i < orion_program_weight_file_count(a->p); i++) {
    const char *rel;
    size_t len;
    const uint8_t *data = orion_program_weight_file_at(a->p, i, &rel, &len);
    ok = data && write_file(dir, rel, data, len);
  }
  return ok;
}

static OrionTensor *value_buffer(AneParts *a, const AneValue *v) {
  for (uint32_t i = 0; i < a->nvalues; i++)
    if (a->value_ids[i].def_stmt == v->def_stmt && a->value_ids[i].def_index == v->def_index) return &a->values[i];
  return NULL;
}

/* One buffer per value a segment hands on, of its MIL type. */
static void make_values(AneParts *a) {
  for (uint32_t s = 0; s < a->plan.nsegs; s++) a->nvalues += a->plan.segs[s].noutputs;
  a->value_ids = calloc(a->nvalues + 1, sizeof *a->value_ids);
  a->values = calloc(a->nvalues + 1, sizeof *a->values);
  uint32_t n = 0;
  for (uint32_t s = 0; s < a->plan.nsegs; s++)
    for (uint32_t i = 0; i < a->plan.segs[s].noutputs; i++, n++) {
      a->value_ids[n] = a->plan.segs[s].outputs[i];
      const MilType *t = ane_value_type(a->f, &a->value_ids[n]);
      OrionTensor *v = &a->values[n];
      v->dtype = t->dtype;
      v->rank = t->rank;
      uint64_t elements = 1;
      for (uint32_t k = 0; k < t->rank; k++) {
        v->dims[k] = t->dims[k];
        elements *= (uint64_t)t->dims[k];
      }
      v->data = calloc(elements ? elements : 1, orion_tensor_dtype_size(t->dtype) ? orion_tensor_dtype_size(t->dtype) : 1);
    }
}

/* Opens and prepares segment seg; its directory is removed once prepared. */
static bool build_segment(AneParts *a, uint32_t seg, Diag *d) {
  AnePartsSegment *g = &a->segs[seg];
  const AneSegment *plan = &a->plan.segs[seg];
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/orion-ane-part-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!temp_make_dir(dir)) { /* registered: an interrupted run removes it */
    snprintf(a->first_error, sizeof a->first_error, "cannot make a directory under %s: %s", tmp ? tmp : "/tmp",
             strerror(errno));
    return segment_failed(a, seg, "write", d);
  }
  bool ok = write_segment(a, seg, dir);
  if (!ok) snprintf(a->first_error, sizeof a->first_error, "cannot write its model directory %.900s", dir);
  /* A device segment of a program written in place takes the new bytes in its own (private) mapping. */
  OrionOpenOptions oo = {.verify_checksums = false, .reload = ORION_RELOAD_AUTO,
                         .writable_weights = plan->on_device && a->writable};
  if (ok) ok = (g->prog = orion_open(dir, &oo, &a->diag)) != NULL;
  if (ok && plan->on_device) orion_program_size_bare_surfaces(g->prog);
  /* A device segment's statements are the partition's choice: its prepare places nothing again. */
  OrionPrepareOptions po = {.numerics = plan->on_device ? ORION_NUMERICS_ANE : a->numerics,
                            .keep_refused_on_device = true};
  if (ok && plan->on_device) ok = (g->device_exec = a->device->prepare(a->device_impl, g->prog, 0, &po, &a->diag));
  else if (ok) ok = (g->exec = orion_backend_prepare(a->cpu, g->prog, 0, &po, &a->diag));
  temp_remove(dir);
  if (!ok) return segment_failed(a, seg, "prepare", d);
  return true;
}

static void release_segment(AneParts *a, uint32_t s) {
  AnePartsSegment *g = &a->segs[s];
  orion_exec_release(g->exec);
  if (g->device_exec) a->device->release(g->device_exec);
  orion_close(g->prog);
  g->exec = NULL;
  g->device_exec = NULL;
  g->prog = NULL;
}

static void release_segments(AneParts *a) {
  for (uint32_t s = 0; a->segs && s < a->plan.nsegs; s++) release_segment(a, s);
}

static void forget_messages(AneParts *a) {
  /* what the last build said is not kept: a training run updates every step */
  sb_free(&a->messages);
  sb_init(&a->messages);
}

static bool build_segments(AneParts *a, Diag *d) {
  forget_messages(a);
  for (uint32_t s = 0; s < a->plan.nsegs; s++)
    if (!build_segment(a, s, d)) return false;
  return true;
}

/* Where each segment's inputs come from and its outputs go. */
static bool wire(AneParts *a, Diag *d) {
  uint32_t nin = orion_input_count(a->p, a->fn);
  a->input_of_param = calloc(a->f->nparams + 1, sizeof *a->input_of_param);
  for (uint32_t i = 0; i < a->f->nparams; i++) {
    a->input_of_param[i] = UINT32_MAX;
    for (uint32_t j = 0; j < nin; j++)
      if (!strcmp(orion_input(a->p, a->fn, j)->mil_name, a->f->params[i].name)) a->input_of_param[i] = j;
  }
  for (uint32_t s = 0; s < a->plan.nsegs; s++) {
    const AneSegment *plan = &a->plan.segs[s];
    AnePartsSegment *g = &a->segs[s];
    g->out = calloc(plan->noutputs + 1, sizeof *g->out);
    for (uint32_t i = 0; i < plan->noutputs; i++) g->out[i] = value_buffer(a, &plan->outputs[i]);
    for (uint32_t i = 0; i < plan->ninputs; i++)
      if (plan->inputs[i].def_stmt != MIL_DEF_PARAM && !value_buffer(a, &plan->inputs[i])) {
        snprintf(a->first_error, sizeof a->first_error, "its input '%s' is made by no segment", plan->inputs[i].name);
        return segment_failed(a, s, "wire", d);
      }
  }
  uint32_t nout = orion_output_count(a->p, a->fn);
  for (uint32_t i = 0; i < nout; i++) {
    const OrionTensorInfo *t = orion_output(a->p, a->fn, i);
    bool found = false;
    for (uint32_t r = 0; r < a->f->nreturns; r++)
      if (!strcmp(a->f->returns[r].name, t->mil_name)) {
        AneValue v = {t->mil_name, a->f->returns[r].def_stmt, a->f->returns[r].def_index};
        found = value_buffer(a, &v) != NULL;
      }
    if (!found) {
      diag_error(d, (SrcSpan){0}, "the ane backend cannot run %s in parts: its output '%s' is not computed by a "
                 "statement", a->what, t->name);
      return false;
    }
  }
  return true;
}

AneParts *ane_parts_prepare(const OrionBackendVtable *device, void *device_impl, OrionProgram *p, uint32_t fn,
                            const char *mil, size_t mil_len, const uint32_t *placed, const struct AneCostModel *cost,
                            const OrionPrepareOptions *opt, Diag *d) {
  AneParts *a = calloc(1, sizeof *a);
  a->device = device;
  a->device_impl = device_impl;
  for (uint32_t i = 0; i < orion_weight_count(p, fn); i++) a->writable |= orion_weight_data_writable(p, fn, i) != NULL;
  a->p = p;
  a->fn = fn;
  a->f = orion_function_mil(p, fn);
  snprintf(a->what, sizeof a->what, "function '%s'", orion_function_name(p, fn));
  a->mil = malloc(mil_len + 1);
  memcpy(a->mil, mil, mil_len);
  a->mil[mil_len] = '\0';
  a->mil_len = mil_len;
  a->numerics = opt ? opt->numerics : ORION_NUMERICS_ANE;
  srcset_init(&a->sources);
  diag_init(&a->diag, &a->sources);
  sb_init(&a->messages);
  a->diag.capture = &a->messages; /* the segments' messages are reported again as the caller's, naming the segment */
  a->diag.suppress_warnings = true;
  a->diag.observe = keep_first_error;
  a->diag.observe_ctx = a;
  ane_partition_plan_placed(&a->plan, a->f, placed, cost);
  a->segs = calloc(a->plan.nsegs + 1, sizeof *a->segs);
  make_values(a);
  a->cpu = orion_backend_open("cpu", NULL, &a->diag);
  bool ok = a->cpu != NULL;
  if (!ok)
    diag_error(d, (SrcSpan){0}, "the ane backend cannot run %s in parts: %s", a->what,
               a->first_error[0] ? a->first_error : "the cpu backend does not open");
  ok = ok && wire(a, d) && build_segments(a, d);
  if (!ok) {
    ane_parts_free(a);
    return NULL;
  }
  return a;
}

bool ane_parts_run(AneParts *a, const OrionTensor *in, const OrionTensor *out, Diag *d) {
  for (uint32_t s = 0; s < a->plan.nsegs; s++) {
    const AneSegment *plan = &a->plan.segs[s];
    AnePartsSegment *g = &a->segs[s];
    OrionTensor *sin = calloc(plan->ninputs + 1, sizeof *sin), *sout = calloc(plan->noutputs + 1, sizeof *sout);
    bool ok = true;
    for (uint32_t i = 0; i < plan->ninputs; i++) {
      const OrionTensor *v = plan->inputs[i].def_stmt == MIL_DEF_PARAM
                                 ? &in[a->input_of_param[plan->inputs[i].def_index]]
                                 : value_buffer(a, &plan->inputs[i]);
      if (v) sin[i] = *v;
      ok = ok && v; /* wire() checked every one */
    }
    for (uint32_t i = 0; i < plan->noutputs; i++)
      if (g->out[i]) sout[i] = *g->out[i];
    ok = ok && (g->device_exec ? a->device->run(g->device_exec, sin, sout, &a->diag)
                               : orion_exec_run(g->exec, sin, sout, &a->diag));
    free(sin);
    free(sout);
    if (!ok) return segment_failed(a, s, "run", d);
  }
  uint32_t nout = orion_output_count(a->p, a->fn);
  for (uint32_t i = 0; i < nout; i++) {
    const OrionTensorInfo *t = orion_output(a->p, a->fn, i);
    for (uint32_t r = 0; r < a->f->nreturns; r++)
      if (!strcmp(a->f->returns[r].name, t->mil_name)) {
        AneValue v = {t->mil_name, a->f->returns[r].def_stmt, a->f->returns[r].def_index};
        const OrionTensor *value = value_buffer(a, &v);
        if (value) memcpy(out[i].data, value->data, t->bytes); /* wire() checked it is there */
      }
  }
  return true;
}

/* The program's current bytes of each weight the segment's function reads, into the segment's writable mapping
 * (the segment's weight files are the program's, so the names match). */
static bool copy_weights(AneParts *a, uint32_t seg) {
  OrionProgram *sp = a->segs[seg].prog;
  for (uint32_t i = 0; i < orion_weight_count(sp, 0); i++) {
    const OrionWeight *w = orion_weight(sp, 0, i);
    void *dst = orion_weight_data_writable(sp, 0, i);
    bool found = false;
    for (uint32_t j = 0; j < orion_weight_count(a->p, a->fn) && !found; j++) {
      const OrionWeight *from = orion_weight(a->p, a->fn, j);
      if (strcmp(from->name, w->name) || from->size != w->size || !dst) continue;
      memcpy(dst, from->data, (size_t)w->size);
      orion_program_note_weight_written(sp, dst, (size_t)w->size);
      found = true;
    }
    if (!found) {
      snprintf(a->first_error, sizeof a->first_error, "its weight '%s' is not the program's", w->name);
      return false;
    }
  }
  return true;
}

/* A device segment of a program reloaded from its files (a patch taken up by orion_backend_update_weights): the
 * segment's directory is written again under its own name from the program's new bytes, the segment's program
 * maps them as a reload does, and the backend updates its compiled program by the self-test's strategy, as for
 * any program reloaded (no compile under reload-files and patch-data). False, the segment as it was, when the
 * name is taken or a step fails before the backend is told; *told says whether it was. */
static bool reload_device_segment(AneParts *a, uint32_t seg, bool *told) {
  AnePartsSegment *g = &a->segs[seg];
  *told = false;
  const char *dir = orion_program_path(g->prog);
  struct stat st;
  if (lstat(dir, &st) == 0 || !temp_make_named_dir(dir)) return false; /* registered: an interrupt removes it */
  OrionOpenOptions remap = {.verify_checksums = false, .reload = ORION_RELOAD_REMAP};
  bool moved = false;
  bool ok = write_segment(a, seg, dir) && orion_reload_weights(g->prog, &remap, &moved, &a->diag);
  temp_remove(dir); /* the mapping keeps the bytes */
  if (!ok) return false;
  *told = true;
  /* The previous mapping holds during the call, as orion_backend_update_weights promises a backend. */
  if (!a->device->weights_changed(g->device_exec, &a->diag)) {
    orion_reload_weights_undo(g->prog);
    return false;
  }
  orion_release_retired_weights(g->prog);
  return true;
}

/* A device segment of a program written in place: its mapping takes the new bytes and the backend updates its
 * compiled program by the self-test's strategy (ane_backend.c); of a program reloaded from its files, the same
 * through the segment's own reload (above). A CPU segment is built again from the program's bytes (no compile). */
bool ane_parts_weights_changed(AneParts *a, Diag *d) {
  forget_messages(a);
  for (uint32_t s = 0; s < a->plan.nsegs; s++) {
    AnePartsSegment *g = &a->segs[s];
    if (g->device_exec && a->writable) {
      if (!copy_weights(a, s)) return segment_failed(a, s, "update", d);
      if (!a->device->weights_changed(g->device_exec, &a->diag)) return segment_failed(a, s, "update", d);
      continue;
    }
    bool told = false;
    if (g->device_exec && reload_device_segment(a, s, &told)) continue;
    if (told) return segment_failed(a, s, "update", d); /* the backend refused: its error, not a rebuild's */
    release_segment(a, s);
    if (!build_segment(a, s, d)) return false;
  }
  return true;
}

void ane_parts_free(AneParts *a) {
  if (!a) return;
  release_segments(a);
  for (uint32_t s = 0; a->segs && s < a->plan.nsegs; s++) {
    free(a->segs[s].out);
  }
  free(a->segs);
  for (uint32_t i = 0; i < a->nvalues; i++) free(a->values[i].data);
  free(a->values);
  free(a->value_ids);
  free(a->input_of_param);
  orion_backend_close(a->cpu);
  ane_partition_free(&a->plan);
  sb_free(&a->messages);
  srcset_free(&a->sources);
  free(a->mil);
  free(a);
}
