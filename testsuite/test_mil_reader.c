/*
 * The MIL text reader: every real file of the shared corpus and everything
 * our emitter writes must read cleanly (with spot checks of the structure and
 * of literal values), the tolerances of mil-spec §1.11 hold, and each kind of
 * error has an exact message at an exact place.
 *
 * Needs ORION_SOURCE_ROOT (meson sets it): the corpus is read from
 * $ORION_SOURCE_ROOT/../shared/corpus/mil, the emitter's output from
 * $ORION_SOURCE_ROOT/testsuite. A missing directory is a failure, not a skip.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "orion/mil_reader.h"

/* ---- helpers ------------------------------------------------------------------ */

typedef struct Read {
  MilProgram *p;
  SourceSet sources;
  Diag d;
  StrBuf diags;
} Read;

static void read_open(Read *r, const char *name, const char *text, size_t len) {
  srcset_init(&r->sources);
  diag_init(&r->d, &r->sources);
  sb_init(&r->diags);
  r->d.capture = &r->diags;
  r->p = mil_read_string(name, text, len, &r->d);
}

static void read_text(Read *r, const char *text) { read_open(r, "t.mil", text, strlen(text)); }

static void read_path(Read *r, const char *path) {
  srcset_init(&r->sources);
  diag_init(&r->d, &r->sources);
  sb_init(&r->diags);
  r->d.capture = &r->diags;
  r->p = mil_read_file(path, &r->d);
}

static void read_close(Read *r) {
  mil_program_free(r->p);
  srcset_free(&r->sources);
  sb_free(&r->diags);
}

static const char *diags(const Read *r) { return r->diags.data ? r->diags.data : ""; }

/* Reads text that must be accepted; fails with the diagnostics otherwise. */
static void read_ok(Read *r, const char *text) {
  read_text(r, text);
  cr_assert_not_null(r->p, "rejected:\n%s", diags(r));
  cr_assert_eq(r->diags.len, 0, "unexpected diagnostics:\n%s", diags(r));
}

/* All diagnostics of text that must be rejected (static buffer). */
static const char *errors_of(const char *text) {
  static char buf[8192];
  Read r;
  read_text(&r, text);
  cr_assert_null(r.p, "accepted: %s", text);
  cr_assert_gt(r.d.nerrors, 0);
  snprintf(buf, sizeof buf, "%s", diags(&r));
  read_close(&r);
  return buf;
}

/* The first line of errors_of(text). */
static const char *first_error(const char *text) {
  static char line[1024];
  const char *all = errors_of(text);
  size_t n = strcspn(all, "\n");
  if (n >= sizeof line) n = sizeof line - 1;
  memcpy(line, all, n);
  line[n] = 0;
  return line;
}

static const char *type_text(const MilType *t) {
  static char buf[256];
  StrBuf sb;
  sb_init(&sb);
  mil_type_print(t, &sb);
  snprintf(buf, sizeof buf, "%s", sb.data ? sb.data : "");
  sb_free(&sb);
  return buf;
}

static const MilStmt *stmt_defining(const MilFunc *f, const char *name) {
  for (uint32_t i = 0; i < f->nstmts; i++)
    for (uint32_t r = 0; r < f->stmts[i].nresults; r++)
      if (strcmp(f->stmts[i].results[r].name, name) == 0) return &f->stmts[i];
  cr_assert_fail("no statement defines '%s'", name);
  return NULL;
}

static const MilLiteral *const_val(const MilFunc *f, const char *name) {
  const MilStmt *s = stmt_defining(f, name);
  cr_assert_str_eq(s->op, "const");
  const MilAttr *a = mil_find_attr(s->attrs, s->nattrs, "val");
  cr_assert_not_null(a);
  return a->value;
}

static const char *source_root(void) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  if (!root || !*root)
    cr_assert_fail("ORION_SOURCE_ROOT is not set: meson test sets it; by hand run "
                   "ORION_SOURCE_ROOT=/path/to/orion %s",
                   "test_mil_reader");
  return root;
}

static char *path_join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = xmalloc(n);
  snprintf(p, n, "%s/%s", a, b);
  return p;
}

static char *corpus_path(const char *file) {
  require_mil_corpus();
  char *dir = path_join(source_root(), "../shared/corpus/mil");
  char *p = path_join(dir, file);
  free(dir);
  return p;
}

/* Names in dir ending with suffix, sorted; the directory must exist. */
static uint32_t list_dir(const char *dir, const char *suffix, char ***out) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "cannot open %s: a directory these tests read is missing", dir);
  char **names = NULL;
  uint32_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name), sl = strlen(suffix);
    if (len <= sl || strcmp(e->d_name + len - sl, suffix) != 0) continue;
    xgrow((void **)&names, sizeof *names, &cap, n + 1);
    names[n++] = path_join(dir, e->d_name);
  }
  closedir(d);
  for (uint32_t i = 1; i < n; i++) /* insertion sort: a few files */
    for (uint32_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char *t = names[j];
      names[j] = names[j - 1];
      names[j - 1] = t;
    }
  *out = names;
  return n;
}

static void free_names(char **names, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

/* Reads a corpus file that must be accepted. */
static void read_corpus(Read *r, const char *file) {
  char *p = corpus_path(file);
  read_path(r, p);
  cr_assert_not_null(r->p, "%s rejected:\n%s", p, diags(r));
  cr_assert_eq(r->diags.len, 0, "%s: unexpected diagnostics:\n%s", p, diags(r));
  free(p);
}

#define HEADER "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [2]> x) {\n" /* body starts on line 4 */
#define FOOTER "    } -> (x);\n}\n"

/* ---- the shared corpus ------------------------------------------------------------ */

Test(corpus, every_file_reads) {
  require_mil_corpus();
  char *dir = path_join(source_root(), "../shared/corpus/mil");
  char **files;
  uint32_t n = list_dir(dir, ".mil", &files);
  cr_assert_geq(n, 14, "expected the 14 corpus files in %s, found %u", dir, n);
  for (uint32_t i = 0; i < n; i++) {
    Read r;
    read_path(&r, files[i]);
    cr_expect_not_null(r.p, "%s rejected:\n%s", files[i], diags(&r));
    cr_expect_eq(r.diags.len, 0, "%s: %s", files[i], diags(&r));
    if (r.p) {
      cr_expect_geq(r.p->nfuncs, 1, "%s has no function", files[i]);
      /* every name was resolved to a definition */
      for (uint32_t f = 0; f < r.p->nfuncs; f++) {
        const MilFunc *fn = &r.p->funcs[f];
        for (uint32_t s = 0; s < fn->nstmts; s++)
          for (uint32_t a = 0; a < fn->stmts[s].nargs; a++)
            for (uint32_t k = 0; k < fn->stmts[s].args[a].nitems; k++)
              cr_expect_not_null(mil_operand_type(fn, &fn->stmts[s].args[a].items[k]));
      }
    }
    read_close(&r);
  }
  free_names(files, n);
  free(dir);
}

Test(corpus, add_model_1_0_dialect) {
  Read r;
  read_corpus(&r, "coremlc_add_model_ios16.mil");
  const MilProgram *p = r.p;
  cr_assert_str_eq(p->version, "1.0");
  cr_assert_str_eq(mil_build_info(p, "coremltools-version"), "8.1");
  cr_assert_str_eq(mil_build_info(p, "coremlc-version"), "3402.4.1");
  cr_assert_null(mil_build_info(p, "nope"));
  cr_assert_eq(p->nfuncs, 1);
  const MilFunc *f = mil_find_func(p, "main");
  cr_assert_not_null(f);
  cr_assert_str_eq(f->opset, "ios16");
  cr_assert_eq(f->ios, 16);
  cr_assert_eq(f->nparams, 2);
  cr_assert_str_eq(f->params[1].name, "y");
  cr_assert_str_eq(type_text(&f->params[1].type), "tensor<fp16, [1, 10]>");
  cr_assert_eq(f->nstmts, 1);
  const MilStmt *s = &f->stmts[0];
  cr_assert_str_eq(s->op, "mul");
  cr_assert_str_eq(s->op_name, "op_3_cast_fp16");
  cr_assert_str_eq(s->results[0].name, "var_3");
  cr_assert_eq(s->nargs, 2);
  cr_assert_eq(mil_find_arg(s, "y")->items[0].def_stmt, MIL_DEF_PARAM);
  cr_assert_eq(mil_find_arg(s, "y")->items[0].def_index, 1);
  /* the 1.0 spelling of the name attribute */
  const MilAttr *name = mil_find_attr(s->attrs, s->nattrs, "name");
  cr_assert_str_eq(type_text(&name->value->type), "tensor<string, []>");
  cr_assert_eq(f->nreturns, 1);
  cr_assert_eq(f->returns[0].def_stmt, 0);
  read_close(&r);
}

Test(corpus, argmax_scalars_and_two_outputs) {
  Read r;
  read_corpus(&r, "coremlc_argmax_two_outputs_ios16.mil"); /* no final newline */
  const MilFunc *f = &r.p->funcs[0];
  cr_assert_eq(f->nstmts, 6);
  cr_assert_eq(f->nreturns, 2);
  cr_assert_str_eq(f->returns[1].name, "score");
  cr_assert_eq(f->returns[1].def_stmt, 5);
  const MilLiteral *axis = const_val(f, "var_4_axis_0");
  cr_assert_eq(axis->type.rank, 0);
  cr_assert_not(axis->type.bare);
  cr_assert_eq(axis->count, 1);
  cr_assert_eq(axis->ints[0], -1);
  cr_assert_eq(const_val(f, "var_4_keep_dims_0")->bools[0], true);
  read_close(&r);
}

Test(corpus, lstm_three_results_and_blob_offsets) {
  Read r;
  read_corpus(&r, "coremlc_lstm_decoder_ios17.mil");
  const MilFunc *f = &r.p->funcs[0];
  cr_assert_str_eq(f->opset, "ios17");
  cr_assert_eq(f->nparams, 4);
  cr_assert_eq(f->nstmts, 39);
  const MilStmt *lstm = stmt_defining(f, "input_cast_fp16_0");
  cr_assert_str_eq(lstm->op, "lstm");
  cr_assert_eq(lstm->nresults, 3);
  cr_assert_str_eq(type_text(&lstm->results[2].type), "tensor<fp16, [1, 640]>");
  cr_assert_eq(lstm->nargs, 11);
  const MilLiteral *w = const_val(f, "concat_1_to_fp16");
  cr_assert_eq(w->payload, MIL_PAYLOAD_BLOB);
  cr_assert_str_eq(w->blob_path, "@model_path/weights/weight.bin");
  cr_assert_eq(w->blob_offset, 1314688);
  cr_assert_eq(mil_type_elements(&w->type), 2560u * 640u);
  cr_assert_eq(const_val(f, "concat_0_to_fp16")->blob_offset, 7868416);
  cr_assert_str_eq(f->returns[0].name, "decoder");
  read_close(&r);
}

Test(corpus, topk_with_uint16_result) {
  Read r;
  read_corpus(&r, "coremlc_joint_softmax_topk_ios17.mil");
  const MilFunc *f = &r.p->funcs[0];
  const MilStmt *s = stmt_defining(f, "var_63_cast_fp16_cast_int16_1");
  cr_assert_str_eq(s->op, "topk");
  cr_assert_eq(s->nresults, 2);
  cr_assert_eq(s->results[1].type.dtype, MIL_DT_UINT16);
  cr_assert_eq(f->nreturns, 4);
  read_close(&r);
}

Test(corpus, flexible_shapes_and_function_attributes) {
  Read r;
  read_corpus(&r, "coremlc_transpose_flexible_shape_ios16.mil");
  const MilFunc *f = &r.p->funcs[0];
  cr_assert_str_eq(type_text(&f->params[0].type), "tensor<fp16, [1, ?, ?]>");
  cr_assert_eq(f->params[0].type.dims[1], -1);
  cr_assert_eq(f->nattrs, 1);
  const MilLiteral *fsi = mil_find_attr(f->attrs, f->nattrs, "FlexibleShapeInformation")->value;
  cr_assert_eq(fsi->type.kind, MIL_TYPE_TUPLE);
  cr_assert_eq(fsi->type.nsub, 2);
  cr_assert_str_eq(type_text(&fsi->type.sub[1]),
                   "tuple<tensor<string, []>, dict<tensor<string, []>, list<tensor<int32, [2]>, ?>>>");
  cr_assert_eq(fsi->value.kind, MIL_ELEM_TUPLE);
  /* ("RangeDims", {{"x", [[1, 1], [1, 2048], [1, 2048]]}}) */
  const MilElem *range = &fsi->value.items[1];
  cr_assert_str_eq(range->items[0].s, "RangeDims");
  const MilElem *entry = &range->items[1].items[0];
  cr_assert_str_eq(entry->items[0].s, "x");
  cr_assert_eq(entry->items[1].n, 3);
  cr_assert_eq(entry->items[1].items[2].items[1].i, 2048);
  cr_assert_eq(fsi->count, 0); /* compound literals have no flat data */
  read_close(&r);
}

Test(corpus, mnist_1_3_dialect_literal_args_and_no_attr_blocks) {
  Read r;
  read_corpus(&r, "coremlc_v1_3_inline_args_mnist_ios16.mil");
  const MilProgram *p = r.p;
  cr_assert_str_eq(p->version, "1.3");
  cr_assert_str_eq(mil_build_info(p, "coremlc-version"), "3520.5.1");
  const MilFunc *f = &p->funcs[0];
  cr_assert_str_eq(f->opset, "ios16");
  cr_assert_eq(f->nstmts, 20);
  /* const()[val = ...] without a name */
  const MilStmt *c = &f->stmts[0];
  cr_assert_null(c->op_name);
  cr_assert_eq(c->nattrs, 1);
  const MilLiteral *w = const_val(f, "Parameter193");
  cr_assert_eq(w->payload, MIL_PAYLOAD_INLINE);
  cr_assert_eq(w->count, 16 * 4 * 4 * 10);
  cr_assert_eq(w->floats[0], 0x1.77540ap-4);
  cr_assert_eq(w->floats[2], 0x1.5d98a4p-4);
  cr_assert_eq(w->floats[4], -0x1.947f0cp-4);
  /* conv with literal arguments and no attribute block */
  const MilStmt *conv = stmt_defining(f, "Convolution28_Output_0");
  cr_assert_str_eq(conv->op, "conv");
  cr_assert_eq(conv->nattrs, 0);
  cr_assert_null(conv->op_name);
  const MilArg *groups = mil_find_arg(conv, "groups");
  cr_assert_eq(groups->items[0].kind, MIL_OPERAND_LITERAL);
  cr_assert(groups->items[0].literal->type.bare);
  cr_assert_eq(groups->items[0].literal->ints[0], 1);
  cr_assert_str_eq(mil_find_arg(conv, "pad_type")->items[0].literal->strings[0], "same");
  cr_assert_eq(mil_find_arg(conv, "weight")->items[0].def_stmt, 2); /* Parameter5 */
  const MilArg *tx = mil_find_arg(stmt_defining(f, "Times212_Output_0"), "transpose_x");
  cr_assert_eq(tx->items[0].literal->bools[0], false);
  read_close(&r);
}

Test(corpus, conformer_encoder_full_file) {
  Read r;
  read_corpus(&r, "coremlc_conformer_streaming_encoder_ios17.mil");
  const MilFunc *f = &r.p->funcs[0];
  cr_assert_eq(f->nstmts, 2971);
  cr_assert_eq(f->nparams, 6);
  cr_assert_eq(f->nreturns, 6);
  /* hex floats: 0x1.5p-17 is fp16(1e-5); -0x1.388p+13 is -10000 */
  const MilLiteral *eps = const_val(f, "var_38_to_fp16");
  cr_assert_eq(eps->value.kind, MIL_ELEM_FLOAT);
  cr_assert_eq(eps->value.f, 0x1.5p-17);
  cr_assert_eq(eps->floats[0], 0x1.5p-17);
  cr_assert_eq(const_val(f, "var_41_to_fp16")->floats[0], -10000.0);
  cr_assert(isinf(const_val(f, "const_5_to_fp16")->floats[0]));
  cr_assert_lt(const_val(f, "const_237_to_fp16")->floats[0], 0);
  cr_assert(isinf(const_val(f, "const_237_to_fp16")->floats[0]));
  /* two typed results of split; a 17-value stack */
  const MilStmt *split = stmt_defining(f, "x_19_split_cast_fp16_1");
  cr_assert_str_eq(split->op, "split");
  cr_assert_eq(split->nresults, 2);
  const MilArg *values = mil_find_arg(stmt_defining(f, "obj_5_cast_fp16"), "values");
  cr_assert(values->is_list);
  cr_assert_eq(values->nitems, 17);
  uint32_t blobs = 0;
  for (uint32_t i = 0; i < f->nstmts; i++) {
    const MilAttr *v = mil_find_attr(f->stmts[i].attrs, f->stmts[i].nattrs, "val");
    if (v && v->value->payload == MIL_PAYLOAD_BLOB) blobs++;
  }
  cr_assert_eq(blobs, 457);
  read_close(&r);
}

Test(corpus, ane_direct_compact_style) {
  Read r;
  read_corpus(&r, "ane_maderix_sdpa_fwd_taps.mil");
  const MilFunc *f = &r.p->funcs[0];
  cr_assert_eq(f->nstmts, 50);
  const MilArg *values = mil_find_arg(stmt_defining(f, "out"), "values");
  cr_assert(values->is_list);
  cr_assert_eq(values->nitems, 6);
  cr_assert_str_eq(values->items[5].name, "xn");
  /* %f decimals: the value as written, the data rounded to fp16 */
  const MilLiteral *eps = const_val(f, "eps");
  cr_assert_eq(eps->value.f, 0.00001);
  cr_assert_eq(eps->floats[0], 0x1.5p-17); /* what coremlc writes for fp16(1e-5) */
  cr_assert_eq(const_val(f, "scv")->floats[0], 0.25);
  cr_assert_str_eq(const_val(f, "Wv")->blob_path, "@model_path/weights/wv.bin");
  cr_assert_eq(const_val(f, "Wv")->blob_offset, 64);
  read_close(&r);
}

Test(corpus, constexpr_parameters_as_attributes) {
  Read r;
  read_corpus(&r, "ane_maderix_int8_constexpr_quant.mil");
  const MilFunc *f = &r.p->funcs[0];
  const MilStmt *s = stmt_defining(f, "W1");
  cr_assert_str_eq(s->op, "constexpr_affine_dequantize");
  cr_assert_eq(s->nattrs, 5);
  const MilLiteral *q = mil_find_attr(s->attrs, s->nattrs, "quantized_data")->value;
  cr_assert_str_eq(type_text(&q->type), "tensor<int8, [64, 64, 1, 1]>");
  cr_assert_eq(q->blob_offset, 4224);
  cr_assert_eq(mil_find_attr(s->attrs, s->nattrs, "scale")->value->floats[0], 0.125);
  read_close(&r);
}

Test(corpus, multiple_outputs) {
  Read r;
  read_corpus(&r, "ane_maderix_qkv_three_outputs.mil");
  const MilFunc *f = &r.p->funcs[0];
  cr_assert_eq(f->nreturns, 3);
  cr_assert_eq(const_val(f, "Wk")->blob_offset, 8320);
  cr_assert_eq(const_val(f, "Wv")->blob_offset, 16576);
  read_close(&r);
  read_corpus(&r, "ane_orion_layernorm_linear_gelu.mil");
  cr_assert_eq(r.p->funcs[0].nreturns, 2);
  cr_assert_str_eq(r.p->funcs[0].returns[1].name, "ln_out");
  read_close(&r);
}

/* ---- what our emitter writes --------------------------------------------------------- */

/* The emitter's canonical form (mil-spec §1.11): a buildInfo dict, every
 * statement named after its first result, parameters sorted by name. */
static void check_emitted(const char *what, const MilProgram *p) {
  cr_assert_not_null(mil_build_info(p, "coremlc-version"), "%s: no buildInfo", what);
  for (uint32_t i = 0; i < p->nfuncs; i++) {
    const MilFunc *f = &p->funcs[i];
    for (uint32_t k = 0; k < f->nstmts; k++) {
      cr_assert_not_null(f->stmts[k].op_name, "%s: statement %u has no name", what, k);
      cr_assert_str_eq(f->stmts[k].op_name, f->stmts[k].results[0].name, "%s", what);
    }
    for (uint32_t k = 1; k < f->nparams; k++)
      cr_assert_lt(strcmp(f->params[k - 1].name, f->params[k].name), 0, "%s: params not sorted", what);
  }
}

Test(emitted, testsuite_mil_files) {
  char *dir = path_join(source_root(), "testsuite/mil");
  char **files;
  uint32_t n = list_dir(dir, ".mil", &files);
  cr_assert_geq(n, 1, "no .mil file in %s", dir);
  for (uint32_t i = 0; i < n; i++) {
    Read r;
    read_path(&r, files[i]);
    cr_assert_not_null(r.p, "%s rejected:\n%s", files[i], diags(&r));
    cr_assert_eq(r.diags.len, 0, "%s", diags(&r));
    check_emitted(files[i], r.p);
    read_close(&r);
  }
  free_names(files, n);
  free(dir);
}

Test(emitted, golden_mil_outputs) {
  char *dir = path_join(source_root(), "testsuite/golden");
  char **files;
  uint32_t n = list_dir(dir, ".expected", &files);
  uint32_t seen = 0;
  for (uint32_t i = 0; i < n; i++) {
    const char *base = strrchr(files[i], '/') + 1;
    if (strncmp(base, "mil-", 4) != 0) continue;
    char *text;
    size_t len;
    const char *err;
    cr_assert(read_file(files[i], MAX_SOURCE_BYTES, &text, &len, &err), "%s: %s", files[i], err);
    const char *from = strstr(text, "--- stdout\n");
    const char *to = from ? strstr(from, "\n--- stderr") : NULL;
    cr_assert(from && to, "%s: no stdout section", files[i]);
    from += strlen("--- stdout\n");
    Read r;
    read_open(&r, base, from, (size_t)(to - from + 1));
    cr_assert_not_null(r.p, "%s rejected:\n%s", files[i], diags(&r));
    cr_assert_eq(r.diags.len, 0, "%s", diags(&r));
    check_emitted(files[i], r.p);
    read_close(&r);
    free(text);
    seen++;
  }
  cr_assert_geq(seen, 7, "expected the mil-*.expected golden files in %s", dir);
  free_names(files, n);
  free(dir);
}

/* ---- tolerance (§1.11) ------------------------------------------------------------------ */

Test(tolerance, compact_text_comments_and_coreml_opsets) {
  Read r;
  read_ok(&r, "program(1.3){func main<CoreML8>(tensor<fp16,[1,2]>x){// no spaces anywhere\n"
              "tensor<fp16,[1,2]>y=relu(x=x)[name=string(\"y\")];}->(y);}");
  const MilFunc *f = &r.p->funcs[0];
  cr_assert_str_eq(f->opset, "ios18");
  cr_assert_str_eq(f->opset_written, "CoreML8");
  cr_assert_eq(f->ios, 18);
  cr_assert_str_eq(f->stmts[0].op_name, "y");
  read_close(&r);
}

Test(tolerance, crlf_and_no_final_newline) {
  Read r;
  read_ok(&r, "program(1.3)\r\n{\r\n  func main<ios18>(fp16 x) {\r\n  } -> (x);\r\n}");
  cr_assert_eq(r.p->funcs[0].nparams, 1);
  cr_assert(r.p->funcs[0].params[0].type.bare);
  read_close(&r);
}

Test(tolerance, missing_attribute_blocks_and_build_info) {
  Read r;
  read_ok(&r, "program(1.3) { func main<ios18>(fp16 x) { fp16 y = relu(x = x); fp16 z = const()[val = fp16(1)]; } "
              "-> (y, z); }");
  cr_assert_eq(r.p->nattrs, 0);
  cr_assert_null(mil_build_info(r.p, "coremlc-version"));
  cr_assert_null(r.p->funcs[0].stmts[0].op_name);
  read_close(&r);
}

Test(tolerance, parenthesised_results_and_unknown_ops) {
  Read r;
  read_ok(&r, HEADER "        (fp16 a, tensor<fp16, [?]> b) = frobnicate(x = x);\n" FOOTER);
  const MilStmt *s = &r.p->funcs[0].stmts[0];
  cr_assert_str_eq(s->op, "frobnicate");
  cr_assert_eq(s->nresults, 2);
  cr_assert_str_eq(s->results[1].name, "b");
  cr_assert_eq(s->results[1].type.dims[0], -1);
  read_close(&r);
}

Test(tolerance, binding_lists_literals_and_keyword_argument_names) {
  Read r;
  read_ok(&r, HEADER "        tensor<fp16, [4]> c = concat(axis = int32(0), interleave = bool(false), values = (x));\n"
                     "        tensor<fp16, [2]> s = coreml_update_state(state = x, value = x);\n"
                     "        tensor<fp16, [6]> d = concat(axis = int32(0), values = (x, c));\n" FOOTER);
  const MilFunc *f = &r.p->funcs[0];
  const MilArg *v = mil_find_arg(&f->stmts[0], "values");
  cr_assert(v->is_list);
  cr_assert_eq(v->nitems, 1);
  cr_assert_str_eq(f->stmts[1].args[0].name, "state");
  const MilArg *v2 = mil_find_arg(&f->stmts[2], "values");
  cr_assert_eq(v2->items[1].def_stmt, 0);
  cr_assert_eq(mil_operand_type(f, &v2->items[1])->dims[0], 4);
  cr_assert_eq(mil_operand_type(f, &v2->items[0])->dims[0], 2);
  read_close(&r);
}

Test(tolerance, flat_and_nested_payloads_give_the_same_data) {
  Read r;
  read_ok(&r, HEADER "        tensor<int32, [2, 3]> a = const()[val = tensor<int32, [2, 3]>([[1, 2, 3], [4, 5, 6]])];\n"
                     "        tensor<int32, [2, 3]> b = const()[val = tensor<int32, [2, 3]>([1, 2, 3, 4, 5, 6])];\n"
                     "        tensor<int32, [0, 3]> e = const()[val = tensor<int32, [0, 3]>([])];\n"
                     "        tensor<int32, [0]> z = const()[val = tensor<int32, [0]>()];\n" FOOTER);
  const MilFunc *f = &r.p->funcs[0];
  const MilLiteral *a = const_val(f, "a"), *b = const_val(f, "b");
  cr_assert_eq(a->count, 6);
  cr_assert_eq(b->count, 6);
  for (int i = 0; i < 6; i++) {
    cr_assert_eq(a->ints[i], i + 1);
    cr_assert_eq(b->ints[i], i + 1);
  }
  cr_assert_eq(a->value.n, 2);
  cr_assert_eq(b->value.n, 6);
  cr_assert_eq(const_val(f, "e")->count, 0);
  cr_assert_eq(const_val(f, "z")->payload, MIL_PAYLOAD_NONE);
  read_close(&r);
}

Test(tolerance, compound_types_empty_dicts_and_unknown_attributes) {
  Read r;
  read_ok(&r, "program(1.3)\n[buildInfo = dict<string, string>({}), somethingNew = tuple<>(())]\n{\n"
              "    func main<ios18>(state<tensor<fp16, [1, 4]>> cache, list<tensor<int32, [2]>, ?> l) "
              "[Opaque = dict<string, list<int32, 2>>({{\"a\", [1, 2]}})] {\n"
              "        tuple<int32, string> t = const()[val = tuple<int32, string>((3, \"s\"))];\n"
              "    } -> (t);\n}\n");
  const MilProgram *p = r.p;
  cr_assert_eq(p->nattrs, 2);
  cr_assert_eq(mil_find_attr(p->attrs, p->nattrs, "somethingNew")->value->type.nsub, 0);
  const MilFunc *f = &p->funcs[0];
  cr_assert_eq(f->params[0].type.kind, MIL_TYPE_STATE);
  cr_assert_str_eq(type_text(&f->params[0].type), "state<tensor<fp16, [1, 4]>>");
  cr_assert_eq(f->params[1].type.kind, MIL_TYPE_LIST);
  cr_assert_eq(f->params[1].type.length, -1);
  cr_assert_str_eq(type_text(&f->attrs[0].value->type), "dict<string, list<int32, 2>>");
  const MilLiteral *t = const_val(f, "t");
  cr_assert_eq(t->type.kind, MIL_TYPE_TUPLE);
  cr_assert_str_eq(t->value.items[1].s, "s");
  read_close(&r);
}

Test(tolerance, multiple_functions) {
  Read r;
  read_ok(&r, "program(1.3) {\n func a<ios17>(fp16 x) {} -> (x);\n func b<ios18>(fp16 x) {\n"
              "  fp16 y = relu(x = x);\n } -> (y);\n}\n");
  cr_assert_eq(r.p->nfuncs, 2);
  cr_assert_str_eq(mil_find_func(r.p, "b")->opset, "ios18");
  cr_assert_null(mil_find_func(r.p, "c"));
  read_close(&r);
}

/* ---- literal values ---------------------------------------------------------------------- */

Test(values, numbers_follow_strtod_and_round_to_the_dtype) {
  Read r;
  read_ok(&r, HEADER
          "        tensor<fp32, [9]> a = const()[val = tensor<fp32, [9]>([0x1p-1, -0x1.388p+13, 0x1p-149, 1e-3, .5, 2., "
          "-1, inf, -inf])];\n"
          "        tensor<fp16, [4]> h = const()[val = tensor<fp16, [4]>([0.1, 65504, 70000, nan])];\n"
          "        tensor<bf16, [2]> b = const()[val = tensor<bf16, [2]>([0.1, 1.00390625])];\n"
          "        tensor<fp64, [1]> d = const()[val = tensor<fp64, [1]>([0.1])];\n"
          "        fp16 n = const()[val = fp16(-nan)];\n" FOOTER);
  const MilFunc *f = &r.p->funcs[0];
  const double *a = const_val(f, "a")->floats;
  cr_assert_eq(a[0], 0.5);
  cr_assert_eq(a[1], -10000.0);
  cr_assert_eq(a[2], 0x1p-149);
  cr_assert_eq(a[3], (double)1e-3f);
  cr_assert_eq(a[4], 0.5);
  cr_assert_eq(a[5], 2.0);
  cr_assert_eq(a[6], -1.0);
  cr_assert(isinf(a[7]) && a[7] > 0);
  cr_assert(isinf(a[8]) && a[8] < 0);
  const MilLiteral *h = const_val(f, "h");
  cr_assert_eq(h->value.items[0].f, 0.1); /* as written */
  cr_assert_eq(h->floats[0], 0x1.998p-4); /* fp16 nearest */
  cr_assert_eq(h->floats[1], 65504.0);
  cr_assert(isinf(h->floats[2]));
  cr_assert(isnan(h->floats[3]));
  cr_assert_eq(const_val(f, "b")->floats[0], 0x1.9ap-4);
  cr_assert_eq(const_val(f, "b")->floats[1], 1.0); /* a tie goes to even */
  cr_assert_eq(const_val(f, "d")->floats[0], 0.1);
  cr_assert(isnan(const_val(f, "n")->floats[0]));
  read_close(&r);
}

Test(values, integers_strings_and_bools) {
  Read r;
  read_ok(&r, HEADER "        tensor<uint64, [2]> u = const()[val = tensor<uint64, [2]>([18446744073709551615, 0])];\n"
                     "        tensor<int64, [1]> i = const()[val = tensor<int64, [1]>([-9223372036854775808])];\n"
                     "        tensor<int4, [2]> q = const()[val = tensor<int4, [2]>([-8, 7])];\n"
                     "        tensor<uint1, [2]> one = const()[val = tensor<uint1, [2]>([0, 1])];\n"
                     "        tensor<string, [2]> s = const()[val = tensor<string, [2]>([\"a\\\"b\\\\c\", \"\"])];\n"
                     "        tensor<bool, [2]> b = const()[val = tensor<bool, [2]>([true, false])];\n" FOOTER);
  const MilFunc *f = &r.p->funcs[0];
  const MilLiteral *u = const_val(f, "u");
  cr_assert(u->value.items[0].big);
  cr_assert_eq((uint64_t)u->ints[0], UINT64_MAX);
  cr_assert_eq(const_val(f, "i")->ints[0], INT64_MIN);
  cr_assert_eq(const_val(f, "q")->ints[0], -8);
  cr_assert_str_eq(const_val(f, "s")->strings[0], "a\"b\\c");
  cr_assert_str_eq(const_val(f, "s")->strings[1], "");
  cr_assert_eq(const_val(f, "b")->bools[0], true);
  cr_assert_eq(const_val(f, "b")->bools[1], false);
  read_close(&r);
}

/* ---- errors: exact texts ------------------------------------------------------------------------ */

Test(errors, syntax_error_with_recovery) {
  cr_assert_str_eq(errors_of(HEADER "        fp16 y = relu(x = x) extra;\n"
                                    "        fp16 z = relu(x = x y);\n" FOOTER),
                   "t.mil:4:30: error: unexpected identifier 'extra', expected ';' or '['\n"
                   "    4 |         fp16 y = relu(x = x) extra;\n"
                   "      |                              ^~~~~\n"
                   "t.mil:5:29: error: unexpected identifier 'y', expected ')' or ','\n"
                   "    5 |         fp16 z = relu(x = x y);\n"
                   "      |                             ^\n");
  cr_assert_str_eq(first_error(""), "t.mil:1:1: error: unexpected end of file, expected 'program'");
  cr_assert_str_eq(first_error("program(1.3) { func main<ios18>() {} -> (); } x"),
                   "t.mil:1:47: error: unexpected identifier 'x', expected end of file");
  cr_assert_str_eq(first_error(HEADER "        fp16 = relu(x = x);\n" FOOTER),
                   "t.mil:4:14: error: unexpected '=', expected identifier");
  cr_assert_str_eq(first_error(HEADER "        fp16 y = relu(x = x)\n" FOOTER),
                   "t.mil:5:5: error: unexpected '}', expected ';' or '['");
}

Test(errors, redefinition) {
  cr_assert_str_eq(errors_of(HEADER "        fp16 y = relu(x = x);\n"
                                    "        fp16 y = relu(x = x);\n" FOOTER),
                   "t.mil:5:14: error: redefinition of 'y'\n"
                   "    5 |         fp16 y = relu(x = x);\n"
                   "      |              ^\n"
                   "t.mil:4:14: note: previous definition of 'y' is here\n"
                   "    4 |         fp16 y = relu(x = x);\n"
                   "      |              ^\n");
  cr_assert_str_eq(first_error(HEADER "        fp16 x = relu(x = x);\n" FOOTER), "t.mil:4:14: error: redefinition of 'x'");
  cr_assert_str_eq(first_error("program(1.3) {\nfunc main<ios18>(fp16 a, fp16 a) {} -> (a);\n}"),
                   "t.mil:2:31: error: redefinition of 'a'");
  cr_assert_str_eq(first_error("program(1.3) {\nfunc f<ios18>() {} -> ();\nfunc f<ios18>() {} -> ();\n}"),
                   "t.mil:3:6: error: redefinition of function 'f'");
}

Test(errors, use_before_definition_and_undefined_names) {
  cr_assert_str_eq(errors_of(HEADER "        fp16 a = relu(x = b);\n"
                                    "        fp16 b = relu(x = x);\n" FOOTER),
                   "t.mil:4:27: error: 'b' is used before its definition\n"
                   "    4 |         fp16 a = relu(x = b);\n"
                   "      |                           ^\n"
                   "t.mil:5:14: note: 'b' is defined here\n"
                   "    5 |         fp16 b = relu(x = x);\n"
                   "      |              ^\n");
  cr_assert_str_eq(first_error(HEADER "        fp16 a = relu(x = a);\n" FOOTER),
                   "t.mil:4:27: error: 'a' is used before its definition");
  cr_assert_str_eq(first_error(HEADER "        fp16 a = concat(values = (x, nowhere));\n" FOOTER),
                   "t.mil:4:38: error: use of undefined value 'nowhere'");
}

Test(errors, undefined_return_name) {
  cr_assert_str_eq(errors_of(HEADER "        fp16 a = relu(x = x);\n    } -> (a, b);\n}\n"),
                   "t.mil:5:14: error: function 'main' returns undefined value 'b'\n"
                   "    5 |     } -> (a, b);\n"
                   "      |              ^\n");
}

Test(errors, payload_shape_mismatch) {
  cr_assert_str_eq(
      errors_of(HEADER "        tensor<fp16, [2, 3]> c = const()[val = tensor<fp16, [2, 3]>([[1, 2, 3], [4, 5]])];\n" FOOTER),
      "t.mil:4:81: error: expected 3 values along axis 1 of tensor<fp16, [2, 3]>, found 2\n"
      "    4 |         tensor<fp16, [2, 3]> c = const()[val = tensor<fp16, [2, 3]>([[1, 2, 3], [4, 5]])];\n"
      "      |                                                                                 ^\n");
  cr_assert_str_eq(
      first_error(HEADER "        tensor<fp16, [2, 3]> c = const()[val = tensor<fp16, [2, 3]>([1, 2, 3, 4, 5])];\n" FOOTER),
      "t.mil:4:69: error: expected 6 values for tensor<fp16, [2, 3]>, found 5");
  cr_assert_str_eq(first_error(HEADER "        tensor<fp16, [2, 1]> c = const()[val = tensor<fp16, [2, 1]>([[[1]], [2]])];\n" FOOTER),
                   "t.mil:4:71: error: list nested deeper than the rank of tensor<fp16, [2, 1]>");
  cr_assert_str_eq(first_error(HEADER "        tensor<fp16, [3]> c = const()[val = tensor<fp16, [3]>([[1], [2], [3]])];\n" FOOTER),
                   "t.mil:4:64: error: list nested deeper than the rank of tensor<fp16, [3]>");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = const()[val = fp16([1])];\n" FOOTER),
                   "t.mil:4:37: error: expected a single value for fp16, found a list");
  cr_assert_str_eq(first_error(HEADER "        tensor<fp16, [1]> c = const()[val = tensor<fp16, [1]>(1)];\n" FOOTER),
                   "t.mil:4:63: error: expected a list for tensor<fp16, [1]>, found an integer");
  cr_assert_str_eq(first_error(HEADER "        tensor<fp16, [2]> c = const()[val = tensor<fp16, [2]>()];\n" FOOTER),
                   "t.mil:4:45: error: expected 2 values for tensor<fp16, [2]>, found none");
  cr_assert_str_eq(first_error(HEADER "        tensor<int32, []> c = const()[val = tensor<int32, []>()];\n" FOOTER),
                   "t.mil:4:45: error: missing value for tensor<int32, []>");
  cr_assert_str_eq(first_error(HEADER "        tensor<int8, [2]> c = const()[val = tensor<int8, [2]>([1, 300])];\n" FOOTER),
                   "t.mil:4:67: error: value 300 is out of range for int8 (-128 to 127)");
  cr_assert_str_eq(first_error(HEADER "        uint8 c = const()[val = uint8(-1)];\n" FOOTER),
                   "t.mil:4:39: error: value -1 is out of range for uint8 (0 to 255)");
  cr_assert_str_eq(first_error(HEADER "        int32 c = const()[val = int32(0.5)];\n" FOOTER),
                   "t.mil:4:39: error: expected an integer for int32, found a number");
  cr_assert_str_eq(first_error(HEADER "        bool c = const()[val = bool(1)];\n" FOOTER),
                   "t.mil:4:37: error: expected true or false for bool, found an integer");
  cr_assert_str_eq(first_error(HEADER "        string c = const()[val = string(1.5)];\n" FOOTER),
                   "t.mil:4:41: error: expected a string for string, found a number");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = const()[val = fp16(\"x\")];\n" FOOTER),
                   "t.mil:4:37: error: expected a number for fp16, found a string");
  cr_assert_str_eq(first_error(HEADER "        tuple<int32, int32> c = const()[val = tuple<int32, int32>((1))];\n" FOOTER),
                   "t.mil:4:67: error: expected 2 values for tuple<int32, int32>, found 1");
  cr_assert_str_eq(first_error(HEADER "        dict<string, int32> c = const()[val = dict<string, int32>({{\"a\"}})];\n" FOOTER),
                   "t.mil:4:68: error: expected a {key, value} entry of dict<string, int32>, found a dict of another size");
}

Test(errors, const_statements) {
  cr_assert_str_eq(first_error(HEADER "        fp16 c = const()[name = string(\"c\")];\n" FOOTER),
                   "t.mil:4:18: error: const 'c' has no 'val' attribute");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = const();\n" FOOTER), "t.mil:4:18: error: const 'c' has no 'val' attribute");
  cr_assert_str_eq(first_error(HEADER "        tensor<fp16, [2]> k = const()[val = tensor<fp16, [3]>([1, 2, 3])];\n" FOOTER),
                   "t.mil:4:45: error: 'val' has type tensor<fp16, [3]> but 'k' is declared as tensor<fp16, [2]>");
  cr_assert_str_eq(first_error(HEADER "        fp16 a, fp16 b = const()[val = fp16(1)];\n" FOOTER),
                   "t.mil:4:26: error: const has 2 results; it must have exactly one");
}

Test(errors, unknown_dtype_and_opset) {
  cr_assert_str_eq(errors_of(HEADER "        tensor<fp8, [2]> c = relu(x = x);\n" FOOTER),
                   "t.mil:4:16: error: unknown dtype 'fp8'\n"
                   "    4 |         tensor<fp8, [2]> c = relu(x = x);\n"
                   "      |                ^~~\n");
  cr_assert_str_eq(first_error(HEADER "        fp8 c = relu(x = x);\n" FOOTER), "t.mil:4:9: error: unknown dtype 'fp8'");
  cr_assert_str_eq(first_error("program(1.3) { func main<macos15>() {} -> (); }"),
                   "t.mil:1:26: error: unknown opset 'macos15' (expected iosNN or CoreMLn)");
  /* an unknown dtype does not hide the other checks */
  cr_assert_str_eq(errors_of(HEADER "        tensor<fp8, [2]> c = relu(x = y);\n" FOOTER),
                   "t.mil:4:16: error: unknown dtype 'fp8'\n"
                   "    4 |         tensor<fp8, [2]> c = relu(x = y);\n"
                   "      |                ^~~\n"
                   "t.mil:4:39: error: use of undefined value 'y'\n"
                   "    4 |         tensor<fp8, [2]> c = relu(x = y);\n"
                   "      |                                       ^\n");
}

Test(errors, lexical) {
  cr_assert_str_eq(errors_of(HEADER "        fp16 c = relu(x = x)[name = string(\"abc)];\n" FOOTER),
                   "t.mil:4:44: error: unterminated string\n"
                   "    4 |         fp16 c = relu(x = x)[name = string(\"abc)];\n"
                   "      |                                            ^~~~~~~\n");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = relu(x = x)[name = string(\"a\\qb\")];\n" FOOTER),
                   "t.mil:4:46: error: unknown escape sequence '\\q' in string");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = relu(x = x) # ;\n" FOOTER), "t.mil:4:30: error: unexpected character '#'");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = const()[val = fp16(0x1.8)];\n" FOOTER),
                   "t.mil:4:37: error: malformed number '0x1.8' (a hex float needs a 'p' exponent)");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = const()[val = fp16(1e999)];\n" FOOTER),
                   "t.mil:4:37: error: number '1e999' out of range (write inf for infinity)");
  cr_assert_str_eq(first_error(HEADER "        int64 c = const()[val = int64(99999999999999999999)];\n" FOOTER),
                   "t.mil:4:39: error: integer '99999999999999999999' out of range (limit is 64 bits)");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = const()[val = fp16(infinity)];\n" FOOTER),
                   "t.mil:4:37: error: unexpected identifier 'infinity' in a literal");
  cr_assert_str_eq(first_error(HEADER "        tensor<fp16, [-2]> c = relu(x = x);\n" FOOTER),
                   "t.mil:4:23: error: dimension -2 is out of range (write ? for an unknown size)");
}

Test(errors, statement_level_checks) {
  cr_assert_str_eq(first_error(HEADER "        fp16 c = add(x = x, x = x);\n" FOOTER), "t.mil:4:29: error: argument 'x' given twice");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = relu(x = x)[name = string(\"a\"), name = string(\"b\")];\n" FOOTER),
                   "t.mil:4:50: error: attribute 'name' given twice");
  cr_assert_str_eq(first_error(HEADER "        fp16 c = relu(x = x)[name = int32(1)];\n" FOOTER),
                   "t.mil:4:37: error: attribute 'name' must be a string, not int32");
}

/* A const whose val is `tensor<fp16, [2]>(BLOBFILE(FIELDS))`, on line 4. */
#define BLOB_CONST(fields) HEADER "        tensor<fp16, [2]> c = const()[val = tensor<fp16, [2]>(BLOBFILE(" fields "))];\n" FOOTER

Test(errors, blobfile) {
  cr_assert_str_eq(first_error(BLOB_CONST("path = string(\"w\"), offset = int32(-1)")),
                   "t.mil:4:101: error: BLOBFILE offset must be a non-negative integer such as uint64(64)");
  cr_assert_str_eq(first_error(BLOB_CONST("path = int32(3), offset = uint64(1)")),
                   "t.mil:4:79: error: BLOBFILE path must be a string, not int32");
  cr_assert_str_eq(first_error(BLOB_CONST("file = string(\"w\"), offset = uint64(1)")),
                   "t.mil:4:72: error: unexpected 'file' in BLOBFILE, expected path and offset");
  cr_assert_str_eq(
      first_error(HEADER "        string c = const()[val = string(BLOBFILE(path = string(\"w\"), offset = uint64(64)))];\n" FOOTER),
      "t.mil:4:34: error: BLOBFILE cannot hold string");
  /* either order of the two fields is read */
  Read r;
  read_ok(&r, BLOB_CONST("offset = uint64(128), path = string(\"w.bin\")"));
  cr_assert_eq(const_val(&r.p->funcs[0], "c")->blob_offset, 128);
  read_close(&r);
}

/* ---- limits ------------------------------------------------------------------------------------------ */

/* The text ends inside brackets: the innermost open one is named. */
Test(errors, unclosed_bracket_at_the_end) {
  cr_assert_str_eq(errors_of("program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1]> x) {\n"),
                   "t.mil:3:43: error: '{' is never closed\n"
                   "    3 |     func main<ios18>(tensor<fp16, [1]> x) {\n"
                   "      |                                           ^\n");
  cr_assert_str_eq(first_error(HEADER "        fp16 y = relu(x = x"), "t.mil:4:22: error: '(' is never closed");
  /* Brackets closed before the end do not count. */
  cr_assert_str_eq(first_error("program(1.3) {} junk"), "t.mil:1:17: error: unexpected identifier 'junk', expected end of file");
}

Test(limits, name_length) {
  char text[4096];
  char name[MIL_MAX_NAME + 2];
  memset(name, 'n', sizeof name - 1);
  name[sizeof name - 1] = 0;
  snprintf(text, sizeof text, HEADER "        fp16 %s = relu(x = x);\n" FOOTER, name);
  cr_assert_str_eq(first_error(text), "t.mil:4:14: error: name too long (limit is 1024 characters)");
  name[MIL_MAX_NAME] = 0; /* exactly at the limit: fine */
  snprintf(text, sizeof text, HEADER "        fp16 %s = relu(x = x);\n" FOOTER, name);
  Read r;
  read_ok(&r, text);
  read_close(&r);
}

Test(limits, nesting) {
  char text[4096];
  char open[64], close[64];
  memset(open, '[', 40);
  open[40] = 0;
  memset(close, ']', 40);
  close[40] = 0;
  snprintf(text, sizeof text, HEADER "        fp16 c = const()[val = fp16(%s1%s)];\n" FOOTER, open, close);
  /* Counted from the last ';': here the program's and the function's braces
   * too, so the 29th '[' is the 33rd open bracket. */
  cr_assert_str_eq(first_error(text), "t.mil:4:65: error: brackets nested too deeply (limit is 32)");
}

Test(limits, rank) {
  cr_assert_str_eq(first_error(HEADER "        tensor<fp16, [1, 1, 1, 1, 1, 1, 1, 1, 1]> c = relu(x = x);\n" FOOTER),
                   "t.mil:4:9: error: tensor rank 9 exceeds the limit of 8");
  Read r;
  read_ok(&r, HEADER "        tensor<fp16, [1, 1, 1, 1, 1, 1, 1, 1]> c = relu(x = x);\n" FOOTER);
  read_close(&r);
}

Test(limits, file_size) {
  size_t n = (size_t)MAX_SOURCE_BYTES + 1;
  char *big = xcalloc(n, 1);
  Read r;
  read_open(&r, "big.mil", big, n);
  cr_assert_null(r.p);
  cr_assert_str_eq(diags(&r), "orionc: error: 'big.mil' is too large (limit is 67108864 bytes)\n");
  read_close(&r);
  free(big);
  read_path(&r, "/nonexistent/model.mil");
  cr_assert_null(r.p);
  cr_assert_str_eq(diags(&r), "orionc: error: cannot read '/nonexistent/model.mil': No such file or directory\n");
  read_close(&r);
}

Test(limits, error_count_and_garbage) {
  /* 10 MB of random bytes after a valid start: stops at the error limit */
  size_t n = 10u * 1000u * 1000u;
  char *junk = xmalloc(n);
  const char *start = HEADER;
  memcpy(junk, start, strlen(start));
  uint64_t state = 42;
  for (size_t i = strlen(start); i < n; i += 8) {
    uint64_t v = splitmix64(&state);
    memcpy(junk + i, &v, n - i < 8 ? n - i : 8);
  }
  Read r;
  read_open(&r, "junk.mil", junk, n);
  cr_assert_null(r.p);
  cr_assert_eq(r.d.nerrors, DEFAULT_ERROR_LIMIT);
  cr_assert_not_null(strstr(diags(&r), "fatal error: too many errors emitted"));
  read_close(&r);
  /* a million statements that all fail their checks stop at the limit too */
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, HEADER);
  for (int i = 0; i < 100000; i++) sb_printf(&sb, "fp16 v%d = relu(x = nope);\n", i);
  sb_puts(&sb, FOOTER);
  read_open(&r, "many.mil", sb.data, sb.len);
  cr_assert_null(r.p);
  cr_assert_eq(r.d.nerrors, DEFAULT_ERROR_LIMIT);
  read_close(&r);
  sb_free(&sb);
  free(junk);
}

/* ---- small API pieces ---------------------------------------------------------------------------- */

Test(api, dtypes) {
  for (int t = MIL_DT_NONE + 1; t < MIL_DT_COUNT; t++) {
    const char *name = mil_dtype_name((MilDType)t);
    cr_assert_eq(mil_dtype_from_name(name, strlen(name)), (MilDType)t);
  }
  cr_assert_eq(mil_dtype_from_name("fp8", 3), MIL_DT_NONE);
  cr_assert_eq(mil_dtype_from_name("fp16x", 4), MIL_DT_FP16);
  cr_assert_str_eq(mil_dtype_name(MIL_DT_COUNT), "none");
  cr_assert(mil_dtype_is_float(MIL_DT_BF16));
  cr_assert(mil_dtype_is_int(MIL_DT_UINT6));
  cr_assert(mil_dtype_is_unsigned(MIL_DT_UINT1));
  cr_assert_not(mil_dtype_is_unsigned(MIL_DT_INT4));
  cr_assert_not(mil_dtype_is_int(MIL_DT_BOOL));
}

Test(api, types) {
  Read r;
  read_ok(&r, "program(1.0) { func main<ios16>(tensor<fp16, []> a, fp16 b, tensor<fp16, [2, ?]> c, "
              "tensor<fp16, [3, 0]> d, tensor<fp16, [2, 3]> e) {} -> (a); }");
  const MilVar *p = r.p->funcs[0].params;
  cr_assert(mil_type_equal(&p[0].type, &p[1].type));
  cr_assert_str_eq(type_text(&p[0].type), "tensor<fp16, []>");
  cr_assert_str_eq(type_text(&p[1].type), "fp16");
  cr_assert_not(mil_type_equal(&p[1].type, &p[2].type));
  cr_assert_eq(mil_type_elements(&p[1].type), 1);
  cr_assert_eq(mil_type_elements(&p[2].type), UINT64_MAX);
  cr_assert_eq(mil_type_elements(&p[3].type), 0);
  cr_assert_eq(mil_type_elements(&p[4].type), 6);
  read_close(&r);
}
