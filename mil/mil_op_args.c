/*
 * Checks a statement's arguments against the op table: every argument is one
 * the op has and each is of its kind (the reader's checks), and the required
 * ones are there (for a backend's binder). The messages are those the CPU
 * backend gives for the same problem (`OP: argument 'NAME' must be a
 * scalar`, `OP: missing argument 'NAME'` at the op).
 */
#include <stdarg.h>

#include "mil_check.h"

static bool problem(const MilArgContext *c, SrcSpan at, const char *fmt, ...) ORION_PRINTF(3, 4);
static bool problem(const MilArgContext *c, SrcSpan at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(c->d, c->tolerant ? DIAG_WARNING : DIAG_ERROR, at, fmt, ap);
  va_end(ap);
  return c->tolerant;
}

/* The operand's type if it is known by now, else NULL. */
static const MilType *operand_type(const MilArgContext *c, const MilOperand *o) {
  if (o->kind == MIL_OPERAND_LITERAL) return &o->literal->type;
  if (o->def_stmt == MIL_DEF_PARAM) return o->def_index < c->nparams ? &c->params[o->def_index].type : NULL;
  if (o->def_stmt >= c->nbuilt || o->def_index >= c->stmts[o->def_stmt].nresults) return NULL;
  return &c->stmts[o->def_stmt].results[o->def_index].type;
}

/* Whether t fits kind; a type with an unknown dtype was reported where it
 * was written, and an unknown size is taken to fit. */
static bool fits_kind(const MilType *t, MilArgKind kind) {
  if (t->kind != MIL_TYPE_TENSOR) return false;
  if (t->dtype == MIL_DT_NONE) return true;
  switch (kind) {
  case MIL_KIND_STRING: return t->dtype == MIL_DT_STRING;
  case MIL_KIND_SCALAR: {
    uint64_t n = mil_type_elements(t);
    return t->dtype != MIL_DT_STRING && (n == 1 || n == UINT64_MAX);
  }
  case MIL_KIND_TENSOR:
  case MIL_KIND_LIST:
    return t->dtype != MIL_DT_STRING;
  }
  return false;
}

static const char *kind_phrase(MilArgKind kind) {
  switch (kind) {
  case MIL_KIND_STRING: return "a string";
  case MIL_KIND_SCALAR: return "a scalar";
  case MIL_KIND_TENSOR: return "a tensor";
  case MIL_KIND_LIST: return "a list of tensors";
  }
  return "?";
}

/* "x, weight and bias" */
static void arg_names(const MilOpInfo *op, StrBuf *sb) {
  for (uint32_t i = 0; i < op->nargs; i++)
    sb_printf(sb, "%s%s", i == 0 ? "" : i + 1 == op->nargs ? " and " : ", ", mil_arg_name(op->first_arg + i));
}

bool mil_check_op_args(const MilArgContext *c, const MilOpInfo *op, const MilStmt *st) {
  bool go_on = true;
  for (uint32_t i = 0; i < st->nargs; i++) {
    const MilArg *a = &st->args[i];
    const MilArgSpec *spec = mil_op_find_arg(op, a->name);
    if (!spec) {
      StrBuf known;
      sb_init(&known);
      arg_names(op, &known);
      if (op->nargs) go_on &= problem(c, a->loc, "%s: unknown argument '%s' (it takes %s)", st->op, a->name, known.data);
      else go_on &= problem(c, a->loc, "%s: unknown argument '%s' (it takes none)", st->op, a->name);
      sb_free(&known);
      continue;
    }
    if (spec->kind != MIL_KIND_LIST && (a->is_list || a->nitems != 1)) {
      go_on &= problem(c, a->loc, "%s: argument '%s' must be a single value", st->op, a->name);
      continue;
    }
    for (uint32_t j = 0; j < a->nitems; j++) {
      const MilType *t = operand_type(c, &a->items[j]);
      if (t && !fits_kind(t, spec->kind)) {
        go_on &= problem(c, a->items[j].loc, "%s: argument '%s' must be %s", st->op, a->name, kind_phrase(spec->kind));
        break;
      }
    }
  }
  return go_on;
}

bool mil_op_check_required(const MilOpInfo *op, const MilStmt *st, Diag *d) {
  /* A constexpr op of the iOS16 form binds its inputs as attributes. */
  bool attrs_bind = op->family == MIL_FAM_CONSTEXPR;
  bool ok = true;
  for (uint32_t i = 0; i < op->nargs; i++) {
    const MilArgSpec *spec = mil_arg_info(op->first_arg + i);
    if (!spec->required || mil_find_arg(st, spec->name)) continue;
    if (attrs_bind && mil_find_attr(st->attrs, st->nattrs, spec->name)) continue;
    diag_error(d, st->op_loc, "%s: missing argument '%s'", st->op, spec->name);
    ok = false;
  }
  return ok;
}
