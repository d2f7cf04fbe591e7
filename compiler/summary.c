/*
 * orionc --summary: what a compiled program takes, gives and holds, of the
 * graph with calls expanded, as text or (--json) as one JSON object.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "compile_internal.h"

/* "512 B", "14.2 KiB", "27.04 MiB": sizes people read at a glance. */
static const char *human_bytes(uint64_t n, char *buf, size_t len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (n < 1024) {
    snprintf(buf, len, "%llu B", (unsigned long long)n);
    return buf;
  }
  double v = (double)n / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, len, "%.2f %s", v, units[u]);
  return buf;
}

/* The counts of one function's declarations. */
typedef struct DeclCounts {
  uint64_t params, elements, bytes, consts;
} DeclCounts;

static DeclCounts count_decls(IrModule *m, IrFunc *fn) {
  DeclCounts c = {0};
  for (uint32_t i = 0; i < fn->ndecls; i++) {
    IrValue *v = ir_value(m, fn->decls[i]);
    if (v->kind != VK_PARAM) {
      c.consts++;
      continue;
    }
    c.params++;
    c.elements += ir_type_elements(&v->type);
    c.bytes += ir_type_elements(&v->type) * ir_dtype_size(v->type.dtype);
  }
  return c;
}

static cJSON *value_json(const char *name, const IrType *t) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", name);
  cJSON_AddStringToObject(o, "dtype", ir_dtype_name(t->dtype));
  cJSON *shape = cJSON_AddArrayToObject(o, "shape");
  for (uint32_t k = 0; k < t->rank; k++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->dims[k]));
  return o;
}

static void summary_json(IrModule *m, const char *input, const CompileTraining *train, StrBuf *out) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "source", input);
  if (train) {
    cJSON *t = cJSON_AddObjectToObject(root, "training");
    cJSON_AddStringToObject(t, "forward", train->contract->forward);
    cJSON_AddStringToObject(t, "backward", train->contract->backward);
    cJSON_AddNumberToObject(t, "saved_values", train->nsaved);
    cJSON_AddNumberToObject(t, "saved_bytes", (double)train->saved_bytes);
    cJSON_AddNumberToObject(t, "params_trained", train->trained);
    cJSON_AddNumberToObject(t, "params_frozen", train->frozen);
    if (train->contract->vocabulary) cJSON_AddNumberToObject(t, "vocabulary", (double)train->contract->vocabulary);
    else cJSON_AddNullToObject(t, "vocabulary");
    if (train->contract->nadapters) cJSON_AddNumberToObject(t, "lora_adapters", train->contract->nadapters);
  }
  cJSON *fns = cJSON_AddArrayToObject(root, "functions");
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    IrFunc *fn = ir_func(m, f);
    if (fn->dead) continue;
    DeclCounts c = count_decls(m, fn);
    cJSON *fo = cJSON_CreateObject();
    cJSON_AddStringToObject(fo, "name", fn->name);
    cJSON *ins = cJSON_AddArrayToObject(fo, "inputs");
    for (uint32_t i = 0; i < fn->ninputs; i++) {
      IrValue *v = ir_value(m, fn->inputs[i]);
      cJSON_AddItemToArray(ins, value_json(v->name, &v->type));
    }
    cJSON *outs = cJSON_AddArrayToObject(fo, "outputs");
    for (uint32_t i = 0; i < fn->noutputs; i++)
      cJSON_AddItemToArray(outs, value_json(fn->outputs[i].name, &ir_value(m, fn->outputs[i].value)->type));
    cJSON_AddNumberToObject(fo, "op_count", fn->nops);
    cJSON_AddNumberToObject(fo, "params", (double)c.params);
    cJSON_AddNumberToObject(fo, "weight_elements", (double)c.elements);
    cJSON_AddNumberToObject(fo, "weight_bytes", (double)c.bytes);
    cJSON_AddNumberToObject(fo, "consts", (double)c.consts);
    uint32_t counts[OP_COUNT] = {0};
    IR_FOR_EACH_OP(m, f, op) counts[ir_op(m, op)->kind]++;
    cJSON *ops = cJSON_AddObjectToObject(fo, "ops");
    for (int k = 0; k < OP_COUNT; k++)
      if (counts[k]) cJSON_AddNumberToObject(ops, ir_op_info((IrOpKind)k)->name, counts[k]);
    cJSON_AddItemToArray(fns, fo);
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) ice("out of memory writing JSON");
  sb_puts(out, text);
  sb_putc(out, '\n');
  free(text);
}

void compile_summary(IrModule *m, const char *input, const CompileTraining *train, bool json, StrBuf *out) {
  if (json) {
    summary_json(m, input, train, out);
    return;
  }
  uint32_t nfuncs = 0;
  for (IrFuncId f = 1; f < m->nfuncs; f++) nfuncs += !m->funcs[f].dead;
  sb_printf(out, "%s: %u function%s\n", input, nfuncs, nfuncs == 1 ? "" : "s");
  if (train) {
    char size[32];
    sb_printf(out, "training: forward %s, backward %s; saved %u value%s (%s, %llu bytes); params %u trained, %u frozen",
              train->contract->forward, train->contract->backward, train->nsaved, train->nsaved == 1 ? "" : "s",
              human_bytes(train->saved_bytes, size, sizeof size), (unsigned long long)train->saved_bytes,
              train->trained, train->frozen);
    if (train->contract->vocabulary) sb_printf(out, "; vocabulary %llu", (unsigned long long)train->contract->vocabulary);
    if (train->contract->nadapters)
      sb_printf(out, "; LoRA adapters %u (%u inputs trained)", train->contract->nadapters, 2 * train->contract->nadapters);
    sb_putc(out, '\n');
  }
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    IrFunc *fn = ir_func(m, f);
    if (fn->dead) continue;
    DeclCounts c = count_decls(m, fn);
    char size[32];
    sb_printf(out, "func %s: %u input%s, %u output%s, %u ops, %llu params (%llu weights, %s), %llu consts\n", fn->name,
              fn->ninputs, fn->ninputs == 1 ? "" : "s", fn->noutputs, fn->noutputs == 1 ? "" : "s", fn->nops,
              (unsigned long long)c.params, (unsigned long long)c.elements, human_bytes(c.bytes, size, sizeof size),
              (unsigned long long)c.consts);
    StrBuf sb;
    sb_init(&sb);
    for (uint32_t i = 0; i < fn->ninputs; i++) {
      IrValue *v = ir_value(m, fn->inputs[i]);
      sb.len = 0;
      ir_type_print(&sb, &v->type);
      sb_printf(out, "  input  %s: %s\n", v->name, sb.data);
    }
    for (uint32_t i = 0; i < fn->noutputs; i++) {
      IrValue *v = ir_value(m, fn->outputs[i].value);
      sb.len = 0;
      ir_type_print(&sb, &v->type);
      sb_printf(out, "  output %s: %s\n", fn->outputs[i].name, sb.data);
    }
    uint32_t counts[OP_COUNT] = {0};
    IR_FOR_EACH_OP(m, f, op) counts[ir_op(m, op)->kind]++;
    sb.len = 0;
    for (int k = 0; k < OP_COUNT; k++)
      if (counts[k]) sb_printf(&sb, "%s%s %u", sb.len ? ", " : "", ir_op_info((IrOpKind)k)->name, counts[k]);
    if (sb.len) sb_printf(out, "  ops: %s\n", sb.data);
    sb_free(&sb);
  }
}
