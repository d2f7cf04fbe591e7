/*
 * The independent check of the MIL emitter: every program we emit (the
 * examples and the golden MIL inputs, through the default pipeline) is read
 * back by the runtime's MIL reader, and what the text declares agrees with
 * the IR it came from: the function's parameters and returned values have
 * the IR's input and output types, in ASCII (binding) order; every weight is
 * a const of the IR param's type whose BLOBFILE offset is the one the blob
 * writer gave; statement names equal their first result.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "orion/mil.h"
#include "orion/mil_reader.h"
#include "orion/passes.h"
#include "orion/weights.h"

static void *load(void *ctx, IrModule *m, IrValueId v, size_t *n) {
  WeightLoadOptions o = {0};
  return weights_materialize(m, v, &o, ctx, n);
}

static bool same_type(const IrType *ir, const MilType *mil) {
  if (mil->kind != MIL_TYPE_TENSOR || mil->rank != ir->rank) return false;
  if (strcmp(mil_dtype_name(mil->dtype), ir_dtype_name(ir->dtype))) return false;
  for (uint32_t i = 0; i < mil->rank; i++)
    if (mil->dims[i] != ir->dims[i]) return false;
  return true;
}

static const MilType *type_of_name(const MilFunc *f, const char *name) {
  for (uint32_t i = 0; i < f->nparams; i++)
    if (!strcmp(f->params[i].name, name)) return &f->params[i].type;
  for (uint32_t s = 0; s < f->nstmts; s++)
    for (uint32_t r = 0; r < f->stmts[s].nresults; r++)
      if (!strcmp(f->stmts[s].results[r].name, name)) return &f->stmts[s].results[r].type;
  return NULL;
}

/* Compiles the .oir file at path and checks its MIL; returns the number of functions checked. */
static int check_file(const char *path, const char *base_dir) {
  char *text;
  size_t len;
  const char *err;
  cr_assert(read_file(path, 1u << 24, &text, &len, &err), "%s: %s", path, err);
  Parsed p;
  parsed_open(&p, text);
  free(text);
  cr_assert_not_null(p.m, "%s: %s", path, p.diags.data);
  p.m->base_dir = base_dir;
  PassManagerOptions pm = {.pipeline = "O1"};
  cr_assert(passes_run(p.m, &pm, &p.d), "%s: %s", path, p.diags.data);
  int checked = 0;
  for (IrFuncId fid = 1; fid < p.m->nfuncs; fid++) {
    if (p.m->funcs[fid].dead) continue;
    BlobWriter blobs;
    blob_writer_init(&blobs);
    StrBuf mil;
    sb_init(&mil);
    MilFunction info;
    MilEmitOptions mo = {.target = MIL_IOS18, .load_param = load, .load_ctx = &p.d};
    cr_assert(mil_emit_program(p.m, fid, &mo, &blobs, &mil, &info, &p.d), "%s: %s", path, p.diags.data);

    StrBuf rd;
    sb_init(&rd);
    Diag d;
    diag_init(&d, &p.sources);
    d.capture = &rd;
    MilProgram *prog = mil_read_string(path, mil.data, mil.len, &d);
    cr_assert_not_null(prog, "%s: the emitted MIL does not read back:\n%s", path, rd.data);
    cr_assert_str_eq(prog->version, "1.3");
    cr_assert_eq(prog->nfuncs, 1);
    const MilFunc *f = &prog->funcs[0];
    cr_assert_str_eq(f->opset, "ios18");

    /* Parameters: the IR inputs, in binding (ASCII) order, with their types. */
    cr_assert_eq(f->nparams, info.ninputs, "%s", path);
    for (uint32_t i = 0; i < info.ninputs; i++) {
      const MilBinding *b = &info.inputs[i];
      cr_assert_str_eq(f->params[b->binding].name, b->mil_name, "%s", path);
      cr_assert(same_type(&b->type, &f->params[b->binding].type), "%s: input %s", path, b->ir_name);
      IrValueId v = ir_func(p.m, fid)->inputs[i];
      cr_assert(ir_type_equal(&ir_value(p.m, v)->type, &b->type), "%s", path);
    }
    /* Returned values: the IR outputs, in declared order, with their types. */
    cr_assert_eq(f->nreturns, info.noutputs, "%s", path);
    for (uint32_t i = 0; i < info.noutputs; i++) {
      cr_assert_str_eq(f->returns[i].name, info.outputs[i].mil_name, "%s", path);
      const MilType *t = type_of_name(f, f->returns[i].name);
      cr_assert_not_null(t, "%s", path);
      IrValueId v = ir_func(p.m, fid)->outputs[i].value;
      cr_assert(same_type(&ir_value(p.m, v)->type, t), "%s: output %s", path, info.outputs[i].ir_name);
    }
    /* Weights: consts of the param's type at the writer's offsets. */
    for (uint32_t w = 0; w < info.nweights; w++) {
      const MilWeight *mw = &info.weights[w];
      const MilStmt *st = NULL;
      for (uint32_t s = 0; s < f->nstmts && !st; s++)
        if (!strcmp(f->stmts[s].results[0].name, mw->mil_name)) st = &f->stmts[s];
      cr_assert_not_null(st, "%s: weight %s", path, mw->ir_name);
      cr_assert_str_eq(st->op, "const");
      cr_assert(same_type(&mw->type, &st->results[0].type), "%s: weight %s", path, mw->ir_name);
      const MilAttr *val = mil_find_attr(st->attrs, st->nattrs, "val");
      cr_assert_not_null(val);
      cr_assert_eq(val->value->payload, MIL_PAYLOAD_BLOB, "%s: weight %s", path, mw->ir_name);
      cr_assert_eq(val->value->blob_offset, mw->offset, "%s: weight %s", path, mw->ir_name);
      cr_assert_str_eq(val->value->blob_path, "@model_path/weights/weight.bin");
    }
    /* Every statement is named after its first result. */
    for (uint32_t s = 0; s < f->nstmts; s++)
      cr_assert_str_eq(f->stmts[s].op_name ? f->stmts[s].op_name : "", f->stmts[s].results[0].name, "%s", path);

    mil_program_free(prog);
    sb_free(&rd);
    sb_free(&mil);
    blob_writer_free(&blobs);
    checked++;
  }
  parsed_close(&p);
  return checked;
}

static int check_dir(const char *dir, const char *prefix) {
  DIR *dp = opendir(dir);
  cr_assert_not_null(dp, "cannot open %s", dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(dp));) {
    size_t l = strlen(e->d_name);
    if (l < 5 || strcmp(e->d_name + l - 4, ".oir") || strncmp(e->d_name, prefix, strlen(prefix))) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    n += check_file(path, dir);
  }
  closedir(dp);
  return n;
}

static const char *root(void) {
  const char *r = getenv("ORION_SOURCE_ROOT");
  cr_assert(r && *r, "ORION_SOURCE_ROOT is not set");
  return r;
}

Test(mil_emit, examples_read_back_with_the_irs_types) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/examples", root());
  cr_assert_geq(check_dir(dir, ""), 3);
}

Test(mil_emit, golden_programs_read_back_with_the_irs_types) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/testsuite/golden", root());
  /* The MIL goldens and the pass goldens that compile cleanly. */
  cr_assert_geq(check_dir(dir, "mil-") + check_dir(dir, "pass-split-concat") + check_dir(dir, "pass-lower"), 10);
}
