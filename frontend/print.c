/*
 * Canonical .oir printer. The output parses back to the same module, and
 * printing that gives the same text: inputs in the header, params and consts
 * in declaration order, ops in program order with their result types,
 * attributes in the op table's order, numbers in their shortest exact form.
 */
#include <string.h>

#include "orion/ir.h"

static void put_string(StrBuf *sb, const char *s) {
  sb_putc(sb, '"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') sb_putc(sb, '\\');
    if (*s == '\n') sb_puts(sb, "\\n");
    else if (*s == '\t') sb_puts(sb, "\\t");
    else sb_putc(sb, *s);
  }
  sb_putc(sb, '"');
}

static void put_attr_value(StrBuf *sb, const IrAttrValue *v) {
  switch (v->kind) {
  case ATTR_INT: sb_printf(sb, "%lld", (long long)v->u.i); break;
  case ATTR_FLOAT: sb_put_double(sb, v->u.f); break;
  case ATTR_BOOL: sb_puts(sb, v->u.b ? "true" : "false"); break;
  case ATTR_STR: put_string(sb, v->u.s); break;
  case ATTR_LIST:
    sb_putc(sb, '[');
    for (uint32_t i = 0; i < v->u.list.n; i++) {
      if (i) sb_puts(sb, ", ");
      put_attr_value(sb, &v->u.list.items[i]);
    }
    sb_putc(sb, ']');
    break;
  }
}

static void put_number(StrBuf *sb, IrDType t, double v) {
  if (t == DT_BOOL) sb_puts(sb, v != 0 ? "true" : "false");
  else if (!ir_dtype_is_float(t)) sb_printf(sb, "%lld", (long long)v);
  else sb_put_double(sb, v);
}

/* Nested lists following the shape, so the text reads like the tensor. */
static void put_const_data(StrBuf *sb, const IrValue *v, int dim, uint64_t *pos) {
  if (dim == v->type.rank) {
    put_number(sb, v->type.dtype, v->data[(*pos)++]);
    return;
  }
  sb_putc(sb, '[');
  for (int64_t i = 0; i < v->type.dims[dim]; i++) {
    if (i) sb_puts(sb, ", ");
    put_const_data(sb, v, dim + 1, pos);
  }
  sb_putc(sb, ']');
}

static void put_source(StrBuf *sb, const IrParamSource *s) {
  switch (s->kind) {
  case SRC_ZEROS: sb_puts(sb, "zeros"); break;
  case SRC_ONES: sb_puts(sb, "ones"); break;
  case SRC_FILL:
    sb_puts(sb, "fill(");
    sb_put_double(sb, s->a);
    sb_putc(sb, ')');
    break;
  case SRC_NORMAL:
  case SRC_UNIFORM:
    sb_printf(sb, "%s(seed=%llu, %s=", s->kind == SRC_NORMAL ? "normal" : "uniform", (unsigned long long)s->seed,
              s->kind == SRC_NORMAL ? "mean" : "low");
    sb_put_double(sb, s->a);
    sb_puts(sb, s->kind == SRC_NORMAL ? ", std=" : ", high=");
    sb_put_double(sb, s->b);
    sb_putc(sb, ')');
    break;
  case SRC_SAFETENSORS:
    sb_puts(sb, "safetensors(");
    put_string(sb, s->path);
    sb_puts(sb, ", ");
    put_string(sb, s->key);
    sb_putc(sb, ')');
    break;
  case SRC_NPY:
    sb_puts(sb, "npy(");
    put_string(sb, s->path);
    sb_putc(sb, ')');
    break;
  case SRC_ROPE_COS:
  case SRC_ROPE_SIN:
    sb_puts(sb, s->kind == SRC_ROPE_COS ? "rope_cos(theta=" : "rope_sin(theta=");
    sb_put_double(sb, s->a);
    sb_putc(sb, ')');
    break;
  }
}

static void put_decl(IrModule *m, StrBuf *sb, IrValueId id) {
  IrValue *v = ir_value(m, id);
  sb_printf(sb, "  %s%s %s: ", v->kind == VK_PARAM && v->frozen ? "frozen " : "", v->kind == VK_PARAM ? "param" : "const",
            v->name);
  ir_type_print(sb, &v->type);
  sb_puts(sb, " = ");
  if (v->kind == VK_PARAM) {
    put_source(sb, &v->src);
  } else if (v->ndata == 1) {
    put_number(sb, v->type.dtype, v->data[0]);
  } else {
    uint64_t pos = 0;
    put_const_data(sb, v, 0, &pos);
  }
  sb_puts(sb, ";\n");
}

static void put_op(IrModule *m, StrBuf *sb, IrOpId id) {
  IrOp *op = ir_op(m, id);
  const IrOpInfo *info = ir_op_info(op->kind);
  sb_puts(sb, "  ");
  for (uint32_t i = 0; i < op->nresults; i++) {
    IrValue *r = ir_value(m, op->results[i]);
    sb_printf(sb, "%s%s: ", i ? ", " : "", r->name);
    ir_type_print(sb, &r->type);
  }
  sb_puts(sb, " = ");
  if (op->kind == OP_CALL) sb_printf(sb, "call %s(", ir_func(m, op->callee)->name);
  else sb_printf(sb, "%s(", info->name);
  for (uint32_t i = 0; i < op->ninputs; i++) sb_printf(sb, "%s%s", i ? ", " : "", ir_value(m, op->inputs[i])->name);
  bool first = op->ninputs == 0;
  for (uint32_t k = 0; k < info->nattrs; k++) {
    const IrAttr *a = ir_op_attr(m, id, info->attrs[k].name);
    if (!a) continue;
    sb_printf(sb, "%s%s=", first ? "" : ", ", a->name);
    put_attr_value(sb, &a->val);
    first = false;
  }
  sb_putc(sb, ')');
  if (op->kind == OP_CALL) sb_printf(sb, " as %s", op->instance);
  sb_putc(sb, ';');
  /* Analyses print as comments, so the text still parses. */
  if (op->sram_bytes) sb_printf(sb, "  // sram %llu", (unsigned long long)op->sram_bytes);
  sb_putc(sb, '\n');
}

/* io-legalize's binding table, as comments (analyses print as comments, so
 * the text still parses): each input and output with its MIL name, its
 * binding index and its bytes, and the one surface size. */
static void put_bindings(StrBuf *sb, const IrBindingTable *t) {
  sb_printf(sb, "  // io surfaces %llu bytes each (minimum %llu)\n", (unsigned long long)t->surface_bytes,
            (unsigned long long)t->min_surface_bytes);
  for (int io = 0; io < 2; io++) {
    const IrBinding *b = io ? t->outputs : t->inputs;
    uint32_t n = io ? t->noutputs : t->ninputs;
    for (uint32_t i = 0; i < n; i++)
      sb_printf(sb, "  // io %s %s: mil %s, binding %u, %llu bytes\n", io ? "output" : "input", b[i].name,
                b[i].mil_name, b[i].binding, (unsigned long long)b[i].bytes);
  }
}

void ir_print_func(IrModule *m, IrFuncId f, StrBuf *sb) {
  IrFunc *fn = ir_func(m, f);
  sb_printf(sb, "func %s(", fn->name);
  for (uint32_t i = 0; i < fn->ninputs; i++) {
    IrValue *v = ir_value(m, fn->inputs[i]);
    sb_printf(sb, "%s%s: ", i ? ", " : "", v->name);
    ir_type_print(sb, &v->type);
  }
  sb_puts(sb, ") {\n");
  if (fn->sram_peak) sb_printf(sb, "  // sram peak %llu bytes\n", (unsigned long long)fn->sram_peak);
  if (fn->bindings) put_bindings(sb, fn->bindings);
  for (uint32_t i = 0; i < fn->ndecls; i++) put_decl(m, sb, fn->decls[i]);
  IR_FOR_EACH_OP(m, f, op) put_op(m, sb, op);
  for (uint32_t g = 0; g < fn->ngroups; g++) { /* analyses print as comments */
    const IrOutputGroup *gr = &fn->groups[g];
    sb_printf(sb, "  // output %s = concat(", gr->name);
    for (uint32_t k = 0; k < gr->nparts; k++) sb_printf(sb, "%s%s", k ? ", " : "", fn->outputs[gr->first + k].name);
    sb_printf(sb, ", axis=%d)\n", gr->axis);
  }
  sb_puts(sb, "  return");
  for (uint32_t i = 0; i < fn->noutputs; i++) {
    const IrOutput *o = &fn->outputs[i];
    const char *vname = ir_value(m, o->value)->name;
    sb_puts(sb, i ? ", " : " ");
    if (strcmp(o->name, vname)) sb_printf(sb, "%s = %s", o->name, vname);
    else sb_puts(sb, vname);
  }
  sb_puts(sb, ";\n}\n");
}

void ir_print_module(IrModule *m, StrBuf *sb) {
  bool first = true;
  for (IrFuncId f = 1; f < m->nfuncs; f++) {
    if (m->funcs[f].dead) continue;
    if (!first) sb_putc(sb, '\n');
    ir_print_func(m, f, sb);
    first = false;
  }
}
