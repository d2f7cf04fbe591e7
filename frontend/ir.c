/*
 * Graph IR core: the op table, types, creation, use lists and rewriting.
 */
#include "orion/ir.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes ---- */

/* The IR's dtypes: its spelling (the .oir language's, equal to the file
 * formats' for each), size and the file formats' dtype it is. */
static const struct {
  const char *name;
  size_t size;
  OrionDType file;
} dtype_info[DT_COUNT] = {
    [DT_INVALID] = {"<invalid>", 0, ORION_DT_NONE}, [DT_FP16] = {"fp16", 2, ORION_DT_FP16},
    [DT_FP32] = {"fp32", 4, ORION_DT_FP32},         [DT_INT32] = {"int32", 4, ORION_DT_INT32},
    [DT_INT8] = {"int8", 1, ORION_DT_INT8},         [DT_UINT8] = {"uint8", 1, ORION_DT_UINT8},
    [DT_BOOL] = {"bool", 1, ORION_DT_BOOL},
};

const char *ir_dtype_name(IrDType t) { return t < DT_COUNT ? dtype_info[t].name : "<invalid>"; }
size_t ir_dtype_size(IrDType t) { return t < DT_COUNT ? dtype_info[t].size : 0; }
bool ir_dtype_is_float(IrDType t) { return t == DT_FP16 || t == DT_FP32; }

OrionDType ir_dtype_to_orion(IrDType t) { return t < DT_COUNT ? dtype_info[t].file : ORION_DT_NONE; }

IrDType ir_dtype_from_orion(OrionDType t) {
  for (int i = DT_FP16; i < DT_COUNT && t != ORION_DT_NONE; i++)
    if (dtype_info[i].file == t) return (IrDType)i;
  return DT_INVALID;
}

IrDType ir_dtype_from_name(const char *s) {
  for (int t = DT_FP16; t < DT_COUNT; t++)
    if (strcmp(s, dtype_info[t].name) == 0) return (IrDType)t;
  return DT_INVALID;
}

uint64_t ir_type_elements(const IrType *t) {
  uint64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= (uint64_t)t->dims[i];
  return n;
}

bool ir_type_equal(const IrType *a, const IrType *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

void ir_type_print(StrBuf *sb, const IrType *t) {
  sb_puts(sb, ir_dtype_name(t->dtype));
  sb_putc(sb, '[');
  for (int i = 0; i < t->rank; i++) sb_printf(sb, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  sb_putc(sb, ']');
}

/* ---- op table ---- */

static IrOpInfo op_infos[OP_COUNT];

static const char *const op_schema_text[OP_COUNT] = {
#define OP(id, name, min_in, max_in, nres, dtypes, attrs) [OP_##id] = attrs,
#include "orion/ops.def"
#undef OP
    [OP_CALL] = "",
};

static const char *const schema_kind_names[] = {"int", "float", "bool", "str", "ints", "floats"};
const char *ir_attr_schema_kind_name(IrAttrSchemaKind k) { return schema_kind_names[k]; }

/* Parses "name:kind? name:kind" once; the table is static text, so a malformed
 * line is a bug in ops.def. */
static void parse_schema(IrOpInfo *info, const char *text) {
  static char storage[OP_COUNT * 128];
  static size_t used;
  size_t n = strlen(text);
  if (used + n + 1 > sizeof storage) ice("ops.def schema storage exhausted");
  char *s = memcpy(storage + used, text, n + 1);
  used += n + 1;
  char *save = NULL;
  for (char *tok = strtok_r(s, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    char *colon = strchr(tok, ':');
    if (!colon || info->nattrs >= IR_MAX_OP_ATTRS) ice("bad ops.def schema for %s: %s", info->name, text);
    *colon = 0;
    char *kind = colon + 1;
    size_t kl = strlen(kind);
    bool opt = kl && kind[kl - 1] == '?';
    if (opt) kind[kl - 1] = 0;
    int k = -1;
    for (int i = 0; i < 6; i++)
      if (strcmp(kind, schema_kind_names[i]) == 0) k = i;
    if (k < 0) ice("bad attribute kind '%s' in ops.def", kind);
    info->attrs[info->nattrs++] = (IrAttrSchema){tok, (IrAttrSchemaKind)k, opt};
  }
}

static void init_op_infos(void) {
#define OP(id, nm, min_in, max_in, nres, dt, attrs) \
  op_infos[OP_##id] = (IrOpInfo){.name = nm, .min_inputs = min_in, .max_inputs = max_in, .results = nres, .dtypes = DTC_##dt};
#include "orion/ops.def"
#undef OP
  op_infos[OP_CALL] = (IrOpInfo){.name = "call", .min_inputs = 0, .max_inputs = -1, .results = 0, .dtypes = DTC_ANY};
  for (int k = 0; k < OP_COUNT; k++) parse_schema(&op_infos[k], op_schema_text[k]);
}

/* Built on first use, once even if threads (a runtime's, a plugin's) ask at
 * the same time. */
static pthread_once_t op_infos_once = PTHREAD_ONCE_INIT;

const IrOpInfo *ir_op_info(IrOpKind k) {
  pthread_once(&op_infos_once, init_op_infos);
  return &op_infos[k];
}

IrOpKind ir_op_from_name(const char *name) {
  for (int k = 0; k < OP_CALL; k++)
    if (strcmp(ir_op_info((IrOpKind)k)->name, name) == 0) return (IrOpKind)k;
  return OP_COUNT;
}

/* ---- module ---- */

IrModule *ir_module_new(void) {
  IrModule *m = xcalloc(1, sizeof *m);
  arena_init(&m->arena);
  /* Slot 0 of each array is the "none" object. */
  xgrow((void **)&m->funcs, sizeof *m->funcs, &m->cap_funcs, 16);
  xgrow((void **)&m->values, sizeof *m->values, &m->cap_values, 256);
  xgrow((void **)&m->ops, sizeof *m->ops, &m->cap_ops, 256);
  memset(&m->funcs[0], 0, sizeof m->funcs[0]);
  memset(&m->values[0], 0, sizeof m->values[0]);
  memset(&m->ops[0], 0, sizeof m->ops[0]);
  m->funcs[0].dead = m->values[0].dead = m->ops[0].dead = true;
  m->nfuncs = m->nvalues = m->nops = 1;
  m->base_dir = ".";
  return m;
}

void ir_module_free(IrModule *m) {
  if (!m) return;
  for (uint32_t i = 0; i < m->nvalues; i++) free(m->values[i].uses);
  for (uint32_t i = 0; i < m->nops; i++) free(m->ops[i].attrs);
  for (uint32_t i = 0; i < m->nfuncs; i++) {
    free(m->funcs[i].inputs);
    free(m->funcs[i].decls);
    free(m->funcs[i].outputs);
    free(m->funcs[i].groups);
    strmap_free(&m->funcs[i].value_names);
  }
  free(m->funcs);
  free(m->values);
  free(m->ops);
  arena_free(&m->arena);
  free(m);
}

/* ---- functions and values ---- */

IrFuncId ir_func_new(IrModule *m, const char *name, SrcSpan loc) {
  xgrow((void **)&m->funcs, sizeof *m->funcs, &m->cap_funcs, m->nfuncs + 1);
  IrFuncId id = m->nfuncs++;
  IrFunc *f = &m->funcs[id];
  memset(f, 0, sizeof *f);
  f->name = arena_strdup(&m->arena, name);
  f->loc = loc;
  return id;
}

IrFuncId ir_func_lookup(IrModule *m, const char *name) {
  for (IrFuncId i = 1; i < m->nfuncs; i++)
    if (!m->funcs[i].dead && strcmp(m->funcs[i].name, name) == 0) return i;
  return 0;
}

static IrValueId value_new(IrModule *m, IrFuncId f, IrValueKind kind, const char *name, const IrType *t,
                           SrcSpan loc) {
  xgrow((void **)&m->values, sizeof *m->values, &m->cap_values, m->nvalues + 1);
  IrValueId id = ir_value_id(m->nvalues++);
  IrValue *v = ir_value(m, id);
  memset(v, 0, sizeof *v);
  v->kind = kind;
  v->func = f;
  v->name = arena_strdup(&m->arena, name);
  if (t) v->type = *t;
  v->loc = loc;
  if (f) strmap_put(&m->funcs[f].value_names, v->name, id.id);
  return id;
}

IrValueId ir_func_add_input(IrModule *m, IrFuncId f, const char *name, const IrType *t, SrcSpan loc) {
  IrValueId v = value_new(m, f, VK_INPUT, name, t, loc);
  ir_value(m, v)->type_declared = true;
  IrFunc *fn = ir_func(m, f);
  xgrow((void **)&fn->inputs, sizeof *fn->inputs, &fn->cap_inputs, fn->ninputs + 1);
  fn->inputs[fn->ninputs++] = v;
  return v;
}

static void add_decl(IrModule *m, IrFuncId f, IrValueId v) {
  IrFunc *fn = ir_func(m, f);
  xgrow((void **)&fn->decls, sizeof *fn->decls, &fn->cap_decls, fn->ndecls + 1);
  fn->decls[fn->ndecls++] = v;
}

IrValueId ir_param_new(IrModule *m, IrFuncId f, const char *name, const IrType *t, const IrParamSource *src,
                       SrcSpan loc) {
  IrValueId v = value_new(m, f, VK_PARAM, name, t, loc);
  IrValue *val = ir_value(m, v);
  val->type_declared = true;
  val->src = *src;
  if (src->path) val->src.path = arena_strdup(&m->arena, src->path);
  if (src->key) val->src.key = arena_strdup(&m->arena, src->key);
  if (src->identity) val->src.identity = arena_strdup(&m->arena, src->identity);
  add_decl(m, f, v);
  return v;
}

IrValueId ir_const_new(IrModule *m, IrFuncId f, const char *name, const IrType *t, const double *data, uint64_t n,
                       SrcSpan loc) {
  IrValueId v = value_new(m, f, VK_CONST, name, t, loc);
  IrValue *val = ir_value(m, v);
  val->type_declared = true;
  val->data = arena_memdup(&m->arena, data, (size_t)n * sizeof *data);
  val->ndata = n;
  add_decl(m, f, v);
  return v;
}

/* The back-pointer from a use (operand or output) to its place in v's list. */
static uint32_t *use_slot(IrModule *m, IrValueId v, IrUse u) {
  return !ir_id_is_none(u.op) ? &ir_op(m, u.op)->use_slots[u.index]
                              : &m->funcs[ir_value(m, v)->func].outputs[u.index].use_slot;
}

static void use_add(IrModule *m, IrValueId v, IrOpId op, uint32_t index) {
  if (ir_id_is_none(v)) return;
  IrValue *val = ir_value(m, v);
  xgrow((void **)&val->uses, sizeof *val->uses, &val->cap_uses, val->nuses + 1);
  val->uses[val->nuses] = (IrUse){op, index};
  *use_slot(m, v, val->uses[val->nuses]) = val->nuses;
  val->nuses++;
}

static void use_remove(IrModule *m, IrValueId v, IrOpId op, uint32_t index) {
  if (ir_id_is_none(v)) return;
  IrValue *val = ir_value(m, v);
  uint32_t i = *use_slot(m, v, (IrUse){op, index});
  if (i >= val->nuses || !ir_id_eq(val->uses[i].op, op) || val->uses[i].index != index)
    ice("use list of '%s' lacks (op %u, operand %u)", val->name, op.id, index);
  /* The last use fills the hole and learns its new place. */
  val->uses[i] = val->uses[--val->nuses];
  if (i < val->nuses) *use_slot(m, v, val->uses[i]) = i;
}

void ir_func_add_output(IrModule *m, IrFuncId f, const char *name, IrValueId v, SrcSpan loc) {
  IrFunc *fn = ir_func(m, f);
  xgrow((void **)&fn->outputs, sizeof *fn->outputs, &fn->cap_outputs, fn->noutputs + 1);
  uint32_t idx = fn->noutputs++;
  fn->outputs[idx] = (IrOutput){.name = arena_strdup(&m->arena, name), .value = v, .loc = loc};
  use_add(m, v, IR_NO_OP, idx);
}

void ir_func_set_output(IrModule *m, IrFuncId f, uint32_t index, IrValueId v) {
  IrFunc *fn = ir_func(m, f);
  use_remove(m, fn->outputs[index].value, IR_NO_OP, index);
  fn->outputs[index].value = v;
  use_add(m, v, IR_NO_OP, index);
}

void ir_func_insert_output(IrModule *m, IrFuncId f, uint32_t index, const char *name, IrValueId v, SrcSpan loc) {
  IrFunc *fn = ir_func(m, f);
  /* Renumber the uses of the outputs that move, from the last down. */
  for (uint32_t i = fn->noutputs; i-- > index;)
    if (!ir_id_is_none(fn->outputs[i].value))
      ir_value(m, fn->outputs[i].value)->uses[fn->outputs[i].use_slot].index = i + 1;
  xgrow((void **)&fn->outputs, sizeof *fn->outputs, &fn->cap_outputs, fn->noutputs + 1);
  memmove(&fn->outputs[index + 1], &fn->outputs[index], (fn->noutputs - index) * sizeof *fn->outputs);
  fn->noutputs++;
  fn->outputs[index] = (IrOutput){.name = arena_strdup(&m->arena, name), .value = v, .loc = loc};
  use_add(m, v, IR_NO_OP, index);
  for (uint32_t g = 0; g < fn->ngroups; g++)
    if (fn->groups[g].first >= index) fn->groups[g].first++;
}

/* ---- ops ---- */

IrOpId ir_op_new(IrModule *m, IrFuncId f, IrOpKind kind, const IrValueId *inputs, uint32_t ninputs,
                 uint32_t nresults, const char *const *result_names, SrcSpan loc) {
  if (ninputs > IR_MAX_OPERANDS || nresults > IR_MAX_OPERANDS)
    ice("ir_op_new: '%s' with operands/results %u/%u over the limit of %d (IR_MAX_OPERANDS)",
        kind == OP_CALL ? "call" : ir_op_info(kind)->name, ninputs, nresults, IR_MAX_OPERANDS);
  xgrow((void **)&m->ops, sizeof *m->ops, &m->cap_ops, m->nops + 1);
  IrOpId id = ir_op_id(m->nops++);
  IrOp *op = ir_op(m, id);
  memset(op, 0, sizeof *op);
  op->kind = kind;
  op->func = f;
  op->loc = loc;
  op->ninputs = ninputs;
  op->inputs = arena_alloc(&m->arena, sizeof(IrValueId) * (ninputs ? ninputs : 1));
  op->use_slots = arena_alloc(&m->arena, sizeof(uint32_t) * (ninputs ? ninputs : 1));
  op->nresults = nresults;
  op->results = arena_alloc(&m->arena, sizeof(IrValueId) * (nresults ? nresults : 1));
  for (uint32_t i = 0; i < ninputs; i++) {
    ir_op(m, id)->inputs[i] = inputs[i];
    use_add(m, inputs[i], id, i);
  }
  for (uint32_t i = 0; i < nresults; i++) {
    const char *name = result_names && result_names[i] ? result_names[i] : ir_unique_name(m, f, "t");
    IrValueId v = value_new(m, f, VK_RESULT, name, NULL, loc);
    ir_value(m, v)->def = id;
    ir_value(m, v)->def_index = i;
    ir_op(m, id)->results[i] = v;
  }
  IrFunc *fn = ir_func(m, f);
  op = ir_op(m, id);
  op->prev = fn->last;
  if (!ir_id_is_none(fn->last)) ir_op(m, fn->last)->next = id;
  else fn->first = id;
  fn->last = id;
  fn->nops++;
  return id;
}

static void unlink_op(IrModule *m, IrOpId id) {
  IrOp *op = ir_op(m, id);
  IrFunc *fn = ir_func(m, op->func);
  if (!ir_id_is_none(op->prev)) ir_op(m, op->prev)->next = op->next;
  else fn->first = op->next;
  if (!ir_id_is_none(op->next)) ir_op(m, op->next)->prev = op->prev;
  else fn->last = op->prev;
  op->prev = op->next = IR_NO_OP;
}

void ir_op_move_before(IrModule *m, IrOpId id, IrOpId before) {
  if (ir_id_eq(id, before)) return;
  unlink_op(m, id);
  IrOp *op = ir_op(m, id);
  IrFunc *fn = ir_func(m, op->func);
  if (ir_id_is_none(before)) { /* to the end */
    op->prev = fn->last;
    if (!ir_id_is_none(fn->last)) ir_op(m, fn->last)->next = id;
    else fn->first = id;
    fn->last = id;
    return;
  }
  IrOp *b = ir_op(m, before);
  op->next = before;
  op->prev = b->prev;
  if (!ir_id_is_none(b->prev)) ir_op(m, b->prev)->next = id;
  else fn->first = id;
  b->prev = id;
}

void ir_op_set_input(IrModule *m, IrOpId id, uint32_t index, IrValueId v) {
  IrOp *op = ir_op(m, id);
  if (index >= op->ninputs) ice("operand %u out of range for %s", index, ir_op_info(op->kind)->name);
  use_remove(m, op->inputs[index], id, index);
  op->inputs[index] = v;
  use_add(m, v, id, index);
}

void ir_op_erase(IrModule *m, IrOpId id) {
  IrOp *op = ir_op(m, id);
  for (uint32_t i = 0; i < op->nresults; i++) {
    IrValue *r = ir_value(m, op->results[i]);
    if (r->nuses) ice("erasing %s whose result '%s' still has %u uses", ir_op_info(op->kind)->name, r->name, r->nuses);
  }
  for (uint32_t i = 0; i < op->ninputs; i++) use_remove(m, op->inputs[i], id, i);
  for (uint32_t i = 0; i < op->nresults; i++) ir_value(m, op->results[i])->dead = true;
  unlink_op(m, id);
  ir_func(m, op->func)->nops--;
  op->dead = true;
}

void ir_decl_erase(IrModule *m, IrValueId v) {
  IrValue *val = ir_value(m, v);
  if (val->nuses) ice("erasing '%s' which still has %u uses", val->name, val->nuses);
  IrFunc *fn = ir_func(m, val->func);
  for (uint32_t i = 0; i < fn->ndecls; i++)
    if (ir_id_eq(fn->decls[i], v)) {
      memmove(&fn->decls[i], &fn->decls[i + 1], (fn->ndecls - i - 1) * sizeof *fn->decls);
      fn->ndecls--;
      break;
    }
  val->dead = true;
}

uint32_t ir_erase_unused_decls(IrModule *m, IrFuncId f) {
  IrFunc *fn = ir_func(m, f);
  uint32_t kept = 0;
  for (uint32_t i = 0; i < fn->ndecls; i++) {
    IrValue *val = ir_value(m, fn->decls[i]);
    if (val->nuses) fn->decls[kept++] = fn->decls[i];
    else val->dead = true;
  }
  uint32_t erased = fn->ndecls - kept;
  fn->ndecls = kept;
  return erased;
}

void ir_replace_all_uses(IrModule *m, IrValueId from, IrValueId to) {
  if (ir_id_eq(from, to)) return;
  while (ir_value(m, from)->nuses) {
    IrUse u = ir_value(m, from)->uses[0];
    if (!ir_id_is_none(u.op)) ir_op_set_input(m, u.op, u.index, to);
    else ir_func_set_output(m, ir_value(m, from)->func, u.index, to);
  }
}

IrValueId ir_func_find_value(IrModule *m, IrFuncId f, const char *name) {
  IrValueId newest = ir_value_id(strmap_get(&ir_func(m, f)->value_names, name));
  if (ir_id_is_none(newest)) return IR_NO_VALUE;
  IrValue *nv = ir_value(m, newest);
  if (!nv->dead && strcmp(nv->name, name) == 0) return newest;
  /* The newest holder of the name was erased or renamed; an older value (or
   * one renamed to it) may still carry it. Rare, so a scan is fine. */
  for (uint32_t v = 1; v < m->nvalues; v++) {
    IrValue *val = &m->values[v];
    if (val->func == f && !val->dead && strcmp(val->name, name) == 0) return ir_value_id(v);
  }
  return IR_NO_VALUE;
}

const char *ir_unique_name(IrModule *m, IrFuncId f, const char *base) {
  if (ir_id_is_none(ir_func_find_value(m, f, base))) return arena_strdup(&m->arena, base);
  for (;;) {
    char *cand = arena_printf(&m->arena, "%s_%u", base, ++ir_func(m, f)->name_counter);
    if (ir_id_is_none(ir_func_find_value(m, f, cand))) return cand;
  }
}

/* ---- attributes ---- */

const IrAttr *ir_op_attr(IrModule *m, IrOpId id, const char *name) {
  IrOp *op = ir_op(m, id);
  for (uint32_t i = 0; i < op->nattrs; i++)
    if (strcmp(op->attrs[i].name, name) == 0) return &op->attrs[i];
  return NULL;
}

void ir_op_set_attr(IrModule *m, IrOpId id, const char *name, const IrAttrValue *val, SrcSpan loc) {
  IrOp *op = ir_op(m, id);
  for (uint32_t i = 0; i < op->nattrs; i++)
    if (strcmp(op->attrs[i].name, name) == 0) {
      op->attrs[i].val = *val;
      op->attrs[i].loc = loc;
      return;
    }
  xgrow((void **)&op->attrs, sizeof *op->attrs, &op->cap_attrs, op->nattrs + 1);
  op->attrs[op->nattrs++] = (IrAttr){arena_strdup(&m->arena, name), *val, loc};
}

void ir_op_set_attr_int(IrModule *m, IrOpId op, const char *name, int64_t v) {
  IrAttrValue a = {.kind = ATTR_INT, .u.i = v};
  ir_op_set_attr(m, op, name, &a, ir_op(m, op)->loc);
}

void ir_op_set_attr_float(IrModule *m, IrOpId op, const char *name, double v) {
  IrAttrValue a = {.kind = ATTR_FLOAT, .u.f = v};
  ir_op_set_attr(m, op, name, &a, ir_op(m, op)->loc);
}

void ir_op_set_attr_bool(IrModule *m, IrOpId op, const char *name, bool v) {
  IrAttrValue a = {.kind = ATTR_BOOL, .u.b = v};
  ir_op_set_attr(m, op, name, &a, ir_op(m, op)->loc);
}

void ir_op_set_attr_str(IrModule *m, IrOpId op, const char *name, const char *v) {
  IrAttrValue a = {.kind = ATTR_STR, .u.s = arena_strdup(&m->arena, v)};
  ir_op_set_attr(m, op, name, &a, ir_op(m, op)->loc);
}

void ir_op_set_attr_ints(IrModule *m, IrOpId op, const char *name, const int64_t *v, uint32_t n) {
  IrAttrValue a = {.kind = ATTR_LIST};
  a.u.list.n = n;
  a.u.list.items = arena_alloc(&m->arena, sizeof(IrAttrValue) * (n ? n : 1));
  for (uint32_t i = 0; i < n; i++) a.u.list.items[i] = (IrAttrValue){.kind = ATTR_INT, .u.i = v[i]};
  ir_op_set_attr(m, op, name, &a, ir_op(m, op)->loc);
}

int64_t ir_attr_int(IrModule *m, IrOpId op, const char *name, int64_t dflt) {
  const IrAttr *a = ir_op_attr(m, op, name);
  return a && a->val.kind == ATTR_INT ? a->val.u.i : dflt;
}

double ir_attr_float(IrModule *m, IrOpId op, const char *name, double dflt) {
  const IrAttr *a = ir_op_attr(m, op, name);
  if (!a) return dflt;
  if (a->val.kind == ATTR_FLOAT) return a->val.u.f;
  if (a->val.kind == ATTR_INT) return (double)a->val.u.i;
  return dflt;
}

bool ir_attr_bool(IrModule *m, IrOpId op, const char *name, bool dflt) {
  const IrAttr *a = ir_op_attr(m, op, name);
  return a && a->val.kind == ATTR_BOOL ? a->val.u.b : dflt;
}

const char *ir_attr_str(IrModule *m, IrOpId op, const char *name, const char *dflt) {
  const IrAttr *a = ir_op_attr(m, op, name);
  return a && a->val.kind == ATTR_STR ? a->val.u.s : dflt;
}

int ir_attr_ints(IrModule *m, IrOpId op, const char *name, int64_t *out, int max) {
  const IrAttr *a = ir_op_attr(m, op, name);
  if (!a || a->val.kind != ATTR_LIST) return -1;
  int n = 0;
  for (uint32_t i = 0; i < a->val.u.list.n && n < max; i++)
    if (a->val.u.list.items[i].kind == ATTR_INT) out[n++] = a->val.u.list.items[i].u.i;
  return (int)a->val.u.list.n;
}

uint64_t ir_derive_seed(uint64_t seed, const char *instance) {
  uint64_t s = seed ^ fnv1a64(instance, strlen(instance), FNV1A64_INIT);
  return splitmix64(&s) & 0x7fffffffffffull; /* stays exact when printed and parsed back */
}
