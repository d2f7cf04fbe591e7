/*
 * A function's MIL with its weights as inputs (runtime/ane/ane_weight_inputs.c):
 * the exact MIL out for a small program (every fp16 BLOBFILE const an input of
 * its own, every reference renamed, the int consts kept), the weights it
 * reports, and each refusal by its words: a conv's weight, an fp32 weight, a
 * BLOBFILE inside a constexpr op, a taken input name.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "../helpers.h"
#include "ane_weight_inputs.h"

#define BLOB(off) "BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(" off "))"

static const char *const linear =
    "program(1.3)\n"
    "{\n"
    "    func main<ios18>(tensor<fp16, [1, 4]> x) {\n"
    "        tensor<fp16, [4, 8]> W = const()[name = string(\"W\"), val = tensor<fp16, [4, 8]>(" BLOB("64") ")];\n"
    "        bool tx = const()[name = string(\"tx\"), val = bool(false)];\n"
    "        tensor<fp16, [1, 8]> h = matmul(transpose_x = tx, transpose_y = tx, x = x, y = W)[name = string(\"h\")];\n"
    "        tensor<fp16, [8]> b = const()[name = string(\"b\"), val = tensor<fp16, [8]>(" BLOB("192") ")];\n"
    "        tensor<fp16, [1, 8]> y = add(x = h, y = b)[name = string(\"y\")];\n"
    "    } -> (y);\n"
    "}\n";

static Capture cap;

static void setup(void) { capture_init(&cap, "test"); }
static void teardown(void) { capture_free(&cap); }

static MilProgram *read_mil(const char *text) {
  MilProgram *p = mil_read_string("t.mil", text, strlen(text), &cap.d);
  cr_assert_not_null(p, "%s", captured(&cap));
  return p;
}

Test(weight_inputs, fp16_consts_become_inputs_and_their_references_are_renamed, .init = setup, .fini = teardown) {
  MilProgram *p = read_mil(linear);
  AneWeightInputs w;
  StrBuf mil;
  sb_init(&mil);
  char why[512] = "";
  cr_assert(ane_weight_inputs_mil(p, &p->funcs[0], linear, &w, &mil, why, sizeof why), "%s", why);
  cr_assert_str_eq(mil.data,
                   "program(1.3)\n"
                   "{\n"
                   "    func main<ios18>(tensor<fp16, [1, 4]> x, tensor<fp16, [4, 8]> orion_weight__W, "
                   "tensor<fp16, [8]> orion_weight__b) {\n"
                   "        bool tx = const()[name = string(\"tx\"), val = bool(false)];\n"
                   "        tensor<fp16, [1, 8]> h = matmul(transpose_x = tx, transpose_y = tx, x = x, y = "
                   "orion_weight__W)[name = string(\"h\")];\n"
                   "        tensor<fp16, [1, 8]> y = add(x = h, y = orion_weight__b)[name = string(\"y\")];\n"
                   "    } -> (y);\n"
                   "}\n");
  cr_assert_eq(w.n, 2);
  cr_assert_str_eq(w.w[0].name, "W");
  cr_assert_str_eq(w.w[0].input, "orion_weight__W");
  cr_assert_eq(w.w[0].stmt, 0);
  cr_assert_eq(w.w[0].bytes, 64);
  cr_assert_str_eq(w.w[1].name, "b");
  cr_assert_eq(w.w[1].stmt, 3);
  cr_assert_eq(w.w[1].bytes, 16);
  /* what comes out reads back as MIL */
  MilProgram *q = read_mil(mil.data);
  cr_assert_eq(q->funcs[0].nparams, 3);
  mil_program_free(q);
  ane_weight_inputs_free(&w);
  sb_free(&mil);
  mil_program_free(p);
}

Test(weight_inputs, a_function_without_weights_has_none, .init = setup, .fini = teardown) {
  static const char text[] = "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, 4]> x) {\n"
                             "        tensor<fp16, [1, 4]> y = relu(x = x)[name = string(\"y\")];\n"
                             "    } -> (y);\n}\n";
  MilProgram *p = read_mil(text);
  AneWeightInputs w;
  StrBuf mil;
  sb_init(&mil);
  char why[512] = "";
  cr_assert(ane_weight_inputs_mil(p, &p->funcs[0], text, &w, &mil, why, sizeof why), "%s", why);
  cr_assert_eq(w.n, 0);
  cr_assert_str_eq(mil.data, text);
  ane_weight_inputs_free(&w);
  sb_free(&mil);
  mil_program_free(p);
}

static void refused(const char *text, const char *want) {
  MilProgram *p = read_mil(text);
  AneWeightInputs w;
  StrBuf mil;
  sb_init(&mil);
  char why[512] = "";
  cr_assert_not(ane_weight_inputs_mil(p, &p->funcs[0], text, &w, &mil, why, sizeof why));
  cr_assert_str_eq(why, want);
  cr_assert_eq(mil.len, 0, "nothing appended");
  cr_assert_eq(w.n, 0);
  sb_free(&mil);
  mil_program_free(p);
}

Test(weight_inputs, a_convs_weight_is_refused, .init = setup, .fini = teardown) {
  refused("program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, 4, 1, 8]> x) {\n"
          "        tensor<fp16, [4, 4, 1, 1]> k = const()[name = string(\"k\"), val = tensor<fp16, [4, 4, 1, 1]>("
          BLOB("64") ")];\n"
          "        string pt = const()[name = string(\"pt\"), val = string(\"valid\")];\n"
          "        tensor<int32, [2]> st = const()[name = string(\"st\"), val = tensor<int32, [2]>([1, 1])];\n"
          "        tensor<int32, [4]> pd = const()[name = string(\"pd\"), val = tensor<int32, [4]>([0, 0, 0, 0])];\n"
          "        int32 g = const()[name = string(\"g\"), val = int32(1)];\n"
          "        tensor<fp16, [1, 4, 1, 8]> y = conv(dilations = st, groups = g, pad = pd, pad_type = pt, "
          "strides = st, weight = k, x = x)[name = string(\"y\")];\n"
          "    } -> (y);\n}\n",
          "function 'main' cannot take its weights as inputs: 'k' is (or makes) the weight of conv 'y', which the ANE "
          "does not reliably take from an input (peers.md §4.6: ignored on one device, a compiler crash at batch >= 2 "
          "on another; dynamic weights go through matmul)");
}

/* lower-linear's form: the conv's weight is a reshape of the const. */
Test(weight_inputs, a_weight_reshaped_into_a_conv_is_refused, .init = setup, .fini = teardown) {
  refused("program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, 4, 1, 8]> x) {\n"
          "        tensor<fp16, [4, 4]> W = const()[name = string(\"W\"), val = tensor<fp16, [4, 4]>(" BLOB("64") ")];\n"
          "        tensor<int32, [4]> sh = const()[name = string(\"sh\"), val = tensor<int32, [4]>([4, 4, 1, 1])];\n"
          "        tensor<fp16, [4, 4, 1, 1]> k = reshape(shape = sh, x = W)[name = string(\"k\")];\n"
          "        string pt = const()[name = string(\"pt\"), val = string(\"valid\")];\n"
          "        tensor<int32, [2]> st = const()[name = string(\"st\"), val = tensor<int32, [2]>([1, 1])];\n"
          "        tensor<int32, [4]> pd = const()[name = string(\"pd\"), val = tensor<int32, [4]>([0, 0, 0, 0])];\n"
          "        int32 g = const()[name = string(\"g\"), val = int32(1)];\n"
          "        tensor<fp16, [1, 4, 1, 8]> y = conv(dilations = st, groups = g, pad = pd, pad_type = pt, "
          "strides = st, weight = k, x = x)[name = string(\"y\")];\n"
          "    } -> (y);\n}\n",
          "function 'main' cannot take its weights as inputs: 'W' is (or makes) the weight of conv 'y', which the ANE "
          "does not reliably take from an input (peers.md §4.6: ignored on one device, a compiler crash at batch >= 2 "
          "on another; dynamic weights go through matmul)");
}

Test(weight_inputs, an_int8_weight_is_refused, .init = setup, .fini = teardown) {
  refused("program(1.3)\n{\n    func main<ios18>(tensor<int8, [8]> x) {\n"
          "        tensor<int8, [8]> b = const()[name = string(\"b\"), val = tensor<int8, [8]>(" BLOB("64") ")];\n"
          "        tensor<int8, [8]> y = add(x = x, y = b)[name = string(\"y\")];\n"
          "    } -> (y);\n}\n",
          "function 'main' cannot take its weights as inputs: 'b' is int8, and a weight input is an fp16 surface (of "
          "an fp16 or fp32 input)");
}

/* An fp32 weight stays an fp32 input (its surface is fp16, as for every fp32 input). */
Test(weight_inputs, an_fp32_weight_is_an_fp32_input, .init = setup, .fini = teardown) {
  static const char text[] = "program(1.3)\n{\n    func main<ios18>(tensor<fp32, [8]> x) {\n"
                             "        tensor<fp32, [8]> b = const()[name = string(\"b\"), val = tensor<fp32, [8]>("
                             BLOB("64") ")];\n"
                             "        tensor<fp32, [8]> y = add(x = x, y = b)[name = string(\"y\")];\n"
                             "    } -> (y);\n}\n";
  MilProgram *p = read_mil(text);
  AneWeightInputs w;
  StrBuf mil;
  sb_init(&mil);
  char why[512] = "";
  cr_assert(ane_weight_inputs_mil(p, &p->funcs[0], text, &w, &mil, why, sizeof why), "%s", why);
  cr_assert_str_eq(mil.data, "program(1.3)\n{\n    func main<ios18>(tensor<fp32, [8]> x, tensor<fp32, [8]> "
                             "orion_weight__b) {\n"
                             "        tensor<fp32, [8]> y = add(x = x, y = orion_weight__b)[name = string(\"y\")];\n"
                             "    } -> (y);\n}\n");
  cr_assert_eq(w.n, 1);
  cr_assert_eq(w.w[0].bytes, 16, "fp16 on its surface");
  ane_weight_inputs_free(&w);
  sb_free(&mil);
  mil_program_free(p);
}

Test(weight_inputs, a_taken_input_name_is_refused, .init = setup, .fini = teardown) {
  refused("program(1.3)\n{\n    func main<ios18>(tensor<fp16, [8]> orion_weight__b) {\n"
          "        tensor<fp16, [8]> b = const()[name = string(\"b\"), val = tensor<fp16, [8]>(" BLOB("64") ")];\n"
          "        tensor<fp16, [8]> y = add(x = orion_weight__b, y = b)[name = string(\"y\")];\n"
          "    } -> (y);\n}\n",
          "function 'main' cannot take its weights as inputs: the input name 'orion_weight__b' for weight 'b' is "
          "taken");
}

/* With convs_as_matmul (the backend's option): a 1x1 conv whose weight is a
 * reshape of a weight (lower-linear's form) is written as reshapes around a
 * matmul with named transpose flags (ANE012), a bias as an add; the weight
 * becomes an input. Other convs are refused as without the option. */
static void as_matmul(const char *text, const char *want) {
  MilProgram *p = read_mil(text);
  AneWeightInputs w;
  StrBuf mil;
  sb_init(&mil);
  char why[512] = "";
  const AneWeightInputsOptions opt = {.convs_as_matmul = true};
  bool ok = ane_weight_inputs_mil_with(&opt, p, &p->funcs[0], text, &w, &mil, why, sizeof why);
  if (want[0] == 'f') { /* a refusal's words */
    cr_assert_not(ok);
    cr_assert_str_eq(why, want);
  } else {
    cr_assert(ok, "%s", why);
    cr_assert_str_eq(mil.data, want);
    MilProgram *again = read_mil(mil.data); /* what it wrote reads back */
    mil_program_free(again);
  }
  ane_weight_inputs_free(&w);
  sb_free(&mil);
  mil_program_free(p);
}

#define CONV_HEAD(x, strides)                                                                                     \
  "program(1.3)\n{\n    func main<ios18>(tensor<fp16, " x "> x) {\n"                                                \
  "        tensor<fp16, [4, 2]> W = const()[name = string(\"W\"), val = tensor<fp16, [4, 2]>(" BLOB("64") ")];\n"   \
  "        tensor<int32, [4]> sh = const()[name = string(\"sh\"), val = tensor<int32, [4]>([4, 2, 1, 1])];\n"        \
  "        tensor<fp16, [4, 2, 1, 1]> k = reshape(shape = sh, x = W)[name = string(\"k\")];\n"                       \
  "        string pt = const()[name = string(\"pt\"), val = string(\"valid\")];\n"                                  \
  "        tensor<int32, [2]> st = const()[name = string(\"st\"), val = tensor<int32, [2]>(" strides ")];\n"         \
  "        tensor<int32, [2]> dl = const()[name = string(\"dl\"), val = tensor<int32, [2]>([1, 1])];\n"              \
  "        tensor<int32, [4]> pd = const()[name = string(\"pd\"), val = tensor<int32, [4]>([0, 0, 0, 0])];\n"        \
  "        int32 g = const()[name = string(\"g\"), val = int32(1)];\n"

#define KEPT                                                                                                       \
  "        tensor<int32, [4]> sh = const()[name = string(\"sh\"), val = tensor<int32, [4]>([4, 2, 1, 1])];\n"        \
  "        tensor<fp16, [4, 2, 1, 1]> k = reshape(shape = sh, x = orion_weight__W)[name = string(\"k\")];\n"         \
  "        string pt = const()[name = string(\"pt\"), val = string(\"valid\")];\n"                                  \
  "        tensor<int32, [2]> st = const()[name = string(\"st\"), val = tensor<int32, [2]>([1, 1])];\n"              \
  "        tensor<int32, [2]> dl = const()[name = string(\"dl\"), val = tensor<int32, [2]>([1, 1])];\n"              \
  "        tensor<int32, [4]> pd = const()[name = string(\"pd\"), val = tensor<int32, [4]>([0, 0, 0, 0])];\n"        \
  "        int32 g = const()[name = string(\"g\"), val = int32(1)];\n"

#define MATMUL                                                                                                     \
  "        tensor<int32, [3]> y__orion_mm_w_shape = const()[name = string(\"y__orion_mm_w_shape\"), val = "          \
  "tensor<int32, [3]>([1, 4, 2])];\n"                                                                             \
  "        tensor<fp16, [1, 4, 2]> y__orion_mm_w = reshape(shape = y__orion_mm_w_shape, x = k)[name = "            \
  "string(\"y__orion_mm_w\")];\n"                                                                                \
  "        tensor<int32, [3]> y__orion_mm_x_shape = const()[name = string(\"y__orion_mm_x_shape\"), val = "          \
  "tensor<int32, [3]>([1, 2, 8])];\n"                                                                             \
  "        tensor<fp16, [1, 2, 8]> y__orion_mm_x = reshape(shape = y__orion_mm_x_shape, x = x)[name = "            \
  "string(\"y__orion_mm_x\")];\n"                                                                                \
  "        bool y__orion_mm_f = const()[name = string(\"y__orion_mm_f\"), val = bool(false)];\n"                    \
  "        tensor<fp16, [1, 4, 8]> y__orion_mm = matmul(transpose_x = y__orion_mm_f, transpose_y = y__orion_mm_f, "  \
  "x = y__orion_mm_w, y = y__orion_mm_x)[name = string(\"y__orion_mm\")];\n"

Test(weight_inputs, a_1x1_convs_weight_is_an_input_through_a_matmul, .init = setup, .fini = teardown) {
  as_matmul(CONV_HEAD("[1, 2, 1, 8]", "[1, 1]")
            "        tensor<fp16, [1, 4, 1, 8]> y = conv(dilations = dl, groups = g, pad = pd, pad_type = pt, "
            "strides = st, weight = k, x = x)[name = string(\"y\")];\n"
            "    } -> (y);\n}\n",
            "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, 2, 1, 8]> x, "
            "tensor<fp16, [4, 2]> orion_weight__W) {\n"
            KEPT MATMUL
            "        tensor<int32, [4]> y__orion_mm_y_shape = const()[name = string(\"y__orion_mm_y_shape\"), val = "
            "tensor<int32, [4]>([1, 4, 1, 8])];\n"
            "        tensor<fp16, [1, 4, 1, 8]> y = reshape(shape = y__orion_mm_y_shape, x = y__orion_mm)[name = "
            "string(\"y\")];\n"
            "    } -> (y);\n}\n");
}

Test(weight_inputs, a_1x1_convs_bias_becomes_an_add, .init = setup, .fini = teardown) {
  as_matmul(CONV_HEAD("[1, 2, 1, 8]", "[1, 1]")
            "        tensor<fp16, [4]> b = const()[name = string(\"b\"), val = tensor<fp16, [4]>(" BLOB("192") ")];\n"
            "        tensor<fp16, [1, 4, 1, 8]> y = conv(bias = b, dilations = dl, groups = g, pad = pd, "
            "pad_type = pt, "
            "strides = st, weight = k, x = x)[name = string(\"y\")];\n"
            "    } -> (y);\n}\n",
            "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, 2, 1, 8]> x, tensor<fp16, [4, 2]> orion_weight__W, "
            "tensor<fp16, [4]> orion_weight__b) {\n"
            KEPT MATMUL
            "        tensor<int32, [4]> y__orion_mm_nobias_shape = const()[name = "
            "string(\"y__orion_mm_nobias_shape\"), "
            "val = tensor<int32, [4]>([1, 4, 1, 8])];\n"
            "        tensor<fp16, [1, 4, 1, 8]> y__orion_mm_nobias = reshape(shape = y__orion_mm_nobias_shape, x = "
            "y__orion_mm)[name = string(\"y__orion_mm_nobias\")];\n"
            "        tensor<int32, [4]> y__orion_mm_b_shape = const()[name = string(\"y__orion_mm_b_shape\"), val = "
            "tensor<int32, [4]>([1, 4, 1, 1])];\n"
            "        tensor<fp16, [1, 4, 1, 1]> y__orion_mm_b = reshape(shape = y__orion_mm_b_shape, x = "
            "orion_weight__b)[name = string(\"y__orion_mm_b\")];\n"
            "        tensor<fp16, [1, 4, 1, 8]> y = add(x = y__orion_mm_nobias, y = y__orion_mm_b)[name = "
            "string(\"y\")];\n"
            "    } -> (y);\n}\n");
}

Test(weight_inputs, a_strided_conv_keeps_the_refusal, .init = setup, .fini = teardown) {
  as_matmul(CONV_HEAD("[1, 2, 1, 8]", "[1, 2]")
            "        tensor<fp16, [1, 4, 1, 4]> y = conv(dilations = dl, groups = g, pad = pd, pad_type = pt, "
            "strides = st, weight = k, x = x)[name = string(\"y\")];\n"
            "    } -> (y);\n}\n",
            "function 'main' cannot take its weights as inputs: 'W' is (or makes) the weight of conv 'y', which the ANE "
            "does not reliably take from an input (peers.md §4.6: ignored on one device, a compiler crash at batch >= 2 "
            "on another; dynamic weights go through matmul)");
}
