/*
 * The IR as passes use it: creation, use lists, replacing uses, deletion,
 * reordering, names, the verifier catching broken structure, and inlining.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "helpers.h"
#include "orion/passes.h"

static IrType t2(IrDType dt, int64_t a, int64_t b) { return (IrType){.dtype = dt, .rank = 2, .dims = {a, b}}; }

static bool uses_contain(IrModule *m, IrValueId v, IrOpId op, uint32_t index) {
  IrValue *val = ir_value(m, v);
  for (uint32_t i = 0; i < val->nuses; i++)
    if (ir_id_eq(val->uses[i].op, op) && val->uses[i].index == index) return true;
  return false;
}

static char *verify_text(IrModule *m) {
  static char buf[4096];
  SourceSet ss;
  srcset_init(&ss);
  StrBuf out;
  sb_init(&out);
  Diag d;
  diag_init(&d, &ss);
  d.capture = &out;
  bool ok = ir_verify(m, &d);
  snprintf(buf, sizeof buf, "%s%s", ok ? "ok" : "", out.data ? out.data : "");
  sb_free(&out);
  srcset_free(&ss);
  return buf;
}

Test(ir, op_table_is_consistent) {
  for (int k = 0; k < OP_CALL; k++) {
    const IrOpInfo *info = ir_op_info((IrOpKind)k);
    cr_assert(info->name && info->name[0]);
    cr_assert_eq(ir_op_from_name(info->name), (IrOpKind)k, "%s", info->name);
    cr_assert(info->max_inputs < 0 || info->max_inputs >= info->min_inputs, "%s", info->name);
  }
  cr_assert_eq(ir_op_from_name("nope"), OP_COUNT);
  const IrOpInfo *conv = ir_op_info(OP_CONV);
  cr_assert_eq(conv->nattrs, 5);
  cr_assert_str_eq(conv->attrs[0].name, "strides");
  cr_assert_eq(conv->attrs[0].kind, AS_INTS);
  cr_assert(conv->attrs[0].optional);
  cr_assert(!ir_op_info(OP_RESHAPE)->attrs[0].optional);
}

/* The op table is built on first use; threads asking at once (a runtime's,
 * a plugin's) all see it whole. Each thread here is the first to ask in this
 * test's fresh process, and records every op's name and attribute count. */
typedef struct TableSeen {
  const char *names[OP_COUNT];
  uint32_t nattrs[OP_COUNT];
} TableSeen;

static pthread_barrier_t all_ready;

static void *read_op_table(void *arg) {
  TableSeen *seen = arg;
  pthread_barrier_wait(&all_ready); /* all ask at the same moment */
  for (int k = 0; k < OP_COUNT; k++) {
    const IrOpInfo *info = ir_op_info((IrOpKind)k);
    seen->names[k] = info->name;
    seen->nattrs[k] = info->nattrs;
  }
  return NULL;
}

Test(ir, op_table_built_once_for_threads_asking_at_once) {
  enum { THREADS = 8 };
  static TableSeen seen[THREADS];
  pthread_t t[THREADS];
  cr_assert_eq(pthread_barrier_init(&all_ready, NULL, THREADS), 0);
  for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, read_op_table, &seen[i]), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++)
    for (int k = 0; k < OP_COUNT; k++) {
      cr_assert_str_eq(seen[i].names[k], seen[0].names[k]);
      cr_assert_eq(seen[i].nattrs[k], seen[0].nattrs[k], "%s", seen[0].names[k]);
    }
  cr_assert_eq(seen[3].nattrs[OP_CONV], 5);
}

/* Whether the function of that name is still there. */
static bool func_alive(IrModule *m, const char *name) {
  for (IrFuncId f = 1; f < m->nfuncs; f++)
    if (!strcmp(m->funcs[f].name, name)) return !m->funcs[f].dead;
  cr_assert_fail("no function '%s'", name);
  return false;
}

/* dce deletes a function whose last caller went, then those only it called,
 * down a chain whose dead end is declared last (the order in which a sweep
 * of the module finds one link per sweep); one still called elsewhere
 * stays, and so do entry functions. */
Test(ir, dce_deletes_callees_left_without_callers) {
  StrBuf text;
  sb_init(&text);
  sb_puts(&text, "func leaf(x: fp16[2]) {\n  y = relu(x);\n  return y;\n}\n"
                 "func mid1(x: fp16[2]) {\n  y = call leaf(x) as a;\n  return y;\n}\n"
                 "func mid2(x: fp16[2]) {\n  y = call leaf(x) as b;\n  return y;\n}\n"
                 "func shared(x: fp16[2]) {\n  y = relu(x);\n  return y;\n}\n"
                 "func top(x: fp16[2]) {\n  a = call mid1(x) as c;\n  b = call mid2(x) as d;\n"
                 "  e = call shared(x) as e;\n  s = add(a, b);\n  t = add(s, e);\n  return t;\n}\n"
                 "func other(x: fp16[2]) {\n  y = call shared(x) as f;\n  return y;\n}\n"
                 "func c0(x: fp16[2]) {\n  y = relu(x);\n  return y;\n}\n");
  enum { CHAIN = 30 }; /* calls nest at most 32 deep */
  for (int i = 1; i < CHAIN; i++)
    sb_printf(&text, "func c%d(x: fp16[2]) {\n  y = call c%d(x) as l;\n  return y;\n}\n", i, i - 1);
  sb_printf(&text, "func main(x: fp16[2]) {\n  t = call top(x) as g;\n  u = call c%d(x) as h;\n"
                   "  k = call other(x) as i;\n  return k;\n}\n", CHAIN - 1);
  Parsed p;
  parsed_open(&p, text.data);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  PassCtx ctx = {.d = &p.d};
  cr_assert(pass_dce(p.m, &ctx));
  cr_assert(ctx.changed);
  for (const char *const *n = (const char *const[]){"top", "mid1", "mid2", "leaf", "c0", "c1", "c29", NULL}; *n; n++)
    cr_assert_not(func_alive(p.m, *n), "'%s' survived", *n);
  for (const char *const *n = (const char *const[]){"main", "other", "shared", NULL}; *n; n++)
    cr_assert(func_alive(p.m, *n), "'%s' was deleted", *n);
  uint32_t alive = 0;
  for (IrFuncId f = 1; f < p.m->nfuncs; f++) alive += !p.m->funcs[f].dead;
  cr_assert_eq(alive, 3);
  cr_assert_str_eq(verify_text(p.m), "ok");
  parsed_close(&p);
  sb_free(&text);
}

Test(ir, dtypes) {
  cr_assert_eq(ir_dtype_from_name("fp16"), DT_FP16);
  cr_assert_eq(ir_dtype_from_name("uint8"), DT_UINT8);
  cr_assert_eq(ir_dtype_from_name("float"), DT_INVALID);
  cr_assert_eq(ir_dtype_size(DT_FP32), 4);
  cr_assert_eq(ir_dtype_size(DT_BOOL), 1);
  IrType t = t2(DT_INT32, 3, 7);
  cr_assert_eq(ir_type_elements(&t), 21);
  StrBuf sb;
  sb_init(&sb);
  ir_type_print(&sb, &t);
  cr_assert_str_eq(sb.data, "int32[3,7]");
  sb.len = 0;
  IrType scalar = {.dtype = DT_FP16};
  ir_type_print(&sb, &scalar);
  cr_assert_str_eq(sb.data, "fp16[]");
  sb_free(&sb);
}

/* The fixed arrays of passes and the emitter hold IR_MAX_OPERANDS operands or
 * results: an op at the limit is made, one over it cannot be (an internal
 * error, since the builder reports such a statement first). */
static void make_concat(uint32_t ninputs, uint32_t nresults) {
  IrModule *m = ir_module_new();
  IrFuncId f = ir_func_new(m, "main", (SrcSpan){0});
  IrType t = t2(DT_FP16, 1, 4);
  IrValueId x = ir_func_add_input(m, f, "x", &t, (SrcSpan){0});
  IrValueId ins[IR_MAX_OPERANDS + 1];
  for (uint32_t i = 0; i <= IR_MAX_OPERANDS; i++) ins[i] = x;
  IrOpId at = ir_op_new(m, f, OP_CONCAT, ins, IR_MAX_OPERANDS, 1, NULL, (SrcSpan){0});
  cr_assert_eq(ir_op(m, at)->ninputs, IR_MAX_OPERANDS);
  IrOpId split = ir_op_new(m, f, OP_SPLIT, &x, 1, IR_MAX_OPERANDS, NULL, (SrcSpan){0});
  cr_assert_eq(ir_op(m, split)->nresults, IR_MAX_OPERANDS);
  ir_op_new(m, f, OP_CONCAT, ins, ninputs, nresults, NULL, (SrcSpan){0});
  ir_module_free(m);
}

Test(ir, op_new_refuses_an_operand_over_the_limit, .signal = SIGABRT) { make_concat(IR_MAX_OPERANDS + 1, 1); }
Test(ir, op_new_refuses_a_result_over_the_limit, .signal = SIGABRT) { make_concat(1, IR_MAX_OPERANDS + 1); }

Test(ir, uses_replace_and_erase) {
  IrModule *m = ir_module_new();
  IrFuncId f = ir_func_new(m, "main", (SrcSpan){0});
  IrType t = t2(DT_FP16, 1, 4);
  IrValueId x = ir_func_add_input(m, f, "x", &t, (SrcSpan){0});
  IrValueId in1[] = {x};
  const char *n1[] = {"a"}, *n2[] = {"b"}, *n3[] = {"c"};
  IrOpId relu = ir_op_new(m, f, OP_RELU, in1, 1, 1, n1, (SrcSpan){0});
  IrValueId a = ir_op(m, relu)->results[0];
  IrValueId in2[] = {a, a};
  IrOpId add = ir_op_new(m, f, OP_ADD, in2, 2, 1, n2, (SrcSpan){0});
  IrValueId b = ir_op(m, add)->results[0];
  ir_func_add_output(m, f, "out", b, (SrcSpan){0});
  cr_assert_str_eq(verify_text(m), "ok");
  cr_assert_eq(ir_value(m, a)->nuses, 2);
  cr_assert(uses_contain(m, a, add, 0) && uses_contain(m, a, add, 1));
  cr_assert(uses_contain(m, b, IR_NO_OP, 0), "outputs are uses");
  cr_assert_eq(ir_value(m, a)->type.dtype, DT_FP16, "the verifier inferred the type");

  /* Insert tanh(x) before relu and point the add at it instead. */
  IrOpId tanh = ir_op_new(m, f, OP_TANH, in1, 1, 1, n3, (SrcSpan){0});
  ir_op_move_before(m, tanh, relu);
  cr_assert_eq(ir_func(m, f)->first.id, tanh.id);
  IrValueId c = ir_op(m, tanh)->results[0];
  ir_replace_all_uses(m, a, c);
  cr_assert_eq(ir_value(m, a)->nuses, 0);
  cr_assert_eq(ir_value(m, c)->nuses, 2);
  cr_assert_eq(ir_op(m, add)->inputs[0].id, c.id);
  ir_op_erase(m, relu);
  cr_assert(ir_op(m, relu)->dead);
  cr_assert(ir_value(m, a)->dead);
  cr_assert_eq(ir_value(m, x)->nuses, 1, "the erased op no longer uses x");
  cr_assert_eq(ir_func(m, f)->nops, 2);
  cr_assert_str_eq(verify_text(m), "ok");

  /* Replacing a returned value moves the output; the output keeps its name. */
  ir_replace_all_uses(m, b, c);
  cr_assert_eq(ir_func(m, f)->outputs[0].value.id, c.id);
  cr_assert_str_eq(ir_func(m, f)->outputs[0].name, "out");
  ir_op_erase(m, add);
  StrBuf sb;
  sb_init(&sb);
  ir_print_module(m, &sb);
  cr_assert_str_eq(sb.data, "func main(x: fp16[1,4]) {\n  c: fp16[1,4] = tanh(x);\n  return out = c;\n}\n");
  sb_free(&sb);
  ir_module_free(m);
}

Test(ir, verifier_catches_use_before_definition) {
  IrModule *m = ir_module_new();
  IrFuncId f = ir_func_new(m, "main", (SrcSpan){0});
  IrType t = t2(DT_FP16, 1, 4);
  IrValueId x = ir_func_add_input(m, f, "x", &t, (SrcSpan){0});
  IrValueId in1[] = {x};
  const char *n1[] = {"a"}, *n2[] = {"b"};
  IrOpId first = ir_op_new(m, f, OP_RELU, in1, 1, 1, n1, (SrcSpan){0});
  IrValueId in2[] = {ir_op(m, first)->results[0]};
  IrOpId second = ir_op_new(m, f, OP_EXP, in2, 1, 1, n2, (SrcSpan){0});
  ir_func_add_output(m, f, "b", ir_op(m, second)->results[0], (SrcSpan){0});
  ir_op_move_before(m, second, first);
  cr_assert_str_eq(verify_text(m), "orionc: error: verifier: operand 'a' of 'exp' is used before it is defined\n");
  ir_module_free(m);
}

Test(ir, verifier_catches_missing_outputs) {
  IrModule *m = ir_module_new();
  ir_func_new(m, "main", (SrcSpan){0});
  cr_assert_str_eq(verify_text(m), "orionc: error: function 'main' has no outputs\n");
  ir_module_free(m);
}

/* Every use the lists record matches an operand or output, and every
 * operand's and output's back-pointer finds its use. */
static void assert_uses_consistent(IrModule *m) {
  for (IrValueId v = ir_value_id(1); v.id < m->nvalues; v.id++) {
    IrValue *val = ir_value(m, v);
    for (uint32_t i = 0; i < val->nuses; i++) {
      IrUse u = val->uses[i];
      if (!ir_id_is_none(u.op)) {
        cr_assert_eq(ir_op(m, u.op)->inputs[u.index].id, v.id);
        cr_assert_eq(ir_op(m, u.op)->use_slots[u.index], i);
      } else {
        cr_assert_eq(ir_func(m, val->func)->outputs[u.index].value.id, v.id);
        cr_assert_eq(ir_func(m, val->func)->outputs[u.index].use_slot, i);
      }
    }
  }
}

Test(ir, many_uses_of_one_value_come_and_go_in_any_order) {
  IrModule *m = ir_module_new();
  IrFuncId f = ir_func_new(m, "main", (SrcSpan){0});
  IrType t = t2(DT_FP16, 1, 4);
  IrValueId x = ir_func_add_input(m, f, "x", &t, (SrcSpan){0});
  IrValueId y = ir_func_add_input(m, f, "y", &t, (SrcSpan){0});
  enum { N = 64 };
  IrOpId ops[N];
  for (int i = 0; i < N; i++) {
    IrValueId in[] = {x, x};
    ops[i] = ir_op_new(m, f, OP_ADD, in, 2, 1, NULL, (SrcSpan){0});
    ir_func_add_output(m, f, ir_value(m, ir_op(m, ops[i])->results[0])->name, ir_op(m, ops[i])->results[0],
                       (SrcSpan){0});
  }
  ir_func_insert_output(m, f, 3, "front", x, (SrcSpan){0});
  cr_assert_eq(ir_value(m, x)->nuses, 2 * N + 1);
  assert_uses_consistent(m);
  /* Move operands to y in a scattered order: each removal fills its hole. */
  for (int k = 0; k < N; k++) {
    int i = (k * 37) % N;
    ir_op_set_input(m, ops[i], (uint32_t)(k % 2), y);
    assert_uses_consistent(m);
  }
  cr_assert_eq(ir_value(m, x)->nuses, N + 1);
  cr_assert_eq(ir_value(m, y)->nuses, N);
  cr_assert(uses_contain(m, x, IR_NO_OP, 3), "the inserted output is output 3");
  cr_assert_str_eq(verify_text(m), "ok");
  ir_replace_all_uses(m, x, y);
  cr_assert_eq(ir_value(m, x)->nuses, 0);
  assert_uses_consistent(m);
  cr_assert_str_eq(verify_text(m), "ok");
  ir_module_free(m);
}

Test(ir, verifier_catches_broken_use_lists) {
  IrModule *m = ir_module_new();
  IrFuncId f = ir_func_new(m, "main", (SrcSpan){0});
  IrType t = t2(DT_FP16, 1, 4);
  IrValueId x = ir_func_add_input(m, f, "x", &t, (SrcSpan){0});
  IrValueId in[] = {x, x};
  const char *n1[] = {"a"};
  IrOpId add = ir_op_new(m, f, OP_ADD, in, 2, 1, n1, (SrcSpan){0});
  ir_func_add_output(m, f, "a", ir_op(m, add)->results[0], (SrcSpan){0});
  cr_assert_str_eq(verify_text(m), "ok");
  IrUse *uses = ir_value(m, x)->uses;
  IrUse second = uses[1];
  uses[1] = uses[0]; /* the first use twice, the second missing */
  cr_assert_str_eq(verify_text(m), "orionc: error: verifier: the use list of 'x' names a use twice\n"
                                    "orionc: error: verifier: the use list of 'x' lacks operand 2 of 'add'\n");
  uses[1] = second;
  ir_value(m, x)->nuses = 1; /* the second use forgotten */
  cr_assert_str_eq(verify_text(m), "orionc: error: verifier: the use list of 'x' lacks operand 2 of 'add'\n");
  ir_value(m, x)->nuses = 2;
  uses[1].index = 5; /* a use of an operand that does not exist */
  cr_assert_str_eq(verify_text(m), "orionc: error: verifier: the use list of 'x' names a use that does not exist\n"
                                    "orionc: error: verifier: the use list of 'x' lacks operand 2 of 'add'\n");
  uses[1] = second;
  cr_assert_str_eq(verify_text(m), "ok");
  ir_module_free(m);
}

Test(ir, erase_unused_decls_keeps_the_order_of_the_rest) {
  IrModule *m = ir_module_new();
  IrFuncId f = ir_func_new(m, "main", (SrcSpan){0});
  IrType t = t2(DT_FP16, 1, 4);
  IrValueId x = ir_func_add_input(m, f, "x", &t, (SrcSpan){0});
  IrParamSource zeros = {.kind = SRC_ZEROS};
  IrValueId w[6];
  for (int i = 0; i < 6; i++) {
    char name[8];
    snprintf(name, sizeof name, "w%d", i);
    w[i] = ir_param_new(m, f, name, &t, &zeros, (SrcSpan){0});
  }
  IrValueId in1[] = {x, w[1]}, in2[] = {x, w[4]};
  IrOpId a = ir_op_new(m, f, OP_ADD, in1, 2, 1, NULL, (SrcSpan){0});
  IrOpId b = ir_op_new(m, f, OP_ADD, in2, 2, 1, NULL, (SrcSpan){0});
  ir_func_add_output(m, f, "a", ir_op(m, a)->results[0], (SrcSpan){0});
  ir_func_add_output(m, f, "b", ir_op(m, b)->results[0], (SrcSpan){0});
  cr_assert_eq(ir_erase_unused_decls(m, f), 4);
  cr_assert_eq(ir_func(m, f)->ndecls, 2);
  cr_assert_eq(ir_func(m, f)->decls[0].id, w[1].id);
  cr_assert_eq(ir_func(m, f)->decls[1].id, w[4].id);
  cr_assert(ir_value(m, w[0])->dead && ir_value(m, w[5])->dead && !ir_value(m, w[4])->dead);
  cr_assert_eq(ir_erase_unused_decls(m, f), 0);
  cr_assert_str_eq(verify_text(m), "ok");
  ir_module_free(m);
}

Test(ir, find_value_after_erasing_and_renaming) {
  IrModule *m = ir_module_new();
  IrFuncId f = ir_func_new(m, "main", (SrcSpan){0});
  IrFuncId g = ir_func_new(m, "other", (SrcSpan){0});
  IrType t = t2(DT_FP16, 1, 4);
  IrValueId x = ir_func_add_input(m, f, "x", &t, (SrcSpan){0});
  ir_func_add_input(m, g, "y", &t, (SrcSpan){0});
  IrValueId in[] = {x};
  const char *n1[] = {"y"}, *n2[] = {"t"};
  IrOpId relu = ir_op_new(m, f, OP_RELU, in, 1, 1, n1, (SrcSpan){0});
  IrOpId tanh = ir_op_new(m, f, OP_TANH, in, 1, 1, n2, (SrcSpan){0});
  IrValueId yv = ir_op(m, relu)->results[0], tv = ir_op(m, tanh)->results[0];
  cr_assert_eq(ir_func_find_value(m, f, "y").id, yv.id, "names are per function");
  cr_assert_eq(ir_func_find_value(m, f, "nothing").id, 0);
  /* A pass replaces relu by tanh and gives tanh's result relu's name. */
  ir_value(m, tv)->name = ir_value(m, yv)->name;
  ir_op_erase(m, relu);
  cr_assert_eq(ir_func_find_value(m, f, "y").id, tv.id);
  cr_assert_eq(ir_func_find_value(m, f, "t").id, 0, "the old name is free again");
  cr_assert_str_eq(ir_unique_name(m, f, "t"), "t");
  cr_assert_str_neq(ir_unique_name(m, f, "y"), "y");
  ir_module_free(m);
}

Test(ir, unique_names_and_attrs) {
  IrModule *m = ir_module_new();
  IrFuncId f = ir_func_new(m, "main", (SrcSpan){0});
  IrType t = t2(DT_FP16, 2, 2);
  IrValueId x = ir_func_add_input(m, f, "x", &t, (SrcSpan){0});
  cr_assert_str_eq(ir_unique_name(m, f, "y"), "y");
  const char *name = ir_unique_name(m, f, "x");
  cr_assert_str_neq(name, "x");
  IrValueId in[] = {x};
  IrOpId op = ir_op_new(m, f, OP_SOFTMAX, in, 1, 1, NULL, (SrcSpan){0});
  cr_assert_str_neq(ir_value(m, ir_op(m, op)->results[0])->name, ir_value(m, x)->name);
  ir_op_set_attr_int(m, op, "axis", 0);
  cr_assert_eq(ir_attr_int(m, op, "axis", -1), 0);
  ir_op_set_attr_int(m, op, "axis", 1);
  cr_assert_eq(ir_op(m, op)->nattrs, 1, "setting again replaces");
  cr_assert_eq(ir_attr_int(m, op, "axis", -1), 1);
  cr_assert_eq(ir_attr_float(m, op, "missing", 2.5), 2.5);
  int64_t perm[] = {1, 0};
  ir_op_set_attr_ints(m, op, "perm", perm, 2);
  int64_t got[4];
  cr_assert_eq(ir_attr_ints(m, op, "perm", got, 4), 2);
  cr_assert_eq(got[0], 1);
  ir_module_free(m);
}

static const char *inline_text(const char *src) {
  static char buf[8192];
  Parsed p;
  parsed_open(&p, src);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  PassCtx ctx = {.d = &p.d};
  cr_assert(pass_inline(p.m, &ctx), "%s", p.diags.data);
  cr_assert(ir_verify(p.m, &p.d), "%s", p.diags.data);
  StrBuf sb;
  sb_init(&sb);
  ir_print_module(p.m, &sb);
  snprintf(buf, sizeof buf, "%s", sb.data);
  sb_free(&sb);
  parsed_close(&p);
  return buf;
}

Test(ir, inline_gives_each_instance_its_own_weights) {
  const char *out = inline_text("func main(x: fp16[2]) {\n a = call f(x) as l0;\n b = call f(a) as l1;\n return b;\n}\n"
                                "func f(x: fp16[2]) {\n param w: fp16[2] = normal(seed=5);\n"
                                " param k: fp16[2] = safetensors(\"m.safetensors\", \"{scope}.k\");\n"
                                " y = mul(x, w);\n z = add(y, k);\n return z;\n}\n");
  char want0[64], want1[64];
  snprintf(want0, sizeof want0, "normal(seed=%llu,", (unsigned long long)ir_derive_seed(5, "l0"));
  snprintf(want1, sizeof want1, "normal(seed=%llu,", (unsigned long long)ir_derive_seed(5, "l1"));
  cr_assert_neq(ir_derive_seed(5, "l0"), ir_derive_seed(5, "l1"));
  cr_assert_not_null(strstr(out, want0), "%s", out);
  cr_assert_not_null(strstr(out, want1), "%s", out);
  cr_assert_not_null(strstr(out, "safetensors(\"m.safetensors\", \"l0.k\")"), "%s", out);
  cr_assert_not_null(strstr(out, "safetensors(\"m.safetensors\", \"l1.k\")"), "%s", out);
  cr_assert_not_null(strstr(out, "l1.z: fp16[2] = add(l1.y, l1.k);"), "%s", out);
  cr_assert_not_null(strstr(out, "return b = l1.z;"), "%s", out);
  cr_assert_null(strstr(out, "func f("), "the callee is gone: %s", out);
  cr_assert_null(strstr(out, "call "), "%s", out);
}

Test(ir, inline_keeps_entry_functions_that_are_also_called_nowhere) {
  const char *out = inline_text("func a(x: fp16[2]) {\n return x;\n}\nfunc b(x: fp16[2]) {\n y = relu(x);\n return y;\n}\n");
  cr_assert_str_eq(out, "func a(x: fp16[2]) {\n  return x;\n}\n\nfunc b(x: fp16[2]) {\n  y: fp16[2] = relu(x);\n  return y;\n}\n");
}
