/*
 * Shape and dtype inference of every op: results computed by hand from the
 * MIL semantics, and the exact error text for each kind of misuse.
 */
#include <criterion/criterion.h>

#include "helpers.h"

#define EXPECT(inputs, body, want) cr_assert_str_eq(infer_of(inputs, body), want)

Test(infer, conv_1x1_and_general) {
  EXPECT("x: fp16[1,768,1,64]", "param w: fp16[256,768,1,1] = zeros;\n y = conv(x, w);\n return y;",
         "fp16[1,256,1,64]");
  /* (10 + 2 - 3)/2 + 1 = 5 and (12 + 0 - 3)/1 + 1 = 10 */
  EXPECT("x: fp32[2,4,10,12]",
         "param w: fp32[8,4,3,3] = zeros;\n y = conv(x, w, strides=[2,1], pad=[1,1,0,0]);\n return y;",
         "fp32[2,8,5,10]");
  /* same: ceil(10/3) = 4 */
  EXPECT("x: fp16[1,2,10]", "param w: fp16[4,2,3] = zeros;\n y = conv(x, w, strides=[3], pad_type=\"same\");\n return y;",
         "fp16[1,4,4]");
  /* dilation 2 makes a 3-tap kernel span 5: 10 - 5 + 1 = 6 */
  EXPECT("x: fp16[1,2,10]", "param w: fp16[4,2,3] = zeros;\n y = conv(x, w, dilations=[2]);\n return y;",
         "fp16[1,4,6]");
  /* depthwise: groups = channels */
  EXPECT("x: fp16[1,6,1,8]", "param w: fp16[6,1,1,3] = zeros;\n param b: fp16[6] = zeros;\n y = conv(x, w, b, groups=6);\n return y;",
         "fp16[1,6,1,6]");
}

Test(infer, conv_errors) {
  EXPECT("x: fp16[1,8,1,4]", "param w: fp16[4,6,1,1] = zeros;\n y = conv(x, w);\n return y;",
         "shape mismatch in 'conv': input [1,8,1,4] has 8 channels but the weight [4,6,1,1] expects 6 (with 1 groups)");
  EXPECT("x: fp16[1,8,1,4]", "param w: fp16[4,8,1,1] = zeros;\n y = conv(x, w, groups=3);\n return y;",
         "'conv' with 3 groups needs input channels (8) and output channels (4) divisible by it");
  EXPECT("x: fp16[1,8,1,4]", "param w: fp16[4,8,1,9] = zeros;\n y = conv(x, w);\n return y;",
         "'conv' kernel [4,8,1,9] (dilated to 9) is larger than the padded input dimension 3 (4)");
  EXPECT("x: fp16[1,8,1,4]", "param w: fp16[4,8,1,1] = zeros;\n y = conv(x, w, pad_type=\"full\");\n return y;",
         "unknown pad_type 'full' of 'conv' (expected valid, same, same_lower or custom)");
  EXPECT("x: fp16[8,4]", "param w: fp16[4,8] = zeros;\n y = conv(x, w);\n return y;",
         "the input of 'conv' must be [N, C, spatial...] with 1 to 3 spatial dimensions, not [8,4]");
}

Test(infer, linear) {
  EXPECT("x: fp16[2,5,16]", "param w: fp16[32,16] = zeros;\n param b: fp16[32] = zeros;\n y = linear(x, w, b);\n return y;",
         "fp16[2,5,32]");
  EXPECT("x: fp16[16]", "param w: fp16[3,16] = zeros;\n y = linear(x, w);\n return y;", "fp16[3]");
  EXPECT("x: fp16[2,16]", "param w: fp16[32,15] = zeros;\n y = linear(x, w);\n return y;",
         "shape mismatch in 'linear': input [2,16] has 16 features but the weight [32,15] expects 15");
  EXPECT("x: fp16[2,16]", "param w: fp16[32,16] = zeros;\n param b: fp16[16] = zeros;\n y = linear(x, w, b);\n return y;",
         "shape mismatch in 'linear': the bias must be [32], not [16]");
}

Test(infer, matmul) {
  EXPECT("a: fp16[2,3], b: fp16[3,4]", "y = matmul(a, b);\n return y;", "fp16[2,4]");
  EXPECT("a: fp16[3,2], b: fp16[4,3]", "y = matmul(a, b, transpose_x=true, transpose_y=true);\n return y;", "fp16[2,4]");
  /* batch dims broadcast: [5,1] with [1,7] -> [5,7] */
  EXPECT("a: fp32[5,1,2,3], b: fp32[1,7,3,4]", "y = matmul(a, b);\n return y;", "fp32[5,7,2,4]");
  /* rank-1 operands lose the inserted dims */
  EXPECT("a: fp32[3], b: fp32[3,4]", "y = matmul(a, b);\n return y;", "fp32[4]");
  EXPECT("a: fp32[2,3], b: fp32[3]", "y = matmul(a, b);\n return y;", "fp32[2]");
  EXPECT("a: fp16[2,3], b: fp16[4,3]", "y = matmul(a, b);\n return y;",
         "shape mismatch in 'matmul': [2,3] times [4,3] needs equal inner sizes (3 vs 4)");
  EXPECT("a: fp16[3], b: fp16[3,4]", "y = matmul(a, b, transpose_x=true);\n return y;",
         "'matmul' cannot transpose a rank-1 operand");
}

Test(infer, binary_broadcasting) {
  EXPECT("a: fp16[4,1,3], b: fp16[5,1]", "y = add(a, b);\n return y;", "fp16[4,5,3]");
  EXPECT("a: fp32[2,3], b: fp32[]", "y = sub(a, b);\n return y;", "fp32[2,3]");
  EXPECT("a: int32[2,3], b: int32[3]", "y = mul(a, b);\n return y;", "int32[2,3]");
  EXPECT("a: fp16[2,3], b: fp16[2,3]", "y = div(a, b);\n return y;", "fp16[2,3]");
  EXPECT("a: fp16[2,3], b: fp16[1]", "y = pow(a, b);\n return y;", "fp16[2,3]");
  EXPECT("a: fp16[2,3], b: fp16[2,1]", "y = maximum(a, b);\n return y;", "fp16[2,3]");
  EXPECT("a: fp16[2,3], b: fp16[2,1]", "y = minimum(a, b);\n return y;", "fp16[2,3]");
  EXPECT("a: fp16[2,3], b: fp16[4,3]", "y = add(a, b);\n return y;",
         "shape mismatch in 'add': [2,3] and [4,3] cannot be broadcast together");
  EXPECT("a: fp16[2,3], b: fp32[2,3]", "y = add(a, b);\n return y;",
         "dtype mismatch in 'add': operand 1 is fp16 but operand 2 is fp32 (insert a cast)");
  EXPECT("a: int32[2], b: int32[2]", "y = div(a, b);\n return y;",
         "operand 1 of 'div' has dtype int32; 'div' takes fp16 or fp32");
  EXPECT("a: bool[2], b: bool[2]", "y = add(a, b);\n return y;",
         "operand 1 of 'add' has dtype bool; 'add' takes fp16, fp32 or int32");
}

Test(infer, unary) {
  static const char *const ops[] = {"relu", "tanh", "sigmoid", "silu", "gelu", "exp", "log", "sqrt", "rsqrt",
                                    "neg", "abs", "identity"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    char body[128];
    snprintf(body, sizeof body, "y = %s(x);\n return y;", ops[i]);
    EXPECT("x: fp16[3,1,7]", body, "fp16[3,1,7]");
  }
  EXPECT("x: int32[4]", "y = abs(x);\n return y;", "int32[4]");
  EXPECT("x: int32[4]", "y = exp(x);\n return y;", "operand 1 of 'exp' has dtype int32; 'exp' takes fp16 or fp32");
  EXPECT("x: fp16[4]", "y = gelu(x, mode=\"tanh\");\n return y;", "fp16[4]");
  EXPECT("x: fp16[4]", "y = gelu(x, mode=\"fast\");\n return y;",
         "unknown gelu mode 'fast' (expected \"exact\" or \"tanh\")");
  EXPECT("x: fp16[4]", "y = rsqrt(x, epsilon=-1);\n return y;", "'epsilon' of 'rsqrt' must be finite and not negative");
  EXPECT("x: fp16[4]", "y = clip(x, min=-1, max=inf);\n return y;", "fp16[4]");
  EXPECT("x: fp16[4]", "y = clip(x, min=1, max=1);\n return y;", "'clip' needs min < max (got 1 and 1)");
}

Test(infer, softmax_and_reductions) {
  EXPECT("x: fp16[2,3,4]", "y = softmax(x, axis=-2);\n return y;", "fp16[2,3,4]");
  EXPECT("x: fp16[2,3,4]", "y = softmax(x, axis=3);\n return y;",
         "'axis' of 'softmax' is 3, out of range for rank 3 (valid: -3 to 2)");
  EXPECT("x: fp16[2,3,4]", "y = reduce_sum(x, axes=[1]);\n return y;", "fp16[2,4]");
  EXPECT("x: fp16[2,3,4]", "y = reduce_mean(x, axes=[0,-1], keep_dims=true);\n return y;", "fp16[1,3,1]");
  EXPECT("x: fp16[2,3,4]", "y = reduce_max(x);\n return y;", "fp16[]");
  EXPECT("x: fp16[2,3,4]", "y = reduce_sum(x, axes=[1,-2]);\n return y;", "axis 1 appears twice in 'axes' of 'reduce_sum'");
}

Test(infer, reshape_transpose_slice) {
  EXPECT("x: fp16[2,3,4]", "y = reshape(x, shape=[6,-1]);\n return y;", "fp16[6,4]");
  EXPECT("x: fp16[2,3,4]", "y = reshape(x, shape=[0,12]);\n return y;", "fp16[2,12]");
  EXPECT("x: fp16[2,3,4]", "y = reshape(x, shape=[5,5]);\n return y;",
         "cannot reshape [2,3,4] (24 elements) to [5,5] (25 elements)");
  EXPECT("x: fp16[2,3,4]", "y = reshape(x, shape=[-1,-1]);\n return y;", "'shape' of 'reshape' has more than one -1");
  EXPECT("x: fp16[2,3,4]", "y = reshape(x, shape=[1,1,1,1,1,24]);\n return y;", "'reshape' to rank 6 exceeds the limit of 5");
  EXPECT("x: fp16[2,3,4]", "y = transpose(x, perm=[2,0,1]);\n return y;", "fp16[4,2,3]");
  EXPECT("x: fp16[2,3,4]", "y = transpose(x, perm=[0,0,1]);\n return y;",
         "'perm' of 'transpose' is not a permutation: axis 0 appears twice");
  /* Python semantics: [1:3], [-2:100] clamps to [2:4], [0:4:3] takes 0 and 3 */
  EXPECT("x: fp16[4,4,4]", "y = slice(x, begin=[1,-2,0], end=[3,100,4], stride=[1,1,3]);\n return y;", "fp16[2,2,2]");
  EXPECT("x: fp16[4]", "y = slice(x, begin=[3], end=[1]);\n return y;", "'slice' of dimension 0 (size 4) from 3 to 1 is empty");
}

Test(infer, split_concat) {
  Parsed p;
  parsed_open(&p, "func main(x: fp16[1,12,5]) {\n a, b, c = split(x, axis=1, split_sizes=[2,4,6]);\n"
                  " y = concat(c, a, b, axis=-2);\n return a, b, c, y;\n}\n");
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert_str_eq(parsed_output_type(&p, 0), "fp16[1,2,5]");
  cr_assert_str_eq(parsed_output_type(&p, 1), "fp16[1,4,5]");
  cr_assert_str_eq(parsed_output_type(&p, 2), "fp16[1,6,5]");
  cr_assert_str_eq(parsed_output_type(&p, 3), "fp16[1,12,5]");
  parsed_close(&p);
  EXPECT("x: fp16[1,12]", "a, b = split(x, axis=1, num_splits=3);\n return a, b;", "'split' makes 3 results but 2 names are given");
  EXPECT("x: fp16[1,10]", "a, b, c = split(x, axis=1, num_splits=3);\n return a, b, c;",
         "'split' cannot divide dimension 1 of size 10 into 3 equal parts");
  EXPECT("x: fp16[1,10]", "a, b = split(x, axis=1);\n return a, b;", "'split' needs exactly one of 'num_splits' and 'split_sizes'");
  EXPECT("x: fp16[1,10], z: fp16[2,3]", "y = concat(x, z, axis=1);\n return y;",
         "shape mismatch in 'concat' along axis 1: operand 1 is [1,10] but operand 2 is [2,3]");
}

Test(infer, cast_norms_select_gather) {
  EXPECT("x: fp32[2,3]", "y = cast(x, dtype=\"fp16\");\n return y;", "fp16[2,3]");
  EXPECT("x: fp32[2,3]", "y = cast(x, dtype=\"fp8\");\n return y;", "'cast' to unknown dtype 'fp8'");
  EXPECT("x: fp16[1,64,768]",
         "param g: fp16[768] = ones;\n param b: fp16[768] = zeros;\n y = layer_norm(x, g, b);\n return y;",
         "fp16[1,64,768]");
  EXPECT("x: fp16[1,768,1,64]", "param g: fp16[768] = ones;\n y = rms_norm(x, g, axes=[1], epsilon=1e-6);\n return y;",
         "fp16[1,768,1,64]");
  EXPECT("x: fp16[1,768,1,64]", "param g: fp16[64] = ones;\n y = rms_norm(x, g, axes=[1]);\n return y;",
         "shape mismatch in 'rms_norm': gamma must have the normalized shape [768], not [64]");
  EXPECT("c: bool[1,1,4,4], a: fp16[], b: fp16[2,3,4,4]", "y = select(c, a, b);\n return y;", "fp16[2,3,4,4]");
  EXPECT("c: fp16[4], a: fp16[4], b: fp16[4]", "y = select(c, a, b);\n return y;", "the condition of 'select' must be bool, not fp16");
  EXPECT("ids: int32[1,7]", "param e: fp16[100,16] = zeros;\n y = gather(e, ids);\n return y;", "fp16[1,7,16]");
  EXPECT("ids: int32[3]", "param e: fp16[4,100,16] = zeros;\n y = gather(e, ids, axis=1);\n return y;", "fp16[4,3,16]");
  EXPECT("ids: fp16[3]", "param e: fp16[100,16] = zeros;\n y = gather(e, ids);\n return y;",
         "the indices of 'gather' must be int32, not fp16");
}

Test(infer, sdpa) {
  EXPECT("q: fp16[1,12,64,64], k: fp16[1,12,80,64], v: fp16[1,12,80,32]", "y = sdpa(q, k, v);\n return y;",
         "fp16[1,12,64,32]");
  EXPECT("q: fp16[1,2,8,4], k: fp16[1,2,8,4], v: fp16[1,2,8,4], m: bool[8,8]",
         "y = sdpa(q, k, v, m, causal=true, scale=0.5);\n return y;", "fp16[1,2,8,4]");
  EXPECT("q: fp16[1,2,8,4], k: fp16[1,2,8,4], v: fp16[1,2,8,4], m: fp16[8,7]", "y = sdpa(q, k, v, m);\n return y;",
         "shape mismatch in 'sdpa': the mask [8,7] does not broadcast to the scores [1,2,8,8]");
  EXPECT("q: fp16[1,2,8,4], k: fp16[1,2,8,5], v: fp16[1,2,8,4]", "y = sdpa(q, k, v);\n return y;",
         "shape mismatch in 'sdpa': query [1,2,8,4] and key [1,2,8,5] need the same last dimension");
  EXPECT("q: fp16[1,2,9,4], k: fp16[1,2,8,4], v: fp16[1,2,8,4]", "y = sdpa(q, k, v, causal=true);\n return y;",
         "causal 'sdpa' needs the query length (9) not above the key length (8)");
}

Test(infer, declared_type_checked) {
  EXPECT("x: fp16[2,3]", "y: fp16[2,3] = relu(x);\n return y;", "fp16[2,3]");
  EXPECT("x: fp16[2,3]", "y: fp16[3,2] = relu(x);\n return y;",
         "type mismatch for 'y': declared fp16[3,2] but 'relu' produces fp16[2,3]");
  EXPECT("x: fp16[2,3]", "y: fp32[2,3] = relu(x);\n return y;",
         "type mismatch for 'y': declared fp32[2,3] but 'relu' produces fp16[2,3]");
}

Test(infer, element_limit_on_results) {
  EXPECT("a: fp16[65536,1], b: fp16[1,65536]", "y = matmul(a, b);\n return y;",
         "result of 'matmul' has too many elements (limit is 2147483648)");
}

Test(infer, cross_entropy) {
  EXPECT("x: fp16[4,7], t: int32[4]", "y = cross_entropy(x, t);\n return y;", "fp32[]");
  EXPECT("x: fp32[2,3,11], t: int32[2,3]", "y = cross_entropy(x, t, ignore_index=-100);\n return y;", "fp32[]");
  EXPECT("x: fp32[5], t: int32[]", "y = cross_entropy(x, t);\n return y;", "fp32[]");
  EXPECT("x: fp32[4,1], t: int32[4]", "y = cross_entropy(x, t);\n return y;", "fp32[]");
}

Test(infer, cross_entropy_errors) {
  EXPECT("x: int32[4,7], t: int32[4]", "y = cross_entropy(x, t);\n return y;",
         "operand 1 of 'cross_entropy' has dtype int32; 'cross_entropy' takes fp16 or fp32");
  EXPECT("x: fp32[], t: int32[]", "y = cross_entropy(x, t);\n return y;",
         "the logits of 'cross_entropy' must have rank 1 or more (the class axis is last)");
  EXPECT("x: fp32[4,7], t: fp32[4]", "y = cross_entropy(x, t);\n return y;",
         "the targets of 'cross_entropy' must be int32 class indices, not fp32");
  EXPECT("x: fp32[4,7], t: int32[4,7]", "y = cross_entropy(x, t);\n return y;",
         "shape mismatch in 'cross_entropy': targets [4,7] must have the logits' shape without the class axis, [4] "
         "(logits [4,7])");
  EXPECT("x: fp32[2,3,7], t: int32[3,2]", "y = cross_entropy(x, t);\n return y;",
         "shape mismatch in 'cross_entropy': targets [3,2] must have the logits' shape without the class axis, [2,3] "
         "(logits [2,3,7])");
  EXPECT("x: fp32[4,7], t: int32[4]", "y = cross_entropy(x, t, ignore_index=2147483648);\n return y;",
         "'ignore_index' of 'cross_entropy' is 2147483648, outside the int32 range of the targets");
}
