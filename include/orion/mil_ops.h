/*
 * The table of MIL ops (include/orion/mil_ops.def): each op's name, family,
 * the opsets that define it, its number of results, and its arguments with
 * their kind, element types and whether they are required. The emitter
 * takes op and argument names from it, the reader checks arguments against
 * it, the CPU backend binds arguments by it and the linter reads MIL with
 * that reader. The table is constant data; nothing here has state.
 */
#ifndef ORION_MIL_OPS_H
#define ORION_MIL_OPS_H

#include "orion/mil_reader.h"

typedef enum MilOpId {
#define MIL_OP(id, ...) MIL_OP_##id,
#define MIL_ARG(...)
#include "orion/mil_ops.def"
#undef MIL_OP
#undef MIL_ARG
  MIL_OP_COUNT
} MilOpId;

/* One id per argument of the table, MIL_ARG_<OP>_<name> (e.g.
 * MIL_ARG_CONV_weight), numbered in table order so that the arguments of
 * one op are consecutive. The MIL_ARGS_OF_<OP> markers give the first of
 * each op's; the `_` twin steps back so the first argument gets that number. */
typedef enum MilArgId {
#define MIL_OP(id, ...) MIL_ARGS_OF_##id, MIL_ARGS_OF_##id##_ = MIL_ARGS_OF_##id - 1,
#define MIL_ARG(op, name, ...) MIL_ARG_##op##_##name,
#include "orion/mil_ops.def"
#undef MIL_OP
#undef MIL_ARG
  MIL_ARG_COUNT
} MilArgId;

/* Families group ops that a backend treats alike (fusion, kernels by family). */
typedef enum MilOpFamily {
  MIL_FAM_CONST,     /* const */
  MIL_FAM_CONSTEXPR, /* constexpr_*: evaluated once, at load */
  MIL_FAM_UNARY,     /* element-wise, one tensor in, same shape and dtype out */
  MIL_FAM_BINARY,    /* element-wise arithmetic on two broadcast tensors */
  MIL_FAM_COMPARE,   /* element-wise comparison: bool result */
  MIL_FAM_LOGICAL,   /* element-wise on bools */
  MIL_FAM_SELECT,    /* select(cond, a, b) */
  MIL_FAM_CAST,
  MIL_FAM_REDUCE,    /* reductions along axes, argmax/argmin */
  MIL_FAM_NORM,      /* softmax, layer_norm */
  MIL_FAM_SHAPE,     /* data movement: reshape, transpose, slice, concat, ... */
  MIL_FAM_INDEX,     /* gather, topk */
  MIL_FAM_POOL,
  MIL_FAM_QUANT,     /* quantize, dequantize */
  MIL_FAM_LINALG,    /* matmul, linear, conv */
  MIL_FAM_ATTENTION,
  MIL_FAM_RECURRENT,
  MIL_FAM_COUNT
} MilOpFamily;

typedef enum MilArgKind {
  MIL_KIND_TENSOR, /* one tensor of any rank */
  MIL_KIND_SCALAR, /* one tensor of one element (rank 0, or every dim 1) */
  MIL_KIND_STRING, /* one string */
  MIL_KIND_LIST    /* a binding list `(a, b, ...)` of tensors */
} MilArgKind;

/* Element type sets: bits (1 << MilDType). */
#define MIL_DTS(t) (1u << (t))
#define MIL_DTS_FLOAT (MIL_DTS(MIL_DT_FP16) | MIL_DTS(MIL_DT_FP32))
#define MIL_DTS_INT                                                                                         \
  (MIL_DTS(MIL_DT_INT8) | MIL_DTS(MIL_DT_INT16) | MIL_DTS(MIL_DT_INT32) | MIL_DTS(MIL_DT_INT64) |           \
   MIL_DTS(MIL_DT_UINT8) | MIL_DTS(MIL_DT_UINT16) | MIL_DTS(MIL_DT_UINT32) | MIL_DTS(MIL_DT_UINT64))
#define MIL_DTS_NUM (MIL_DTS_FLOAT | MIL_DTS(MIL_DT_INT32))
#define MIL_DTS_BOOL MIL_DTS(MIL_DT_BOOL)
#define MIL_DTS_STRING MIL_DTS(MIL_DT_STRING)
#define MIL_DTS_QUANT (MIL_DTS(MIL_DT_INT8) | MIL_DTS(MIL_DT_UINT8))
#define MIL_DTS_MASK (MIL_DTS_FLOAT | MIL_DTS_BOOL)
#define MIL_DTS_ANY (((1u << MIL_DT_COUNT) - 1) & ~MIL_DTS(MIL_DT_NONE) & ~MIL_DTS_STRING)

typedef struct MilArgSpec {
  const char *name;
  MilOpId op;     /* the op it belongs to */
  MilArgKind kind;
  uint32_t dtypes; /* MIL_DTS_ bits */
  bool required;
} MilArgSpec;

typedef struct MilOpInfo {
  MilOpId id;
  const char *name;
  MilOpFamily family;
  uint8_t since_ios, until_ios; /* opsets that define it; until 0: all since */
  int8_t min_results, max_results; /* max -1: any number */
  MilArgId first_arg;              /* its arguments: [first_arg, first_arg + nargs) */
  uint32_t nargs;
} MilOpInfo;

const MilOpInfo *mil_op_info(MilOpId op);
/* The op called name; NULL if the table does not have it. */
const MilOpInfo *mil_op_find(const char *name);
/* The op's name as MIL spells it (the emitter's only source of op names). */
const char *mil_op_name(MilOpId op);
const MilArgSpec *mil_arg_info(MilArgId arg);
const char *mil_arg_name(MilArgId arg);
/* The op's argument called name; NULL if it has none of that name. */
const MilArgSpec *mil_op_find_arg(const MilOpInfo *op, const char *name);
/* Whether opset iosNN defines the op. */
bool mil_op_in_opset(const MilOpInfo *op, uint32_t ios);
/* Reports each required argument of op that statement st binds neither as
 * an argument nor (a constexpr op) as an attribute: "OP: missing argument
 * 'NAME'" at the op. For a backend's binder, at prepare: the reader does not
 * ask for required arguments (a program that lacks one is read, and refused
 * by the backend asked to run it). True if none is missing. */
bool mil_op_check_required(const MilOpInfo *op, const MilStmt *st, Diag *d);
/* "unary", "linalg", ... */
const char *mil_op_family_name(MilOpFamily f);
/* "tensor", "scalar", "string", "list" */
const char *mil_arg_kind_name(MilArgKind k);

#endif
