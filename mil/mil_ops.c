/*
 * The MIL op table as data (include/orion/mil_ops.def) and its look-ups.
 */
#include <string.h>

#include "orion/mil_ops.h"

/* Each op's argument count at compile time: a struct with one char per
 * argument (which also makes a repeated argument name a compile error). */
struct mil_nargs_none_ {
  char none_;
#define MIL_OP(id, ...) \
  }                     \
  ;                     \
  struct mil_nargs_##id { \
    char none_;
#define MIL_ARG(op, name, ...) char name;
#include "orion/mil_ops.def"
#undef MIL_OP
#undef MIL_ARG
};

#define NARGS(id) ((uint32_t)(sizeof(struct mil_nargs_##id) - 1))

static const MilOpInfo ops[MIL_OP_COUNT] = {
#define MIL_OP(id, name, family, since, until, rmin, rmax) \
  {MIL_OP_##id, name, MIL_FAM_##family, since, until, rmin, rmax, MIL_ARGS_OF_##id, NARGS(id)},
#define MIL_ARG(...)
#include "orion/mil_ops.def"
#undef MIL_OP
#undef MIL_ARG
};

static const MilArgSpec args[MIL_ARG_COUNT] = {
#define MIL_OP(...)
#define MIL_ARG(op, name, kind, dts, presence) {#name, MIL_OP_##op, MIL_KIND_##kind, MIL_DTS_##dts, MIL_##presence},
#define MIL_REQ true
#define MIL_OPT false
#include "orion/mil_ops.def"
#undef MIL_OP
#undef MIL_ARG
#undef MIL_REQ
#undef MIL_OPT
};

const MilOpInfo *mil_op_info(MilOpId op) { return (unsigned)op < MIL_OP_COUNT ? &ops[op] : NULL; }

const MilOpInfo *mil_op_find(const char *name) {
  for (size_t i = 0; i < MIL_OP_COUNT; i++)
    if (!strcmp(ops[i].name, name)) return &ops[i];
  return NULL;
}

const char *mil_op_name(MilOpId op) { return (unsigned)op < MIL_OP_COUNT ? ops[op].name : "?"; }

const MilArgSpec *mil_arg_info(MilArgId arg) { return (unsigned)arg < MIL_ARG_COUNT ? &args[arg] : NULL; }

const char *mil_arg_name(MilArgId arg) { return (unsigned)arg < MIL_ARG_COUNT ? args[arg].name : "?"; }

const MilArgSpec *mil_op_find_arg(const MilOpInfo *op, const char *name) {
  for (uint32_t i = 0; i < op->nargs; i++)
    if (!strcmp(args[op->first_arg + i].name, name)) return &args[op->first_arg + i];
  return NULL;
}

bool mil_op_in_opset(const MilOpInfo *op, uint32_t ios) {
  return ios >= op->since_ios && (op->until_ios == 0 || ios <= op->until_ios);
}

const char *mil_op_family_name(MilOpFamily f) {
  static const char *const names[MIL_FAM_COUNT] = {
      [MIL_FAM_CONST] = "const",   [MIL_FAM_CONSTEXPR] = "constexpr", [MIL_FAM_UNARY] = "unary",
      [MIL_FAM_BINARY] = "binary", [MIL_FAM_COMPARE] = "compare",     [MIL_FAM_LOGICAL] = "logical",
      [MIL_FAM_SELECT] = "select", [MIL_FAM_CAST] = "cast",           [MIL_FAM_REDUCE] = "reduce",
      [MIL_FAM_NORM] = "norm",     [MIL_FAM_SHAPE] = "shape",         [MIL_FAM_INDEX] = "index",
      [MIL_FAM_POOL] = "pool",     [MIL_FAM_QUANT] = "quant",         [MIL_FAM_LINALG] = "linalg",
      [MIL_FAM_ATTENTION] = "attention", [MIL_FAM_RECURRENT] = "recurrent",
  };
  return (unsigned)f < MIL_FAM_COUNT ? names[f] : "?";
}

const char *mil_arg_kind_name(MilArgKind k) {
  switch (k) {
  case MIL_KIND_TENSOR: return "tensor";
  case MIL_KIND_SCALAR: return "scalar";
  case MIL_KIND_STRING: return "string";
  case MIL_KIND_LIST: return "list";
  }
  return "?";
}
