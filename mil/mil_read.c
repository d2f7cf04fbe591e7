/*
 * MIL reader entry points: text -> syntax tree (flex/bison) -> MilProgram,
 * with the semantic checks (mil-spec §1.8):
 *   - each name is defined once per function, used only after its
 *     definition, and every returned name is defined;
 *   - every literal's payload fits its declared type (nested brackets that
 *     follow the shape, a flat list of the element count, a bare scalar for
 *     rank 0; element kinds and integer ranges per dtype; BLOBFILE fields);
 *   - `const` has one result and a `val` whose type is the declared one;
 *   - opsets are iosNN or CoreMLn (= ios(n+10));
 *   - the arguments of an op the MIL op table knows are the table's and
 *     each is of its kind (mil_op_args.c).
 * A tolerant read (MilReadOptions) reports the problems of names, of op
 * arguments and of a const's declared type as warnings and keeps the program.
 * Syntax errors stop before these checks, so a broken statement cannot set
 * off a cascade of "undefined value" errors; errors the grammar reports that
 * leave the tree whole (an unknown dtype, a negative dimension) do not.
 * Errors come in source order within each of the two stages.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "mil_ast.h"
#include "mil_check.h"
#include "mil_parser.h"
#include "orion/fp16.h"

/* From the generated scanner (reentrant API). */
typedef struct yy_buffer_state *YY_BUFFER_STATE;
int mil_yylex_init_extra(MilParseCtx *extra, yyscan_t *scanner);
int mil_yylex_destroy(yyscan_t scanner);
YY_BUFFER_STATE mil_yy_scan_bytes(const char *bytes, int len, yyscan_t scanner);
int mil_yyparse(yyscan_t scanner, MilParseCtx *ctx);

/* ---- types ------------------------------------------------------------------- */

bool mil_type_equal(const MilType *a, const MilType *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
  case MIL_TYPE_TENSOR:
    if (a->dtype != b->dtype || a->rank != b->rank) return false;
    for (uint32_t i = 0; i < a->rank; i++)
      if (a->dims[i] != b->dims[i]) return false;
    return true;
  case MIL_TYPE_LIST:
    if (a->length != b->length) return false;
    break;
  case MIL_TYPE_TUPLE:
  case MIL_TYPE_DICT:
  case MIL_TYPE_STATE:
    break;
  }
  if (a->nsub != b->nsub) return false;
  for (uint32_t i = 0; i < a->nsub; i++)
    if (!mil_type_equal(&a->sub[i], &b->sub[i])) return false;
  return true;
}

uint64_t mil_type_elements(const MilType *t) {
  if (t->kind != MIL_TYPE_TENSOR) return UINT64_MAX;
  uint64_t n = 1;
  bool zero = false;
  bool unknown = false;
  for (uint32_t i = 0; i < t->rank; i++) {
    if (t->dims[i] < 0) unknown = true;
    else if (t->dims[i] == 0) zero = true;
    else if (n > UINT64_MAX / (uint64_t)t->dims[i]) n = UINT64_MAX;
    else n *= (uint64_t)t->dims[i];
  }
  if (unknown) return UINT64_MAX;
  return zero ? 0 : n;
}

void mil_type_print(const MilType *t, StrBuf *out) {
  switch (t->kind) {
  case MIL_TYPE_TENSOR:
    if (t->bare && t->rank == 0) {
      sb_puts(out, mil_dtype_name(t->dtype));
      return;
    }
    sb_printf(out, "tensor<%s, [", mil_dtype_name(t->dtype));
    for (uint32_t i = 0; i < t->rank; i++) {
      if (i) sb_puts(out, ", ");
      if (t->dims[i] < 0) sb_putc(out, '?');
      else sb_printf(out, "%lld", (long long)t->dims[i]);
    }
    sb_puts(out, "]>");
    return;
  case MIL_TYPE_LIST:
    sb_puts(out, "list<");
    mil_type_print(&t->sub[0], out);
    if (t->length < 0) sb_puts(out, ", ?>");
    else sb_printf(out, ", %lld>", (long long)t->length);
    return;
  case MIL_TYPE_TUPLE:
  case MIL_TYPE_DICT:
  case MIL_TYPE_STATE:
    sb_puts(out, t->kind == MIL_TYPE_TUPLE ? "tuple<" : t->kind == MIL_TYPE_DICT ? "dict<" : "state<");
    for (uint32_t i = 0; i < t->nsub; i++) {
      if (i) sb_puts(out, ", ");
      mil_type_print(&t->sub[i], out);
    }
    sb_putc(out, '>');
    return;
  }
}

/* ---- tree helpers for the grammar -------------------------------------------- */

AstNode *mil_ast_push(MilParseCtx *ctx, AstNode *list, void *item) {
  AstNode *n = arena_alloc(ctx->scratch, sizeof *n);
  n->item = item;
  n->next = list;
  return n;
}

void mil_ast_push_elem(MilParseCtx *ctx, MilElem e) {
  xgrow((void **)&ctx->elems.items, sizeof *ctx->elems.items, &ctx->elems.cap, ctx->elems.len + 1);
  ctx->elems.items[ctx->elems.len++] = e;
}

MilElem mil_ast_close_list(MilParseCtx *ctx, MilElemKind kind, uint32_t mark, SrcSpan loc) {
  MilElem e;
  memset(&e, 0, sizeof e);
  e.kind = (uint8_t)kind;
  e.offset = loc.start;
  if (mark > ctx->elems.len) mark = ctx->elems.len; /* after recovery only */
  e.n = ctx->elems.len - mark;
  if (e.n) e.items = arena_memdup(ctx->arena, ctx->elems.items + mark, (size_t)e.n * sizeof *ctx->elems.items);
  ctx->elems.len = mark;
  return e;
}

static uint32_t list_length(const AstNode *l) {
  uint32_t n = 0;
  for (; l; l = l->next) n++;
  return n;
}

const MilType *mil_ast_types(MilParseCtx *ctx, AstNode *list, uint32_t *n) {
  *n = list_length(list);
  MilType *out = arena_alloc(ctx->arena, (size_t)*n * sizeof *out);
  uint32_t i = *n;
  for (AstNode *l = list; l; l = l->next) out[--i] = *(const MilType *)l->item;
  return out;
}

/* ---- building and checking ------------------------------------------------------ */

typedef struct Builder {
  MilParseCtx *ctx;
  Diag *d;
  Arena *arena; /* the program's */
  const SourceFile *src;
  StrMap seen; /* duplicate argument/attribute names of one list */
  bool tolerant;
} Builder;

/* A problem of names, types or op arguments: an error, or in a tolerant
 * read a warning that lets the read go on. Returns whether it may go on. */
static bool name_problem(Builder *b, SrcSpan at, const char *fmt, ...) ORION_PRINTF(3, 4);
static bool name_problem(Builder *b, SrcSpan at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(b->d, b->tolerant ? DIAG_WARNING : DIAG_ERROR, at, fmt, ap);
  va_end(ap);
  return b->tolerant;
}

/* Items of a newest-first list in source order (heap array, caller frees). */
static void **list_items(const AstNode *l, uint32_t *n) {
  *n = list_length(l);
  void **items = xmalloc(((size_t)*n + 1) * sizeof *items);
  uint32_t i = *n;
  for (; l; l = l->next) items[--i] = l->item;
  return items;
}

/* The span of the token that starts at `offset` (numbers, names, strings):
 * elements keep only their start, so the end is found in the text. */
static SrcSpan token_span(Builder *b, uint32_t offset) {
  SrcSpan s = {b->ctx->file, offset, offset + 1};
  const char *t = b->src->text;
  size_t n = b->src->len, i = offset;
  if (i >= n) return s;
  if (t[i] == '"') {
    for (i++; i < n && t[i] != '"' && t[i] != '\n'; i++)
      if (t[i] == '\\' && i + 1 < n) i++;
    if (i < n && t[i] == '"') i++;
  } else if (t[i] == '[' || t[i] == '(' || t[i] == '{') {
    i++;
  } else {
    while (i < n && (t[i] == '_' || t[i] == '.' || t[i] == '+' || t[i] == '-' || (t[i] >= '0' && t[i] <= '9') ||
                     (t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z')))
      i++;
  }
  s.end = (uint32_t)(i > offset ? i : offset + 1);
  return s;
}

static const char *type_str(Builder *b, const MilType *t) {
  StrBuf sb;
  sb_init(&sb);
  mil_type_print(t, &sb);
  char *s = arena_strndup(b->arena, sb.data ? sb.data : "", sb.len);
  sb_free(&sb);
  return s;
}

static const char *elem_desc(const MilElem *e) {
  switch ((MilElemKind)e->kind) {
  case MIL_ELEM_INT: return "an integer";
  case MIL_ELEM_FLOAT: return "a number";
  case MIL_ELEM_BOOL: return "a bool";
  case MIL_ELEM_STRING: return "a string";
  case MIL_ELEM_LIST: return "a list";
  case MIL_ELEM_TUPLE: return "a tuple";
  case MIL_ELEM_DICT: return "a dict";
  }
  return "a value";
}

static bool is_scalar(const MilElem *e) { return e->kind <= MIL_ELEM_STRING; }

/* An unknown dtype was reported where it was spelled; its literals are not checked. */
static bool has_unknown_dtype(const MilType *t) {
  if (t->kind == MIL_TYPE_TENSOR) return t->dtype == MIL_DT_NONE;
  for (uint32_t i = 0; i < t->nsub; i++)
    if (has_unknown_dtype(&t->sub[i])) return true;
  return false;
}

/* One scalar of a tensor of dtype dt. */
static bool fits_scalar(Builder *b, MilDType dt, const MilElem *e) {
  const char *want = NULL;
  switch (dt) {
  case MIL_DT_BOOL:
    if (e->kind != MIL_ELEM_BOOL) want = "true or false";
    break;
  case MIL_DT_STRING:
    if (e->kind != MIL_ELEM_STRING) want = "a string";
    break;
  default:
    if (mil_dtype_is_float(dt)) {
      if (e->kind != MIL_ELEM_INT && e->kind != MIL_ELEM_FLOAT) want = "a number";
      break;
    }
    if (e->kind != MIL_ELEM_INT) {
      want = "an integer";
      break;
    }
    /* Range of the integer dtype. */
    unsigned bits = orion_dtype_bits(dt);
    bool ok;
    char range[64];
    if (mil_dtype_is_unsigned(dt)) {
      uint64_t max = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
      ok = e->big ? bits == 64 : e->i >= 0 && (uint64_t)e->i <= max;
      snprintf(range, sizeof range, "0 to %llu", (unsigned long long)max);
    } else {
      int64_t max = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
      ok = !e->big && e->i >= -max - 1 && e->i <= max;
      snprintf(range, sizeof range, "%lld to %lld", (long long)(-max - 1), (long long)max);
    }
    if (!ok) {
      char v[32];
      if (e->big) snprintf(v, sizeof v, "%llu", (unsigned long long)(uint64_t)e->i);
      else snprintf(v, sizeof v, "%lld", (long long)e->i);
      diag_error(b->d, token_span(b, e->offset), "value %s is out of range for %s (%s)", v, mil_dtype_name(dt), range);
      return false;
    }
    return true;
  }
  if (want) {
    diag_error(b->d, token_span(b, e->offset), "expected %s for %s, found %s", want, mil_dtype_name(dt), elem_desc(e));
    return false;
  }
  return true;
}

/* Axis `axis` of a tensor payload written with nested brackets. */
static bool fits_nested(Builder *b, const MilType *t, const MilElem *e, uint32_t axis) {
  int64_t want = t->dims[axis];
  if (e->kind != MIL_ELEM_LIST) {
    diag_error(b->d, token_span(b, e->offset), "expected a list along axis %u of %s, found %s", axis, type_str(b, t),
               elem_desc(e));
    return false;
  }
  if (want >= 0 && (uint64_t)want != e->n) {
    diag_error(b->d, token_span(b, e->offset), "expected %lld values along axis %u of %s, found %u", (long long)want,
               axis, type_str(b, t), e->n);
    return false;
  }
  for (uint32_t i = 0; i < e->n; i++) {
    const MilElem *it = &e->items[i];
    if (axis + 1 < t->rank) {
      if (!fits_nested(b, t, it, axis + 1)) return false;
    } else if (!is_scalar(it)) {
      diag_error(b->d, token_span(b, it->offset), "list nested deeper than the rank of %s", type_str(b, t));
      return false;
    } else if (!fits_scalar(b, t->dtype, it)) {
      return false;
    }
  }
  return true;
}

static bool fits_tensor(Builder *b, const MilType *t, const MilElem *e) {
  if (t->rank == 0) {
    if (!is_scalar(e)) {
      diag_error(b->d, token_span(b, e->offset), "expected a single value for %s, found %s", type_str(b, t),
                 elem_desc(e));
      return false;
    }
    return fits_scalar(b, t->dtype, e);
  }
  if (e->kind != MIL_ELEM_LIST) {
    diag_error(b->d, token_span(b, e->offset), "expected a list for %s, found %s", type_str(b, t), elem_desc(e));
    return false;
  }
  bool flat = true;
  for (uint32_t i = 0; i < e->n && flat; i++) flat = is_scalar(&e->items[i]);
  if (t->rank == 1 || !flat) return fits_nested(b, t, e, 0);
  /* A flat list for rank >= 2: its length must be the element count (with
   * unknown dims, a multiple of the product of the known ones). */
  uint64_t known = 1;
  bool unknown = false;
  for (uint32_t i = 0; i < t->rank; i++) {
    if (t->dims[i] < 0) unknown = true;
    else if (known > UINT64_MAX / ((uint64_t)t->dims[i] + 1)) known = UINT64_MAX;
    else known *= (uint64_t)t->dims[i];
  }
  bool ok = unknown ? (known == 0 ? e->n == 0 : e->n % known == 0) : known == e->n;
  if (!ok) {
    diag_error(b->d, token_span(b, e->offset), "expected %s%llu values for %s, found %u",
               unknown ? "a multiple of " : "", (unsigned long long)known, type_str(b, t), e->n);
    return false;
  }
  for (uint32_t i = 0; i < e->n; i++)
    if (!fits_scalar(b, t->dtype, &e->items[i])) return false;
  return true;
}

/* Does payload element e fit type t? Reports the first mismatch. Recursion
 * is bounded by the nesting limit of the scanner. */
static bool fits(Builder *b, const MilType *t, const MilElem *e) {
  switch (t->kind) {
  case MIL_TYPE_TENSOR:
    return fits_tensor(b, t, e);
  case MIL_TYPE_STATE:
    return fits(b, &t->sub[0], e);
  case MIL_TYPE_LIST:
  case MIL_TYPE_TUPLE: {
    MilElemKind want = t->kind == MIL_TYPE_LIST ? MIL_ELEM_LIST : MIL_ELEM_TUPLE;
    if (e->kind != want) {
      diag_error(b->d, token_span(b, e->offset), "expected %s for %s, found %s",
                 want == MIL_ELEM_LIST ? "a list" : "a tuple", type_str(b, t), elem_desc(e));
      return false;
    }
    int64_t n = t->kind == MIL_TYPE_LIST ? t->length : (int64_t)t->nsub;
    if (n >= 0 && (uint64_t)n != e->n) {
      diag_error(b->d, token_span(b, e->offset), "expected %lld values for %s, found %u", (long long)n, type_str(b, t),
                 e->n);
      return false;
    }
    for (uint32_t i = 0; i < e->n; i++)
      if (!fits(b, t->kind == MIL_TYPE_LIST ? &t->sub[0] : &t->sub[i], &e->items[i])) return false;
    return true;
  }
  case MIL_TYPE_DICT:
    if (e->kind != MIL_ELEM_DICT) {
      diag_error(b->d, token_span(b, e->offset), "expected a dict for %s, found %s", type_str(b, t), elem_desc(e));
      return false;
    }
    for (uint32_t i = 0; i < e->n; i++) {
      const MilElem *kv = &e->items[i];
      if (kv->kind != MIL_ELEM_DICT || kv->n != 2) {
        diag_error(b->d, token_span(b, kv->offset), "expected a {key, value} entry of %s, found %s", type_str(b, t),
                   kv->kind == MIL_ELEM_DICT ? "a dict of another size" : elem_desc(kv));
        return false;
      }
      if (!fits(b, &t->sub[0], &kv->items[0]) || !fits(b, &t->sub[1], &kv->items[1])) return false;
    }
    return true;
  }
  return false;
}

/* fp32 and bf16 rounding of a double (nearest even), overflow to infinity. */
static double round_fp32(double v) {
  if (fabs(v) >= 0x1.ffffffp127) return copysign(HUGE_VAL, v);
  return (double)(float)v;
}

static double round_bf16(double v) {
  if (isnan(v) || isinf(v) || v == 0) return v;
  int e;
  frexp(v, &e);
  int lead = e - 1 < -126 ? -126 : e - 1; /* below 2^-126 the spacing stays fixed */
  double q = ldexp(1.0, lead - 7);
  double r = nearbyint(v / q) * q;
  return fabs(r) > 0x1.fep127 ? copysign(HUGE_VAL, v) : r;
}

static double round_fp16(double v) {
  if (fabs(v) >= 65520.0) return copysign(HUGE_VAL, v); /* FP16_MAX plus half a step */
  return (double)fp16_to_float(fp16_from_double(v));
}

static uint64_t count_scalars(const MilElem *e) {
  if (is_scalar(e)) return 1;
  uint64_t n = 0;
  for (uint32_t i = 0; i < e->n; i++) n += count_scalars(&e->items[i]);
  return n;
}

static void collect_scalars(const MilElem *e, const MilElem **out, uint64_t *k) {
  if (is_scalar(e)) {
    out[(*k)++] = e;
    return;
  }
  for (uint32_t i = 0; i < e->n; i++) collect_scalars(&e->items[i], out, k);
}

/* The row-major data of a checked inline tensor literal. */
static void flatten(Builder *b, MilLiteral *l) {
  MilDType dt = l->type.dtype;
  uint64_t n = count_scalars(&l->value);
  const MilElem **leaves = xmalloc((size_t)(n ? n : 1) * sizeof *leaves);
  uint64_t k = 0;
  collect_scalars(&l->value, leaves, &k);
  l->count = n;
  if (dt == MIL_DT_BOOL) {
    bool *v = arena_alloc(b->arena, (size_t)n * sizeof *v);
    for (uint64_t i = 0; i < n; i++) v[i] = leaves[i]->b;
    l->bools = v;
  } else if (dt == MIL_DT_STRING) {
    const char **v = arena_alloc(b->arena, (size_t)n * sizeof *v);
    for (uint64_t i = 0; i < n; i++) v[i] = leaves[i]->s;
    l->strings = v;
  } else if (mil_dtype_is_float(dt)) {
    double *v = arena_alloc(b->arena, (size_t)n * sizeof *v);
    for (uint64_t i = 0; i < n; i++) {
      const MilElem *e = leaves[i];
      double x = e->kind == MIL_ELEM_FLOAT ? e->f : e->big ? (double)(uint64_t)e->i : (double)e->i;
      v[i] = dt == MIL_DT_FP16 ? round_fp16(x) : dt == MIL_DT_BF16 ? round_bf16(x) : dt == MIL_DT_FP32 ? round_fp32(x) : x;
    }
    l->floats = v;
  } else {
    int64_t *v = arena_alloc(b->arena, (size_t)n * sizeof *v);
    for (uint64_t i = 0; i < n; i++) v[i] = leaves[i]->i;
    l->ints = v;
  }
  free(leaves);
}

static bool is_string_scalar(const MilLiteral *l) {
  return l->type.kind == MIL_TYPE_TENSOR && l->type.rank == 0 && l->type.dtype == MIL_DT_STRING &&
         l->payload == MIL_PAYLOAD_INLINE;
}

/* Checks a typed literal against its type and fills in its data. */
static bool check_literal(Builder *b, AstLit *al) {
  MilLiteral *l = al->lit;
  if (has_unknown_dtype(&l->type)) return false;
  switch (l->payload) {
  case MIL_PAYLOAD_NONE:
    if (l->type.kind == MIL_TYPE_TENSOR && mil_type_elements(&l->type) != 0) {
      if (l->type.rank == 0 || mil_type_elements(&l->type) == UINT64_MAX)
        diag_error(b->d, l->loc, "missing value for %s", type_str(b, &l->type));
      else
        diag_error(b->d, l->loc, "expected %llu values for %s, found none",
                   (unsigned long long)mil_type_elements(&l->type), type_str(b, &l->type));
      return false;
    }
    return true;
  case MIL_PAYLOAD_INLINE:
    if (!fits(b, &l->type, &l->value)) return false;
    if (l->type.kind == MIL_TYPE_TENSOR) flatten(b, l);
    return true;
  case MIL_PAYLOAD_BLOB:
    break;
  }
  if (!al->blob_path || !al->blob_offset) return false; /* bad keys, reported by the parser */
  if (l->type.kind != MIL_TYPE_TENSOR || l->type.dtype == MIL_DT_STRING) {
    diag_error(b->d, l->loc, "BLOBFILE cannot hold %s", type_str(b, &l->type));
    return false;
  }
  if (!check_literal(b, al->blob_path) || !check_literal(b, al->blob_offset)) return false;
  const MilLiteral *path = al->blob_path->lit, *off = al->blob_offset->lit;
  if (!is_string_scalar(path)) {
    diag_error(b->d, path->loc, "BLOBFILE path must be a string, not %s", type_str(b, &path->type));
    return false;
  }
  if (off->type.kind != MIL_TYPE_TENSOR || off->type.rank != 0 || !mil_dtype_is_int(off->type.dtype) ||
      off->payload != MIL_PAYLOAD_INLINE || (!off->value.big && off->value.i < 0)) {
    diag_error(b->d, off->loc, "BLOBFILE offset must be a non-negative integer such as uint64(64)");
    return false;
  }
  l->blob_path = path->value.s;
  l->blob_offset = (uint64_t)off->value.i;
  l->blob_offset_loc = token_span(b, off->value.offset);
  return true;
}

/* Attribute blocks of programs, functions and statements. */
static bool build_attrs(Builder *b, AstNode *list, const MilAttr **out, uint32_t *nout) {
  uint32_t n;
  void **items = list_items(list, &n);
  MilAttr *attrs = arena_alloc(b->arena, (size_t)n * sizeof *attrs);
  bool ok = true;
  strmap_free(&b->seen);
  for (uint32_t i = 0; i < n; i++) {
    AstAttr *a = items[i];
    attrs[i].name = a->name;
    attrs[i].loc = a->loc;
    attrs[i].value = a->value->lit;
    if (strmap_get(&b->seen, a->name)) {
      diag_error(b->d, a->loc, "attribute '%s' given twice", a->name);
      ok = false;
    }
    strmap_put(&b->seen, a->name, 1);
    if (!check_literal(b, a->value)) ok = false;
  }
  free(items);
  *out = attrs;
  *nout = n;
  return ok;
}

/* A definition of a name in a function: a parameter or a statement result. */
typedef struct Def {
  uint32_t stmt; /* MIL_DEF_PARAM for parameters */
  uint32_t index;
  const MilVar *var;
  uint32_t first; /* if this redefines a name: its first definition (1-based), else 0 */
} Def;

/* The names of one function. All definitions are collected before the
 * statements are built, so that a use before its definition can be told
 * apart from a name defined nowhere while errors still come in source order. */
typedef struct Scope {
  StrMap map; /* name -> first definition (1-based index into defs) */
  Def *defs;
  uint32_t ndefs, cap;
  uint32_t next; /* the next definition to check for redefinition */
} Scope;

static void scope_add(Scope *sc, uint32_t stmt, uint32_t index, const MilVar *v) {
  xgrow((void **)&sc->defs, sizeof *sc->defs, &sc->cap, sc->ndefs + 1);
  uint32_t first = strmap_get(&sc->map, v->name);
  sc->defs[sc->ndefs++] = (Def){stmt, index, v, first};
  if (!first) strmap_put(&sc->map, v->name, sc->ndefs);
}

/* Reports the next n definitions if they repeat a name. */
static bool scope_check_defs(Builder *b, Scope *sc, uint32_t n) {
  bool ok = true;
  for (; n > 0 && sc->next < sc->ndefs; n--, sc->next++) {
    const Def *def = &sc->defs[sc->next];
    if (!def->first) continue;
    diag_error(b->d, def->var->loc, "redefinition of '%s'", def->var->name);
    diag_note(b->d, sc->defs[def->first - 1].var->loc, "previous definition of '%s' is here", def->var->name);
    ok = false;
  }
  return ok;
}

/* Resolves a name used in statement `stmt` (UINT32_MAX: in the return list). */
static bool scope_resolve(Builder *b, const Scope *sc, MilOperand *o, uint32_t stmt, const char *func) {
  uint32_t id = strmap_get(&sc->map, o->name);
  if (!id) {
    o->def_stmt = MIL_DEF_UNDEFINED;
    if (stmt == UINT32_MAX) return name_problem(b, o->loc, "function '%s' returns undefined value '%s'", func, o->name);
    return name_problem(b, o->loc, "use of undefined value '%s'", o->name);
  }
  const Def *def = &sc->defs[id - 1];
  o->def_stmt = def->stmt;
  o->def_index = def->index;
  if (def->stmt != MIL_DEF_PARAM && def->stmt >= stmt) {
    bool go_on = name_problem(b, o->loc, "'%s' is used before its definition", o->name);
    diag_note(b->d, def->var->loc, "'%s' is defined here", o->name); /* dropped with a suppressed warning */
    return go_on;
  }
  return true;
}

static MilOperand build_operand(Builder *b, const AstOperand *o, const Scope *sc, uint32_t stmt, const char *func,
                                bool *ok) {
  MilOperand m;
  memset(&m, 0, sizeof m);
  m.loc = o->loc;
  if (o->name) {
    m.kind = MIL_OPERAND_NAME;
    m.name = o->name;
    if (!scope_resolve(b, sc, &m, stmt, func)) *ok = false;
  } else {
    m.kind = MIL_OPERAND_LITERAL;
    m.literal = o->lit->lit;
    if (!check_literal(b, o->lit)) *ok = false;
  }
  return m;
}

static bool build_stmt(Builder *b, const AstStmt *as, MilStmt *st, Scope *sc, uint32_t index) {
  bool ok = true;
  memset(st, 0, sizeof *st);
  st->op = as->op;
  st->loc = as->loc;
  st->op_loc = as->op_loc;

  uint32_t n;
  void **items = list_items(as->results, &n);
  MilVar *results = arena_alloc(b->arena, (size_t)n * sizeof *results);
  for (uint32_t i = 0; i < n; i++) results[i] = *(const MilVar *)items[i];
  free(items);
  st->results = results;
  st->nresults = n;
  if (!scope_check_defs(b, sc, n)) ok = false;

  items = list_items(as->args, &n);
  MilArg *args = arena_alloc(b->arena, (size_t)n * sizeof *args);
  strmap_free(&b->seen);
  for (uint32_t i = 0; i < n; i++) {
    const AstArg *aa = items[i];
    MilArg *a = &args[i];
    a->name = aa->name;
    a->loc = aa->loc;
    a->is_list = aa->is_list;
    if (strmap_get(&b->seen, aa->name)) {
      diag_error(b->d, aa->loc, "argument '%s' given twice", aa->name);
      ok = false;
    }
    strmap_put(&b->seen, aa->name, 1);
    uint32_t m;
    void **ops = list_items(aa->items, &m);
    MilOperand *operands = arena_alloc(b->arena, (size_t)m * sizeof *operands);
    for (uint32_t j = 0; j < m; j++) operands[j] = build_operand(b, ops[j], sc, index, NULL, &ok);
    free(ops);
    a->items = operands;
    a->nitems = m;
  }
  free(items);
  st->args = args;
  st->nargs = n;

  if (!build_attrs(b, as->attrs, &st->attrs, &st->nattrs)) ok = false;
  const MilAttr *name = mil_find_attr(st->attrs, st->nattrs, "name");
  if (name) {
    if (is_string_scalar(name->value)) {
      st->op_name = name->value->value.s;
    } else {
      diag_error(b->d, name->value->loc, "attribute 'name' must be a string, not %s", type_str(b, &name->value->type));
      ok = false;
    }
  }

  if (strcmp(st->op, "const") == 0) {
    const MilAttr *val = mil_find_attr(st->attrs, st->nattrs, "val");
    if (st->nresults != 1) {
      diag_error(b->d, st->op_loc, "const has %u results; it must have exactly one", st->nresults);
      ok = false;
    } else if (!val) {
      diag_error(b->d, st->op_loc, "const '%s' has no 'val' attribute", st->results[0].name);
      ok = false;
    } else if (!has_unknown_dtype(&val->value->type) && !has_unknown_dtype(&st->results[0].type) &&
               !mil_type_equal(&val->value->type, &st->results[0].type)) {
      if (!name_problem(b, val->value->loc, "'val' has type %s but '%s' is declared as %s",
                        type_str(b, &val->value->type), st->results[0].name, type_str(b, &st->results[0].type)))
        ok = false;
    }
  }
  return ok;
}

/* "ios18", or "CoreML8" (the proto's spelling) as ios18. */
static bool parse_opset(const char *s, uint32_t *ios) {
  const char *digits;
  uint32_t add;
  if (strncmp(s, "ios", 3) == 0) digits = s + 3, add = 0;
  else if (strncmp(s, "CoreML", 6) == 0) digits = s + 6, add = 10;
  else return false;
  size_t n = strlen(digits);
  if (n == 0 || n > 3 || strspn(digits, "0123456789") != n) return false;
  *ios = (uint32_t)strtoul(digits, NULL, 10) + add;
  return true;
}

static bool build_func(Builder *b, const AstFunc *af, MilFunc *f) {
  bool ok = true;
  memset(f, 0, sizeof *f);
  f->name = af->name;
  f->loc = af->loc;
  f->opset_written = af->opset;
  if (parse_opset(af->opset, &f->ios)) {
    f->opset = arena_printf(b->arena, "ios%u", f->ios);
  } else {
    diag_error(b->d, af->opset_loc, "unknown opset '%s' (expected iosNN or CoreMLn)", af->opset);
    f->opset = af->opset;
    ok = false;
  }

  uint32_t n;
  void **items = list_items(af->params, &n);
  MilVar *params = arena_alloc(b->arena, (size_t)n * sizeof *params);
  for (uint32_t i = 0; i < n; i++) params[i] = *(const MilVar *)items[i];
  free(items);
  f->params = params;
  f->nparams = n;

  Scope sc;
  memset(&sc, 0, sizeof sc);
  strmap_init(&sc.map);
  for (uint32_t i = 0; i < n; i++) scope_add(&sc, MIL_DEF_PARAM, i, &params[i]);
  if (!scope_check_defs(b, &sc, n)) ok = false;

  if (!build_attrs(b, af->attrs, &f->attrs, &f->nattrs)) ok = false;

  void **stmt_items = list_items(af->stmts, &n);
  for (uint32_t i = 0; i < n; i++) {
    const AstStmt *as = stmt_items[i];
    uint32_t nr;
    void **res = list_items(as->results, &nr);
    for (uint32_t r = 0; r < nr; r++) scope_add(&sc, i, r, res[r]);
    free(res);
  }
  MilStmt *stmts = arena_alloc(b->arena, (size_t)n * sizeof *stmts);
  for (uint32_t i = 0; i < n && !diag_should_stop(b->d); i++) {
    if (!build_stmt(b, stmt_items[i], &stmts[i], &sc, i)) ok = false;
    const MilOpInfo *info = mil_op_find(stmts[i].op);
    MilArgContext ac = {b->d, params, f->nparams, stmts, i, b->tolerant};
    if (info && !mil_check_op_args(&ac, info, &stmts[i])) ok = false;
  }
  free(stmt_items);
  f->stmts = stmts;
  f->nstmts = n;

  items = list_items(af->rets, &n);
  MilOperand *rets = arena_alloc(b->arena, (size_t)n * sizeof *rets);
  for (uint32_t i = 0; i < n; i++) rets[i] = build_operand(b, items[i], &sc, UINT32_MAX, f->name, &ok);
  free(items);
  f->returns = rets;
  f->nreturns = n;

  strmap_free(&sc.map);
  free(sc.defs);
  return ok;
}

static bool build_program(MilParseCtx *ctx, MilProgram *p, bool tolerant) {
  Builder b = {.ctx = ctx, .d = ctx->diag, .arena = &p->arena, .src = srcset_get(ctx->diag->sources, ctx->file),
               .tolerant = tolerant};
  strmap_init(&b.seen);
  bool ok = true;
  p->version = ctx->version;
  p->file = ctx->file;
  if (!build_attrs(&b, ctx->attrs, &p->attrs, &p->nattrs)) ok = false;

  uint32_t n;
  void **items = list_items(ctx->funcs, &n);
  MilFunc *funcs = arena_alloc(&p->arena, (size_t)n * sizeof *funcs);
  StrMap names;
  strmap_init(&names);
  for (uint32_t i = 0; i < n && !diag_should_stop(b.d); i++) {
    const AstFunc *af = items[i];
    uint32_t prev = strmap_get(&names, af->name);
    if (prev) {
      diag_error(b.d, af->loc, "redefinition of function '%s'", af->name);
      diag_note(b.d, funcs[prev - 1].loc, "previous definition of '%s' is here", af->name);
      ok = false;
    } else {
      strmap_put(&names, af->name, i + 1);
    }
    if (!build_func(&b, af, &funcs[i])) ok = false;
  }
  strmap_free(&names);
  strmap_free(&b.seen);
  free(items);
  p->funcs = funcs;
  p->nfuncs = n;
  return ok;
}

/* ---- entry points -------------------------------------------------------------- */

static MilProgram *read_registered(uint32_t file, const MilReadOptions *opt, Diag *d) {
  const SourceFile *src = srcset_get(d->sources, file);
  MilProgram *p = xcalloc(1, sizeof *p);
  arena_init(&p->arena);
  Arena scratch;
  arena_init(&scratch);
  MilParseCtx ctx = {.arena = &p->arena, .scratch = &scratch, .diag = d, .file = file};
  uint32_t errors_before = d->nerrors;
  yyscan_t scanner;
  if (mil_yylex_init_extra(&ctx, &scanner)) ice("cannot create the MIL scanner");
  mil_yy_scan_bytes(src->text, (int)src->len, scanner);
  int rc = mil_yyparse(scanner, &ctx);
  mil_yylex_destroy(scanner);
  free(ctx.elems.items);
  ctx.elems.items = NULL;
  free(ctx.open);
  ctx.open = NULL;
  /* Only errors that leave the tree whole (unknown dtypes, bad dims) let the
   * checks run: after a syntax error they would mostly report its echoes.
   * (rc == 2, stack exhaustion, was reported through mil_yyerror.) */
  bool parsed = rc == 0 && ctx.seen_program && !diag_should_stop(d) && d->nerrors - errors_before == ctx.soft_errors;
  bool ok = parsed && build_program(&ctx, p, opt && opt->tolerant) && d->nerrors == errors_before;
  arena_free(&scratch);
  if (!ok) {
    mil_program_free(p);
    return NULL;
  }
  return p;
}

MilProgram *mil_read_string(const char *name, const char *text, size_t len, Diag *d) {
  uint32_t file = srcset_load_string(name, text, len, d);
  return file ? read_registered(file, NULL, d) : NULL;
}

MilProgram *mil_read_file(const char *path, Diag *d) {
  uint32_t file = srcset_load(path, d);
  return file ? read_registered(file, NULL, d) : NULL;
}

MilProgram *mil_read_source(uint32_t file, const MilReadOptions *opt, Diag *d) {
  if (!srcset_get(d->sources, file)) ice("mil_read_source: no source %u", file);
  return read_registered(file, opt, d);
}

void mil_program_free(MilProgram *p) {
  if (!p) return;
  arena_free(&p->arena);
  free(p);
}

/* ---- look-ups ---------------------------------------------------------------------- */

const MilFunc *mil_find_func(const MilProgram *p, const char *name) {
  for (uint32_t i = 0; i < p->nfuncs; i++)
    if (strcmp(p->funcs[i].name, name) == 0) return &p->funcs[i];
  return NULL;
}

const MilAttr *mil_find_attr(const MilAttr *attrs, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(attrs[i].name, name) == 0) return &attrs[i];
  return NULL;
}

const MilArg *mil_find_arg(const MilStmt *s, const char *name) {
  for (uint32_t i = 0; i < s->nargs; i++)
    if (strcmp(s->args[i].name, name) == 0) return &s->args[i];
  return NULL;
}

const char *mil_build_info(const MilProgram *p, const char *key) {
  const MilAttr *a = mil_find_attr(p->attrs, p->nattrs, "buildInfo");
  if (!a || a->value->payload != MIL_PAYLOAD_INLINE || a->value->value.kind != MIL_ELEM_DICT) return NULL;
  const MilElem *d = &a->value->value;
  for (uint32_t i = 0; i < d->n; i++) {
    const MilElem *kv = &d->items[i];
    if (kv->kind == MIL_ELEM_DICT && kv->n == 2 && kv->items[0].kind == MIL_ELEM_STRING &&
        kv->items[1].kind == MIL_ELEM_STRING && strcmp(kv->items[0].s, key) == 0)
      return kv->items[1].s;
  }
  return NULL;
}

const MilType *mil_operand_type(const MilFunc *f, const MilOperand *o) {
  if (o->kind == MIL_OPERAND_LITERAL) return &o->literal->type;
  if (o->def_stmt == MIL_DEF_PARAM) return o->def_index < f->nparams ? &f->params[o->def_index].type : NULL;
  if (o->def_stmt >= f->nstmts || o->def_index >= f->stmts[o->def_stmt].nresults) return NULL;
  return &f->stmts[o->def_stmt].results[o->def_index].type;
}
