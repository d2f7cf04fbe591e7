/* A 1x1 conv as a matmul (ane_conv_matmul.h). */
#include "ane_conv_matmul.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const MilType *operand_type(const MilFunc *f, const MilOperand *o) {
  if (o->kind != MIL_OPERAND_NAME) return o->kind == MIL_OPERAND_LITERAL && o->literal ? &o->literal->type : NULL;
  if (o->def_stmt == MIL_DEF_PARAM) return o->def_index < f->nparams ? &f->params[o->def_index].type : NULL;
  if (o->def_stmt >= f->nstmts || o->def_index >= f->stmts[o->def_stmt].nresults) return NULL;
  return &f->stmts[o->def_stmt].results[o->def_index].type;
}

/* The inline value of an operand: a literal, or a const statement's val. */
static const MilLiteral *operand_value(const MilFunc *f, const MilOperand *o) {
  if (o->kind == MIL_OPERAND_LITERAL) return o->literal;
  if (o->kind != MIL_OPERAND_NAME || o->def_stmt >= f->nstmts) return NULL;
  const MilStmt *d = &f->stmts[o->def_stmt];
  if (strcmp(d->op, "const")) return NULL;
  for (uint32_t a = 0; a < d->nattrs; a++)
    if (!strcmp(d->attrs[a].name, "val") && d->attrs[a].value && d->attrs[a].value->payload != MIL_PAYLOAD_BLOB)
      return d->attrs[a].value;
  return NULL;
}

static const MilOperand *arg(const MilStmt *st, const char *name) {
  for (uint32_t a = 0; a < st->nargs; a++)
    if (!strcmp(st->args[a].name, name) && !st->args[a].is_list && st->args[a].nitems == 1)
      return &st->args[a].items[0];
  return NULL;
}

/* Every element of an int const equal to want (an absent argument is its default, which is want). */
static bool ints_all(const MilFunc *f, const MilStmt *st, const char *name, int64_t want) {
  const MilOperand *o = arg(st, name);
  if (!o) return true;
  const MilLiteral *v = operand_value(f, o);
  if (!v || !v->ints) return false;
  for (uint64_t i = 0; i < v->count; i++)
    if (v->ints[i] != want) return false;
  return true;
}

static bool no(char *why, size_t len, const char *what) {
  snprintf(why, len, "%s", what);
  return false;
}

bool ane_conv_as_matmul_ok(const MilFunc *f, const MilStmt *st, char *why, size_t len) {
  static const char *const known = " x weight bias strides pad_type pad dilations groups ";
  if (strcmp(st->op, "conv") || st->nresults != 1) return no(why, len, "it is not a conv of one result");
  for (uint32_t a = 0; a < st->nargs; a++) {
    char word[80];
    snprintf(word, sizeof word, " %s ", st->args[a].name);
    if (!strstr(known, word)) return no(why, len, "it has an argument a 1x1 conv does not");
  }
  const MilOperand *x = arg(st, "x"), *w = arg(st, "weight"), *b = arg(st, "bias");
  const MilType *xt = x && x->kind == MIL_OPERAND_NAME ? operand_type(f, x) : NULL;
  const MilType *wt = w && w->kind == MIL_OPERAND_NAME ? operand_type(f, w) : NULL;
  const MilType *yt = &st->results[0].type;
  if (!xt || !wt || xt->kind != MIL_TYPE_TENSOR || wt->kind != MIL_TYPE_TENSOR || yt->kind != MIL_TYPE_TENSOR ||
      xt->rank != 4 || wt->rank != 4 || yt->rank != 4)
    return no(why, len, "its x, weight and result are not named rank-4 tensors");
  int64_t cin = xt->dims[1], s = xt->dims[3], cout = wt->dims[0];
  if (xt->dims[0] != 1 || xt->dims[2] != 1 || cin < 1 || s < 1)
    return no(why, len, "its x is not [1, Cin, 1, S]");
  if (wt->dims[1] != cin || wt->dims[2] != 1 || wt->dims[3] != 1 || cout < 1)
    return no(why, len, "its weight is not [Cout, Cin, 1, 1]");
  if (yt->dims[0] != 1 || yt->dims[1] != cout || yt->dims[2] != 1 || yt->dims[3] != s)
    return no(why, len, "its result is not [1, Cout, 1, S]");
  if (!ints_all(f, st, "strides", 1) || !ints_all(f, st, "dilations", 1) || !ints_all(f, st, "groups", 1) ||
      !ints_all(f, st, "pad", 0))
    return no(why, len, "its strides, dilations and groups are not all 1 or its pad not all 0");
  if (b) {
    const MilType *bt = b->kind == MIL_OPERAND_NAME ? operand_type(f, b) : NULL;
    if (!bt || bt->kind != MIL_TYPE_TENSOR || bt->rank != 1 || bt->dims[0] != cout)
      return no(why, len, "its bias is not a named [Cout] tensor");
  }
  return true;
}

static void put_type(StrBuf *out, MilDType dt, const int64_t *dims, uint32_t rank) {
  MilType t = {.kind = MIL_TYPE_TENSOR, .dtype = dt, .rank = rank};
  memcpy(t.dims, dims, rank * sizeof *dims);
  mil_type_print(&t, out);
}

/* `tensor<int32, [n]> NAME = const()[name = string("NAME"), val = tensor<int32, [n]>([...])];` */
static void put_shape(StrBuf *out, const char *res, const char *what, const int64_t *dims, uint32_t rank) {
  char shape[160] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < rank && used < sizeof shape; i++)
    used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%" PRId64, i ? ", " : "", dims[i]);
  sb_printf(out,
            "        tensor<int32, [%u]> %s%s_%s = const()[name = string(\"%s%s_%s\"), val = tensor<int32, [%u]>([%s])];"
            "\n",
            rank, res, ANE_CONV_MATMUL_SUFFIX, what, res, ANE_CONV_MATMUL_SUFFIX, what, rank, shape);
}

/* `TYPE NAME = reshape(shape = RES_SUFFIX_what_shape, x = IN)[name = string("NAME")];`, NAME being
 * RES_SUFFIX_what, or RES itself when what is NULL. */
static void put_reshape(StrBuf *out, const char *res, const char *what, MilDType dt, const int64_t *dims,
                        uint32_t rank, const char *in) {
  char shape_what[64];
  snprintf(shape_what, sizeof shape_what, "%s_shape", what ? what : "y");
  put_shape(out, res, shape_what, dims, rank);
  StrBuf name;
  sb_init(&name);
  if (what) sb_printf(&name, "%s%s_%s", res, ANE_CONV_MATMUL_SUFFIX, what);
  else sb_puts(&name, res);
  sb_puts(out, "        ");
  put_type(out, dt, dims, rank);
  sb_printf(out, " %s = reshape(shape = %s%s_%s, x = %s)[name = string(\"%s\")];\n", name.data, res,
            ANE_CONV_MATMUL_SUFFIX, shape_what, in, name.data);
  sb_free(&name);
}

void ane_conv_as_matmul_write(const MilFunc *f, const MilStmt *st, AneOperandText *text, const void *ctx,
                              StrBuf *out) {
  const MilOperand *x = arg(st, "x"), *w = arg(st, "weight"), *b = arg(st, "bias");
  const MilType *xt = operand_type(f, x), *yt = &st->results[0].type;
  const char *res = st->results[0].name, *mm_suffix = ANE_CONV_MATMUL_SUFFIX;
  MilDType dt = yt->dtype;
  int64_t cin = xt->dims[1], s = xt->dims[3], cout = yt->dims[1];
  put_reshape(out, res, "w", dt, (int64_t[]){1, cout, cin}, 3, text(ctx, w));
  put_reshape(out, res, "x", dt, (int64_t[]){1, cin, s}, 3, text(ctx, x));
  sb_printf(out, "        bool %s%s_f = const()[name = string(\"%s%s_f\"), val = bool(false)];\n", res, mm_suffix, res,
            mm_suffix);
  StrBuf mm;
  sb_init(&mm);
  sb_printf(&mm, "%s%s", res, mm_suffix);
  sb_puts(out, "        ");
  put_type(out, dt, (int64_t[]){1, cout, s}, 3);
  sb_printf(out, " %s = matmul(transpose_x = %s_f, transpose_y = %s_f, x = %s_w, y = %s_x)[name = string(\"%s\")];\n",
            mm.data, mm.data, mm.data, mm.data, mm.data, mm.data);
  if (!b) {
    put_reshape(out, res, NULL, dt, (int64_t[]){1, cout, 1, s}, 4, mm.data);
  } else {
    put_reshape(out, res, "nobias", dt, (int64_t[]){1, cout, 1, s}, 4, mm.data);
    put_reshape(out, res, "b", dt, (int64_t[]){1, cout, 1, 1}, 4, text(ctx, b));
    sb_puts(out, "        ");
    put_type(out, dt, (int64_t[]){1, cout, 1, s}, 4);
    sb_printf(out, " %s = add(x = %s_nobias, y = %s_b)[name = string(\"%s\")];\n", res, mm.data, mm.data, res);
  }
  sb_free(&mm);
}
