/*
 * The orion graph IR.
 *
 * A module owns every object: functions, values and ops live in module arrays
 * and refer to each other by 32-bit ids (0 means "none"); value ids and op ids
 * are distinct types (IrValueId, IrOpId), so one cannot be passed where the
 * other is expected; strings, attribute
 * data and constant data live in the module's arena. Arrays grow, so a pointer
 * from ir_value()/ir_op()/ir_func() is valid only until the next object of
 * that kind is created: hold ids, not pointers, across creations.
 *
 * Every value knows its uses (op, operand index); a use with op == 0 is the
 * enclosing function's output number `index`. That makes "replace all uses"
 * and "is this dead" O(uses); each operand and output also knows where its
 * use sits, so dropping one use is O(1) however many a value has. Ops of a function form a doubly linked list in
 * program order; deleted objects are marked dead and skipped by iteration.
 * See docs/ir.md.
 */
#ifndef ORION_IR_H
#define ORION_IR_H

#include "orion/dtype.h"
#include "orion/support.h"

/* Value and op ids are single-member structs, not integers, so that mixing
 * them up (an op id given to ir_value, a value id stored as a use's op) is a
 * compile error rather than a wrong object at run time. `.id` is the index in
 * the module's array; 0 is the "none" object of each kind. Compare with
 * ir_id_eq, test for none with ir_id_is_none. */
typedef struct IrValueId {
  uint32_t id;
} IrValueId;
typedef struct IrOpId {
  uint32_t id;
} IrOpId;
typedef uint32_t IrFuncId;

#define IR_NO_VALUE ((IrValueId){0})
#define IR_NO_OP ((IrOpId){0})

static inline IrValueId ir_value_id(uint32_t id) { return (IrValueId){id}; }
static inline IrOpId ir_op_id(uint32_t id) { return (IrOpId){id}; }
static inline bool ir_value_id_eq(IrValueId a, IrValueId b) { return a.id == b.id; }
static inline bool ir_op_id_eq(IrOpId a, IrOpId b) { return a.id == b.id; }
static inline bool ir_value_id_is_none(IrValueId v) { return v.id == 0; }
static inline bool ir_op_id_is_none(IrOpId op) { return op.id == 0; }
/* Either kind of id; comparing a value id with an op id does not compile. */
#define ir_id_eq(a, b) _Generic((a), IrValueId: ir_value_id_eq, IrOpId: ir_op_id_eq)((a), (b))
#define ir_id_is_none(x) _Generic((x), IrValueId: ir_value_id_is_none, IrOpId: ir_op_id_is_none)(x)

/* ---- types ---- */

typedef enum IrDType { DT_INVALID, DT_FP16, DT_FP32, DT_INT32, DT_INT8, DT_UINT8, DT_BOOL, DT_COUNT } IrDType;

#define IR_MAX_RANK ORION_MAX_RANK
/* Largest element count of one tensor (2^31: indexes stay in int32 range on every backend). */
#define IR_MAX_ELEMENTS ORION_MAX_ELEMENTS
/* Longest value, function or attribute name. */
#define IR_MAX_NAME 255
/* Deepest nesting of brackets in one statement. */
#define IR_MAX_NESTING 16
/* Deepest chain of function calls (inlining depth). */
#define IR_MAX_CALL_DEPTH 32
/* Most ops, and most params and consts, in one function, as written and after
 * inlining. Each op costs the compiler about 2 KiB by the end of the pass
 * pipeline, so this keeps any program's compile near 1 GiB; real models are far
 * below (a 12-block GPT-2 is about 500 ops). */
#define IR_MAX_OPS_PER_FUNC (1u << 18)
#define IR_MAX_DECLS_PER_FUNC (1u << 18)
/* Most operands, and most results, of one op (a concat's parts, a split's or
 * a call's results). Passes and the MIL emitter keep one op's operands or
 * results in fixed arrays of this size: the builder rejects a statement over
 * it with an error naming the limit, and ir_op_new refuses to create such an
 * op (an internal error: a pass must not make what no source can), so every
 * op in a module is within it. */
#define IR_MAX_OPERANDS 256

typedef struct IrType {
  IrDType dtype; /* DT_INVALID: not inferred yet */
  uint8_t rank;
  int64_t dims[IR_MAX_RANK];
} IrType;

const char *ir_dtype_name(IrDType t);
IrDType ir_dtype_from_name(const char *s); /* DT_INVALID if unknown */
size_t ir_dtype_size(IrDType t);
bool ir_dtype_is_float(IrDType t);
/* The file formats' dtype of an IR dtype (ORION_DT_NONE for DT_INVALID), and
 * back (DT_INVALID for a dtype the IR does not have). */
OrionDType ir_dtype_to_orion(IrDType t);
IrDType ir_dtype_from_orion(OrionDType t);
uint64_t ir_type_elements(const IrType *t);
bool ir_type_equal(const IrType *a, const IrType *b);
/* "fp16[1,768,1,64]"; scalars print as "fp16[]". */
void ir_type_print(StrBuf *sb, const IrType *t);

/* ---- ops ---- */

typedef enum IrOpKind {
#define OP(id, name, min_in, max_in, nres, dtypes, attrs) OP_##id,
#include "orion/ops.def"
#undef OP
  OP_CALL, /* call of another function, inlined by ir_inline_calls */
  OP_COUNT
} IrOpKind;

typedef enum IrDTypeClass { DTC_FLOAT, DTC_NUM, DTC_ANY } IrDTypeClass;

typedef enum IrAttrKind { ATTR_INT, ATTR_FLOAT, ATTR_BOOL, ATTR_STR, ATTR_LIST } IrAttrKind;

/* Attribute kinds of the schema (what an op expects). */
typedef enum IrAttrSchemaKind { AS_INT, AS_FLOAT, AS_BOOL, AS_STR, AS_INTS, AS_FLOATS } IrAttrSchemaKind;

typedef struct IrAttrSchema {
  const char *name;
  IrAttrSchemaKind kind;
  bool optional;
} IrAttrSchema;

#define IR_MAX_OP_ATTRS 8

typedef struct IrOpInfo {
  const char *name;
  int min_inputs, max_inputs; /* max -1: variadic */
  int results;                /* 0: decided by attributes */
  IrDTypeClass dtypes;
  uint32_t nattrs;
  IrAttrSchema attrs[IR_MAX_OP_ATTRS];
} IrOpInfo;

const IrOpInfo *ir_op_info(IrOpKind k);
/* OP_COUNT if no op has this name. */
IrOpKind ir_op_from_name(const char *name);
const char *ir_attr_schema_kind_name(IrAttrSchemaKind k);

typedef struct IrAttrValue {
  IrAttrKind kind;
  union {
    int64_t i;
    double f;
    bool b;
    const char *s;
    struct {
      struct IrAttrValue *items;
      uint32_t n;
    } list;
  } u;
} IrAttrValue;

typedef struct IrAttr {
  const char *name;
  IrAttrValue val;
  SrcSpan loc;
} IrAttr;

/* ---- values ---- */

typedef enum IrValueKind { VK_INPUT, VK_PARAM, VK_CONST, VK_RESULT } IrValueKind;

typedef enum IrParamSourceKind {
  SRC_ZEROS,
  SRC_ONES,
  SRC_FILL,        /* a = value */
  SRC_NORMAL,      /* a = mean, b = std, seed */
  SRC_UNIFORM,     /* a = low, b = high, seed */
  SRC_SAFETENSORS, /* path, key */
  SRC_NPY,         /* path */
  SRC_ROPE_COS,    /* a = theta: rotary position table, [positions, head_dim] */
  SRC_ROPE_SIN     /* a = theta */
} IrParamSourceKind;

typedef struct IrParamSource {
  IrParamSourceKind kind;
  double a, b;
  uint64_t seed;
  const char *path; /* as written; relative paths are relative to the module's base_dir */
  const char *key;
  /* What weights_identity says of the param, when it is not computed from
   * the fields above: set by weights_override to the identity the param had
   * before, so that a compile with replaced weights shares storage as the
   * original did. NULL otherwise. */
  const char *identity;
} IrParamSource;

typedef struct IrUse {
  IrOpId op;      /* IR_NO_OP: the function's output number `index` */
  uint32_t index; /* operand index */
} IrUse;

typedef struct IrValue {
  IrValueKind kind;
  bool dead;
  bool type_declared; /* the source spelled the type: inference must agree */
  bool frozen;        /* VK_PARAM: `frozen param`, never trained (docs/training.md) */
  IrType type;
  const char *name;
  IrFuncId func;
  IrOpId def;          /* VK_RESULT: defining op */
  uint32_t def_index;  /* VK_RESULT: which result */
  IrUse *uses;         /* heap, owned by the module */
  uint32_t nuses, cap_uses;
  IrParamSource src;   /* VK_PARAM */
  double *data;        /* VK_CONST: ndata values, row-major; ndata == 1 splats */
  uint64_t ndata;
  SrcSpan loc;
} IrValue;

typedef struct IrOp {
  IrOpKind kind;
  bool dead;
  IrFuncId func;
  IrValueId *inputs;
  uint32_t *use_slots; /* per operand: where its use sits in that value's use list (O(1) removal) */
  uint32_t ninputs;
  IrValueId *results;
  uint32_t nresults;
  IrAttr *attrs;
  uint32_t nattrs, cap_attrs;
  IrFuncId callee;      /* OP_CALL */
  const char *instance; /* OP_CALL: the instance name that prefixes the callee's names */
  IrOpId prev, next;
  SrcSpan loc;
  uint64_t sram_bytes; /* working-set estimate from sram-annotate (0: not annotated) */
} IrOp;

typedef struct IrOutput {
  const char *name; /* the name callers bind; stays when the value is replaced */
  IrValueId value;
  uint32_t use_slot; /* where this use sits in the value's use list */
  SrcSpan loc;
  IrType type; /* fixed by the first verification: the interface no pass may change */
} IrOutput;

/* Outputs [first, first + nparts) are, concatenated along `axis`, the
 * original output `name` of type `type` (split-concat makes these: the ANE
 * rejects concat, so the caller reassembles). */
typedef struct IrOutputGroup {
  const char *name;
  int axis;
  uint32_t first, nparts;
  IrType type;
} IrOutputGroup;

/* One input or output as the device binds it (io-legalize's analysis). */
typedef struct IrBinding {
  const char *name;     /* what it was computed for: the input's value name, or the output's name */
  const char *mil_name; /* its name in the MIL text */
  uint32_t binding;     /* index in ASCII order of the MIL names (inputs and outputs counted separately) */
  uint64_t bytes;       /* the tensor's data bytes (elements * dtype size) */
} IrBinding;

/* A function's binding table: the ANE binds surfaces in ASCII order of their
 * MIL names and wants them all of one size, at least the target's minimum.
 * Set by io-legalize; the MIL emitter and the package manifest use it. */
typedef struct IrBindingTable {
  IrBinding *inputs, *outputs; /* parallel to IrFunc.inputs and IrFunc.outputs */
  uint32_t ninputs, noutputs;
  uint64_t surface_bytes;     /* every surface's size: the largest tensor, at least the minimum, a multiple of 64 */
  uint64_t min_surface_bytes; /* the target's minimum it was computed for */
} IrBindingTable;

typedef struct IrFunc {
  const char *name;
  bool dead;
  SrcSpan loc;
  IrValueId *inputs;
  uint32_t ninputs, cap_inputs;
  IrValueId *decls; /* params and consts, in declaration order */
  uint32_t ndecls, cap_decls;
  IrOpId first, last;
  uint32_t nops;
  IrOutput *outputs;
  uint32_t noutputs, cap_outputs;
  bool has_return;
  SrcSpan return_loc;
  uint32_t ncallers; /* call sites naming this function; entries have none */
  uint32_t name_counter; /* next suffix tried for generated names */
  StrMap value_names;    /* name -> newest value created with it here; see ir_func_find_value */
  uint64_t sram_peak;    /* largest op working set, from sram-annotate (0: not annotated) */
  IrBindingTable *bindings; /* from io-legalize, in the arena (NULL: not computed, or invalidated) */
  IrOutputGroup *groups; /* outputs split into parts */
  uint32_t ngroups, cap_groups;
} IrFunc;

typedef struct IrModule {
  Arena arena;
  IrFunc *funcs;
  uint32_t nfuncs, cap_funcs; /* funcs[0] unused */
  IrValue *values;
  uint32_t nvalues, cap_values;
  IrOp *ops;
  uint32_t nops, cap_ops;
  const char *base_dir; /* directory that relative weight paths start from */
} IrModule;

IrModule *ir_module_new(void);
void ir_module_free(IrModule *m);

static inline IrFunc *ir_func(IrModule *m, IrFuncId id) { return &m->funcs[id]; }
static inline IrValue *ir_value(IrModule *m, IrValueId id) { return &m->values[id.id]; }
static inline IrOp *ir_op(IrModule *m, IrOpId id) { return &m->ops[id.id]; }

/* Functions. */
IrFuncId ir_func_new(IrModule *m, const char *name, SrcSpan loc);
IrFuncId ir_func_lookup(IrModule *m, const char *name); /* 0 if none */
IrValueId ir_func_add_input(IrModule *m, IrFuncId f, const char *name, const IrType *t, SrcSpan loc);
IrValueId ir_param_new(IrModule *m, IrFuncId f, const char *name, const IrType *t, const IrParamSource *src,
                       SrcSpan loc);
/* Consts: n == 1 splats the value over the shape, else n == elements. Data is copied. */
IrValueId ir_const_new(IrModule *m, IrFuncId f, const char *name, const IrType *t, const double *data, uint64_t n,
                       SrcSpan loc);
void ir_func_add_output(IrModule *m, IrFuncId f, const char *name, IrValueId v, SrcSpan loc);
void ir_func_set_output(IrModule *m, IrFuncId f, uint32_t index, IrValueId v);
/* Inserts an output at position `index` (later outputs move up by one). */
void ir_func_insert_output(IrModule *m, IrFuncId f, uint32_t index, const char *name, IrValueId v, SrcSpan loc);

/* Ops. ir_op_new creates an op and its nresults result values (types not yet
 * inferred, names taken from result_names or generated) and appends it to the
 * function (ninputs and nresults at most IR_MAX_OPERANDS); ir_op_move_before
 * reorders (before == IR_NO_OP: to the end). */
IrOpId ir_op_new(IrModule *m, IrFuncId f, IrOpKind kind, const IrValueId *inputs, uint32_t ninputs,
                 uint32_t nresults, const char *const *result_names, SrcSpan loc);
void ir_op_move_before(IrModule *m, IrOpId op, IrOpId before);
void ir_op_set_input(IrModule *m, IrOpId op, uint32_t index, IrValueId v);
/* Removes an op whose results have no uses (an internal error otherwise). */
void ir_op_erase(IrModule *m, IrOpId op);
/* Removes an unused param or const. */
void ir_decl_erase(IrModule *m, IrValueId v);
/* Removes every param and const of f that nothing uses, in one linear sweep;
 * returns how many went. */
uint32_t ir_erase_unused_decls(IrModule *m, IrFuncId f);
/* Points every use of `from` (ops and function outputs) at `to`. */
void ir_replace_all_uses(IrModule *m, IrValueId from, IrValueId to);
/* A name not yet used in the function, based on `base`. */
const char *ir_unique_name(IrModule *m, IrFuncId f, const char *base);
/* The live value named `name` in f, or IR_NO_VALUE. Constant time through the name
 * index, which remembers the newest value created with each name; a renamed
 * value (pass_replace_op) must take a name some value of f was created with. */
IrValueId ir_func_find_value(IrModule *m, IrFuncId f, const char *name);

/* Attributes. */
const IrAttr *ir_op_attr(IrModule *m, IrOpId op, const char *name);
void ir_op_set_attr(IrModule *m, IrOpId op, const char *name, const IrAttrValue *val, SrcSpan loc);
void ir_op_set_attr_int(IrModule *m, IrOpId op, const char *name, int64_t v);
void ir_op_set_attr_float(IrModule *m, IrOpId op, const char *name, double v);
void ir_op_set_attr_bool(IrModule *m, IrOpId op, const char *name, bool v);
void ir_op_set_attr_str(IrModule *m, IrOpId op, const char *name, const char *v);
void ir_op_set_attr_ints(IrModule *m, IrOpId op, const char *name, const int64_t *v, uint32_t n);
/* Typed reads with defaults (the attribute must be of the schema kind). */
int64_t ir_attr_int(IrModule *m, IrOpId op, const char *name, int64_t dflt);
double ir_attr_float(IrModule *m, IrOpId op, const char *name, double dflt);
bool ir_attr_bool(IrModule *m, IrOpId op, const char *name, bool dflt);
const char *ir_attr_str(IrModule *m, IrOpId op, const char *name, const char *dflt);
/* Copies up to max ints of a list attribute; returns the count, or -1 if absent. */
int ir_attr_ints(IrModule *m, IrOpId op, const char *name, int64_t *out, int max);

/* Iteration over a function's live ops in program order. */
#define IR_FOR_EACH_OP(m, fid, opvar) \
  for (IrOpId opvar = ir_func((m), (fid))->first; !ir_id_is_none(opvar); opvar = ir_op((m), opvar)->next)

/* ---- analyses and transformations (frontend) ---- */

/* Infers the result types of one op from its inputs and attributes and checks
 * operands and attributes; reports at the op's location. */
bool ir_infer_op(IrModule *m, IrOpId op, Diag *d);
/* Infers and checks the whole module: types, dtypes, attributes, use lists,
 * outputs, calls. `stage` names who asks (for messages after a pass). */
bool ir_verify(IrModule *m, Diag *d);

/* Canonical .oir text; parses back to the same module. */
void ir_print_module(IrModule *m, StrBuf *out);
void ir_print_func(IrModule *m, IrFuncId f, StrBuf *out);
/* Graphviz (dot) view of the module. */
void ir_print_dot(IrModule *m, StrBuf *out);

/* Seed of a random initializer instantiated under an instance path. */
uint64_t ir_derive_seed(uint64_t seed, const char *instance);

#endif
