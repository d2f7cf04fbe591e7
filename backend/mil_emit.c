/*
 * MIL text emitter: a verified, legalized IR function -> model.mil.
 *
 * The canonical form (MIL spec §1.11): program(1.3) with func main<ios18>
 * (or program(1.0) and ios16/ios17 spellings), one statement per line,
 * arguments sorted by key, [name = string("<result>")] on every statement,
 * every scalar or small parameter bound to a named const (the ANE path wants
 * bool matmul flags as consts), conv bias as a separate add, floats as C99
 * hex so that values round-trip exactly, weights as BLOBFILE consts pointing
 * at their metadata record. Names are valid MIL identifiers, unique, never a
 * reserved word (mil_name_claim, the rule io-legalize also names inputs and
 * outputs with); generated helper names go through the same table as user
 * names, so they can never collide. The names, binding order and surface
 * size of inputs and outputs are io-legalize's binding table, used as it is:
 * function inputs are listed in its binding order, the ANE's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orion/fp16.h"
#include "orion/manifest.h"
#include "orion/mil.h"
#include "orion/mil_ops.h"
#include "orion/passes.h"
#include "orion/weights.h"

typedef struct Emitter {
  IrModule *m;
  IrFuncId f;
  const MilEmitOptions *opt;
  BlobWriter *blobs;
  StrBuf *out;
  Diag *d;
  bool v13;              /* 1.3 dialect spellings */
  StrMap used;           /* MIL names taken */
  const char **mil_name; /* per IR value id */
  MilWeight *weights;
  uint32_t nweights, cap_weights;
  bool ok;
} Emitter;

/* ---- names ---- */

static const char *claim(Emitter *e, const char *want) { return mil_name_claim(e->m, &e->used, want); }

/* ---- literals and types ---- */

static void put_type(Emitter *e, const IrType *t) {
  if (t->rank == 0 && e->v13) {
    sb_puts(e->out, ir_dtype_name(t->dtype));
    return;
  }
  sb_printf(e->out, "tensor<%s, [", ir_dtype_name(t->dtype));
  for (int i = 0; i < t->rank; i++) sb_printf(e->out, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  sb_puts(e->out, "]>");
}

static void put_scalar_type(Emitter *e, const char *dtype) {
  if (e->v13) sb_puts(e->out, dtype);
  else sb_printf(e->out, "tensor<%s, []>", dtype);
}

/* A value as stored in dtype dt: floats rounded to the type, then C99 hex. */
static void put_number(StrBuf *sb, IrDType dt, double v) {
  if (dt == DT_BOOL) {
    sb_puts(sb, v != 0 ? "true" : "false");
    return;
  }
  if (!ir_dtype_is_float(dt)) {
    sb_printf(sb, "%lld", (long long)v);
    return;
  }
  double r = dt == DT_FP16 ? (double)fp16_to_float(fp16_from_double(v)) : (double)(float)v;
  if (isnan(r)) sb_puts(sb, "nan");
  else if (isinf(r)) sb_puts(sb, r > 0 ? "inf" : "-inf");
  else sb_printf(sb, "%a", r);
}

static void put_string_literal(Emitter *e, const char *s) {
  put_scalar_type(e, "string");
  sb_printf(e->out, "(\"%s\")", s);
}

static void put_nested(Emitter *e, const IrType *t, const double *data, uint64_t ndata, int dim, uint64_t *pos) {
  if (dim == t->rank) {
    put_number(e->out, t->dtype, data[ndata == 1 ? 0 : *pos]);
    (*pos)++;
    return;
  }
  sb_putc(e->out, '[');
  for (int64_t i = 0; i < t->dims[dim]; i++) {
    if (i) sb_puts(e->out, ", ");
    put_nested(e, t, data, ndata, dim + 1, pos);
  }
  sb_putc(e->out, ']');
}

static void put_blobfile(Emitter *e, uint64_t offset) {
  sb_puts(e->out, "BLOBFILE(path = ");
  put_string_literal(e, e->opt->weight_path ? e->opt->weight_path : "@model_path/weights/weight.bin");
  sb_puts(e->out, ", offset = ");
  put_scalar_type(e, "uint64");
  sb_printf(e->out, "(%llu))", (unsigned long long)offset);
}

/* ---- statements ---- */

/* One argument of a statement: its id in the MIL op table gives its name. */
typedef struct Arg {
  MilArgId key;
  const char *value;  /* a MIL name */
  const char **list;  /* binding list (concat values) */
  uint32_t nlist;
} Arg;

static int arg_cmp(const void *a, const void *b) {
  return strcmp(mil_arg_name(((const Arg *)a)->key), mil_arg_name(((const Arg *)b)->key));
}

static void begin_stmt(Emitter *e) { sb_puts(e->out, "        "); }

static void put_name_attr(Emitter *e, const char *name) {
  sb_puts(e->out, "[name = ");
  put_string_literal(e, name);
}

/* `T name = op(k = v, ...)[name = string("name")];` with arguments sorted by key. */
static void put_op(Emitter *e, MilOpId opid, const IrType *types, const char *const *names, uint32_t nres,
                   Arg *args, uint32_t nargs) {
  begin_stmt(e);
  for (uint32_t i = 0; i < nres; i++) {
    if (i) sb_puts(e->out, ", ");
    put_type(e, &types[i]);
    sb_printf(e->out, " %s", names[i]);
  }
  uint32_t ios = 16 + (uint32_t)(e->opt->target - MIL_IOS16);
  if (!mil_op_in_opset(mil_op_info(opid), ios)) ice("%s is not an op of ios%u", mil_op_name(opid), ios);
  sb_printf(e->out, " = %s(", mil_op_name(opid));
  qsort(args, nargs, sizeof *args, arg_cmp);
  for (uint32_t i = 0; i < nargs; i++) {
    if (mil_arg_info(args[i].key)->op != opid)
      ice("the emitter passes %s an argument of %s", mil_op_name(opid), mil_op_name(mil_arg_info(args[i].key)->op));
    sb_printf(e->out, "%s%s = ", i ? ", " : "", mil_arg_name(args[i].key));
    if (args[i].list) {
      sb_putc(e->out, '(');
      for (uint32_t j = 0; j < args[i].nlist; j++) sb_printf(e->out, "%s%s", j ? ", " : "", args[i].list[j]);
      sb_putc(e->out, ')');
    } else {
      sb_puts(e->out, args[i].value);
    }
  }
  sb_puts(e->out, ")");
  put_name_attr(e, names[0]);
  sb_puts(e->out, "];\n");
}

/* const statements for op parameters; each returns the const's MIL name. */
static const char *const_scalar(Emitter *e, const char *base, IrDType dt, double v) {
  const char *name = claim(e, base);
  IrType t = {.dtype = dt, .rank = 0};
  begin_stmt(e);
  put_type(e, &t);
  sb_printf(e->out, " %s = %s()", name, mil_op_name(MIL_OP_CONST));
  put_name_attr(e, name);
  sb_puts(e->out, ", val = ");
  put_scalar_type(e, ir_dtype_name(dt));
  sb_putc(e->out, '(');
  put_number(e->out, dt, v);
  sb_puts(e->out, ")];\n");
  return name;
}

static const char *const_bool(Emitter *e, const char *base, bool v) { return const_scalar(e, base, DT_BOOL, v); }
static const char *const_int(Emitter *e, const char *base, int64_t v) { return const_scalar(e, base, DT_INT32, (double)v); }

static const char *const_string(Emitter *e, const char *base, const char *v) {
  const char *name = claim(e, base);
  begin_stmt(e);
  put_scalar_type(e, "string");
  sb_printf(e->out, " %s = %s()", name, mil_op_name(MIL_OP_CONST));
  put_name_attr(e, name);
  sb_puts(e->out, ", val = ");
  put_string_literal(e, v);
  sb_puts(e->out, "];\n");
  return name;
}

static const char *const_ints(Emitter *e, const char *base, const int64_t *v, int n) {
  const char *name = claim(e, base);
  IrType t = {.dtype = DT_INT32, .rank = 1, .dims = {n}};
  begin_stmt(e);
  put_type(e, &t);
  sb_printf(e->out, " %s = %s()", name, mil_op_name(MIL_OP_CONST));
  put_name_attr(e, name);
  sb_puts(e->out, ", val = ");
  put_type(e, &t);
  sb_puts(e->out, "([");
  for (int i = 0; i < n; i++) sb_printf(e->out, "%s%lld", i ? ", " : "", (long long)v[i]);
  sb_puts(e->out, "])];\n");
  return name;
}

/* ---- weights and consts ---- */

enum { INT32_BLOB_MIN_ELEMENTS = 1024 };

static bool blob_dtype(IrDType dt, MilTarget target, BlobDType *out) {
  uint32_t code = orion_dtype_blob_code(ir_dtype_to_orion(dt)); /* 0 for bool: weight.bin has no code */
  *out = (BlobDType)code;
  return code != 0 && (dt != DT_INT32 || target == MIL_IOS18); /* int32 blobs are iOS18's */
}

/* Bytes of a const in its dtype (for blob storage), or NULL after an error. */
static void *const_bytes(IrModule *m, IrValueId v, Diag *d, size_t *nbytes) {
  IrValue *val = ir_value(m, v);
  uint64_t n = ir_type_elements(&val->type);
  size_t es = ir_dtype_size(val->type.dtype);
  uint8_t *buf = n <= SIZE_MAX / es ? try_malloc((size_t)n * es) : NULL;
  if (!buf) {
    diag_error(d, val->loc, "const '%s' (%llu bytes) does not fit in memory", val->name,
               (unsigned long long)(n * es));
    return NULL;
  }
  for (uint64_t i = 0; i < n; i++) {
    double x = val->data[val->ndata == 1 ? 0 : i];
    switch (val->type.dtype) {
    case DT_FP16: { uint16_t h = fp16_from_double(x); memcpy(buf + i * 2, &h, 2); break; }
    case DT_FP32: { float f = (float)x; memcpy(buf + i * 4, &f, 4); break; }
    case DT_INT32: { int32_t k = (int32_t)x; memcpy(buf + i * 4, &k, 4); break; }
    case DT_INT8: buf[i] = (uint8_t)(int8_t)x; break;
    case DT_UINT8: case DT_BOOL: buf[i] = (uint8_t)x; break;
    default: ice("const of dtype %s", ir_dtype_name(val->type.dtype));
    }
  }
  *nbytes = (size_t)n * es;
  return buf;
}

static void emit_decl(Emitter *e, IrValueId v) {
  IrValue *val = ir_value(e->m, v);
  const char *name = e->mil_name[v.id];
  uint64_t elements = ir_type_elements(&val->type);
  BlobDType bd;
  /* coremltools' rule: float consts of 10 or more elements go to the weight
   * file. int32 tables of INT32_BLOB_MIN_ELEMENTS or more too, where int32
   * blobs exist (iOS18, blob_dtype): cross_entropy's class table of a 32k
   * vocabulary is 128 KB of blob instead of 190 KB of MIL text, while shapes,
   * axes and small index lists stay readable inline. */
  bool to_blob = val->kind == VK_PARAM || (elements >= 10 && ir_dtype_is_float(val->type.dtype)) ||
                 (elements >= INT32_BLOB_MIN_ELEMENTS && val->type.dtype == DT_INT32);
  if (to_blob && !blob_dtype(val->type.dtype, e->opt->target, &bd)) {
    if (val->kind == VK_PARAM) {
      diag_error(e->d, val->loc, "weight '%s' of dtype %s cannot be stored in a weight file for %s", val->name,
                 ir_dtype_name(val->type.dtype), mil_target_name(e->opt->target));
      e->ok = false;
      return;
    }
    to_blob = false;
  }
  begin_stmt(e);
  put_type(e, &val->type);
  sb_printf(e->out, " %s = %s()", name, mil_op_name(MIL_OP_CONST));
  put_name_attr(e, name);
  sb_puts(e->out, ", val = ");
  if (!to_blob) {
    if (val->type.rank == 0) put_scalar_type(e, ir_dtype_name(val->type.dtype));
    else put_type(e, &val->type);
    sb_putc(e->out, '(');
    uint64_t pos = 0;
    put_nested(e, &val->type, val->data, val->ndata, 0, &pos);
    sb_puts(e->out, ")];\n");
    return;
  }
  size_t nbytes = 0;
  uint64_t offset;
  if (val->kind == VK_PARAM && e->opt->add_param) {
    if (!e->opt->add_param(e->opt->load_ctx, e->m, v, e->blobs, bd, &offset, &nbytes)) {
      e->ok = false;
      sb_puts(e->out, "<error>)];\n");
      return;
    }
  } else {
    void *bytes = val->kind == VK_PARAM ? e->opt->load_param(e->opt->load_ctx, e->m, v, &nbytes) : const_bytes(e->m, v, e->d, &nbytes);
    if (!bytes) {
      e->ok = false;
      sb_puts(e->out, "<error>)];\n");
      return;
    }
    if (nbytes != elements * ir_dtype_size(val->type.dtype)) ice("weight '%s' has %zu bytes", val->name, nbytes);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    offset = blob_writer_add_as(e->blobs, weights_identity(e->m, v), bd, bytes, nbytes, package_weight_checksum(PACKAGE_FORMAT_VERSION, bytes, nbytes));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (e->opt->blob_ms)
      *e->opt->blob_ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    free(bytes);
  }
  put_type(e, &val->type);
  sb_putc(e->out, '(');
  put_blobfile(e, offset);
  sb_puts(e->out, ")];\n");
  xgrow((void **)&e->weights, sizeof *e->weights, &e->cap_weights, e->nweights + 1);
  e->weights[e->nweights++] = (MilWeight){val->name, name, val->type, offset, nbytes};
}

/* ---- ops ---- */

#define MAX_ARGS 12

static const char *res_name(Emitter *e, IrOpId op) { return e->mil_name[ir_op(e->m, op)->results[0].id]; }
static const char *in_name(Emitter *e, IrOpId op, uint32_t i) { return e->mil_name[ir_op(e->m, op)->inputs[i].id]; }
static const IrType *in_type(Emitter *e, IrOpId op, uint32_t i) { return &ir_value(e->m, ir_op(e->m, op)->inputs[i])->type; }

static const char *helper(Emitter *e, IrOpId op, const char *what) {
  return arena_printf(&e->m->arena, "%s_%s", res_name(e, op), what);
}

static void simple(Emitter *e, IrOpId op, MilOpId milop, Arg *args, uint32_t n) {
  IrOp *o = ir_op(e->m, op);
  IrType types[IR_MAX_OPERANDS]; /* every op is within the limit (ir_op_new) */
  const char *names[IR_MAX_OPERANDS];
  for (uint32_t i = 0; i < o->nresults; i++) {
    types[i] = ir_value(e->m, o->results[i])->type;
    names[i] = e->mil_name[o->results[i].id];
  }
  put_op(e, milop, types, names, o->nresults, args, n);
}

static void emit_conv(Emitter *e, IrOpId op) {
  IrOp *o = ir_op(e->m, op);
  const IrType *x = in_type(e, op, 0), *w = in_type(e, op, 1);
  int sp = x->rank - 2;
  int64_t strides[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pad[6] = {0};
  ir_attr_ints(e->m, op, "strides", strides, 3);
  ir_attr_ints(e->m, op, "dilations", dil, 3);
  const char *pad_type = ir_attr_str(e->m, op, "pad_type", ir_op_attr(e->m, op, "pad") ? "custom" : "valid");
  if (!strcmp(pad_type, "custom")) ir_attr_ints(e->m, op, "pad", pad, 6);
  Arg a[MAX_ARGS];
  uint32_t n = 0;
  a[n++] = (Arg){MIL_ARG_CONV_x, in_name(e, op, 0), NULL, 0};
  a[n++] = (Arg){MIL_ARG_CONV_weight, in_name(e, op, 1), NULL, 0};
  a[n++] = (Arg){MIL_ARG_CONV_strides, const_ints(e, helper(e, op, "strides"), strides, sp), NULL, 0};
  a[n++] = (Arg){MIL_ARG_CONV_pad_type, const_string(e, helper(e, op, "pad_type"), pad_type), NULL, 0};
  a[n++] = (Arg){MIL_ARG_CONV_pad, const_ints(e, helper(e, op, "pad"), pad, 2 * sp), NULL, 0};
  a[n++] = (Arg){MIL_ARG_CONV_dilations, const_ints(e, helper(e, op, "dilations"), dil, sp), NULL, 0};
  a[n++] = (Arg){MIL_ARG_CONV_groups, const_int(e, helper(e, op, "groups"), ir_attr_int(e->m, op, "groups", 1)), NULL, 0};
  if (o->ninputs < 3) {
    simple(e, op, MIL_OP_CONV, a, n);
    return;
  }
  /* Bias as a separate add (the ANE path avoids conv's bias), reshaped to [1, C, 1...]. */
  IrType ct = ir_value(e->m, o->results[0])->type;
  const char *conv_name = claim(e, helper(e, op, "nobias"));
  put_op(e, MIL_OP_CONV, &ct, &conv_name, 1, a, n);
  int64_t shape[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++) shape[i] = i == 1 ? w->dims[0] : 1;
  Arg r[2] = {{MIL_ARG_RESHAPE_x, in_name(e, op, 2), NULL, 0}, {MIL_ARG_RESHAPE_shape, const_ints(e, helper(e, op, "bias_shape"), shape, x->rank), NULL, 0}};
  IrType bt = {.dtype = ct.dtype, .rank = (uint8_t)x->rank};
  memcpy(bt.dims, shape, sizeof(int64_t) * (size_t)x->rank);
  const char *bias_name = claim(e, helper(e, op, "bias"));
  put_op(e, MIL_OP_RESHAPE, &bt, &bias_name, 1, r, 2);
  Arg add[2] = {{MIL_ARG_ADD_x, conv_name, NULL, 0}, {MIL_ARG_ADD_y, bias_name, NULL, 0}};
  simple(e, op, MIL_OP_ADD, add, 2);
}

/* A reduction: the MIL op and its x, axes and keep_dims arguments. */
static void emit_reduce(Emitter *e, IrOpId op, MilOpId milop, MilArgId ax, MilArgId aaxes, MilArgId akeep) {
  const IrType *x = in_type(e, op, 0);
  int64_t axes[IR_MAX_RANK];
  int n = ir_attr_ints(e->m, op, "axes", axes, IR_MAX_RANK);
  if (n < 0)
    for (n = 0; n < x->rank; n++) axes[n] = n;
  Arg a[3] = {{ax, in_name(e, op, 0), NULL, 0},
              {aaxes, const_ints(e, helper(e, op, "axes"), axes, n), NULL, 0},
              {akeep, const_bool(e, helper(e, op, "keep_dims"), ir_attr_bool(e->m, op, "keep_dims", false)), NULL, 0}};
  simple(e, op, milop, a, 3);
}

static void emit_slice(Emitter *e, IrOpId op) {
  const IrType *x = in_type(e, op, 0);
  int64_t b[IR_MAX_RANK], en[IR_MAX_RANK], s[IR_MAX_RANK] = {1, 1, 1, 1, 1};
  ir_attr_ints(e->m, op, "begin", b, IR_MAX_RANK);
  ir_attr_ints(e->m, op, "end", en, IR_MAX_RANK);
  ir_attr_ints(e->m, op, "stride", s, IR_MAX_RANK);
  /* The IR's Python semantics, resolved to plain non-negative bounds. */
  for (int i = 0; i < x->rank; i++) {
    int64_t n = x->dims[i];
    b[i] = b[i] < 0 ? b[i] + n : b[i];
    en[i] = en[i] < 0 ? en[i] + n : en[i];
    b[i] = b[i] < 0 ? 0 : b[i] > n ? n : b[i];
    en[i] = en[i] < 0 ? 0 : en[i] > n ? n : en[i];
  }
  Arg a[4] = {{MIL_ARG_SLICE_BY_INDEX_x, in_name(e, op, 0), NULL, 0},
              {MIL_ARG_SLICE_BY_INDEX_begin, const_ints(e, helper(e, op, "begin"), b, x->rank), NULL, 0},
              {MIL_ARG_SLICE_BY_INDEX_end, const_ints(e, helper(e, op, "end"), en, x->rank), NULL, 0},
              {MIL_ARG_SLICE_BY_INDEX_stride, const_ints(e, helper(e, op, "stride"), s, x->rank), NULL, 0}};
  simple(e, op, MIL_OP_SLICE_BY_INDEX, a, 4);
}

static void emit_split(Emitter *e, IrOpId op) {
  IrOp *o = ir_op(e->m, op);
  int axis = (int)ir_attr_int(e->m, op, "axis", 0);
  const IrType *x = in_type(e, op, 0);
  if (axis < 0) axis += x->rank;
  int64_t sizes[IR_MAX_OPERANDS];
  for (uint32_t i = 0; i < o->nresults; i++) sizes[i] = ir_value(e->m, o->results[i])->type.dims[axis];
  Arg a[3] = {{MIL_ARG_SPLIT_x, in_name(e, op, 0), NULL, 0},
              {MIL_ARG_SPLIT_axis, const_int(e, helper(e, op, "axis"), axis), NULL, 0},
              {MIL_ARG_SPLIT_split_sizes, const_ints(e, helper(e, op, "split_sizes"), sizes, (int)o->nresults), NULL, 0}};
  simple(e, op, MIL_OP_SPLIT, a, 3);
}

/* .oir ops written as one MIL op of the same operands: the op and the
 * arguments of the operands (y: the second, or log's and rsqrt's epsilon). */
typedef struct OneToOne {
  MilOpId op;
  MilArgId x, y;
} OneToOne;

static const OneToOne one_to_one[OP_COUNT] = {
    [OP_ADD] = {MIL_OP_ADD, MIL_ARG_ADD_x, MIL_ARG_ADD_y},
    [OP_SUB] = {MIL_OP_SUB, MIL_ARG_SUB_x, MIL_ARG_SUB_y},
    [OP_MUL] = {MIL_OP_MUL, MIL_ARG_MUL_x, MIL_ARG_MUL_y},
    [OP_DIV] = {MIL_OP_REAL_DIV, MIL_ARG_REAL_DIV_x, MIL_ARG_REAL_DIV_y},
    [OP_POW] = {MIL_OP_POW, MIL_ARG_POW_x, MIL_ARG_POW_y},
    [OP_MAXIMUM] = {MIL_OP_MAXIMUM, MIL_ARG_MAXIMUM_x, MIL_ARG_MAXIMUM_y},
    [OP_MINIMUM] = {MIL_OP_MINIMUM, MIL_ARG_MINIMUM_x, MIL_ARG_MINIMUM_y},
    [OP_RELU] = {MIL_OP_RELU, MIL_ARG_RELU_x, MIL_ARG_COUNT},
    [OP_TANH] = {MIL_OP_TANH, MIL_ARG_TANH_x, MIL_ARG_COUNT},
    [OP_SIGMOID] = {MIL_OP_SIGMOID, MIL_ARG_SIGMOID_x, MIL_ARG_COUNT},
    [OP_SILU] = {MIL_OP_SILU, MIL_ARG_SILU_x, MIL_ARG_COUNT},
    [OP_EXP] = {MIL_OP_EXP, MIL_ARG_EXP_x, MIL_ARG_COUNT},
    [OP_SQRT] = {MIL_OP_SQRT, MIL_ARG_SQRT_x, MIL_ARG_COUNT},
    [OP_ABS] = {MIL_OP_ABS, MIL_ARG_ABS_x, MIL_ARG_COUNT},
    [OP_IDENTITY] = {MIL_OP_IDENTITY, MIL_ARG_IDENTITY_x, MIL_ARG_COUNT},
    [OP_LOG] = {MIL_OP_LOG, MIL_ARG_LOG_x, MIL_ARG_LOG_epsilon},
    [OP_RSQRT] = {MIL_OP_RSQRT, MIL_ARG_RSQRT_x, MIL_ARG_RSQRT_epsilon},
};

static void emit_op(Emitter *e, IrOpId op) {
  IrOp *o = ir_op(e->m, op);
  Arg a[MAX_ARGS];
  uint32_t n = 0;
  const char *x = o->ninputs ? in_name(e, op, 0) : NULL;
  switch (o->kind) {
  case OP_CONV: emit_conv(e, op); return;
  case OP_LINEAR:
    a[n++] = (Arg){MIL_ARG_LINEAR_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_LINEAR_weight, in_name(e, op, 1), NULL, 0};
    if (o->ninputs > 2) a[n++] = (Arg){MIL_ARG_LINEAR_bias, in_name(e, op, 2), NULL, 0};
    if (in_type(e, op, 0)->rank > 3) {
      diag_error(e->d, o->loc, "MIL's linear takes inputs of rank 1 to 3; this one has rank %d (use conv or reshape)",
                 in_type(e, op, 0)->rank);
      e->ok = false;
      return;
    }
    simple(e, op, MIL_OP_LINEAR, a, n);
    return;
  case OP_MATMUL:
    a[n++] = (Arg){MIL_ARG_MATMUL_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_MATMUL_y, in_name(e, op, 1), NULL, 0};
    a[n++] = (Arg){MIL_ARG_MATMUL_transpose_x, const_bool(e, helper(e, op, "transpose_x"), ir_attr_bool(e->m, op, "transpose_x", false)), NULL, 0};
    a[n++] = (Arg){MIL_ARG_MATMUL_transpose_y, const_bool(e, helper(e, op, "transpose_y"), ir_attr_bool(e->m, op, "transpose_y", false)), NULL, 0};
    simple(e, op, MIL_OP_MATMUL, a, n);
    return;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAXIMUM: case OP_MINIMUM: {
    const OneToOne *m = &one_to_one[o->kind];
    a[n++] = (Arg){m->x, x, NULL, 0};
    a[n++] = (Arg){m->y, in_name(e, op, 1), NULL, 0};
    simple(e, op, m->op, a, n);
    return;
  }
  case OP_RELU: case OP_TANH: case OP_SIGMOID: case OP_SILU: case OP_EXP: case OP_SQRT: case OP_ABS: case OP_IDENTITY: {
    a[n++] = (Arg){one_to_one[o->kind].x, x, NULL, 0};
    simple(e, op, one_to_one[o->kind].op, a, n);
    return;
  }
  case OP_GELU: {
    bool tanh_mode = !strcmp(ir_attr_str(e->m, op, "mode", "exact"), "tanh");
    a[n++] = (Arg){MIL_ARG_GELU_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_GELU_mode, const_string(e, helper(e, op, "mode"), tanh_mode ? "TANH_APPROXIMATION" : "EXACT"), NULL, 0};
    simple(e, op, MIL_OP_GELU, a, n);
    return;
  }
  case OP_LOG: case OP_RSQRT:
    a[n++] = (Arg){one_to_one[o->kind].x, x, NULL, 0};
    a[n++] = (Arg){one_to_one[o->kind].y, const_scalar(e, helper(e, op, "epsilon"), in_type(e, op, 0)->dtype,
                                                   ir_attr_float(e->m, op, "epsilon", 0.0)), NULL, 0};
    simple(e, op, one_to_one[o->kind].op, a, n);
    return;
  case OP_SOFTMAX:
    a[n++] = (Arg){MIL_ARG_SOFTMAX_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_SOFTMAX_axis, const_int(e, helper(e, op, "axis"), ir_attr_int(e->m, op, "axis", -1)), NULL, 0};
    simple(e, op, MIL_OP_SOFTMAX, a, n);
    return;
#define REDUCE(ID) emit_reduce(e, op, MIL_OP_##ID, MIL_ARG_##ID##_x, MIL_ARG_##ID##_axes, MIL_ARG_##ID##_keep_dims)
  case OP_REDUCE_SUM: REDUCE(REDUCE_SUM); return;
  case OP_REDUCE_MEAN: REDUCE(REDUCE_MEAN); return;
  case OP_REDUCE_MAX: REDUCE(REDUCE_MAX); return;
#undef REDUCE
  case OP_RESHAPE: {
    const IrType *rt = &ir_value(e->m, o->results[0])->type;
    a[n++] = (Arg){MIL_ARG_RESHAPE_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_RESHAPE_shape, const_ints(e, helper(e, op, "shape"), rt->dims, rt->rank), NULL, 0};
    simple(e, op, MIL_OP_RESHAPE, a, n);
    return;
  }
  case OP_TRANSPOSE: {
    int64_t perm[IR_MAX_RANK];
    int r = ir_attr_ints(e->m, op, "perm", perm, IR_MAX_RANK);
    for (int i = 0; i < r; i++)
      if (perm[i] < 0) perm[i] += r;
    a[n++] = (Arg){MIL_ARG_TRANSPOSE_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_TRANSPOSE_perm, const_ints(e, helper(e, op, "perm"), perm, r), NULL, 0};
    simple(e, op, MIL_OP_TRANSPOSE, a, n);
    return;
  }
  case OP_SLICE: emit_slice(e, op); return;
  case OP_SPLIT: emit_split(e, op); return;
  case OP_CONCAT: {
    const char **list = arena_alloc(&e->m->arena, sizeof *list * o->ninputs);
    for (uint32_t i = 0; i < o->ninputs; i++) list[i] = in_name(e, op, i);
    int64_t axis = ir_attr_int(e->m, op, "axis", 0);
    if (axis < 0) axis += in_type(e, op, 0)->rank;
    a[n++] = (Arg){MIL_ARG_CONCAT_values, NULL, list, o->ninputs};
    a[n++] = (Arg){MIL_ARG_CONCAT_axis, const_int(e, helper(e, op, "axis"), axis), NULL, 0};
    a[n++] = (Arg){MIL_ARG_CONCAT_interleave, const_bool(e, helper(e, op, "interleave"), false), NULL, 0};
    simple(e, op, MIL_OP_CONCAT, a, n);
    return;
  }
  case OP_CAST: {
    const char *to = ir_attr_str(e->m, op, "dtype", "fp16");
    IrDType dt = ir_dtype_from_name(to);
    if ((dt == DT_INT8 || dt == DT_UINT8) && e->opt->target < MIL_IOS17) {
      diag_error(e->d, o->loc, "cast to %s needs target ios17 or later", to);
      e->ok = false;
      return;
    }
    a[n++] = (Arg){MIL_ARG_CAST_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_CAST_dtype, const_string(e, helper(e, op, "dtype"), to), NULL, 0};
    simple(e, op, MIL_OP_CAST, a, n);
    return;
  }
  case OP_LAYER_NORM: {
    const IrType *t = in_type(e, op, 0);
    int64_t axes[IR_MAX_RANK];
    int k = ir_attr_ints(e->m, op, "axes", axes, IR_MAX_RANK);
    if (k < 0) {
      k = 1;
      axes[0] = t->rank - 1;
    }
    for (int i = 0; i < k; i++)
      if (axes[i] < 0) axes[i] += t->rank;
    a[n++] = (Arg){MIL_ARG_LAYER_NORM_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_LAYER_NORM_axes, const_ints(e, helper(e, op, "axes"), axes, k), NULL, 0};
    if (o->ninputs > 1) a[n++] = (Arg){MIL_ARG_LAYER_NORM_gamma, in_name(e, op, 1), NULL, 0};
    if (o->ninputs > 2) a[n++] = (Arg){MIL_ARG_LAYER_NORM_beta, in_name(e, op, 2), NULL, 0};
    a[n++] = (Arg){MIL_ARG_LAYER_NORM_epsilon, const_scalar(e, helper(e, op, "epsilon"), t->dtype, ir_attr_float(e->m, op, "epsilon", 1e-5)), NULL, 0};
    simple(e, op, MIL_OP_LAYER_NORM, a, n);
    return;
  }
  case OP_CLIP: {
    IrDType dt = in_type(e, op, 0)->dtype;
    a[n++] = (Arg){MIL_ARG_CLIP_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_CLIP_alpha, const_scalar(e, helper(e, op, "alpha"), dt, ir_attr_float(e->m, op, "min", 0)), NULL, 0};
    a[n++] = (Arg){MIL_ARG_CLIP_beta, const_scalar(e, helper(e, op, "beta"), dt, ir_attr_float(e->m, op, "max", 0)), NULL, 0};
    simple(e, op, MIL_OP_CLIP, a, n);
    return;
  }
  case OP_SELECT:
    a[n++] = (Arg){MIL_ARG_SELECT_cond, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_SELECT_a, in_name(e, op, 1), NULL, 0};
    a[n++] = (Arg){MIL_ARG_SELECT_b, in_name(e, op, 2), NULL, 0};
    simple(e, op, MIL_OP_SELECT, a, n);
    return;
  case OP_GATHER: {
    int64_t axis = ir_attr_int(e->m, op, "axis", 0);
    if (axis < 0) axis += in_type(e, op, 0)->rank;
    a[n++] = (Arg){MIL_ARG_GATHER_x, x, NULL, 0};
    a[n++] = (Arg){MIL_ARG_GATHER_indices, in_name(e, op, 1), NULL, 0};
    a[n++] = (Arg){MIL_ARG_GATHER_axis, const_int(e, helper(e, op, "axis"), axis), NULL, 0};
    simple(e, op, MIL_OP_GATHER, a, n);
    return;
  }
  case OP_NEG: case OP_RMS_NORM: case OP_SDPA: case OP_CROSS_ENTROPY: case OP_CALL: case OP_COUNT:
    break;
  }
  ice("'%s' reached MIL emission without being legalized", o->kind == OP_CALL ? "call" : ir_op_info(o->kind)->name);
}

/* ---- program ---- */

bool mil_emit_program(IrModule *m, IrFuncId f, const MilEmitOptions *opt, BlobWriter *blobs, StrBuf *out,
                      MilFunction *info, Diag *d) {
  Emitter e = {.m = m, .f = f, .opt = opt, .blobs = blobs, .out = out, .d = d, .v13 = opt->target == MIL_IOS18, .ok = true};
  strmap_init(&e.used);
  e.mil_name = xcalloc(m->nvalues, sizeof *e.mil_name);
  IrFunc *fn = ir_func(m, f);
  uint32_t nout = fn->noutputs, nin = fn->ninputs;
  MilBinding *outs = arena_alloc(&m->arena, sizeof *outs * (nout ? nout : 1));
  MilBinding *ins = arena_alloc(&m->arena, sizeof *ins * (nin ? nin : 1));
  bool *direct = xcalloc(nout ? nout : 1, sizeof *direct);

  /* Inputs and outputs are named, ordered and sized by io-legalize's
   * binding table; without one (a pipeline that left io-legalize out, or a
   * direct call) it is computed here by the same function. Everything else
   * is named after them in the same table. A result returned under its own
   * name is that output; other outputs get an identity statement of their own. */
  const IrBindingTable *bt = fn->bindings;
  if (!bt) {
    bt = io_bindings_compute(m, f, opt->min_surface_bytes ? opt->min_surface_bytes : IO_DEFAULT_MIN_SURFACE_BYTES);
  } else {
    if (!io_bindings_current(m, f))
      ice("the binding table of '%s' is stale: a pass changed its inputs or outputs without invalidating "
          "ANALYSIS_BINDINGS", fn->name);
    if (opt->min_surface_bytes && bt->min_surface_bytes != opt->min_surface_bytes)
      ice("the binding table of '%s' was computed for a %llu-byte minimum surface, the target's is %llu", fn->name,
          (unsigned long long)bt->min_surface_bytes, (unsigned long long)opt->min_surface_bytes);
  }
  for (uint32_t i = 0; i < nin; i++) strmap_put(&e.used, bt->inputs[i].mil_name, 1);
  for (uint32_t i = 0; i < nout; i++) strmap_put(&e.used, bt->outputs[i].mil_name, 1);
  for (uint32_t i = 0; i < nin; i++) {
    IrValueId v = fn->inputs[i];
    const IrBinding *b = &bt->inputs[i];
    e.mil_name[v.id] = b->mil_name;
    ins[i] = (MilBinding){b->name, b->mil_name, ir_value(m, v)->type, b->binding, b->bytes};
  }
  for (uint32_t i = 0; i < nout; i++) {
    IrOutput *o = &fn->outputs[i];
    IrValue *v = ir_value(m, o->value);
    const IrBinding *b = &bt->outputs[i];
    outs[i] = (MilBinding){b->name, b->mil_name, v->type, b->binding, b->bytes};
    if (v->kind == VK_RESULT && !e.mil_name[o->value.id] && !strcmp(o->name, v->name)) {
      e.mil_name[o->value.id] = outs[i].mil_name;
      direct[i] = true;
    }
  }
  for (uint32_t i = 0; i < fn->ndecls; i++) e.mil_name[fn->decls[i].id] = claim(&e, ir_value(m, fn->decls[i])->name);
  IR_FOR_EACH_OP(m, f, op) {
    IrOp *o = ir_op(m, op);
    for (uint32_t r = 0; r < o->nresults; r++)
      if (!e.mil_name[o->results[r].id]) e.mil_name[o->results[r].id] = claim(&e, ir_value(m, o->results[r])->name);
  }

  sb_printf(out, "program(%s)\n", mil_program_version(opt->target));
  if (e.v13)
    sb_puts(out, "[buildInfo = dict<string, string>({{\"coremlc-component-MIL\", \"3510.2.1\"}, {\"coremlc-version\", "
                 "\"3505.4.1\"}, {\"coremltools-component-milinternal\", \"\"}, {\"coremltools-version\", \"9.0\"}})]\n");
  else
    sb_puts(out, "[buildInfo = dict<tensor<string, []>, tensor<string, []>>({{\"coremlc-component-MIL\", \"3402.3.2\"}, "
                 "{\"coremlc-version\", \"3402.4.1\"}, {\"coremltools-component-milinternal\", \"\"}, "
                 "{\"coremltools-version\", \"8.1\"}})]\n");
  sb_printf(out, "{\n    func main<%s>(", mil_target_name(opt->target));
  MilBinding *sorted = xmalloc(sizeof *sorted * (nin ? nin : 1));
  for (uint32_t i = 0; i < nin; i++) sorted[ins[i].binding] = ins[i];
  for (uint32_t i = 0; i < nin; i++) {
    if (i) sb_puts(out, ", ");
    put_type(&e, &sorted[i].type);
    sb_printf(out, " %s", sorted[i].mil_name);
  }
  free(sorted);
  sb_puts(out, ") {\n");
  for (uint32_t i = 0; i < fn->ndecls && e.ok; i++) emit_decl(&e, fn->decls[i]);
  IR_FOR_EACH_OP(m, f, op) {
    if (!e.ok) break;
    emit_op(&e, op);
  }
  for (uint32_t i = 0; i < nout && e.ok; i++) {
    if (direct[i]) continue;
    Arg a = {MIL_ARG_IDENTITY_x, e.mil_name[fn->outputs[i].value.id], NULL, 0};
    put_op(&e, MIL_OP_IDENTITY, &outs[i].type, &outs[i].mil_name, 1, &a, 1);
  }
  sb_puts(out, "    } -> (");
  for (uint32_t i = 0; i < nout; i++) sb_printf(out, "%s%s", i ? ", " : "", outs[i].mil_name);
  sb_puts(out, ");\n}\n");

  if (info) {
    *info = (MilFunction){fn->name, ins, outs, nin, nout, NULL, e.nweights, fn->groups, fn->ngroups,
                          bt->surface_bytes, bt->min_surface_bytes};
    info->weights = arena_memdup(&m->arena, e.weights, sizeof *e.weights * e.nweights);
  }
  free(e.weights);
  free(direct);
  free(e.mil_name);
  strmap_free(&e.used);
  return e.ok;
}
