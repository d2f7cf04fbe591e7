/*
 * The probe report as JSON: a chip entry in the constraint table's format
 * (constraints/ane_constraints.json, "chips"), which can replace the
 * chip's entry there, and every measurement under "probe" for the record.
 */
#include "probe_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static void add_text(cJSON *o, const char *key, const char *s) {
  if (s) cJSON_AddStringToObject(o, key, s);
  else cJSON_AddNullToObject(o, key);
}

/* One sourced value of the chip entry from the table's (or the target's default). */
static cJSON *table_value(const ConstraintChipValue *v, uint64_t value) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "value", (double)value);
  cJSON_AddBoolToObject(o, "inherited", v->inherited);
  cJSON_AddStringToObject(o, "source", v->source);
  cJSON_AddBoolToObject(o, "disputed", v->disputed);
  if (v->disputed) cJSON_AddStringToObject(o, "dispute_note", v->dispute_note);
  return o;
}

static cJSON *probed_value(uint64_t value, const char *source) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "value", (double)value);
  cJSON_AddBoolToObject(o, "inherited", false);
  cJSON_AddStringToObject(o, "source", source);
  cJSON_AddBoolToObject(o, "disputed", false);
  return o;
}

typedef struct Known {
  ConstraintChipValue value; /* what the entry says when no probe measured it */
  uint64_t number;
} Known;

static cJSON *chip_number(bool measured, uint64_t value, const char *how, const char *stamp, const Known *k) {
  if (!measured) return table_value(&k->value, k->number);
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "orion-run probe (%s): %s", stamp, how);
  cJSON *o = probed_value(value, sb.data);
  sb_free(&sb);
  return o;
}

static cJSON *chip_entry(const OrionProbeReport *r, const ConstraintTable *table, const char *chip, const char *stamp) {
  const ConstraintChip *c = constraints_chip(table, chip);
  MilTarget target = r->dialects.found ? r->dialects.newest : c ? c->target : r->target;
  const ConstraintTarget *defaults = constraints_target(table, target);
  Known surface, sram, dim;
  StrBuf inherited_source; /* cJSON copies it */
  sb_init(&inherited_source);
  if (c) {
    /* An inherited figure follows the target (the dialect probe may have changed it). */
    surface = (Known){c->min_surface_bytes,
                      c->min_surface_bytes.inherited ? defaults->min_surface_bytes : c->min_surface_bytes.value};
    sram = (Known){c->sram_budget_bytes,
                   c->sram_budget_bytes.inherited ? defaults->sram_budget_bytes : c->sram_budget_bytes.value};
    dim = (Known){c->max_tensor_dim, c->max_tensor_dim.inherited ? defaults->max_tensor_dim : c->max_tensor_dim.value};
  } else {
    sb_printf(&inherited_source, "no figure for this chip yet: the default of target %s", mil_target_name(target));
    ConstraintChipValue inherited = {.inherited = true, .source = inherited_source.data};
    surface = (Known){inherited, defaults->min_surface_bytes};
    sram = (Known){inherited, defaults->sram_budget_bytes};
    dim = (Known){inherited, defaults->max_tensor_dim};
  }
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "description", c ? c->description : "a chip orion-run probe measured (describe it)");
  if (r->dialects.found) {
    StrBuf src;
    sb_init(&src);
    sb_printf(&src, "orion-run probe (%s): the newest MIL dialect whose relu program was accepted", stamp);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "value", mil_target_name(r->dialects.newest));
    cJSON_AddBoolToObject(t, "inherited", false);
    cJSON_AddStringToObject(t, "source", src.data);
    cJSON_AddBoolToObject(t, "disputed", false);
    cJSON_AddItemToObject(e, "target", t);
    sb_free(&src);
  } else if (c) {
    cJSON *t = table_value(&c->dialect, 0);
    cJSON_ReplaceItemInObject(t, "value", cJSON_CreateString(mil_target_name(c->target)));
    cJSON_AddItemToObject(e, "target", t);
  } else {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "value", mil_target_name(target));
    cJSON_AddBoolToObject(t, "inherited", false);
    cJSON_AddStringToObject(t, "source", "orion-run probe: the dialect its programs were written in and accepted");
    cJSON_AddBoolToObject(t, "disputed", false);
    cJSON_AddItemToObject(e, "target", t);
  }
  const OrionProbeSearch *s = &r->surface, *ch = &r->channels;
  uint64_t unit = ORION_PROBE_WIDTH * 2;
  StrBuf how;
  sb_init(&how);
  sb_printf(&how, "the smallest [1, C, 1, %u] fp16 relu surface accepted (C = %llu; %llu bytes rejected)",
            ORION_PROBE_WIDTH, (unsigned long long)s->accepted, (unsigned long long)(s->rejected * unit));
  cJSON_AddItemToObject(e, "min_surface_bytes", chip_number(s->found, s->accepted * unit, how.data, stamp, &surface));
  sb_free(&how);
  sb_init(&how);
  sb_printf(&how, "time per FLOP of a [1, 1, n, n] matmul rises past this working set (inputs and output, fp16)");
  cJSON_AddItemToObject(e, "sram_budget_bytes", chip_number(r->sram.knee_found, r->sram.knee_bytes, how.data, stamp, &sram));
  sb_free(&how);
  sb_init(&how);
  sb_printf(&how, "the largest channel count of a [1, C, 1, %u] fp16 relu accepted (%llu rejected)", ORION_PROBE_WIDTH,
            (unsigned long long)ch->rejected);
  cJSON_AddItemToObject(e, "max_tensor_dim", chip_number(ch->found, ch->accepted, how.data, stamp, &dim));
  sb_free(&how);
  sb_free(&inherited_source);
  return e;
}

static cJSON *search_json(const OrionProbeSearch *s, bool bytes) {
  cJSON *o = cJSON_CreateObject();
  uint64_t unit = bytes ? ORION_PROBE_WIDTH * 2 : 1;
  cJSON_AddBoolToObject(o, "found", s->found);
  cJSON_AddBoolToObject(o, "all_accepted", s->all_accepted);
  cJSON_AddBoolToObject(o, "none_accepted", s->none);
  const char *key_acc = bytes ? "smallest_accepted_bytes" : "largest_accepted";
  const char *key_rej = bytes ? "largest_rejected_bytes" : "smallest_rejected";
  if (s->accepted) cJSON_AddNumberToObject(o, key_acc, (double)(s->accepted * unit));
  else cJSON_AddNullToObject(o, key_acc);
  if (s->rejected) cJSON_AddNumberToObject(o, key_rej, (double)(s->rejected * unit));
  else cJSON_AddNullToObject(o, key_rej);
  cJSON_AddNumberToObject(o, bytes ? "range_min_bytes" : "range_min", (double)(s->lo * unit));
  cJSON_AddNumberToObject(o, bytes ? "range_max_bytes" : "range_max", (double)(s->hi * unit));
  add_text(o, "error", s->error);
  cJSON *a = cJSON_AddArrayToObject(o, "attempts");
  for (uint32_t i = 0; i < s->nattempts; i++) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "channels", (double)s->attempts[i].size);
    cJSON_AddNumberToObject(t, "bytes", (double)(s->attempts[i].size * ORION_PROBE_WIDTH * 2));
    cJSON_AddBoolToObject(t, "accepted", s->attempts[i].accepted);
    add_text(t, "error", s->attempts[i].error);
    cJSON_AddItemToArray(a, t);
  }
  return o;
}

static cJSON *acceptance_json(const OrionProbeAcceptance *a) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "rule", a->rule);
  cJSON_AddBoolToObject(o, "accepted", a->accepted);
  add_text(o, "error", a->error);
  return o;
}

static cJSON *probe_json(const OrionProbeReport *r, const char *chip, const char *version, const char *date) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "orion_version", version);
  cJSON_AddStringToObject(p, "date", date);
  cJSON_AddStringToObject(p, "backend", r->backend);
  cJSON_AddStringToObject(p, "chip", chip);
  cJSON_AddStringToObject(p, "target", mil_target_name(r->target));
  cJSON_AddNumberToObject(p, "programs_prepared", r->prepared);
  if (r->dialects.ran) {
    cJSON *o = cJSON_AddObjectToObject(p, "dialects");
    for (int t = MIL_IOS16; t <= MIL_IOS18; t++) {
      cJSON *d = cJSON_AddObjectToObject(o, mil_target_name((MilTarget)t));
      cJSON_AddStringToObject(d, "program", mil_program_version((MilTarget)t));
      cJSON_AddBoolToObject(d, "accepted", r->dialects.accepted[t]);
      add_text(d, "error", r->dialects.error[t]);
    }
  }
  if (r->channels.ran) cJSON_AddItemToObject(p, "channels", search_json(&r->channels, false));
  if (r->surface.ran) cJSON_AddItemToObject(p, "surface", search_json(&r->surface, true));
  if (r->concat.ran) cJSON_AddItemToObject(p, "concat", acceptance_json(&r->concat));
  if (r->gelu.ran) cJSON_AddItemToObject(p, "gelu", acceptance_json(&r->gelu));
  if (r->sram.ran) {
    cJSON *o = cJSON_AddObjectToObject(p, "sram");
    cJSON *a = cJSON_AddArrayToObject(o, "points");
    for (uint32_t i = 0; i < r->sram.npoints; i++) {
      const OrionProbePoint *pt = &r->sram.points[i];
      cJSON *t = cJSON_CreateObject();
      cJSON_AddNumberToObject(t, "n", (double)pt->n);
      cJSON_AddNumberToObject(t, "working_set_bytes", (double)pt->working_set_bytes);
      cJSON_AddNumberToObject(t, "flops", pt->flops);
      cJSON_AddNumberToObject(t, "best_ms", pt->best_ms);
      cJSON_AddNumberToObject(t, "ns_per_flop", pt->ns_per_flop);
      cJSON_AddItemToArray(a, t);
    }
    cJSON_AddBoolToObject(o, "knee_found", r->sram.knee_found);
    if (r->sram.knee_found) cJSON_AddNumberToObject(o, "knee_bytes", (double)r->sram.knee_bytes);
    else cJSON_AddNullToObject(o, "knee_bytes");
    add_text(o, "error", r->sram.error);
  }
  if (r->dispatch.ran) {
    cJSON *o = cJSON_AddObjectToObject(p, "dispatch");
    cJSON_AddBoolToObject(o, "ok", r->dispatch.ok);
    cJSON_AddNumberToObject(o, "channels", (double)r->dispatch.channels);
    cJSON_AddNumberToObject(o, "runs", r->dispatch.runs);
    cJSON_AddNumberToObject(o, "best_ms", r->dispatch.best_ms);
    cJSON_AddNumberToObject(o, "median_ms", r->dispatch.median_ms);
    add_text(o, "error", r->dispatch.error);
  }
  if (r->compiles.ran) {
    cJSON *o = cJSON_AddObjectToObject(p, "compiles");
    cJSON_AddNumberToObject(o, "cap", r->compiles.cap);
    cJSON_AddBoolToObject(o, "failed", r->compiles.failed);
    if (r->compiles.failed) cJSON_AddNumberToObject(o, "budget", r->compiles.budget);
    else cJSON_AddNullToObject(o, "budget");
    cJSON_AddNumberToObject(o, "this_probe", r->compiles.this_probe);
    add_text(o, "error", r->compiles.error);
  }
  return p;
}

char *orion_probe_report_json(const OrionProbeReport *r, const ConstraintTable *table, const char *chip,
                              const char *version, const char *date) {
  StrBuf stamp;
  sb_init(&stamp);
  sb_printf(&stamp, "orion %s, backend %s, %s", version, r->backend, date);
  cJSON *root = cJSON_CreateObject();
  cJSON *chips = cJSON_AddObjectToObject(root, "chips");
  cJSON_AddItemToObject(chips, chip, chip_entry(r, table, chip, stamp.data));
  cJSON_AddItemToObject(root, "probe", probe_json(r, chip, version, date));
  sb_free(&stamp);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}
