/*
 * Argument errors of the ops whose arguments the CPU backend binds at
 * prepare (element-wise ops, reductions and norms, views, linear algebra,
 * attention, argmax/topk, pooling, quantize, lstm, shape ops): each hand-written
 * program is rejected by cpu_prepare itself, with the exact message at the
 * op's FILE:LINE:COL, before anything runs. These errors were found by the
 * kernels on every run before binding moved them to prepare.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "orion/cpu.h"

#define MIL_HEAD "program(1.3)\n[buildInfo = dict<string, string>({{\"coremlc-version\", \"3505.4.1\"}})]\n{\n"
#define FUNC_PARAMS "tensor<fp32, [2]> x, tensor<fp32, []> e, tensor<int32, []> ai"
#define S_(n) "string(\"" n "\")"
/* the parameters of the linear algebra and attention cases */
/* the parameters of the argmax, topk, pooling, quantize and lstm cases */
#define MI "tensor<fp32, [2, 3]> a, tensor<fp32, [1, 1, 4, 4]> im, tensor<fp32, [2, 1, 1]> s, tensor<fp32, [1, 1]> h0"
/* the parameters of the shape op cases */
#define SH "tensor<fp32, [2, 3]> a, tensor<int32, [2]> ib, tensor<fp32, [6]> f"
#define LA "tensor<fp32, [2, 3]> a, tensor<fp32, [4, 3]> b, tensor<fp32, [3]> v, tensor<fp32, [1, 3, 4]> c, tensor<fp32, [5, 3, 1, 2]> q"

typedef struct BindCase {
  const char *stmts;  /* the function's body, whose result is y */
  const char *at;     /* where the error points: the first occurrence of this text */
  const char *msg;    /* the message after "error: " */
  const char *params; /* the function's parameters; NULL: x fp32[2], e fp32 scalar, ai int32 scalar */
} BindCase;

static const BindCase cases[] = {
    /* unary */
    /* An argument the op does not take is the MIL reader's to refuse (its op table). */
    {"        tensor<fp32, [2]> y = relu(z = x)[name = " S_("y") "];\n", "z = x", "relu: unknown argument 'z' (it takes x)", NULL},
    {"        tensor<fp32, [2]> y = relu(x = (x, x))[name = " S_("y") "];\n", "relu(",
     "relu: argument 'x' must be a single value", NULL},
    {"        tensor<fp32, [2]> y = rsqrt(epsilon = tensor<fp32, [2]>([1, 2]), x = x)[name = " S_("y") "];\n", "rsqrt(",
     "rsqrt: argument 'epsilon' must be a scalar", NULL},
    {"        tensor<fp32, [2]> y = log(epsilon = e, x = x)[name = " S_("y") "];\n", "log(",
     "log: argument 'epsilon' must be a constant", NULL},
    {"        tensor<fp32, [2]> y = clip(alpha = fp32(0), x = x)[name = " S_("y") "];\n", "clip(",
     "clip: needs both alpha and beta", NULL},
    {"        tensor<fp32, [2]> y = gelu(mode = " S_("FAST") ", x = x)[name = " S_("y") "];\n", "gelu(",
     "gelu: unknown mode 'FAST'", NULL},
    {"        tensor<fp32, [2]> y = gelu(mode = fp32(1), x = x)[name = " S_("y") "];\n", "gelu(",
     "gelu: argument 'mode' must be a string", NULL},
    {"        tensor<fp32, [2]> y = relu(x = " S_("a") ")[name = " S_("y") "];\n", "relu(",
     "relu: argument 'x' must be a tensor", NULL},
    {"        tensor<bool, [2]> y = logical_not(x = x)[name = " S_("y") "];\n", "logical_not(",
     "logical_not: takes and returns bool, not fp32 and bool", NULL},
    {"        tensor<fp32, [3]> y = exp(x = x)[name = " S_("y") "];\n", "exp(",
     "exp: the result shape is [2] but the statement declares [3]", NULL},
    /* binary */
    {"        tensor<fp32, [2]> y = add(x = x, y = " S_("a") ")[name = " S_("y") "];\n", "add(",
     "add: argument 'y' must be a tensor", NULL}, /* the reader's (MIL op table) */
    {"        tensor<fp32, [2]> y = less(x = x, y = x)[name = " S_("y") "];\n", "less(",
     "less: returns bool, but the result is declared fp32", NULL},
    {"        tensor<bool, [2]> y = logical_and(x = x, y = x)[name = " S_("y") "];\n", "logical_and(",
     "logical_and: takes and returns bool, not fp32 and fp32 into bool", NULL},
    {"        tensor<bool, [2]> y = mul(x = x, y = x)[name = " S_("y") "];\n", "mul(", "mul: does not return bool", NULL},
    {"        tensor<fp32, [2]> y = sub(x = x, y = tensor<fp32, [3]>([1, 2, 3]))[name = " S_("y") "];\n", "sub(",
     "sub: an operand of shape [3] does not broadcast to [2]", NULL},
    {"        tensor<fp32, [2]> y = maximum(x = x, y = tensor<fp32, [1, 2]>([1, 2]))[name = " S_("y") "];\n",
     "maximum(", "maximum: an operand of rank 2 does not broadcast to rank 1", NULL},
    {"        tensor<fp32, [2]> y = real_div(x = x)[name = " S_("y") "];\n", "real_div(",
     "real_div: missing argument 'y'", NULL},
    /* select, cast */
    {"        tensor<fp32, [2]> y = select(a = x, b = x)[name = " S_("y") "];\n", "select(",
     "select: missing argument 'cond'", NULL},
    {"        tensor<bool, [3]> c = const()[name = " S_("c") ", val = tensor<bool, [3]>([true, false, true])];\n"
     "        tensor<fp32, [2]> y = select(a = x, b = x, cond = c)[name = " S_("y") "];\n",
     "select(", "select: an operand of shape [3] does not broadcast to [2]", NULL},
    {"        tensor<fp32, [2]> y = cast(x = x)[name = " S_("y") "];\n", "cast(", "cast: missing argument 'dtype'", NULL},
    {"        tensor<fp32, [2]> y = cast(dtype = " S_("int32") ", x = x)[name = " S_("y") "];\n", "cast(",
     "cast: casts to 'int32' but the result is declared fp32", NULL},
    {"        tensor<int32, [3]> y = cast(dtype = " S_("int32") ", x = x)[name = " S_("y") "];\n", "cast(",
     "cast: the result shape is [2] but the statement declares [3]", NULL},
    /* softmax, reductions, layer_norm */
    {"        tensor<fp32, [2]> y = softmax(axis = int32(2), x = x)[name = " S_("y") "];\n", "softmax(",
     "softmax: axis 2 is out of range for rank 1", NULL},
    {"        tensor<fp32, [2]> y = softmax(axis = ai, x = x)[name = " S_("y") "];\n", "softmax(",
     "softmax: argument 'axis' must be a constant", NULL},
    {"        tensor<fp32, [1]> y = reduce_sum(axes = tensor<int32, [1]>([5]), keep_dims = bool(true), x = x)[name = " S_("y") "];\n",
     "reduce_sum(", "reduce_sum: axis 5 is out of range for rank 1", NULL},
    {"        tensor<fp32, [1]> y = reduce_max(axes = tensor<int32, [9]>([0, 0, 0, 0, 0, 0, 0, 0, 0]), x = x)[name = " S_("y") "];\n",
     "reduce_max(", "reduce_max: argument 'axes' must be a list of at most 8 integers", NULL},
    {"        tensor<fp32, [2]> y = reduce_mean(axes = tensor<int32, [1]>([0]), x = x)[name = " S_("y") "];\n",
     "reduce_mean(", "reduce_mean: the result shape is [] but the statement declares [2]", NULL},
    {"        tensor<fp32, [1]> y = reduce_sum(keep_dims = tensor<bool, [2]>([true, false]), x = x)[name = " S_("y") "];\n",
     "reduce_sum(", "reduce_sum: argument 'keep_dims' must be a scalar", NULL},
    {"        tensor<fp32, [2]> y = layer_norm(axes = tensor<int32, [2]>([0, -1]), x = x)[name = " S_("y") "];\n",
     "layer_norm(", "layer_norm: axis -1 is listed twice", NULL},
    {"        tensor<fp32, [2]> y = layer_norm(axes = tensor<int32, [1]>([0]), gamma = tensor<fp32, [3]>([1, 1, 1]), x = x)[name = " S_("y") "];\n",
     "layer_norm(", "layer_norm: gamma and beta must have the 2 elements of the normalized dims", NULL},
    {"        tensor<fp32, [2]> y = layer_norm(epsilon = e, x = x)[name = " S_("y") "];\n", "layer_norm(",
     "layer_norm: argument 'epsilon' must be a constant", NULL},
    /* a view (reshape of the same dtype) */
    {"        tensor<int32, [1]> shp = const()[name = " S_("shp") ", val = tensor<int32, [1]>([3])];\n"
     "        tensor<fp32, [3]> y = reshape(shape = shp, x = x)[name = " S_("y") "];\n",
     "reshape(", "reshape: reshapes 2 elements into 3", NULL},
    /* matmul, linear, conv */
    {"        tensor<fp32, [2, 4]> y = matmul(x = a, y = b)[name = " S_("y") "];\n", "matmul(",
     "matmul: the inner dimensions differ (3 and 4)", LA},
    {"        tensor<fp32, [2]> y = matmul(transpose_y = bool(true), x = a, y = v)[name = " S_("y") "];\n", "matmul(",
     "matmul: a transpose flag is set on a rank-1 operand", LA},
    {"        tensor<fp32, [2, 3]> y = matmul(x = a, y = fp32(1))[name = " S_("y") "];\n", "matmul(",
     "matmul: operands must have rank 1 or more", LA},
    {"        tensor<fp32, [5, 3, 3, 4]> y = matmul(x = q, y = c)[name = " S_("y") "];\n", "matmul(",
     "matmul: the inner dimensions differ (2 and 3)", LA},
    {"        tensor<fp32, [2, 4]> y = linear(weight = v, x = a)[name = " S_("y") "];\n", "linear(",
     "linear: weight must be [D_out, D_in] with D_in the last dimension of x", LA},
    {"        tensor<fp32, [2, 4]> y = linear(bias = v, weight = b, x = a)[name = " S_("y") "];\n", "linear(",
     "linear: bias must have D_out = 4 elements", LA},
    {"        tensor<fp32, [4, 2]> y = linear(bias = v, weight = a, x = b)[name = " S_("y") "];\n", "linear(",
     "linear: bias must have D_out = 2 elements", LA},
    {"        tensor<fp32, [4, 3]> y = linear(weight = a, x = b)[name = " S_("y") "];\n", "linear(",
     "linear: the result shape is [4, 2] but the statement declares [4, 3]", LA},
    {"        tensor<fp32, [2, 4]> y = conv(weight = a, x = b)[name = " S_("y") "];\n", "conv(",
     "conv: x and weight must both have rank 3, 4 or 5 (a 1-D, 2-D or 3-D convolution)", LA},
    {"        tensor<fp32, [1, 3, 4]> w = const()[name = " S_("w") ", val = tensor<fp32, [1, 3, 4]>([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y = conv(strides = tensor<int32, [2]>([1, 1]), weight = w, x = c)[name = " S_("y") "];\n",
     "conv(", "conv: strides needs 1 entries", LA},
    {"        tensor<fp32, [1, 3, 4]> w = const()[name = " S_("w") ", val = tensor<fp32, [1, 3, 4]>([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y = conv(groups = int32(2), weight = w, x = c)[name = " S_("y") "];\n",
     "conv(", "conv: groups 2 does not fit 3 input channels and a weight of 3 per group", LA},
    {"        tensor<fp32, [1, 3, 4]> w = const()[name = " S_("w") ", val = tensor<fp32, [1, 3, 4]>([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y = conv(pad_type = " S_("around") ", weight = w, x = c)[name = " S_("y") "];\n",
     "conv(", "conv: unknown pad_type 'around'", LA},
    {"        tensor<fp32, [1, 3, 4]> w = const()[name = " S_("w") ", val = tensor<fp32, [1, 3, 4]>([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y = conv(pad_type = " S_("custom") ", weight = w, x = c)[name = " S_("y") "];\n",
     "conv(", "conv: pad_type custom needs pad with 2 entries", LA},
    {"        tensor<fp32, [1, 3, 4]> w = const()[name = " S_("w") ", val = tensor<fp32, [1, 3, 4]>([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y = conv(dilations = tensor<int32, [1]>([0]), weight = w, x = c)[name = " S_("y") "];\n",
     "conv(", "conv: strides and dilations must be positive", LA},
    {"        tensor<fp32, [1, 3, 4]> w = const()[name = " S_("w") ", val = tensor<fp32, [1, 3, 4]>([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y = conv(pad = tensor<int32, [2]>([-1, 0]), pad_type = " S_("custom") ", weight = w, x = c)[name = " S_("y") "];\n",
     "conv(", "conv: pad entries must not be negative", LA},
    {"        tensor<fp32, [1, 3, 4]> w = const()[name = " S_("w") ", val = tensor<fp32, [1, 3, 4]>([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y = conv(bias = v, weight = w, x = c)[name = " S_("y") "];\n",
     "conv(", "conv: bias must have 1 elements", LA},
    {"        tensor<fp32, [1, 3, 4]> w = const()[name = " S_("w") ", val = tensor<fp32, [1, 3, 4]>([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 2]> y = conv(weight = w, x = c)[name = " S_("y") "];\n",
     "conv(", "conv: the result shape is [1, 1, 1] but the statement declares [1, 1, 2]", LA},
    /* scaled_dot_product_attention */
    {"        tensor<fp32, [2, 3]> y = scaled_dot_product_attention(key = a, query = a, value = a)[name = " S_("y") "];\n",
     "scaled_dot_product_attention(", "scaled_dot_product_attention: query, key and value must have the same rank, 3 or more (they have 2, 2 and 2)", LA},
    {"        tensor<fp32, [1, 3, 4]> y = scaled_dot_product_attention(key = q, query = c, value = c)[name = " S_("y") "];\n",
     "scaled_dot_product_attention(", "scaled_dot_product_attention: query, key and value must have the same rank, 3 or more (they have 3, 4 and 3)", LA},
    {"        tensor<fp32, [1, 3, 3]> k = const()[name = " S_("k") ", val = tensor<fp32, [1, 3, 3]>([1, 1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 3, 4]> y = scaled_dot_product_attention(key = k, query = c, value = c)[name = " S_("y") "];\n",
     "scaled_dot_product_attention(", "scaled_dot_product_attention: key has 3 features per row but query 4", LA},
    {"        tensor<fp32, [1, 2, 4]> vv = const()[name = " S_("vv") ", val = tensor<fp32, [1, 2, 4]>([1, 1, 1, 1, 1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 3, 4]> y = scaled_dot_product_attention(key = c, query = c, value = vv)[name = " S_("y") "];\n",
     "scaled_dot_product_attention(", "scaled_dot_product_attention: value has 2 rows but key 3", LA},
    {"        tensor<fp32, [1, 3, 4]> y = scaled_dot_product_attention(attn_mask = " S_("m") ", key = c, query = c, value = c)[name = " S_("y") "];\n",
     "scaled_dot_product_attention(", "scaled_dot_product_attention: argument 'attn_mask' must be a tensor", LA},
    {"        tensor<fp32, [1, 3, 4]> y = scaled_dot_product_attention(attn_mask = a, key = c, query = c, value = c)[name = " S_("y") "];\n",
     "scaled_dot_product_attention(", "scaled_dot_product_attention: an operand of shape [2, 3] does not broadcast to [1, 3, 3]", LA},
    {"        tensor<fp32, [1, 3, 3]> y = scaled_dot_product_attention(key = c, query = c, value = c)[name = " S_("y") "];\n",
     "scaled_dot_product_attention(", "scaled_dot_product_attention: the result shape is [1, 3, 4] but the statement declares [1, 3, 3]", LA},
    {"        tensor<int32, [1, 3, 4]> y = scaled_dot_product_attention(key = c, query = c, value = c)[name = " S_("y") "];\n",
     "scaled_dot_product_attention(", "scaled_dot_product_attention: query, key, value and the result must be fp16 or fp32", LA},
    /* argmax, topk, pooling, quantize */
    {"        tensor<fp32, [2]> y = reduce_argmax(x = a)[name = " S_("y") "];\n", "reduce_argmax(",
     "reduce_argmax: returns int32, but the result is declared fp32", MI},
    {"        tensor<int32, [2]> y = reduce_argmin(output_dtype = " S_("uint16") ", x = a)[name = " S_("y") "];\n", "reduce_argmin(",
     "reduce_argmin: output_dtype 'uint16' is not supported (only int32)", MI},
    {"        tensor<int32, [2]> y = reduce_argmax(axis = int32(3), x = a)[name = " S_("y") "];\n", "reduce_argmax(",
     "reduce_argmax: axis 3 is out of range for rank 2", MI},
    {"        tensor<int32, [2, 1]> y = reduce_argmax(x = a)[name = " S_("y") "];\n", "reduce_argmax(",
     "reduce_argmax: the result shape is [2] but the statement declares [2, 1]", MI},
    {"        tensor<fp32, [2, 2]> y, tensor<int32, [2, 2]> i = topk(k = int32(4), x = a)[name = " S_("y") "];\n", "topk(",
     "topk: k 4 is out of range for dimension 1 of size 3", MI},
    {"        tensor<fp32, [2, 2]> y, tensor<int32, [2, 2]> i = topk(k = int32(2), return_indices = bool(false), x = a)[name = " S_("y") "];\n", "topk(",
     "topk: return_indices = false is not supported", MI},
    {"        tensor<fp32, [2, 2]> y = topk(k = int32(2), x = a)[name = " S_("y") "];\n", "topk(",
     "topk: must have two results (values and indices)", MI},
    {"        tensor<fp32, [2, 2]> y, tensor<int8, [2, 2]> i = topk(k = int32(2), output_indices_dtype = " S_("int8") ", x = a)[name = " S_("y") "];\n", "topk(",
     "topk: output_indices_dtype must be int32 or uint16, not 'int8'", MI},
    {"        tensor<fp32, [2, 2]> y, tensor<fp32, [2, 2]> i = topk(k = int32(2), x = a)[name = " S_("y") "];\n", "topk(",
     "topk: the indices are int32, but the result is declared fp32", MI},
    {"        tensor<fp32, [2, 3]> y, tensor<int32, [2, 3]> i = topk(k = int32(2), x = a)[name = " S_("y") "];\n", "topk(",
     "topk: the result shape is [2, 2] but the statement declares [2, 3]", MI},
    {"        tensor<fp32, [1, 1]> y = max_pool(kernel_sizes = tensor<int32, [2]>([2, 2]), pad_type = " S_("valid") ", x = a)[name = " S_("y") "];\n", "max_pool(",
     "max_pool: x must be an fp16 or fp32 tensor of rank 3, 4 or 5 (a 1-D, 2-D or 3-D pool)", MI},
    {"        tensor<fp32, [1, 1, 2, 2]> y = max_pool(kernel_sizes = tensor<int32, [1]>([2]), pad_type = " S_("valid") ", x = im)[name = " S_("y") "];\n", "max_pool(",
     "max_pool: kernel_sizes needs 2 entries", MI},
    {"        tensor<fp32, [1, 1, 3, 3]> y = max_pool(kernel_sizes = tensor<int32, [2]>([2, 2]), x = im)[name = " S_("y") "];\n", "max_pool(",
     "max_pool: missing argument 'pad_type'", MI},
    {"        tensor<fp32, [1, 1, 3, 3]> y = avg_pool(kernel_sizes = tensor<int32, [2]>([2, 2]), pad_type = " S_("wrap") ", x = im)[name = " S_("y") "];\n", "avg_pool(",
     "avg_pool: unknown pad_type 'wrap'", MI},
    {"        tensor<fp32, [1, 1, 3, 3]> y = max_pool(ceil_mode = bool(true), kernel_sizes = tensor<int32, [2]>([2, 2]), pad_type = " S_("same") ", x = im)[name = " S_("y") "];\n", "max_pool(",
     "max_pool: ceil_mode needs pad_type valid or custom", MI},
    {"        tensor<fp32, [1, 1, 3, 3]> y = max_pool(kernel_sizes = tensor<int32, [2]>([0, 2]), pad_type = " S_("valid") ", x = im)[name = " S_("y") "];\n", "max_pool(",
     "max_pool: kernel_sizes and strides must be positive", MI},
    {"        tensor<fp32, [1, 1, 1, 1]> y = max_pool(kernel_sizes = tensor<int32, [2]>([5, 2]), pad_type = " S_("valid") ", x = im)[name = " S_("y") "];\n", "max_pool(",
     "max_pool: the kernel is larger than the padded input", MI},
    {"        tensor<fp32, [1, 1, 2, 2]> y = max_pool(kernel_sizes = tensor<int32, [2]>([2, 2]), pad_type = " S_("valid") ", x = im)[name = " S_("y") "];\n", "max_pool(",
     "max_pool: the result shape is [1, 1, 3, 3] but the statement declares [1, 1, 2, 2]", MI},
    {"        tensor<int8, [2, 3]> q = quantize(input = a, scale = fp32(1))[name = " S_("q") "];\n"
     "        tensor<fp32, [2, 3]> y = dequantize(input = q, scale = fp32(1))[name = " S_("y") "];\n", "quantize(",
     "quantize: missing argument 'output_dtype'", MI},
    {"        tensor<int8, [2, 3]> q = quantize(input = a, output_dtype = " S_("int16") ", scale = fp32(1))[name = " S_("q") "];\n"
     "        tensor<fp32, [2, 3]> y = dequantize(input = q, scale = fp32(1))[name = " S_("y") "];\n", "quantize(",
     "quantize: output_dtype must be int8 or uint8, not 'int16'", MI},
    {"        tensor<int8, [2, 3]> q = quantize(input = a, output_dtype = " S_("int8") ", scale = tensor<fp32, [3]>([1, 1, 1]))[name = " S_("q") "];\n"
     "        tensor<fp32, [2, 3]> y = dequantize(input = q, scale = fp32(1))[name = " S_("y") "];\n", "quantize(",
     "quantize: scale must be a scalar when axis is not given", MI},
    {"        tensor<int8, [2, 3]> q = quantize(input = a, output_dtype = " S_("int8") ", scale = fp32(1), zero_point = uint8(0))[name = " S_("q") "];\n"
     "        tensor<fp32, [2, 3]> y = dequantize(input = q, scale = fp32(1))[name = " S_("y") "];\n", "quantize(",
     "quantize: zero_point is uint8 but the quantized type is int8", MI},
    {"        tensor<fp32, [2, 3]> y = quantize(input = a, output_dtype = " S_("int8") ", scale = fp32(1))[name = " S_("y") "];\n", "quantize(",
     "quantize: the result is declared fp32 but the op returns int8", MI},
    {"        tensor<fp32, [2, 3]> y = dequantize(input = a, scale = fp32(1))[name = " S_("y") "];\n", "dequantize(",
     "dequantize: input must be int8 or uint8, not fp32", MI},
    {"        tensor<int8, [2, 3]> q = quantize(input = a, output_dtype = " S_("int8") ", scale = int32(1))[name = " S_("q") "];\n"
     "        tensor<fp32, [2, 3]> y = dequantize(input = q, scale = fp32(1))[name = " S_("y") "];\n", "quantize(",
     "quantize: scale must be fp16 or fp32", MI},
    /* lstm */
    {"        tensor<fp32, [4, 1]> w = const()[name = " S_("w") ", val = tensor<fp32, [4, 1]>([1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(clip = fp32(1), initial_c = h0, initial_h = h0, weight_hh = w, weight_ih = w, x = s)[name = " S_("l") "];\n",
     "lstm(", "lstm: clip is not supported yet", MI},
    {"        tensor<fp32, [4, 1]> w = const()[name = " S_("w") ", val = tensor<fp32, [4, 1]>([1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y = lstm(initial_c = h0, initial_h = h0, weight_hh = w, weight_ih = w, x = s)[name = " S_("l") "];\n",
     "lstm(", "lstm: must have three results (the output, h and c)", MI},
    {"        tensor<fp32, [4, 1]> w = const()[name = " S_("w") ", val = tensor<fp32, [4, 1]>([1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(recurrent_activation = " S_("softsign") ", initial_c = h0, initial_h = h0, weight_hh = w, weight_ih = w, x = s)[name = " S_("l") "];\n",
     "lstm(", "lstm: recurrent_activation 'softsign' is not supported (sigmoid, tanh, relu or linear)", MI},
    {"        tensor<fp32, [4, 1]> w = const()[name = " S_("w") ", val = tensor<fp32, [4, 1]>([1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(bias = tensor<fp32, [2]>([0, 0]), initial_c = h0, initial_h = h0, weight_hh = w, weight_ih = w, x = s)[name = " S_("l") "];\n",
     "lstm(", "lstm: bias must have 4H = 4 elements and peephole 3H = 3", MI},
    {"        tensor<fp32, [4, 1]> w = const()[name = " S_("w") ", val = tensor<fp32, [4, 1]>([1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(initial_c = h0, initial_h = s, weight_hh = w, weight_ih = w, x = s)[name = " S_("l") "];\n",
     "lstm(", "lstm: initial_h and initial_c must be [1, 1]", MI},
    {"        tensor<fp32, [4, 1]> w = const()[name = " S_("w") ", val = tensor<fp32, [4, 1]>([1, 1, 1, 1])];\n"
     "        tensor<fp32, [1, 1, 1]> y, tensor<fp32, [1, 1]> h, tensor<fp32, [1, 1]> c = lstm(initial_c = h0, initial_h = h0, weight_hh = w, weight_ih = w, x = h0)[name = " S_("l") "];\n",
     "lstm(", "lstm: x must have rank 3 and the weights rank 2", MI},
    /* shape ops */
    {"        tensor<fp32, [2, 3]> y = transpose(perm = tensor<int32, [1]>([0]), x = a)[name = " S_("y") "];\n", "transpose(",
     "transpose: perm has 1 entries for rank 2", SH},
    {"        tensor<fp32, [2, 3]> y = transpose(perm = tensor<int32, [2]>([0, 0]), x = a)[name = " S_("y") "];\n", "transpose(",
     "transpose: perm is not a permutation", SH},
    {"        tensor<fp32, [2, 3]> y = transpose(perm = tensor<int32, [2]>([1, 0]), x = a)[name = " S_("y") "];\n", "transpose(",
     "transpose: the result shape is [3, 2] but the statement declares [2, 3]", SH},
    {"        tensor<fp32, [3, 2]> y = transpose(perm = ib, x = a)[name = " S_("y") "];\n", "transpose(",
     "transpose: argument 'perm' must be a constant", SH},
    {"        tensor<fp32, [1, 2]> y = slice_by_index(begin = tensor<int32, [2]>([0, 0]), x = a)[name = " S_("y") "];\n", "slice_by_index(",
     "slice_by_index: needs begin and end", SH},
    {"        tensor<fp32, [1, 2]> y = slice_by_index(begin = tensor<int32, [1]>([0]), end = tensor<int32, [1]>([1]), x = a)[name = " S_("y") "];\n", "slice_by_index(",
     "slice_by_index: begin, end, stride and masks need 2 entries each", SH},
    {"        tensor<fp32, [1, 2]> y = slice_by_index(begin = tensor<int32, [2]>([0, 0]), end = tensor<int32, [2]>([1, 2]), stride = tensor<int32, [2]>([1, 0]), x = a)[name = " S_("y") "];\n", "slice_by_index(",
     "slice_by_index: stride 0 in dimension 1", SH},
    {"        tensor<fp32, [2, 3]> y = slice_by_index(begin = tensor<int32, [2]>([0, 0]), end = tensor<int32, [2]>([1, 2]), x = a)[name = " S_("y") "];\n", "slice_by_index(",
     "slice_by_index: the result shape is [1, 2] but the statement declares [2, 3]", SH},
    {"        tensor<fp32, [1, 1]> y = slice_by_size(begin = tensor<int32, [2]>([0, 5]), size = tensor<int32, [2]>([1, 1]), x = a)[name = " S_("y") "];\n", "slice_by_size(",
     "slice_by_size: begin 5 is out of range for dimension 1 of size 3", SH},
    {"        tensor<fp32, [3, 1]> y = slice_by_size(begin = tensor<int32, [2]>([0, 0]), size = tensor<int32, [2]>([3, 1]), x = a)[name = " S_("y") "];\n", "slice_by_size(",
     "slice_by_size: size 3 from begin 0 does not fit dimension 0 of size 2", SH},
    {"        tensor<fp32, [2, 1]> y, tensor<fp32, [2, 2]> z = split(axis = int32(1), num_splits = int32(2), x = a)[name = " S_("y") "];\n", "split(",
     "split: cannot split dimension 1 evenly 2 ways", SH},
    {"        tensor<fp32, [2, 1]> y, tensor<fp32, [2, 2]> z = split(axis = int32(1), split_sizes = tensor<int32, [2]>([1, 1]), x = a)[name = " S_("y") "];\n", "split(",
     "split: the split sizes do not match the 2 results and dimension 1", SH},
    {"        tensor<fp32, [2, 1]> y, tensor<fp32, [2, 2]> z = split(split_sizes = tensor<int32, [2]>([1, 2]), x = a)[name = " S_("y") "];\n", "split(",
     "split: missing argument 'axis'", SH},
    {"        tensor<fp32, [2, 1]> y, tensor<fp32, [2, 1]> z = split(axis = int32(1), split_sizes = tensor<int32, [2]>([1, 2]), x = a)[name = " S_("y") "];\n", "split(",
     "split: the result shape is [2, 2] but the statement declares [2, 1]", SH},
    {"        tensor<fp32, [4, 3]> y = concat(axis = int32(0), values = (a, f))[name = " S_("y") "];\n", "concat(",
     "concat: value 1 does not match the shape of the first value", SH},
    {"        tensor<fp32, [4, 3]> y = concat(values = (a, a))[name = " S_("y") "];\n", "concat(",
     "concat: missing argument 'axis'", SH},
    {"        tensor<fp32, [4, 4]> y = concat(axis = int32(0), values = (a, a))[name = " S_("y") "];\n", "concat(",
     "concat: the result shape is [4, 3] but the statement declares [4, 4]", SH},
    {"        tensor<fp32, [2, 3]> y = gather(axis = int32(0), batch_dims = int32(1), indices = ib, x = a)[name = " S_("y") "];\n", "gather(",
     "gather: batch_dims other than 0 are not supported yet", SH},
    {"        tensor<fp32, [2, 3]> y = gather(axis = int32(1), indices = ib, x = a)[name = " S_("y") "];\n", "gather(",
     "gather: the result shape is [2, 2] but the statement declares [2, 3]", SH},
    {"        tensor<fp32, [2, 3]> y = gather_along_axis(axis = int32(0), indices = a, x = a)[name = " S_("y") "];\n", "gather_along_axis(",
     "gather_along_axis: indices must be integers", SH},
    {"        tensor<fp32, [1, 2, 3]> y = expand_dims(x = a)[name = " S_("y") "];\n", "expand_dims(",
     "expand_dims: missing argument 'axes'", SH},
    {"        tensor<fp32, [1, 1, 2, 3]> y = expand_dims(axes = tensor<int32, [2]>([0, 0]), x = a)[name = " S_("y") "];\n", "expand_dims(",
     "expand_dims: axis 0 is listed twice", SH},
    {"        tensor<fp32, [6]> y = squeeze(x = a)[name = " S_("y") "];\n", "squeeze(",
     "squeeze: the result shape is [2, 3] but the statement declares [6]", SH},
    {"        tensor<fp32, [2, 2, 3]> y = stack(axis = int32(0), values = (a, f))[name = " S_("y") "];\n", "stack(",
     "stack: value 1 does not have the shape of the first value", SH},
    {"        tensor<fp32, [2, 3]> y = tile(reps = tensor<int32, [1]>([2]), x = a)[name = " S_("y") "];\n", "tile(",
     "tile: reps has 1 entries for rank 2", SH},
    {"        tensor<fp32, [2, 3]> y = tile(reps = tensor<int32, [2]>([1, 0]), x = a)[name = " S_("y") "];\n", "tile(",
     "tile: reps entries must be positive (entry 1 is 0)", SH},
    {"        tensor<fp32, [2, 3]> y = tile(x = a)[name = " S_("y") "];\n", "tile(",
     "tile: missing argument 'reps'", SH},
    {"        tensor<fp32, [2, 3]> y = pad(pad = tensor<int32, [1]>([1]), x = a)[name = " S_("y") "];\n", "pad(",
     "pad: pad needs an even number of entries, at most 4", SH},
    {"        tensor<fp32, [2, 6]> y = pad(mode = " S_("reflect") ", pad = tensor<int32, [2]>([0, 3]), x = a)[name = " S_("y") "];\n", "pad(",
     "pad: reflect padding of dimension 1 needs pads below its size 3", SH},
    {"        tensor<fp32, [2, 3]> y = pad(mode = " S_("wrap") ", pad = tensor<int32, [2]>([0, 0]), x = a)[name = " S_("y") "];\n", "pad(",
     "pad: unknown mode 'wrap' (constant, reflect or replicate)", SH},
    {"        tensor<fp32, [2]> y = shape(x = a)[name = " S_("y") "];\n", "shape(",
     "shape: returns int32, but the result is declared fp32", SH},
    {"        tensor<fp32, [3]> y = range_1d(end = fp32(3), start = fp32(0), step = fp32(0))[name = " S_("y") "];\n", "range_1d(",
     "range_1d: start, end and step must be finite and step not 0", SH},
    {"        tensor<fp32, [3]> y = range_1d(end = fp32(3), start = fp32(0))[name = " S_("y") "];\n", "range_1d(",
     "range_1d: needs start, end and step", SH},
    {"        tensor<fp32, [4]> y = range_1d(end = fp32(3), start = fp32(0), step = fp32(1))[name = " S_("y") "];\n", "range_1d(",
     "range_1d: the result shape is [3] but the statement declares [4]", SH},
    {"        tensor<int32, [3]> y = reshape(shape = tensor<int32, [1]>([3]), x = a)[name = " S_("y") "];\n", "reshape(",
     "reshape: reshapes 6 elements into 3", SH},
};

/* Writes the case as model.mil in a fresh directory, prepares it and checks
 * that cpu_prepare failed with exactly the expected message at `at`. */
static void expect_rejected(const BindCase *k) {
  char dir[64];
  test_dir_make(dir, sizeof dir, "cpubind");
  StrBuf mil;
  sb_init(&mil);
  sb_printf(&mil, "%s    func main<ios18>(%s) {\n%s    } -> (y);\n}\n", MIL_HEAD, k->params ? k->params : FUNC_PARAMS,
            k->stmts);
  char path[128];
  snprintf(path, sizeof path, "%s/model.mil", dir);
  const char *err;
  cr_assert(write_file_atomic(path, mil.data, mil.len, &err), "%s", err);

  const char *p = strstr(mil.data, k->at);
  cr_assert_not_null(p, "'%s' is not in the program", k->at);
  uint32_t line = 1, col = 1;
  for (const char *s = mil.data; s < p; s++) {
    if (*s == '\n') line++, col = 1;
    else col++;
  }
  char want[512];
  snprintf(want, sizeof want, "%s:%u:%u: error: %s\n", path, line, col, k->msg);

  Capture cap;
  capture_init(&cap, NULL);
  /* The MIL reader checks argument names and kinds against the MIL op
   * table, so some of these are refused by orion_open already; the rest by
   * cpu_prepare. Either way, before anything runs, with the same message. */
  OrionProgram *prog = orion_open(dir, NULL, &cap.d);
  if (prog) {
    CpuProgram *c = cpu_prepare(prog, 0, CPU_NUMERICS_FP32, &cap.d);
    cr_assert_null(c, "prepared; wanted %s", want);
    cr_assert_not_null(strstr(cap.text.data, want), "got:\n%s\nwant:\n%s", cap.text.data, want);
  } else {
    /* The reader points at the argument, on the statement's line. */
    char line_prefix[160], msg[400];
    snprintf(line_prefix, sizeof line_prefix, "%s:%u:", path, line);
    snprintf(msg, sizeof msg, ": error: %s\n", k->msg);
    const char *at = strstr(cap.text.data, line_prefix), *m = strstr(cap.text.data, msg);
    cr_assert(at == cap.text.data && m && !memchr(at, '\n', (size_t)(m - at)), "got:\n%s\nwant on line %u:%s",
              cap.text.data, line, msg);
  }
  orion_close(prog);
  capture_free(&cap);
  sb_free(&mil);
  test_dir_remove(dir);
}

Test(cpu_bind, argument_errors_are_rejected_at_prepare) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_rejected(&cases[i]);
}

/* A required argument (the MIL op table's REQ) that the binder would have
 * done without is refused by the table's check, after the binder: transpose
 * of a scalar without perm (a perm of no entries would fit its rank). Also
 * for the CPU backend's own pseudo-op: a reshape planned as a view. */
Test(cpu_bind, required_arguments_are_the_tables) {
  BindCase perm = {"        tensor<fp32, []> y = transpose(x = e)[name = " S_("y") "];\n", "transpose(",
                   "transpose: missing argument 'perm'", NULL};
  expect_rejected(&perm);
  BindCase shape = {"        tensor<fp32, [2]> y = reshape(x = x)[name = " S_("y") "];\n", "reshape(",
                    "reshape: missing argument 'shape'", NULL};
  expect_rejected(&shape);
}

/* Every bound statement's problem is reported, not only the first. */
Test(cpu_bind, every_bound_statement_is_checked) {
  BindCase two = {"        tensor<fp32, [3]> a = relu(x = x)[name = " S_("a") "];\n"
                  "        tensor<fp32, [2]> y = softmax(axis = int32(4), x = x)[name = " S_("y") "];\n",
                  "relu(", "relu: the result shape is [2] but the statement declares [3]", NULL};
  expect_rejected(&two);
  two.at = "softmax(";
  two.msg = "softmax: axis 4 is out of range for rank 1";
  expect_rejected(&two);
}

/* An argument that may be computed when the program runs (tile's reps) is
 * not required to be a constant: the program prepares, and what the value
 * implies is checked when it runs. */
Test(cpu_bind, runtime_shape_arguments_are_checked_when_they_run) {
  char dir[64];
  test_dir_make(dir, sizeof dir, "cpubind");
  const char *mil = MIL_HEAD "    func main<ios18>(tensor<fp32, [2, 3]> a, tensor<int32, [2]> ib) {\n"
                    "        tensor<fp32, [2, 6]> y = tile(reps = ib, x = a)[name = " S_("y") "];\n"
                    "    } -> (y);\n}\n";
  char path[128];
  snprintf(path, sizeof path, "%s/model.mil", dir);
  const char *err;
  cr_assert(write_file_atomic(path, mil, strlen(mil), &err), "%s", err);
  Capture cap;
  capture_init(&cap, NULL);
  OrionProgram *prog = orion_open(dir, NULL, &cap.d);
  cr_assert_not_null(prog, "%s", cap.text.data);
  CpuProgram *c = cpu_prepare(prog, 0, CPU_NUMERICS_FP32, &cap.d);
  cr_assert_not_null(c, "%s", cap.text.data);
  float a[6] = {1, 2, 3, 4, 5, 6}, y[12];
  int32_t reps[2] = {1, 2};
  CpuTensor in[2] = {{.dtype = MIL_DT_FP32, .rank = 2, .dims = {2, 3}, .data = a},
                     {.dtype = MIL_DT_INT32, .rank = 1, .dims = {2}, .data = reps}};
  CpuTensor out = {.dtype = MIL_DT_FP32, .rank = 2, .dims = {2, 6}, .data = y};
  cr_assert(cpu_run_into(c, in, &out, &cap.d), "%s", cap.text.data);
  const float want[12] = {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6};
  cr_assert(memcmp(y, want, sizeof want) == 0);
  reps[1] = 3;
  cr_assert_not(cpu_run_into(c, in, &out, &cap.d));
  char msg[256];
  snprintf(msg, sizeof msg, "%s:5:34: error: tile: the result shape is [2, 9] but the statement declares [2, 6]\n", path);
  cr_assert_not_null(strstr(cap.text.data, msg), "got:\n%s\nwant:\n%s", cap.text.data, msg);
  cpu_free(c);
  orion_close(prog);
  capture_free(&cap);
  test_dir_remove(dir);
}
