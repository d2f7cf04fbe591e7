/*
 * AST -> graph IR. Resolves names (definition before use, no redefinition),
 * types, param sources, constant literals, op names, arity and attributes
 * against the op table. Shapes and dtypes of results are left to the verifier,
 * which infers them; declared result types are recorded for it to check.
 *
 * Errors are reported and building goes on with the next statement, so one
 * run shows as many independent problems as possible.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

typedef struct Builder {
  OirParseCtx *ctx;
  Diag *d;
  IrModule *m;
  IrFuncId f;
  StrMap names;     /* value name -> value id in the current function */
  StrMap poisoned;  /* names whose definition failed: uses are not reported again */
  StrMap instances; /* call instance names in the current function */
  StrMap funcs;     /* function name -> its first definition */
} Builder;

/* ---- list helpers: the grammar builds lists in reverse ---- */

#define REVERSE_LIST(T, head)                          \
  do {                                                 \
    T *prev_ = NULL, *it_ = (head);                    \
    while (it_) {                                      \
      T *nx_ = it_->next;                              \
      it_->next = prev_;                               \
      prev_ = it_;                                     \
      it_ = nx_;                                       \
    }                                                  \
    (head) = prev_;                                    \
  } while (0)

/* ---- suggestions ---- */

static const char *suggest_op(const char *name) {
  Suggestion s;
  suggestion_init(&s, name);
  for (int k = 0; k < OP_CALL; k++) suggestion_consider(&s, ir_op_info((IrOpKind)k)->name);
  return s.best;
}

/* The defined value (or poisoned name) of the current function nearest to `name`. */
static const char *suggest_value(const Builder *b, const char *name) {
  Suggestion s;
  suggestion_init(&s, name);
  for (uint32_t i = 0; i < b->names.cap; i++) suggestion_consider(&s, b->names.keys[i]);
  for (uint32_t i = 0; i < b->poisoned.cap; i++) suggestion_consider(&s, b->poisoned.keys[i]);
  return s.best;
}

/* ---- types ---- */

static bool resolve_type(Builder *b, const AstType *at, IrType *out) {
  memset(out, 0, sizeof *out);
  IrDType dt = ir_dtype_from_name(at->dtype);
  bool ok = true;
  if (dt == DT_INVALID) {
    diag_error(b->d, at->dtype_loc, "unknown dtype '%s' (expected fp16, fp32, int32, int8, uint8 or bool)",
               at->dtype);
    ok = false;
  }
  if (at->rank > IR_MAX_RANK) {
    diag_error(b->d, at->loc, "tensor rank %u exceeds the limit of %d", at->rank, IR_MAX_RANK);
    return false;
  }
  uint64_t elements = 1;
  bool too_many = false;
  for (uint32_t i = 0; i < at->rank; i++) {
    int64_t dim = at->dims[i];
    if (dim <= 0) {
      diag_error(b->d, at->loc, "dimension %u of the type is %lld; dimensions must be positive", i,
                 (long long)dim);
      return false;
    }
    if (__builtin_mul_overflow(elements, (uint64_t)dim, &elements) || elements > IR_MAX_ELEMENTS) too_many = true;
    out->dims[i] = dim;
  }
  if (too_many) {
    diag_error(b->d, at->loc, "tensor has too many elements (limit is %llu)", (unsigned long long)IR_MAX_ELEMENTS);
    return false;
  }
  out->dtype = dt;
  out->rank = (uint8_t)at->rank;
  return ok;
}

/* ---- names ---- */

static bool define_name(Builder *b, const char *name, SrcSpan loc) {
  IrValueId prev = ir_value_id(strmap_get(&b->names, name));
  if (!ir_id_is_none(prev)) {
    diag_error(b->d, loc, "redefinition of '%s'", name);
    diag_note(b->d, ir_value(b->m, prev)->loc, "previous definition of '%s' is here", name);
    return false;
  }
  return true;
}

static IrValueId lookup_value(Builder *b, const char *name, SrcSpan loc) {
  IrValueId v = ir_value_id(strmap_get(&b->names, name));
  if (ir_id_is_none(v) && !strmap_get(&b->poisoned, name)) {
    diag_error(b->d, loc, "use of undefined value '%s'", name);
    const char *sugg = suggest_value(b, name);
    if (sugg) diag_note(b->d, loc, "did you mean '%s'?", sugg);
  }
  return v;
}

/* A definition that failed still claims its name, so later uses do not
 * cascade into "undefined value" errors. */
static void poison(Builder *b, const char *name) {
  if (!strmap_get(&b->names, name)) strmap_put(&b->poisoned, name, 1);
}

/* ---- literals ---- */

static const char *lit_kind_name(const AstLit *l) {
  static const char *const names[] = {"integer", "number", "bool", "string", "list"};
  return names[l->kind];
}

static bool lit_number(const AstLit *l, double *out) {
  if (l->kind == LIT_INT) *out = (double)l->i;
  else if (l->kind == LIT_FLOAT) *out = l->f;
  else if (l->kind == LIT_BOOL) *out = l->b ? 1.0 : 0.0;
  else return false;
  return true;
}

static IrAttrValue *lit_to_attr(Builder *b, const AstLit *l, IrAttrValue *out) {
  switch (l->kind) {
  case LIT_INT: out->kind = ATTR_INT; out->u.i = l->i; break;
  case LIT_FLOAT: out->kind = ATTR_FLOAT; out->u.f = l->f; break;
  case LIT_BOOL: out->kind = ATTR_BOOL; out->u.b = l->b; break;
  case LIT_STR: out->kind = ATTR_STR; out->u.s = arena_strdup(&b->m->arena, l->s); break;
  case LIT_LIST: {
    out->kind = ATTR_LIST;
    out->u.list.n = l->n;
    out->u.list.items = arena_alloc(&b->m->arena, sizeof(IrAttrValue) * (l->n ? l->n : 1));
    uint32_t i = 0;
    for (const AstLit *it = l->items; it; it = it->next) lit_to_attr(b, it, &out->u.list.items[i++]);
    break;
  }
  }
  return out;
}

/* Flattens a (possibly nested) list literal into data, checking it against the shape. */
static bool flatten_const(Builder *b, const AstLit *l, const IrType *t, uint32_t dim, double *data, uint64_t *n,
                          bool nested) {
  if (l->kind != LIT_LIST) {
    double v;
    if (!lit_number(l, &v)) {
      diag_error(b->d, l->loc, "constant values must be numbers or bools, not a %s", lit_kind_name(l));
      return false;
    }
    data[(*n)++] = v;
    return true;
  }
  if (nested) {
    if (dim >= t->rank || (int64_t)l->n != t->dims[dim]) {
      StrBuf sb;
      sb_init(&sb);
      ir_type_print(&sb, t);
      if (dim >= t->rank)
        diag_error(b->d, l->loc, "constant list nested deeper than the rank of %s", sb.data);
      else
        diag_error(b->d, l->loc, "constant list has %u item%s where dimension %u of %s is %lld", l->n,
                   l->n == 1 ? "" : "s", dim, sb.data, (long long)t->dims[dim]);
      sb_free(&sb);
      return false;
    }
  }
  for (const AstLit *it = l->items; it; it = it->next) {
    if (it->kind == LIT_LIST && !nested) {
      diag_error(b->d, it->loc, "a flat constant list cannot contain lists");
      return false;
    }
    if (nested && it->kind != LIT_LIST && dim + 1 < t->rank) {
      diag_error(b->d, it->loc, "constant list is not nested as deep as the rank of its type (%u)", t->rank);
      return false;
    }
    if (!flatten_const(b, it, t, dim + 1, data, n, nested)) return false;
  }
  return true;
}

/* A literal stored in a tensor of dtype t must be representable there:
 * integers in range, bools 0 or 1, floats within the finite range
 * (inf and nan are allowed only where written as such). */
static bool value_fits(Builder *b, IrDType t, double v, SrcSpan loc, const char *what) {
  static const struct { IrDType t; double lo, hi; } int_ranges[] = {
      {DT_INT32, -2147483648.0, 2147483647.0}, {DT_INT8, -128, 127}, {DT_UINT8, 0, 255}, {DT_BOOL, 0, 1}};
  for (size_t i = 0; i < sizeof int_ranges / sizeof *int_ranges; i++) {
    if (int_ranges[i].t != t) continue;
    if (isnan(v) || v != floor(v) || v < int_ranges[i].lo || v > int_ranges[i].hi) {
      StrBuf sb;
      sb_init(&sb);
      sb_put_double(&sb, v);
      diag_error(b->d, loc, "%s of dtype %s cannot hold the value %s (range %.0f to %.0f)", what, ir_dtype_name(t), sb.data,
                 int_ranges[i].lo, int_ranges[i].hi);
      sb_free(&sb);
      return false;
    }
    return true;
  }
  double max = t == DT_FP16 ? 65504.0 : 3.4028234663852886e38;
  if (isfinite(v) && fabs(v) > max) {
    StrBuf sb;
    sb_init(&sb);
    sb_put_double(&sb, v);
    diag_error(b->d, loc, "%s value %s is beyond the finite range of %s (largest is %g)", what, sb.data, ir_dtype_name(t), max);
    sb_free(&sb);
    return false;
  }
  return true;
}

static void build_const(Builder *b, const AstStmt *s) {
  IrType t;
  bool ok = resolve_type(b, s->type, &t);
  ok = define_name(b, s->name, s->name_loc) && ok;
  poison(b, s->name); /* until the const is made */
  if (!ok) return;
  uint64_t elements = ir_type_elements(&t);
  const AstLit *l = s->value;
  double *data;
  uint64_t n = 0;
  if (l->kind != LIT_LIST) {
    data = xmalloc(sizeof *data);
    if (!flatten_const(b, l, &t, 0, data, &n, false)) goto out;
  } else {
    /* Either nested to match the shape, or flat with one item per element. */
    bool nested = l->items && l->items->kind == LIT_LIST;
    if (!nested && l->n != elements && !(t.rank == 1 && l->n == t.dims[0])) {
      StrBuf sb;
      sb_init(&sb);
      ir_type_print(&sb, &t);
      diag_error(b->d, l->loc, "constant has %u values but %s holds %llu", l->n, sb.data,
                 (unsigned long long)elements);
      sb_free(&sb);
      return;
    }
    if (elements > (1u << 20)) {
      diag_error(b->d, l->loc, "constant too large to write inline (limit is %u elements); use a param", 1u << 20);
      return;
    }
    data = xmalloc(sizeof *data * (size_t)elements);
    if (!flatten_const(b, l, &t, 0, data, &n, nested)) goto out;
  }
  for (uint64_t i = 0; i < n; i++)
    if (!value_fits(b, t.dtype, data[i], l->loc, "constant")) goto out;
  IrValueId v = ir_const_new(b->m, b->f, s->name, &t, data, n, s->name_loc);
  strmap_put(&b->names, ir_value(b->m, v)->name, v.id);
out:
  free(data);
}

/* ---- params ---- */

typedef struct SourceArgs {
  const AstArg *positional[4];
  uint32_t npositional;
} SourceArgs;

/* Reads name=value attributes of a source against its allowed names. */
static bool source_attr(Builder *b, const AstStmt *s, const char *name, const AstLit **out) {
  *out = NULL;
  for (const AstArg *a = s->source_args; a; a = a->next)
    if (a->kind == ARG_ATTR && strcmp(a->name, name) == 0) *out = a->lit;
  return *out != NULL;
}

static bool check_source_args(Builder *b, const AstStmt *s, const char *const *allowed, uint32_t max_positional,
                              SourceArgs *pos) {
  pos->npositional = 0;
  bool ok = true;
  uint32_t given = 0; /* bit i: allowed[i] was given by name */
  for (const AstArg *a = s->source_args; a; a = a->next) {
    if (a->kind == ARG_ATTR) {
      int known = -1;
      for (int i = 0; allowed[i]; i++)
        if (strcmp(allowed[i], a->name) == 0) known = i;
      if (known < 0) {
        diag_error(b->d, a->loc, "unknown argument '%s' for weight source '%s'", a->name, s->source);
        ok = false;
      } else if (given & (1u << known)) { /* a flag per name: linear however many arguments */
        diag_error(b->d, a->loc, "argument '%s' given twice", a->name);
        ok = false;
      }
      if (known >= 0) given |= 1u << known;
    } else if (a->kind == ARG_VALUE) {
      diag_error(b->d, a->loc, "weight source arguments must be literals, not the value '%s'", a->name);
      ok = false;
    } else if (pos->npositional < max_positional && allowed[pos->npositional] &&
               source_attr(b, s, allowed[pos->npositional], &(const AstLit *){NULL})) {
      diag_error(b->d, a->loc, "'%s' given both by position and by name", allowed[pos->npositional]);
      ok = false;
    } else if (pos->npositional >= max_positional) {
      diag_error(b->d, a->loc, "too many arguments for weight source '%s'", s->source);
      ok = false;
    } else {
      pos->positional[pos->npositional++] = a;
    }
  }
  return ok;
}

static bool number_arg(Builder *b, const AstLit *l, const char *what, double *out) {
  if (!lit_number(l, out) || l->kind == LIT_BOOL) {
    diag_error(b->d, l->loc, "%s must be a number, not a %s", what, lit_kind_name(l));
    return false;
  }
  if (!isfinite(*out)) {
    diag_error(b->d, l->loc, "%s must be finite", what);
    return false;
  }
  return true;
}

static bool string_arg(Builder *b, const AstLit *l, const char *what, const char **out) {
  if (l->kind != LIT_STR) {
    diag_error(b->d, l->loc, "%s must be a string, not a %s", what, lit_kind_name(l));
    return false;
  }
  if (!l->s[0]) {
    diag_error(b->d, l->loc, "%s must not be empty", what);
    return false;
  }
  *out = l->s;
  return true;
}

static bool build_source(Builder *b, const AstStmt *s, const IrType *t, IrParamSource *src) {
  memset(src, 0, sizeof *src);
  const char *name = s->source;
  SourceArgs pos;
  const AstLit *l;
  if (!strcmp(name, "zeros") || !strcmp(name, "ones")) {
    static const char *const none[] = {NULL};
    src->kind = name[0] == 'z' ? SRC_ZEROS : SRC_ONES;
    return check_source_args(b, s, none, 0, &pos);
  }
  if (!strcmp(name, "fill")) {
    static const char *const allowed[] = {"value", NULL};
    src->kind = SRC_FILL;
    if (!check_source_args(b, s, allowed, 1, &pos)) return false;
    l = pos.npositional ? pos.positional[0]->lit : (source_attr(b, s, "value", &l), l);
    if (!l) {
      diag_error(b->d, s->source_loc, "'fill' needs a value, e.g. fill(0.5)");
      return false;
    }
    return number_arg(b, l, "the fill value", &src->a) && value_fits(b, t->dtype, src->a, l->loc, "fill value");
  }
  if (!strcmp(name, "normal") || !strcmp(name, "uniform")) {
    bool normal = name[0] == 'n';
    static const char *const normal_args[] = {"seed", "mean", "std", NULL};
    static const char *const uniform_args[] = {"seed", "low", "high", NULL};
    src->kind = normal ? SRC_NORMAL : SRC_UNIFORM;
    if (!check_source_args(b, s, normal ? normal_args : uniform_args, 0, &pos)) return false;
    if (!source_attr(b, s, "seed", &l)) {
      diag_error(b->d, s->source_loc, "'%s' needs a seed so that weights are reproducible, e.g. %s(seed=1)", name,
                 name);
      return false;
    }
    if (l->kind != LIT_INT || l->i < 0 || l->i > (int64_t)0x7fffffffffffll) {
      diag_error(b->d, l->loc, "the seed must be an integer from 0 to %lld", (long long)0x7fffffffffffll);
      return false;
    }
    src->seed = (uint64_t)l->i;
    src->a = normal ? 0.0 : 0.0;
    src->b = 1.0;
    if (source_attr(b, s, normal ? "mean" : "low", &l) && !number_arg(b, l, normal ? "mean" : "low", &src->a))
      return false;
    if (source_attr(b, s, normal ? "std" : "high", &l) && !number_arg(b, l, normal ? "std" : "high", &src->b))
      return false;
    if (normal && src->b < 0) {
      diag_error(b->d, s->source_loc, "the standard deviation must not be negative");
      return false;
    }
    if (!normal && !(src->a < src->b)) {
      diag_error(b->d, s->source_loc, "'uniform' needs low < high");
      return false;
    }
    if (!ir_dtype_is_float(t->dtype)) {
      diag_error(b->d, s->source_loc, "random initializers need a float dtype, not %s", ir_dtype_name(t->dtype));
      return false;
    }
    return true;
  }
  if (!strcmp(name, "safetensors")) {
    static const char *const allowed[] = {"path", "key", NULL};
    src->kind = SRC_SAFETENSORS;
    if (!check_source_args(b, s, allowed, 2, &pos)) return false;
    const AstLit *path = pos.npositional > 0 ? pos.positional[0]->lit : (source_attr(b, s, "path", &l), l);
    const AstLit *key = pos.npositional > 1 ? pos.positional[1]->lit : (source_attr(b, s, "key", &l), l);
    if (!path || !key) {
      diag_error(b->d, s->source_loc, "'safetensors' needs a file and a tensor name, e.g. safetensors(\"model.safetensors\", \"wte.weight\")");
      return false;
    }
    return string_arg(b, path, "the file name", &src->path) && string_arg(b, key, "the tensor name", &src->key);
  }
  if (!strcmp(name, "npy")) {
    static const char *const allowed[] = {"path", NULL};
    src->kind = SRC_NPY;
    if (!check_source_args(b, s, allowed, 1, &pos)) return false;
    const AstLit *path = pos.npositional > 0 ? pos.positional[0]->lit : (source_attr(b, s, "path", &l), l);
    if (!path) {
      diag_error(b->d, s->source_loc, "'npy' needs a file name, e.g. npy(\"w.npy\")");
      return false;
    }
    return string_arg(b, path, "the file name", &src->path);
  }
  if (!strcmp(name, "rope_cos") || !strcmp(name, "rope_sin")) {
    static const char *const allowed[] = {"theta", NULL};
    src->kind = name[5] == 'c' ? SRC_ROPE_COS : SRC_ROPE_SIN;
    if (!check_source_args(b, s, allowed, 1, &pos)) return false;
    src->a = 10000.0;
    l = pos.npositional ? pos.positional[0]->lit : (source_attr(b, s, "theta", &l), l);
    if (l && !number_arg(b, l, "theta", &src->a)) return false;
    if (!(src->a > 1.0)) {
      diag_error(b->d, l ? l->loc : s->source_loc, "theta must be greater than 1");
      return false;
    }
    if (!ir_dtype_is_float(t->dtype) || t->rank != 2 || t->dims[1] % 2 != 0) {
      StrBuf ty;
      sb_init(&ty);
      ir_type_print(&ty, t);
      diag_error(b->d, s->source_loc, "'%s' makes a float table [positions, head_dim] with an even head_dim, not %s",
                 name, ty.data);
      sb_free(&ty);
      return false;
    }
    return true;
  }
  diag_error(b->d, s->source_loc,
             "unknown weight source '%s' (expected zeros, ones, fill, normal, uniform, safetensors or npy)", name);
  return false;
}

/* The one declaration modifier: `frozen param ...` marks a weight that
 * training leaves unchanged (docs/language.md section 5). It is a word the
 * builder checks, not a reserved one, so no existing name stops working. */
static bool check_modifier(Builder *b, const AstStmt *s) {
  if (strcmp(s->modifier, "frozen") != 0) {
    diag_error(b->d, s->modifier_loc, "unknown modifier '%s' before '%s' (the only one is 'frozen', for a param)",
               s->modifier, s->kind == STMT_PARAM ? "param" : "const");
    return false;
  }
  if (s->kind != STMT_PARAM) {
    diag_error(b->d, s->modifier_loc, "only a param can be frozen: const '%s' is never trained", s->name);
    return false;
  }
  return true;
}

static void build_param(Builder *b, AstStmt *s) {
  REVERSE_LIST(AstArg, s->source_args);
  IrType t;
  IrParamSource src;
  bool ok = resolve_type(b, s->type, &t);
  ok = define_name(b, s->name, s->name_loc) && ok;
  poison(b, s->name); /* until the param is made */
  if (!ok || !build_source(b, s, &t, &src)) return;
  IrValueId v = ir_param_new(b->m, b->f, s->name, &t, &src, s->name_loc);
  ir_value(b->m, v)->frozen = s->modifier && strcmp(s->modifier, "frozen") == 0;
  strmap_put(&b->names, ir_value(b->m, v)->name, v.id);
}

/* ---- ops ---- */

static const IrAttrSchema *find_schema(const IrOpInfo *info, const char *name) {
  for (uint32_t i = 0; i < info->nattrs; i++)
    if (!strcmp(info->attrs[i].name, name)) return &info->attrs[i];
  return NULL;
}

static bool lit_matches(const AstLit *l, IrAttrSchemaKind k) {
  switch (k) {
  case AS_INT: return l->kind == LIT_INT;
  case AS_FLOAT: return l->kind == LIT_INT || l->kind == LIT_FLOAT;
  case AS_BOOL: return l->kind == LIT_BOOL;
  case AS_STR: return l->kind == LIT_STR;
  case AS_INTS:
  case AS_FLOATS:
    if (l->kind != LIT_LIST) return false;
    for (const AstLit *it = l->items; it; it = it->next)
      if (!lit_matches(it, k == AS_INTS ? AS_INT : AS_FLOAT)) return false;
    return true;
  }
  return false;
}

static void list_schema(Builder *b, const IrOpInfo *info, SrcSpan loc) {
  if (!info->nattrs) {
    diag_note(b->d, loc, "'%s' takes no attributes", info->name);
    return;
  }
  StrBuf sb;
  sb_init(&sb);
  for (uint32_t i = 0; i < info->nattrs; i++) sb_printf(&sb, "%s%s", i ? ", " : "", info->attrs[i].name);
  diag_note(b->d, loc, "'%s' takes %s", info->name, sb.data);
  sb_free(&sb);
}

/* Checks and collects the arguments of an op: values first, then attributes. */
static bool collect_args(Builder *b, const AstStmt *s, const IrOpInfo *info, IrValueId *inputs, uint32_t *ninputs,
                         uint32_t max_inputs) {
  bool ok = true, seen_attr = false;
  bool given[IR_MAX_OP_ATTRS] = {false}; /* per schema entry: linear however many attributes */
  *ninputs = 0;
  for (const AstArg *a = s->args; a; a = a->next) {
    if (a->kind == ARG_ATTR) {
      seen_attr = true;
      if (!info) continue; /* calls: reported by the caller */
      const IrAttrSchema *sch = find_schema(info, a->name);
      if (!sch) {
        diag_error(b->d, a->loc, "unknown attribute '%s' for '%s'", a->name, info->name);
        list_schema(b, info, s->op_loc);
        ok = false;
      } else if (!lit_matches(a->lit, sch->kind)) {
        diag_error(b->d, a->lit->loc, "attribute '%s' of '%s' must be %s %s, not a %s", a->name, info->name,
                   sch->kind == AS_INT ? "an" : "a", ir_attr_schema_kind_name(sch->kind) , lit_kind_name(a->lit));
        ok = false;
      }
      if (sch && given[sch - info->attrs]) {
        diag_error(b->d, a->loc, "attribute '%s' given twice", a->name);
        ok = false;
      }
      if (sch) given[sch - info->attrs] = true;
      continue;
    }
    if (a->kind == ARG_LIT) {
      diag_error(b->d, a->loc, "operands must be named values; declare the literal with 'const' first");
      ok = false;
      continue;
    }
    if (seen_attr) {
      diag_error(b->d, a->loc, "operand '%s' after attributes; operands come first", a->name);
      ok = false;
      continue;
    }
    IrValueId v = lookup_value(b, a->name, a->loc);
    if (ir_id_is_none(v)) ok = false;
    if (*ninputs < max_inputs) inputs[*ninputs] = v;
    (*ninputs)++;
  }
  return ok;
}

/* Result names go into the table whatever happens to the op, so that later
 * statements do not cascade "undefined value" errors. */
static void define_results(Builder *b, const AstStmt *s, IrOpId op) {
  uint32_t i = 0;
  for (const AstResult *r = s->results; r; r = r->next, i++) {
    if (ir_id_is_none(op)) {
      poison(b, r->name);
      continue;
    }
    IrValueId v = ir_op(b->m, op)->results[i];
    ir_value(b->m, v)->loc = r->loc;
    strmap_put(&b->names, ir_value(b->m, v)->name, v.id);
    if (r->type) {
      IrType t;
      if (resolve_type(b, r->type, &t)) {
        ir_value(b->m, v)->type = t;
        ir_value(b->m, v)->type_declared = true;
      }
    }
  }
}

static void build_op(Builder *b, AstStmt *s) {
  REVERSE_LIST(AstResult, s->results);
  REVERSE_LIST(AstArg, s->args);
  bool ok = true;
  uint32_t nresults = 0;
  const char *names[IR_MAX_OPERANDS];
  for (const AstResult *r = s->results; r; r = r->next) {
    if (!define_name(b, r->name, r->loc)) ok = false;
    /* Pairwise, but only up to the limit: past it the statement is an error anyway. */
    for (const AstResult *q = s->results; q != r && nresults < IR_MAX_OPERANDS; q = q->next)
      if (!strcmp(q->name, r->name)) {
        diag_error(b->d, r->loc, "'%s' named twice among the results", r->name);
        ok = false;
      }
    if (nresults < IR_MAX_OPERANDS) names[nresults] = r->name;
    nresults++;
  }
  if (nresults > IR_MAX_OPERANDS) {
    diag_error(b->d, s->loc, "too many results (limit is %d)", IR_MAX_OPERANDS);
    return;
  }

  IrValueId inputs[IR_MAX_OPERANDS];
  uint32_t ninputs = 0;
  IrOpKind kind;
  const IrOpInfo *info = NULL;
  if (s->kind == STMT_CALL) {
    kind = OP_CALL;
    for (const AstArg *a = s->args; a; a = a->next)
      if (a->kind == ARG_ATTR) {
        diag_error(b->d, a->loc, "calls take no attributes");
        ok = false;
      }
  } else {
    kind = ir_op_from_name(s->op);
    if (kind == OP_COUNT) {
      IrFuncId fn = strmap_get(&b->funcs, s->op);
      diag_error(b->d, s->op_loc, "unknown op '%s'", s->op);
      const char *sugg = suggest_op(s->op);
      if (fn) diag_note(b->d, s->op_loc, "'%s' is a function; write 'call %s(...) as NAME'", s->op, s->op);
      else if (sugg) diag_note(b->d, s->op_loc, "did you mean '%s'?", sugg);
      collect_args(b, s, NULL, inputs, &ninputs, IR_MAX_OPERANDS);
      define_results(b, s, IR_NO_OP);
      return;
    }
    info = ir_op_info(kind);
  }
  ok = collect_args(b, s, info, inputs, &ninputs, IR_MAX_OPERANDS) && ok;
  if (ninputs > IR_MAX_OPERANDS) {
    diag_error(b->d, s->loc, "too many operands for '%s': %u given (limit is %d)",
               s->kind == STMT_CALL ? "call" : s->op, ninputs, IR_MAX_OPERANDS);
    define_results(b, s, IR_NO_OP);
    return;
  }
  if (info) {
    int max = info->max_inputs;
    if ((int)ninputs < info->min_inputs || (max >= 0 && (int)ninputs > max)) {
      if (max == info->min_inputs)
        diag_error(b->d, s->op_loc, "'%s' takes %d operand%s but %u %s given", info->name, max, max == 1 ? "" : "s",
                   ninputs, ninputs == 1 ? "was" : "were");
      else if (max < 0)
        diag_error(b->d, s->op_loc, "'%s' takes at least %d operand%s but %u %s given", info->name, info->min_inputs,
                   info->min_inputs == 1 ? "" : "s", ninputs, ninputs == 1 ? "was" : "were");
      else
        diag_error(b->d, s->op_loc, "'%s' takes %d to %d operands but %u %s given", info->name, info->min_inputs, max,
                   ninputs, ninputs == 1 ? "was" : "were");
      ok = false;
    }
    for (uint32_t i = 0; i < info->nattrs; i++) {
      if (info->attrs[i].optional) continue;
      bool given = false;
      for (const AstArg *a = s->args; a; a = a->next) given |= a->kind == ARG_ATTR && !strcmp(a->name, info->attrs[i].name);
      if (!given) {
        diag_error(b->d, s->op_loc, "'%s' requires the attribute '%s'", info->name, info->attrs[i].name);
        ok = false;
      }
    }
    if (info->results > 0 && nresults != (uint32_t)info->results) {
      diag_error(b->d, s->results->loc, "'%s' has %d result%s but %u name%s given", info->name, info->results,
                 info->results == 1 ? "" : "s", nresults, nresults == 1 ? " is" : "s are");
      ok = false;
    }
  }
  IrFuncId callee = 0;
  if (kind == OP_CALL) {
    callee = strmap_get(&b->funcs, s->op);
    if (!callee) {
      diag_error(b->d, s->op_loc, "call of undefined function '%s'", s->op);
      ok = false;
    } else if (callee == b->f) {
      diag_error(b->d, s->op_loc, "function '%s' calls itself; recursion cannot be inlined", s->op);
      ok = false;
    }
    if (strmap_get(&b->instances, s->instance)) {
      diag_error(b->d, s->instance_loc, "instance name '%s' is used twice in '%s'", s->instance, ir_func(b->m, b->f)->name);
      ok = false;
    }
    strmap_put(&b->instances, s->instance, 1);
  }
  if (!ok) {
    define_results(b, s, IR_NO_OP);
    return;
  }
  IrOpId op = ir_op_new(b->m, b->f, kind, inputs, ninputs, nresults, names, s->loc);
  ir_op(b->m, op)->loc = s->op_loc;
  if (kind == OP_CALL) {
    ir_op(b->m, op)->callee = callee;
    ir_op(b->m, op)->instance = arena_strdup(&b->m->arena, s->instance);
    ir_func(b->m, callee)->ncallers++;
  }
  for (const AstArg *a = s->args; a; a = a->next) {
    if (a->kind != ARG_ATTR) continue;
    IrAttrValue val;
    lit_to_attr(b, a->lit, &val);
    const IrAttrSchema *sch = find_schema(info, a->name);
    /* Integers written for float attributes are stored as floats. */
    if (sch && sch->kind == AS_FLOAT && val.kind == ATTR_INT) val = (IrAttrValue){.kind = ATTR_FLOAT, .u.f = (double)val.u.i};
    if (sch && sch->kind == AS_FLOATS)
      for (uint32_t i = 0; i < val.u.list.n; i++)
        if (val.u.list.items[i].kind == ATTR_INT)
          val.u.list.items[i] = (IrAttrValue){.kind = ATTR_FLOAT, .u.f = (double)val.u.list.items[i].u.i};
    ir_op_set_attr(b->m, op, a->name, &val, a->loc);
  }
  define_results(b, s, op);
}

static void build_return(Builder *b, AstStmt *s) {
  IrFunc *fn = ir_func(b->m, b->f);
  if (fn->has_return) {
    diag_error(b->d, s->loc, "function '%s' already has a return statement", fn->name);
    diag_note(b->d, fn->return_loc, "the first return is here");
    return;
  }
  fn->has_return = true;
  fn->return_loc = s->loc;
  REVERSE_LIST(AstRet, s->rets);
  StrMap returned;
  strmap_init(&returned);
  for (const AstRet *r = s->rets; r; r = r->next) {
    if (strmap_get(&returned, r->out_name)) {
      diag_error(b->d, r->loc, "output '%s' returned twice", r->out_name);
      continue;
    }
    strmap_put(&returned, r->out_name, 1);
    IrValueId v = lookup_value(b, r->value, r->loc);
    if (!ir_id_is_none(v)) ir_func_add_output(b->m, b->f, r->out_name, v, r->loc);
  }
  strmap_free(&returned);
}

/* Warnings for what nothing uses: usually a typo or a leftover. */
static void warn_unused(Builder *b) {
  IrFunc *fn = ir_func(b->m, b->f);
  for (uint32_t i = 0; i < fn->ndecls; i++) {
    IrValue *v = ir_value(b->m, fn->decls[i]);
    if (!v->nuses) diag_warning(b->d, v->loc, "%s '%s' is never used", v->kind == VK_PARAM ? "param" : "const", v->name);
  }
  for (uint32_t i = 0; i < fn->ninputs; i++) {
    IrValue *v = ir_value(b->m, fn->inputs[i]);
    if (!v->nuses) diag_warning(b->d, v->loc, "input '%s' is never used", v->name);
  }
  IR_FOR_EACH_OP(b->m, b->f, op) {
    IrOp *o = ir_op(b->m, op);
    bool used = false;
    for (uint32_t r = 0; r < o->nresults; r++) used |= ir_value(b->m, o->results[r])->nuses > 0;
    if (!used && o->nresults)
      diag_warning(b->d, ir_value(b->m, o->results[0])->loc, "result '%s' of '%s' is never used",
                   ir_value(b->m, o->results[0])->name, o->kind == OP_CALL ? "call" : ir_op_info(o->kind)->name);
  }
}

/* The named size limits of a function, checked before each statement adds to it. */
static bool within_size_limits(Builder *b, const AstStmt *s) {
  IrFunc *fn = ir_func(b->m, b->f);
  if ((s->kind == STMT_OP || s->kind == STMT_CALL) && fn->nops >= IR_MAX_OPS_PER_FUNC) {
    diag_error(b->d, s->loc, "function '%s' has more than %u ops (the limit)", fn->name, IR_MAX_OPS_PER_FUNC);
    return false;
  }
  if ((s->kind == STMT_PARAM || s->kind == STMT_CONST) && fn->ndecls >= IR_MAX_DECLS_PER_FUNC) {
    diag_error(b->d, s->loc, "function '%s' has more than %u params and consts (the limit)", fn->name,
               IR_MAX_DECLS_PER_FUNC);
    return false;
  }
  return true;
}

static void build_func(Builder *b, AstFunc *af, IrFuncId f) {
  b->f = f;
  strmap_init(&b->names);
  strmap_init(&b->poisoned);
  strmap_init(&b->instances);
  REVERSE_LIST(AstInput, af->inputs);
  REVERSE_LIST(AstStmt, af->stmts);
  for (AstInput *in = af->inputs; in; in = in->next) {
    IrType t;
    bool ok = resolve_type(b, in->type, &t);
    if (!define_name(b, in->name, in->loc) || !ok) {
      poison(b, in->name);
      continue;
    }
    IrValueId v = ir_func_add_input(b->m, f, in->name, &t, in->loc);
    strmap_put(&b->names, ir_value(b->m, v)->name, v.id);
  }
  bool too_large = false;
  for (AstStmt *s = af->stmts; s && !diag_should_stop(b->d); s = s->next) {
    if (ir_func(b->m, f)->has_return && s->kind != STMT_RETURN) {
      diag_error(b->d, s->loc, "statement after the return statement");
      continue;
    }
    if (!within_size_limits(b, s)) {
      too_large = true; /* the rest would only repeat it */
      break;
    }
    if (s->modifier) check_modifier(b, s); /* reported, and the declaration still claims its name */
    switch (s->kind) {
    case STMT_PARAM: build_param(b, s); break;
    case STMT_CONST: build_const(b, s); break;
    case STMT_OP:
    case STMT_CALL: build_op(b, s); break;
    case STMT_RETURN: build_return(b, s); break;
    }
  }
  if (!ir_func(b->m, f)->has_return && !too_large)
    diag_error(b->d, af->end_loc, "function '%s' has no return statement; it must return at least one output",
               af->name);
  if (!diag_has_errors(b->d)) warn_unused(b);
  strmap_free(&b->names);
  strmap_free(&b->poisoned);
  strmap_free(&b->instances);
}

IrModule *oir_build(OirParseCtx *ctx, AstFunc *funcs) {
  Builder b = {.ctx = ctx, .d = ctx->diag, .m = ir_module_new()};
  uint32_t errors_before = b.d->nerrors;
  if (!funcs) diag_error(b.d, (SrcSpan){ctx->file, 0, 0}, "no functions in the file");
  /* Functions first, so that a call may name a function defined later. */
  strmap_init(&b.funcs);
  for (AstFunc *af = funcs; af; af = af->next) {
    IrFuncId prev = strmap_get(&b.funcs, af->name);
    if (prev) {
      diag_error(b.d, af->name_loc, "redefinition of function '%s'", af->name);
      diag_note(b.d, ir_func(b.m, prev)->loc, "previous definition of '%s' is here", af->name);
    }
    IrFuncId f = ir_func_new(b.m, af->name, af->name_loc);
    if (!prev) strmap_put(&b.funcs, ir_func(b.m, f)->name, f);
  }
  IrFuncId f = 1;
  for (AstFunc *af = funcs; af && !diag_should_stop(b.d); af = af->next, f++) build_func(&b, af, f);
  strmap_free(&b.funcs);
  if (b.d->nerrors > errors_before || !ir_verify(b.m, b.d)) {
    ir_module_free(b.m);
    return NULL;
  }
  return b.m;
}
