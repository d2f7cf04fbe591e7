/*
 * The text of orionc --summary: what a compiled program takes, gives and
 * holds, of the graph with calls expanded.
 */
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

void compile_summary(IrModule *m, const char *input, StrBuf *out) {
  uint32_t nfuncs = 0;
  for (IrFuncId f = 1; f < m->nfuncs; f++) nfuncs += !m->funcs[f].dead;
  sb_printf(out, "%s: %u function%s\n", input, nfuncs, nfuncs == 1 ? "" : "s");
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    IrFunc *fn = ir_func(m, f);
    if (fn->dead) continue;
    uint64_t nparams = 0, elements = 0, bytes = 0, nconsts = 0;
    for (uint32_t i = 0; i < fn->ndecls; i++) {
      IrValue *v = ir_value(m, fn->decls[i]);
      if (v->kind != VK_PARAM) {
        nconsts++;
        continue;
      }
      nparams++;
      elements += ir_type_elements(&v->type);
      bytes += ir_type_elements(&v->type) * ir_dtype_size(v->type.dtype);
    }
    char size[32];
    sb_printf(out, "func %s: %u input%s, %u output%s, %u ops, %llu params (%llu weights, %s), %llu consts\n", fn->name,
              fn->ninputs, fn->ninputs == 1 ? "" : "s", fn->noutputs, fn->noutputs == 1 ? "" : "s", fn->nops,
              (unsigned long long)nparams, (unsigned long long)elements, human_bytes(bytes, size, sizeof size),
              (unsigned long long)nconsts);
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
