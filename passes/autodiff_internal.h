/*
 * What gradient rules see of the reverse sweep (passes/autodiff.c), and the
 * small builders they emit the backward with. Internal to passes/.
 *
 * A rule is called once per forward op that has an adjoint. It reads the
 * op's operands, results and attributes in F (ad_in, ad_res_type, ...), asks
 * for forward values it needs in the backward (ad_x, ad_y: this makes them
 * saved values or backward inputs), takes the adjoints of the results (ad_gy)
 * and hands each operand that needs one (ad_needs) its gradient (ad_give),
 * which must have that operand's type. Every builder infers its result's
 * type at once, so rules can read shapes as they go.
 */
#ifndef ORION_AUTODIFF_INTERNAL_H
#define ORION_AUTODIFF_INTERNAL_H

#include "orion/autodiff.h"

typedef struct AdCtx AdCtx;

/* false: the rule reported an error (an unsupported form of the op). */
typedef bool (*GradRuleFn)(AdCtx *c);

typedef struct GradRule {
  const char *family;  /* NULL: no row (the table test fails) */
  GradRuleFn fn;       /* NULL with a family: explicitly not differentiable */
} GradRule;

const GradRule *grad_rule(IrOpKind k);

/* The forward op being differentiated. */
IrModule *ad_module(AdCtx *c);
IrOpId ad_op(AdCtx *c);
uint32_t ad_nin(AdCtx *c);
IrValueId ad_in(AdCtx *c, uint32_t i);   /* operand i in F */
IrType ad_in_type(AdCtx *c, uint32_t i);
IrType ad_res_type(AdCtx *c, uint32_t i);
uint32_t ad_nres(AdCtx *c);
/* Forward values in the backward: operand i, result i. */
IrValueId ad_x(AdCtx *c, uint32_t i);
IrValueId ad_y(AdCtx *c, uint32_t i);
/* Adjoint of result i (zeros of its type if it has none, e.g. an unused part of a split). */
IrValueId ad_gy(AdCtx *c, uint32_t i);
bool ad_has_gy(AdCtx *c, uint32_t i);
/* Does operand i need a gradient (is it on a path from a trainable param)? */
bool ad_needs(AdCtx *c, uint32_t i);
/* Adds g (operand i's type) into operand i's adjoint. */
void ad_give(AdCtx *c, uint32_t i, IrValueId g);
/* Is the op a gather whose adjoint goes out by rows (AutodiffOptions.gather_rows)? */
bool ad_gather_by_rows(AdCtx *c);
/* Hands the gather's adjoint g (its result's type) out as rows of the table's gradient. */
void ad_give_rows(AdCtx *c, IrValueId g);
/* An error at the forward op. */
bool ad_fail(AdCtx *c, const char *fmt, ...) ORION_PRINTF(2, 3);

/* ---- builders (all in the backward function, types inferred at once) ---- */

IrType ad_type(AdCtx *c, IrValueId v);
IrOpId ad_begin(AdCtx *c, IrOpKind k, const IrValueId *in, uint32_t n, uint32_t nres);
IrValueId ad_end(AdCtx *c, IrOpId op); /* infers; the first result */
IrValueId ad_op1(AdCtx *c, IrOpKind k, IrValueId a);
IrValueId ad_op2(AdCtx *c, IrOpKind k, IrValueId a, IrValueId b);
IrValueId ad_scalar(AdCtx *c, IrDType dt, double v);
/* A const of type t and data (n == 1 splats). */
IrValueId ad_const(AdCtx *c, const IrType *t, const double *data, uint64_t n);
IrValueId ad_zeros(AdCtx *c, const IrType *t);
IrValueId ad_reshape(AdCtx *c, IrValueId x, int rank, const int64_t *dims);
IrValueId ad_transpose(AdCtx *c, IrValueId x, const int64_t *perm, int rank);
IrValueId ad_reduce(AdCtx *c, IrOpKind k, IrValueId x, const int64_t *axes, int naxes, bool keep);
IrValueId ad_matmul(AdCtx *c, IrValueId a, IrValueId b, bool ta, bool tb);
IrValueId ad_cast(AdCtx *c, IrValueId x, IrDType dt);
IrValueId ad_select(AdCtx *c, IrValueId cond, IrValueId a, IrValueId b);
/* x != 0 as bool. */
IrValueId ad_nonzero(AdCtx *c, IrValueId x);
IrValueId ad_concat(AdCtx *c, const IrValueId *parts, uint32_t n, int axis);
IrValueId ad_slice(AdCtx *c, IrValueId x, const int64_t *begin, const int64_t *end, const int64_t *stride);
/* The adjoint of a slice along one axis put back in place: g's elements at
 * begin, begin + stride, ... of a zero tensor of `size` along `axis` (the
 * other axes as g's). IR_NO_VALUE for a stride at rank IR_MAX_RANK. */
IrValueId ad_unslice(AdCtx *c, IrValueId g, int axis, int64_t begin, int64_t stride, int64_t size);
/* g (a broadcast shape) summed down to `to` (undoes broadcasting). */
IrValueId ad_unbroadcast(AdCtx *c, IrValueId g, const IrType *to);
/* g broadcast up to `to` (g's shape broadcasts to it). */
IrValueId ad_expand(AdCtx *c, IrValueId g, const IrType *to);
/* Normalized axes of an `axes` attribute (default: every axis, or the last
 * when dflt_last) as a mask over rank r; returns how many. */
int ad_axes_mask(AdCtx *c, const char *attr, int r, bool dflt_last, bool *mask);

/* Rule families, by file. */
bool grad_add_sub(AdCtx *c);
bool grad_mul(AdCtx *c);
bool grad_div(AdCtx *c);
bool grad_pow(AdCtx *c);
bool grad_max_min(AdCtx *c);
bool grad_unary(AdCtx *c);
bool grad_gelu(AdCtx *c);
bool grad_clip(AdCtx *c);
bool grad_select(AdCtx *c);
bool grad_cast(AdCtx *c);
bool grad_identity(AdCtx *c);
bool grad_reduce(AdCtx *c);
bool grad_reshape(AdCtx *c);
bool grad_transpose(AdCtx *c);
bool grad_slice(AdCtx *c);
bool grad_split(AdCtx *c);
bool grad_concat(AdCtx *c);
bool grad_gather(AdCtx *c);
bool grad_softmax(AdCtx *c);
bool grad_matmul(AdCtx *c);
bool grad_linear(AdCtx *c);
bool grad_conv(AdCtx *c);
bool grad_layer_norm(AdCtx *c);
bool grad_rms_norm(AdCtx *c);
bool grad_sdpa(AdCtx *c);
bool grad_cross_entropy(AdCtx *c);

#endif
