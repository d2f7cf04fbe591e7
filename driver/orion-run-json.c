/*
 * orion-run --json: the run's report as one JSON object on standard output
 * (instead of the lines on stderr): what ran, the timings of --repeat, the
 * outputs written, and with --profile every statement's time.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "orion-run.h"

static cJSON *shape(const CpuTensor *t) {
  cJSON *a = cJSON_CreateArray();
  for (uint32_t i = 0; i < t->rank; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->dims[i]));
  return a;
}

/* Op kinds in order of first appearance; statements in MIL order. */
static cJSON *profile(const OrionExec *exec, SourceSet *sources, uint32_t runs) {
  cJSON *p = cJSON_CreateObject();
  uint32_t n = orion_exec_profile_count(exec);
  double total = 0;
  for (uint32_t i = 0; i < n; i++) total += orion_exec_profile_stmt(exec, i)->ms;
  cJSON_AddNumberToObject(p, "runs", runs);
  cJSON_AddNumberToObject(p, "ms_in_ops", total);
  cJSON *kinds = cJSON_AddArrayToObject(p, "ops");
  for (uint32_t i = 0; i < n; i++) {
    const OrionStmtTime *e = orion_exec_profile_stmt(exec, i);
    bool seen = false;
    for (uint32_t k = 0; k < i && !seen; k++) seen = !strcmp(orion_exec_profile_stmt(exec, k)->op, e->op);
    if (seen) continue;
    uint32_t count = 0;
    double ms = 0;
    for (uint32_t k = i; k < n; k++)
      if (!strcmp(orion_exec_profile_stmt(exec, k)->op, e->op)) {
        count++;
        ms += orion_exec_profile_stmt(exec, k)->ms;
      }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", e->op);
    cJSON_AddNumberToObject(o, "count", count);
    cJSON_AddNumberToObject(o, "ms", ms);
    cJSON_AddItemToArray(kinds, o);
  }
  cJSON *stmts = cJSON_AddArrayToObject(p, "statements");
  for (uint32_t i = 0; i < n; i++) {
    const OrionStmtTime *e = orion_exec_profile_stmt(exec, i);
    uint32_t line = 0, col = 0;
    const SourceFile *sf = e->loc.file ? srcset_get(sources, e->loc.file) : NULL;
    if (sf) srcset_linecol(sources, e->loc.file, e->loc.start, &line, &col);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", e->op);
    cJSON_AddStringToObject(o, "name", e->name);
    if (sf) cJSON_AddStringToObject(o, "file", sf->name);
    else cJSON_AddNullToObject(o, "file");
    cJSON_AddNumberToObject(o, "line", line);
    cJSON_AddNumberToObject(o, "column", col);
    cJSON_AddNumberToObject(o, "runs", (double)e->runs);
    cJSON_AddNumberToObject(o, "ms", e->ms);
    cJSON_AddItemToArray(stmts, o);
  }
  return p;
}

char *orion_run_report_json(const OrionRunReport *r) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "program", r->program);
  cJSON_AddStringToObject(root, "function", r->function);
  cJSON_AddStringToObject(root, "backend", r->backend);
  cJSON_AddStringToObject(root, "numerics", r->numerics_fp32 ? "fp32" : "ane");
  cJSON_AddNumberToObject(root, "runs", r->runs);
  cJSON *t = cJSON_AddObjectToObject(root, "ms_per_run");
  cJSON_AddNumberToObject(t, "mean", r->total_ms / r->runs);
  cJSON_AddNumberToObject(t, "best", r->best_ms);
  cJSON *outs = cJSON_AddArrayToObject(root, "outputs");
  for (uint32_t i = 0; i < r->noutputs; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->output_names[i]);
    cJSON_AddStringToObject(o, "file", r->output_files[i]);
    cJSON_AddStringToObject(o, "dtype", mil_dtype_name(r->outputs[i].dtype));
    cJSON_AddItemToObject(o, "shape", shape(&r->outputs[i]));
    cJSON_AddItemToArray(outs, o);
  }
  if (r->exec) cJSON_AddItemToObject(root, "profile", profile(r->exec, r->sources, r->runs));
  else cJSON_AddNullToObject(root, "profile");
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) ice("out of memory writing JSON");
  return text;
}
