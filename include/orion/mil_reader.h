/*
 * MIL text reader: a `model.mil` file (written by Apple's coremlc, by the
 * ANE-direct projects or by our own emitter) -> an in-memory MilProgram.
 *
 * Both dialects are read (`program(1.0)` with `tensor<T, []>` scalars and
 * `program(1.3)` with bare `T` scalars); see the MIL spec §1 and
 * docs/mil-reader.md. After parsing, the reader checks SSA (one definition
 * per name, uses after definitions, defined return names), literal payloads
 * against their declared types, `const` statements, and the arguments of
 * every op the MIL op table knows (include/orion/mil_ops.def: no argument
 * the op does not have, each of its kind; required arguments are left to
 * the backend, see mil_op_check_required). An op the
 * table does not know is read like any other and rejected by whoever
 * executes it (and by orion-lint, which checks for what will run).
 *
 * Everything a program holds lives in its arena and is addressed by index;
 * mil_program_free() releases it all. Locations are SrcSpans into the Diag's
 * SourceSet, so keep that set alive while reporting about a program.
 */
#ifndef ORION_MIL_READER_H
#define ORION_MIL_READER_H

#include "orion/dtype.h"
#include "orion/support.h"

/* Limits: input beyond them is reported, never truncated. The file size limit
 * is MAX_SOURCE_BYTES (support.h). */
#define MIL_MAX_RANK 8        /* dimensions of a tensor type */
#define MIL_MAX_NAME 1024     /* bytes in an identifier */
#define MIL_MAX_NESTING 32    /* open brackets ( [ { < within one statement */

/* Element types: the file formats' one enum (orion/dtype.h), of which MIL
 * text spells those below MIL_DT_COUNT. The MIL_DT_ names are its names. */
typedef OrionDType MilDType;
#define MIL_DT_NONE ORION_DT_NONE
#define MIL_DT_BOOL ORION_DT_BOOL
#define MIL_DT_STRING ORION_DT_STRING
#define MIL_DT_FP16 ORION_DT_FP16
#define MIL_DT_FP32 ORION_DT_FP32
#define MIL_DT_FP64 ORION_DT_FP64
#define MIL_DT_BF16 ORION_DT_BF16
#define MIL_DT_INT4 ORION_DT_INT4
#define MIL_DT_INT8 ORION_DT_INT8
#define MIL_DT_INT16 ORION_DT_INT16
#define MIL_DT_INT32 ORION_DT_INT32
#define MIL_DT_INT64 ORION_DT_INT64
#define MIL_DT_UINT1 ORION_DT_UINT1
#define MIL_DT_UINT2 ORION_DT_UINT2
#define MIL_DT_UINT3 ORION_DT_UINT3
#define MIL_DT_UINT4 ORION_DT_UINT4
#define MIL_DT_UINT6 ORION_DT_UINT6
#define MIL_DT_UINT8 ORION_DT_UINT8
#define MIL_DT_UINT16 ORION_DT_UINT16
#define MIL_DT_UINT32 ORION_DT_UINT32
#define MIL_DT_UINT64 ORION_DT_UINT64
#define MIL_DT_COUNT ORION_DT_MIL_END

/* "fp16", ...; "none" for MIL_DT_NONE or a value MIL does not spell. */
static inline const char *mil_dtype_name(MilDType t) {
  return (unsigned)t < MIL_DT_COUNT ? orion_dtype_name(t) : "none";
}
/* The dtype spelled by the n bytes at s; MIL_DT_NONE if MIL has no such dtype. */
static inline MilDType mil_dtype_from_name(const char *s, size_t n) {
  OrionDType t = orion_dtype_from_name(s, n);
  return t < MIL_DT_COUNT ? t : MIL_DT_NONE;
}
/* fp16 fp32 fp64 bf16 */
static inline bool mil_dtype_is_float(MilDType t) { return t < MIL_DT_COUNT && orion_dtype_is_float(t); }
/* int* and uint* */
static inline bool mil_dtype_is_int(MilDType t) { return orion_dtype_is_int(t); }
static inline bool mil_dtype_is_unsigned(MilDType t) { return orion_dtype_is_unsigned(t); }

typedef enum MilTypeKind {
  MIL_TYPE_TENSOR, /* tensor<T, [dims]>, or a bare T (rank 0) */
  MIL_TYPE_LIST,   /* list<T, LEN> */
  MIL_TYPE_TUPLE,  /* tuple<T1, T2, ...> */
  MIL_TYPE_DICT,   /* dict<K, V> */
  MIL_TYPE_STATE   /* state<T> */
} MilTypeKind;

typedef struct MilType {
  MilTypeKind kind;
  MilDType dtype;             /* TENSOR: element type */
  uint32_t rank;              /* TENSOR */
  int64_t dims[MIL_MAX_RANK]; /* TENSOR: -1 for an unknown dimension ('?') */
  bool bare;                  /* TENSOR of rank 0 written as a bare dtype (1.3 dialect) */
  int64_t length;             /* LIST: -1 for '?' */
  /* LIST: [0] the element type; DICT: [0] key, [1] value; STATE: [0];
   * TUPLE: [0..nsub) the members. */
  const struct MilType *sub;
  uint32_t nsub;
} MilType;

/* Structural equality; a bare `fp16` equals `tensor<fp16, []>`. */
bool mil_type_equal(const MilType *a, const MilType *b);
/* Product of the dims of a TENSOR type; UINT64_MAX if a dim is unknown or the
 * product does not fit. */
uint64_t mil_type_elements(const MilType *t);
/* Appends the type as it was spelled ("tensor<fp16, [1, ?]>", "fp16", ...). */
void mil_type_print(const MilType *t, StrBuf *out);

/* One element of a literal payload, untyped as in the text. */
typedef enum MilElemKind {
  MIL_ELEM_INT,    /* decimal integer */
  MIL_ELEM_FLOAT,  /* decimal or hex float, inf, -inf, nan */
  MIL_ELEM_BOOL,   /* true, false */
  MIL_ELEM_STRING, /* "..." (escapes resolved) */
  MIL_ELEM_LIST,   /* [ ... ]: tensor rows, list values */
  MIL_ELEM_TUPLE,  /* ( ... ) */
  MIL_ELEM_DICT    /* { ... }: a dict, or one {key, value} entry of it */
} MilElemKind;

typedef struct MilElem {
  uint8_t kind;    /* MilElemKind */
  bool big;        /* INT above INT64_MAX: i holds it wrapped, (uint64_t)i is the value */
  uint32_t offset; /* byte offset of the element in the source */
  uint32_t n;      /* LIST/TUPLE/DICT: number of items; STRING: length in bytes */
  union {
    int64_t i;                    /* INT */
    double f;                     /* FLOAT, as written (not rounded to any dtype) */
    bool b;                       /* BOOL */
    const char *s;                /* STRING, NUL-terminated */
    const struct MilElem *items;  /* LIST/TUPLE/DICT */
  };
} MilElem;

typedef enum MilPayloadKind {
  MIL_PAYLOAD_NONE,   /* T() */
  MIL_PAYLOAD_INLINE, /* T(elements) */
  MIL_PAYLOAD_BLOB    /* T(BLOBFILE(path = ..., offset = ...)) */
} MilPayloadKind;

/* A typed literal `TYPE(PAYLOAD)`. */
typedef struct MilLiteral {
  MilType type;
  MilPayloadKind payload;
  MilElem value;         /* INLINE: the payload as written (a scalar or brackets) */
  const char *blob_path; /* BLOB: e.g. "@model_path/weights/weight.bin" */
  uint64_t blob_offset;  /* BLOB: offset of the blob's metadata record */
  SrcSpan blob_loc;        /* BLOB: the BLOBFILE keyword */
  SrcSpan blob_offset_loc; /* BLOB: the offset's number */
  /* INLINE tensors: the elements in row-major order, whether written nested or
   * flat; exactly one array is set, by dtype. Floats are rounded to the dtype
   * (fp16 and bf16 to nearest even), so each is exactly representable in it;
   * ints are range-checked (uint64 above INT64_MAX is stored wrapped). */
  uint64_t count;
  const double *floats;
  const int64_t *ints;
  const bool *bools;
  const char *const *strings;
  SrcSpan loc;
} MilLiteral;

/* A named, typed variable: a function parameter or a statement result. */
typedef struct MilVar {
  const char *name;
  MilType type;
  SrcSpan loc; /* of the name */
} MilVar;

/* Where a name is defined (filled in for every name once the program is read). */
#define MIL_DEF_PARAM UINT32_MAX
#define MIL_DEF_UNDEFINED (UINT32_MAX - 1) /* a name defined nowhere (tolerant reads only) */
typedef enum MilOperandKind { MIL_OPERAND_NAME, MIL_OPERAND_LITERAL } MilOperandKind;

typedef struct MilOperand {
  MilOperandKind kind;
  const char *name;          /* NAME */
  uint32_t def_stmt;         /* NAME: index of the defining statement, MIL_DEF_PARAM or MIL_DEF_UNDEFINED */
  uint32_t def_index;        /* NAME: result index in that statement, or the parameter index */
  const MilLiteral *literal; /* LITERAL */
  SrcSpan loc;
} MilOperand;

/* One op argument: `x = a`, `x = int32(1)`, or a binding list `values = (a, b)`. */
typedef struct MilArg {
  const char *name;
  bool is_list;             /* written in parentheses (even with one item) */
  const MilOperand *items;  /* one item unless is_list */
  uint32_t nitems;
  SrcSpan loc;              /* of the argument name */
} MilArg;

/* An entry of an attribute block: `name = TYPE(PAYLOAD)`. */
typedef struct MilAttr {
  const char *name;
  const MilLiteral *value;
  SrcSpan loc; /* of the attribute name */
} MilAttr;

/* `results = op(args)[attrs];` */
typedef struct MilStmt {
  const char *op;      /* op type, e.g. "conv"; any name (the op table's ops have their arguments checked) */
  const char *op_name; /* the `name` attribute's string, NULL if there is none */
  const MilVar *results;
  uint32_t nresults;
  const MilArg *args;
  uint32_t nargs;
  const MilAttr *attrs; /* all attributes, `name` and `val` included, in source order */
  uint32_t nattrs;
  SrcSpan loc;    /* the whole statement */
  SrcSpan op_loc; /* the op type */
} MilStmt;

typedef struct MilFunc {
  const char *name;
  const char *opset;         /* normalised: "ios18" (also for a written "CoreML8") */
  const char *opset_written; /* as in the text */
  uint32_t ios;              /* 18 for ios18 */
  const MilVar *params;
  uint32_t nparams;
  const MilAttr *attrs; /* function attribute block (e.g. FlexibleShapeInformation) */
  uint32_t nattrs;
  const MilStmt *stmts;
  uint32_t nstmts;
  const MilOperand *returns; /* always MIL_OPERAND_NAME */
  uint32_t nreturns;
  SrcSpan loc; /* of the name */
} MilFunc;

typedef struct MilProgram {
  const char *version;  /* as written: "1.0", "1.3" */
  const MilAttr *attrs; /* program attribute block (buildInfo), kept as typed values */
  uint32_t nattrs;
  const MilFunc *funcs;
  uint32_t nfuncs;
  uint32_t file; /* source id in the Diag's SourceSet */
  Arena arena;   /* owns everything above */
} MilProgram;

/* Reads MIL text. Returns NULL when any error was reported (the diagnostics
 * say why), never a partial program. The text is registered in d->sources
 * under `name`. Input above MAX_SOURCE_BYTES is refused. */
MilProgram *mil_read_string(const char *name, const char *text, size_t len, Diag *d);
/* Same, reading the file; "-" reads standard input. */
MilProgram *mil_read_file(const char *path, Diag *d);

typedef struct MilReadOptions {
  /* Read past problems of names and types (a name defined nowhere or
   * used before its definition, an argument the op table does not know or
   * one of the wrong kind, a const whose value's type is not the one it
   * declares): each is reported as a
   * warning, with the message it has as an error, and the program is
   * returned (an undefined name's operand has def_stmt MIL_DEF_UNDEFINED).
   * Syntax errors, bad literals and everything else still fail the read.
   * For tools that check MIL with defects of that kind, such as the linter;
   * nothing should execute such a program. (A Diag that turns warnings into
   * errors makes them fail the read again.) */
  bool tolerant;
} MilReadOptions;

/* Reads the MIL text registered as `file` in d->sources; opt NULL is the
 * default (strict) reading. */
MilProgram *mil_read_source(uint32_t file, const MilReadOptions *opt, Diag *d);
void mil_program_free(MilProgram *p); /* NULL is fine */

/* Look-ups (NULL if absent). */
const MilFunc *mil_find_func(const MilProgram *p, const char *name);
const MilAttr *mil_find_attr(const MilAttr *attrs, uint32_t n, const char *name);
const MilArg *mil_find_arg(const MilStmt *s, const char *name);
/* The value of key in the program's buildInfo dict, NULL if absent. */
const char *mil_build_info(const MilProgram *p, const char *key);
/* The type of an operand: a literal's type, or the type its name was defined with. */
const MilType *mil_operand_type(const MilFunc *f, const MilOperand *o);

#endif
