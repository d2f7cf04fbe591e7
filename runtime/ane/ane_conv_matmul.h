/*
 * A 1x1 conv written as the matmul the ANE takes with a dynamic operand,
 * for a function whose weights become inputs (ane_weight_inputs.h): every
 * report of weights as inputs that works goes through matmul (peers.md
 * §4.9), while a conv whose weight is an input is disputed (§4.6). A conv
 * of stride 1, no padding, groups 1, dilation 1 and a [Cout, Cin, 1, 1]
 * weight over x [1, Cin, 1, S] is y[o, s] = sum_c W[o, c] x[c, s]:
 *
 *   W3 = reshape(W, [1, Cout, Cin]);  x3 = reshape(x, [1, Cin, S])
 *   m = matmul(transpose_x = F, transpose_y = F, x = W3, y = x3)   [1, Cout, S]
 *   y = reshape(m, [1, Cout, 1, S])                  (+ add of reshape(bias, [1, Cout, 1, 1]))
 *
 * with the transpose flags named bool consts (ANE012) and every reshape of
 * a shape the table's rules accept (rank 4 at the ends, no transposes
 * needed: the weight is already [Cout, Cin]). The new names are the conv's
 * result name with a suffix of ANE_CONV_MATMUL_SUFFIX; the conv's result
 * keeps its name and type, so nothing after it changes.
 */
#ifndef ORION_ANE_CONV_MATMUL_H
#define ORION_ANE_CONV_MATMUL_H

#include <stdbool.h>
#include <stddef.h>

#include "orion/mil_reader.h"
#include "orion/support.h"

#define ANE_CONV_MATMUL_SUFFIX "__orion_mm"

/* Whether statement st of f is such a conv (its operands named values);
 * if not, why into why (a clause). */
bool ane_conv_as_matmul_ok(const MilFunc *f, const MilStmt *st, char *why, size_t len);

/* The text an operand is written as (a weight's input name, or its own). */
typedef const char *AneOperandText(const void *ctx, const MilOperand *o);

/* Appends st (ane_conv_as_matmul_ok) as its matmul form, one statement a
 * line, each indented by 8 spaces, operands through text. */
void ane_conv_as_matmul_write(const MilFunc *f, const MilStmt *st, AneOperandText *text, const void *ctx,
                              StrBuf *out);

#endif
