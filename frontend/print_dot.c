/*
 * Graphviz view of a module (orionc --emit=dot): one cluster per function,
 * a node per input, param, const and op, an edge per use labelled with the
 * value's type. `dot -Tsvg` renders it.
 */
#include <string.h>

#include "orion/ir.h"

static void put_escaped(StrBuf *sb, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') sb_putc(sb, '\\');
    sb_putc(sb, *s);
  }
}

static void put_value_node(IrModule *m, StrBuf *sb, IrValueId v) {
  IrValue *val = ir_value(m, v);
  static const char *const shapes[] = {[VK_INPUT] = "invhouse", [VK_PARAM] = "box3d", [VK_CONST] = "note"};
  sb_printf(sb, "    v%u [shape=%s, label=\"", v.id, shapes[val->kind]);
  put_escaped(sb, val->name);
  sb_puts(sb, "\\n");
  ir_type_print(sb, &val->type);
  sb_puts(sb, "\"];\n");
}

/* The node a value comes from: its op for results, itself otherwise. */
static void put_source(IrModule *m, StrBuf *sb, IrValueId v) {
  IrValue *val = ir_value(m, v);
  if (val->kind == VK_RESULT) sb_printf(sb, "op%u", val->def.id);
  else sb_printf(sb, "v%u", v.id);
}

static void put_edge_label(IrModule *m, StrBuf *sb, IrValueId v) {
  sb_puts(sb, " [label=\"");
  ir_type_print(sb, &ir_value(m, v)->type);
  sb_puts(sb, "\"]");
}

void ir_print_dot(IrModule *m, StrBuf *sb) {
  sb_puts(sb, "digraph orion {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    IrFunc *fn = ir_func(m, f);
    if (fn->dead) continue;
    sb_printf(sb, "  subgraph cluster_f%u {\n    label=\"", f);
    put_escaped(sb, fn->name);
    sb_puts(sb, "\";\n");
    for (uint32_t i = 0; i < fn->ninputs; i++) put_value_node(m, sb, fn->inputs[i]);
    for (uint32_t i = 0; i < fn->ndecls; i++) put_value_node(m, sb, fn->decls[i]);
    IR_FOR_EACH_OP(m, f, op) {
      IrOp *o = ir_op(m, op);
      sb_printf(sb, "    op%u [shape=ellipse, label=\"", op.id);
      put_escaped(sb, o->kind == OP_CALL ? ir_func(m, o->callee)->name : ir_op_info(o->kind)->name);
      sb_puts(sb, "\\n");
      for (uint32_t r = 0; r < o->nresults; r++) {
        if (r) sb_puts(sb, ", ");
        put_escaped(sb, ir_value(m, o->results[r])->name);
      }
      sb_puts(sb, "\"];\n");
      for (uint32_t i = 0; i < o->ninputs; i++) {
        sb_puts(sb, "    ");
        put_source(m, sb, o->inputs[i]);
        sb_printf(sb, " -> op%u", op.id);
        put_edge_label(m, sb, o->inputs[i]);
        sb_puts(sb, ";\n");
      }
    }
    for (uint32_t i = 0; i < fn->noutputs; i++) {
      sb_printf(sb, "    out%u_%u [shape=house, label=\"", f, i);
      put_escaped(sb, fn->outputs[i].name);
      sb_puts(sb, "\"];\n    ");
      put_source(m, sb, fn->outputs[i].value);
      sb_printf(sb, " -> out%u_%u", f, i);
      put_edge_label(m, sb, fn->outputs[i].value);
      sb_puts(sb, ";\n");
    }
    sb_puts(sb, "  }\n");
  }
  sb_puts(sb, "}\n");
}
