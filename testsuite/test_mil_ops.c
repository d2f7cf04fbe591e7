/*
 * The MIL op table (include/orion/mil_ops.def) is consistent in itself, and
 * covers what uses it: every op the CPU backend runs (its rows name the
 * table's ids, so the rest is a compile error), the arguments its shared
 * binders read and its families, and every op the emitter writes (the
 * golden MIL outputs, read strictly, so their arguments are checked against
 * the table too); and the reader's checks of arguments by the table, strict
 * and tolerant.
 *
 * Needs ORION_SOURCE_ROOT (meson sets it).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "orion/mil_ops.h"

static const char *source_root(void) {
  const char *r = getenv("ORION_SOURCE_ROOT");
  cr_assert(r && *r, "ORION_SOURCE_ROOT is not set (meson test sets it)");
  return r;
}

Test(table, consistent) {
  uint32_t total = 0;
  for (uint32_t i = 0; i < MIL_OP_COUNT; i++) {
    const MilOpInfo *op = mil_op_info((MilOpId)i);
    cr_assert_eq(op->id, (MilOpId)i);
    cr_assert(op->name && *op->name);
    cr_assert_eq(mil_op_find(op->name), op, "'%s' is in the table twice", op->name);
    cr_assert_lt(op->family, MIL_FAM_COUNT, "%s", op->name);
    cr_assert_str_neq(mil_op_family_name(op->family), "?", "%s", op->name);
    cr_assert(op->since_ios >= 15 && op->since_ios <= 18, "%s: since ios%u", op->name, op->since_ios);
    cr_assert(op->until_ios == 0 || op->until_ios >= op->since_ios, "%s", op->name);
    cr_assert(op->min_results >= 1 && (op->max_results == -1 || op->max_results >= op->min_results), "%s", op->name);
    cr_assert_eq(op->first_arg, (MilArgId)total, "%s: its arguments do not follow the previous op's", op->name);
    for (uint32_t k = 0; k < op->nargs; k++) {
      const MilArgSpec *a = mil_arg_info(op->first_arg + k);
      cr_assert_eq(a->op, op->id, "argument %s follows %s but names another op", a->name, op->name);
      cr_assert(a->name && *a->name);
      cr_assert_eq(mil_op_find_arg(op, a->name), a, "%s has two arguments '%s'", op->name, a->name);
      cr_assert_neq(a->dtypes, 0u, "%s.%s takes no dtype", op->name, a->name);
      cr_assert_eq(a->kind == MIL_KIND_STRING, a->dtypes == MIL_DTS_STRING, "%s.%s: a string kind takes strings only",
                   op->name, a->name);
      cr_assert_str_neq(mil_arg_kind_name(a->kind), "?");
    }
    total += op->nargs;
  }
  cr_assert_eq(total, (uint32_t)MIL_ARG_COUNT);
  cr_assert_null(mil_op_find("frobnicate"));
  cr_assert_null(mil_op_info(MIL_OP_COUNT));
  cr_assert_str_eq(mil_arg_name(MIL_ARG_CONV_weight), "weight");
  cr_assert_str_eq(mil_op_name(MIL_OP_SCALED_DOT_PRODUCT_ATTENTION), "scaled_dot_product_attention");
  cr_assert(mil_op_in_opset(mil_op_info(MIL_OP_SCALED_DOT_PRODUCT_ATTENTION), 18));
  cr_assert_not(mil_op_in_opset(mil_op_info(MIL_OP_SCALED_DOT_PRODUCT_ATTENTION), 17));
  cr_assert_not(mil_op_in_opset(mil_op_info(MIL_OP_CONSTEXPR_AFFINE_DEQUANTIZE), 18));
}

/* The CPU backend's op table (CPU_OPS, runtime/cpu/cpu_internal.h) names
 * each op by its MilOpId, and its constexpr table is indexed by one: an op
 * the MIL table lacks does not compile, nor does an argument looked up by a
 * name (the look-ups take MilArgIds). What is left to check at run time: the
 * backend finds each row by its op's id, and nothing else. */
#define CPU_OP_ID(id, family, kernel, code, binder) MIL_OP_##id,
static const MilOpId cpu_op_ids[] = {CPU_OPS(CPU_OP_ID)};
#undef CPU_OP_ID

Test(table, every_cpu_backend_op) {
  bool runs[MIL_OP_COUNT] = {false};
  for (size_t i = 0; i < sizeof cpu_op_ids / sizeof *cpu_op_ids; i++) {
    const OpEntry *e = cpu_op(cpu_op_ids[i]);
    cr_assert_not_null(e, "the CPU backend does not find its row for '%s'", mil_op_name(cpu_op_ids[i]));
    cr_assert_eq(e->op, cpu_op_ids[i], "%s", mil_op_name(cpu_op_ids[i]));
    runs[cpu_op_ids[i]] = true;
  }
  uint32_t cx = 0;
  for (uint32_t i = 0; i < MIL_OP_COUNT; i++) {
    const MilOpInfo *op = mil_op_info((MilOpId)i);
    cr_expect_eq(cpu_op(op->id) != NULL, runs[i], "%s: found without a row", op->name);
    if (find_cx(op->id)) {
      cr_expect_eq(op->family, MIL_FAM_CONSTEXPR, "%s is evaluated as a constexpr", op->name);
      cx++;
    }
  }
  cr_assert_geq(sizeof cpu_op_ids / sizeof *cpu_op_ids, 65);
  cr_assert_eq(cx, 5u);
  cr_assert_null(cpu_op(MIL_OP_CONST));
  cr_assert_null(cpu_op(MIL_OP_COUNT));
  cr_assert_eq(view_entry.op, (uint16_t)MIL_OP_COUNT, "view is the backend's own op, not MIL's");
}

/* The arguments shared binders read for several ops (SHARED_ ids, named by
 * one op's id, resolved to the statement's own argument of that name): every
 * op whose row has such a binder has them, in the MIL table. */
static const struct {
  Binder bind;
  MilArgId args[6];
  uint32_t n;
} shared_reads[] = {
    {bind_unary, {SHARED_x}, 1},
    {bind_binary, {SHARED_x, SHARED_y}, 2},
    {bind_copy, {SHARED_x}, 1},
    {bind_reduce, {SHARED_x, SHARED_axes, SHARED_keep_dims}, 3},
    {bind_layer_norm, {SHARED_axes}, 1},
    {bind_argreduce, {SHARED_x, SHARED_axis, SHARED_arg_keep_dims, SHARED_arg_output_dtype}, 4},
    {bind_pool, {SHARED_x, SHARED_kernel_sizes, SHARED_strides, SHARED_pad_type, SHARED_pad, SHARED_ceil_mode}, 6},
    {bind_quant, {SHARED_input, SHARED_scale, SHARED_zero_point, SHARED_quant_axis}, 4},
    {bind_linear, {SHARED_weight, SHARED_x}, 2},
    {bind_conv, {SHARED_weight, SHARED_x}, 2},
    {bind_transpose, {SHARED_x}, 1},
};

Test(table, every_argument_the_cpu_binders_share) {
  uint32_t seen = 0;
  for (size_t i = 0; i < sizeof cpu_op_ids / sizeof *cpu_op_ids; i++) {
    const OpEntry *e = cpu_op(cpu_op_ids[i]);
    const MilOpInfo *op = mil_op_info(cpu_op_ids[i]);
    for (size_t b = 0; b < sizeof shared_reads / sizeof *shared_reads; b++) {
      if (shared_reads[b].bind != e->bind) continue;
      for (uint32_t k = 0; k < shared_reads[b].n; k++, seen++)
        cr_expect_not_null(mil_op_find_arg(op, mil_arg_name(shared_reads[b].args[k])),
                           "the CPU backend reads argument '%s' of %s, which the MIL op table does not give it",
                           mil_arg_name(shared_reads[b].args[k]), op->name);
    }
  }
  cr_assert_geq(seen, 40u, "found only %u shared argument reads", seen);
}

/* The CPU backend keeps its own op families (OpFamily): they say how its
 * plan treats an op (views, fusion groups, weight operands), which the MIL
 * table's families do not (identity is unary there but a view here, gather
 * is an index op there but data movement here, conv and linear are both
 * linalg there but fuse differently here). Each CPU family holds ops of the
 * MIL families listed, so a row cannot put, say, a linalg op among the
 * element-wise ops a fused group runs. */
static const struct {
  OpFamily cpu;
  MilOpFamily mil[2];
  uint32_t n;
} family_map[] = {
    {OF_UNARY, {MIL_FAM_UNARY}, 1},          {OF_BINARY, {MIL_FAM_BINARY}, 1},
    {OF_COMPARE, {MIL_FAM_COMPARE}, 1},      {OF_LOGICAL, {MIL_FAM_LOGICAL}, 1},
    {OF_SELECT, {MIL_FAM_SELECT}, 1},        {OF_CAST, {MIL_FAM_CAST}, 1},
    {OF_SOFTMAX, {MIL_FAM_NORM}, 1},         {OF_REDUCE, {MIL_FAM_REDUCE}, 1},
    {OF_NORM, {MIL_FAM_NORM}, 1},            {OF_RESHAPE, {MIL_FAM_SHAPE, MIL_FAM_UNARY}, 2},
    {OF_TRANSPOSE, {MIL_FAM_SHAPE}, 1},      {OF_SHAPE, {MIL_FAM_SHAPE, MIL_FAM_INDEX}, 2},
    {OF_INDEX, {MIL_FAM_REDUCE, MIL_FAM_INDEX}, 2}, {OF_POOL, {MIL_FAM_POOL}, 1},
    {OF_QUANT, {MIL_FAM_QUANT}, 1},          {OF_RECURRENT, {MIL_FAM_RECURRENT}, 1},
    {OF_MATMUL, {MIL_FAM_LINALG}, 1},        {OF_LINEAR, {MIL_FAM_LINALG}, 1},
    {OF_CONV, {MIL_FAM_LINALG}, 1},          {OF_ATTENTION, {MIL_FAM_ATTENTION}, 1},
};

Test(table, cpu_families_within_the_tables) {
  for (size_t i = 0; i < sizeof cpu_op_ids / sizeof *cpu_op_ids; i++) {
    const OpEntry *e = cpu_op(cpu_op_ids[i]);
    const MilOpInfo *op = mil_op_info(cpu_op_ids[i]);
    bool found = false, fits = false;
    for (size_t m = 0; m < sizeof family_map / sizeof *family_map; m++) {
      if (family_map[m].cpu != e->family) continue;
      found = true;
      for (uint32_t k = 0; k < family_map[m].n; k++) fits |= family_map[m].mil[k] == op->family;
    }
    cr_expect(found, "%s: CPU family %u is not in the map", op->name, e->family);
    cr_expect(fits, "%s: its CPU family does not hold the MIL family %s", op->name, mil_op_family_name(op->family));
  }
}

/* Checks the ops of an emitted program: in the table, and in the opset of the function. */
static void check_ops(const char *what, const char *text, size_t len, uint32_t *nops) {
  SourceSet ss;
  srcset_init(&ss);
  Diag d;
  diag_init(&d, &ss);
  StrBuf diags;
  sb_init(&diags);
  d.capture = &diags;
  MilProgram *p = mil_read_string(what, text, len, &d);
  cr_assert_not_null(p, "%s:\n%s", what, diags.data);
  cr_assert_eq(diags.len, 0, "%s", diags.data);
  for (uint32_t f = 0; f < p->nfuncs; f++)
    for (uint32_t s = 0; s < p->funcs[f].nstmts; s++) {
      const MilStmt *st = &p->funcs[f].stmts[s];
      const MilOpInfo *op = mil_op_find(st->op);
      cr_assert_not_null(op, "%s: the emitter wrote '%s', which the MIL op table does not have", what, st->op);
      cr_assert(mil_op_in_opset(op, p->funcs[f].ios), "%s: %s in ios%u", what, st->op, p->funcs[f].ios);
      cr_assert_geq((int)st->nresults, op->min_results, "%s: %s", what, st->op);
      cr_assert(op->max_results < 0 || (int)st->nresults <= op->max_results, "%s: %s", what, st->op);
      (*nops)++;
    }
  mil_program_free(p);
  sb_free(&diags);
  srcset_free(&ss);
}

Test(table, every_emitted_op) {
  static const char *const files[] = {"testsuite/mil/tiny_mlp.mil", "testsuite/mil/gpt2_block.mil",
                                      "testsuite/mil/llama_block.mil", "testsuite/golden/mil-attention.expected",
                                      "testsuite/golden/mil-consts.expected", "testsuite/golden/mil-elementwise.expected",
                                      "testsuite/golden/mil-ios16.expected", "testsuite/golden/mil-linear.expected",
                                      "testsuite/golden/mil-tensor.expected", "testsuite/golden/mil-names.expected"};
  uint32_t nops = 0;
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", source_root(), files[i]);
    char *text;
    size_t len;
    const char *err;
    cr_assert(read_file(path, MAX_SOURCE_BYTES, &text, &len, &err), "%s: %s", path, err);
    const char *from = text, *to = text + len;
    if (strstr(files[i], ".expected")) { /* the stdout section of a golden result */
      from = strstr(text, "--- stdout\n");
      cr_assert_not_null(from, "%s", path);
      from += strlen("--- stdout\n");
      const char *e = strstr(from, "\n--- stderr");
      if (e) to = e + 1;
    }
    check_ops(files[i], from, (size_t)(to - from), &nops);
    free(text);
  }
  cr_assert_geq(nops, 100);
}

/* ---- the reader's checks by the table ---- */

#define HEADER "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [2]> x) {\n" /* body starts on line 4 */
#define FOOTER "    } -> (x);\n}\n"

typedef struct Read {
  MilProgram *p;
  SourceSet sources;
  Diag d;
  StrBuf diags;
} Read;

/* Reads text (strictly, or tolerantly). */
static void read_with(Read *r, const char *text, bool tolerant) {
  srcset_init(&r->sources);
  diag_init(&r->d, &r->sources);
  sb_init(&r->diags);
  r->d.capture = &r->diags;
  uint32_t file = srcset_add(&r->sources, "t.mil", text, strlen(text));
  MilReadOptions opt = {.tolerant = tolerant};
  r->p = mil_read_source(file, &opt, &r->d);
}

static void read_close(Read *r) {
  mil_program_free(r->p);
  srcset_free(&r->sources);
  sb_free(&r->diags);
}

static const char *diags(const Read *r) { return r->diags.data ? r->diags.data : ""; }

static void read_ok(Read *r, const char *text) {
  read_with(r, text, false);
  cr_assert_not_null(r->p, "rejected:\n%s", diags(r));
  cr_assert_eq(r->diags.len, 0, "unexpected diagnostics:\n%s", diags(r));
}

/* The first line of the diagnostics of text that must be rejected. */
static const char *first_error(const char *text) {
  static char line[1024];
  Read r;
  read_with(&r, text, false);
  cr_assert_null(r.p, "accepted: %s", text);
  snprintf(line, sizeof line, "%.*s", (int)strcspn(diags(&r), "\n"), diags(&r));
  read_close(&r);
  return line;
}

static const MilStmt *stmt_defining(const MilFunc *f, const char *name) {
  for (uint32_t i = 0; i < f->nstmts; i++)
    for (uint32_t k = 0; k < f->stmts[i].nresults; k++)
      if (!strcmp(f->stmts[i].results[k].name, name)) return &f->stmts[i];
  cr_assert_fail("no statement defines '%s'", name);
  return NULL;
}


Test(op_args, unknown_names_and_wrong_kinds) {
  cr_assert_str_eq(first_error(HEADER "        fp16 y = relu(x = x, alpha = x);\n" FOOTER),
                   "t.mil:4:30: error: relu: unknown argument 'alpha' (it takes x)");
  cr_assert_str_eq(first_error(HEADER "        fp16 y = matmul(x = x, y = x, transposex = bool(true));\n" FOOTER),
                   "t.mil:4:39: error: matmul: unknown argument 'transposex' (it takes x, y, transpose_x and "
                   "transpose_y)");
  cr_assert_str_eq(first_error(HEADER "        fp16 y = relu(x = (x, x));\n" FOOTER),
                   "t.mil:4:23: error: relu: argument 'x' must be a single value");
  cr_assert_str_eq(first_error(HEADER "        fp16 y = softmax(axis = tensor<int32, [2]>([0, 1]), x = x);\n" FOOTER),
                   "t.mil:4:33: error: softmax: argument 'axis' must be a scalar");
  cr_assert_str_eq(first_error(HEADER "        fp16 y = gelu(mode = int32(1), x = x);\n" FOOTER),
                   "t.mil:4:30: error: gelu: argument 'mode' must be a string");
  cr_assert_str_eq(first_error(HEADER "        string m = const()[val = string(\"EXACT\")];\n"
                                      "        fp16 y = relu(x = m);\n" FOOTER),
                   "t.mil:5:27: error: relu: argument 'x' must be a tensor");
}

/* What the table does not check: ops it does not have, and required
 * arguments (the backend asked to run the program refuses it). */
Test(op_args, unknown_ops_and_missing_arguments_are_read) {
  Read r;
  read_ok(&r, HEADER "        fp16 y = frobnicate(anything = x);\n"
                     "        fp16 z = max_pool(x = y);\n" FOOTER);
  const MilOpInfo *op = mil_op_find("max_pool");
  cr_assert_not_null(op);
  const MilStmt *st = stmt_defining(&r.p->funcs[0], "z");
  cr_assert_not(mil_op_check_required(op, st, &r.d));
  cr_assert_str_eq(diags(&r), "t.mil:5:18: error: max_pool: missing argument 'kernel_sizes'\n"
                              "    5 |         fp16 z = max_pool(x = y);\n"
                              "      |                  ^~~~~~~~\n"
                              "t.mil:5:18: error: max_pool: missing argument 'pad_type'\n"
                              "    5 |         fp16 z = max_pool(x = y);\n"
                              "      |                  ^~~~~~~~\n");
  read_close(&r);
}

/* A tolerant read reports problems of names and arguments as warnings, in
 * the same words, and returns the program; other errors still fail it. */
Test(op_args, tolerant_reading) {
  const char *text = HEADER "        fp16 y = relu(bogus = x, x = nowhere);\n"
                            "        fp16 z = relu(x = later);\n"
                            "        fp16 later = relu(x = x);\n    } -> (y, gone);\n}\n";
  cr_assert_str_eq(first_error(text), "t.mil:4:38: error: use of undefined value 'nowhere'");
  Read r;
  read_with(&r, text, true);
  cr_assert_not_null(r.p, "%s", diags(&r));
  cr_assert_eq(r.d.nerrors, 0);
  cr_assert_eq(r.d.nwarnings, 4, "%s", diags(&r));
  const char *want[] = {"t.mil:4:38: warning: use of undefined value 'nowhere'",
                        "t.mil:4:23: warning: relu: unknown argument 'bogus' (it takes x)",
                        "t.mil:5:27: warning: 'later' is used before its definition",
                        "t.mil:7:14: warning: function 'main' returns undefined value 'gone'"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    cr_assert_not_null(strstr(diags(&r), want[i]), "no '%s' in:\n%s", want[i], diags(&r));
  const MilFunc *f = &r.p->funcs[0];
  cr_assert_eq(f->returns[1].def_stmt, MIL_DEF_UNDEFINED);
  cr_assert_eq(f->stmts[0].args[1].items[0].def_stmt, MIL_DEF_UNDEFINED);
  cr_assert_null(mil_operand_type(f, &f->returns[1]));
  read_close(&r);
  /* A syntax error is an error in a tolerant read too. */
  const char *broken = HEADER "        fp16 y = relu(x = x) extra;\n" FOOTER;
  read_with(&r, broken, true);
  cr_assert_null(r.p);
  cr_assert_eq(r.d.nerrors, 1, "%s", diags(&r));
  read_close(&r);
}


/* The linter checks BLOBFILEs against their declared types itself (ANE008),
 * so a tolerant read keeps a const whose value's type is not its own. */
Test(op_args, tolerant_const_types) {
  const char *text = HEADER "        tensor<fp16, [2]> k = const()[val = tensor<fp32, [2]>([1, 2])];\n" FOOTER;
  cr_assert_str_eq(first_error(text),
                   "t.mil:4:45: error: 'val' has type tensor<fp32, [2]> but 'k' is declared as tensor<fp16, [2]>");
  Read r;
  read_with(&r, text, true);
  cr_assert_not_null(r.p, "%s", diags(&r));
  cr_assert_eq(r.d.nwarnings, 1, "%s", diags(&r));
  cr_assert_eq(strncmp(diags(&r), "t.mil:4:45: warning: 'val' has type tensor<fp32, [2]>", 53), 0, "%s", diags(&r));
  read_close(&r);
}
