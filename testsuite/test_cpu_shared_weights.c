/*
 * The fp32 copies of fp16 weights that the programs of one CPU context share
 * (runtime/cpu/weights.c): a training package's forward and backward read
 * the same blob of w, so in one context they read one fp32 copy of it,
 * converted once at prepare and once per weight update (orion_write_weights
 * then each program's cpu_reload_weights), with the bits of programs that
 * have copies of their own; a program reloaded on its own converts again;
 * cpu_set_weight gives the program a value of its own and leaves the
 * other's alone; nothing is left when the programs are freed.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "helpers.h"
#include "orion/compile.h"
#include "orion/cpu.h"
#include "orion/fp16.h"

static char dir[] = "/tmp/orion-shared-weights-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(dir)); }
static void teardown(void) { remove_tree(dir); }

TestSuite(cpu_shared_weights, .init = setup, .fini = teardown);

/* The backward reads w for h's gradient. w is small (under the size kept
 * fp16 in place), so both programs hold it as fp32. */
static const char *model = "func main(x: fp16[4,8], targets: int32[4]) {\n"
                           "  param u: fp16[8,8] = normal(seed=2, std=0.5);\n"
                           "  param w: fp16[16,8] = normal(seed=3, std=0.5);\n"
                           "  h = linear(x, u);\n"
                           "  logits = linear(h, w);\n"
                           "  loss: fp32[] = cross_entropy(logits, targets);\n"
                           "  return loss;\n}\n";

typedef struct Opened {
  SourceSet sources;
  Diag d;
  StrBuf msgs;
  OrionProgram *p;
  uint32_t fwd, bwd;
} Opened;

static void open_pkg(Opened *o, const char *path) {
  srcset_init(&o->sources);
  diag_init(&o->d, &o->sources);
  sb_init(&o->msgs);
  o->d.capture = &o->msgs;
  OrionOpenOptions oo = ORION_OPEN_OPTIONS_DEFAULT;
  oo.writable_weights = true;
  o->p = orion_open(path, &oo, &o->d);
  cr_assert_not_null(o->p, "%s", o->msgs.data);
  o->fwd = orion_function_find(o->p, "main.fwd");
  o->bwd = orion_function_find(o->p, "main.bwd");
  cr_assert(o->fwd != UINT32_MAX && o->bwd != UINT32_MAX);
}

static void close_pkg(Opened *o) {
  orion_close(o->p);
  srcset_free(&o->sources);
  sb_free(&o->msgs);
}

/* The const slot of program c holding weight data `data`. */
static uint32_t slot_of(const CpuProgram *c, const void *data) {
  for (uint32_t s = 0; s < c->nslots; s++)
    if (c->slots[s].kind == SK_CONST && c->slots[s].weight >= 0 &&
        orion_weight(c->prog, c->fn, (uint32_t)c->slots[s].weight)->data == data)
      return s;
  cr_assert_fail("no slot reads the weight");
  return UINT32_MAX;
}

/* Inputs for function fn: x and every other float input from a ramp, loss_scale 1, targets 0..3. */
typedef struct Inputs {
  CpuTensor t[8];
  uint32_t n;
} Inputs;

static void make_inputs(const OrionProgram *p, uint32_t fn, Inputs *in) {
  in->n = orion_input_count(p, fn);
  cr_assert_leq(in->n, 8);
  for (uint32_t i = 0; i < in->n; i++) {
    const OrionTensorInfo *ti = orion_input(p, fn, i);
    CpuTensor *t = &in->t[i];
    *t = (CpuTensor){.dtype = ti->dtype, .rank = ti->rank};
    memcpy(t->dims, ti->dims, sizeof t->dims);
    int64_t n = 1;
    for (uint32_t k = 0; k < ti->rank; k++) n *= ti->dims[k];
    t->data = xcalloc((size_t)n, 4);
    for (int64_t k = 0; k < n; k++) {
      float v = !strcmp(ti->name, "loss_scale") ? 1.0f : (float)((k * 7) % 13) / 4.0f - 1.5f;
      if (ti->dtype == MIL_DT_INT32) ((int32_t *)t->data)[k] = (int32_t)(k % 4);
      else if (ti->dtype == MIL_DT_FP16) ((uint16_t *)t->data)[k] = fp16_from_float(v);
      else ((float *)t->data)[k] = v;
    }
  }
}

static void inputs_free(Inputs *in) {
  for (uint32_t i = 0; i < in->n; i++) free(in->t[i].data);
}

/* Runs c; returns its outputs' bytes, concatenated (caller frees). */
static unsigned char *run_bytes(Opened *o, CpuProgram *c, uint32_t fn, size_t *len) {
  Inputs in;
  make_inputs(o->p, fn, &in);
  uint32_t nout = orion_output_count(o->p, fn);
  CpuTensor out[8];
  cr_assert_leq(nout, 8);
  cr_assert(cpu_run(c, in.t, out, &o->d), "%s", o->msgs.data);
  unsigned char *all = NULL;
  *len = 0;
  for (uint32_t k = 0; k < nout; k++) {
    size_t b = (size_t)orion_output(o->p, fn, k)->bytes;
    all = xrealloc(all, *len + b);
    memcpy(all + *len, out[k].data, b);
    *len += b;
    cpu_tensor_free(&out[k]);
  }
  inputs_free(&in);
  return all;
}

/* fn's results in the context, against the same program prepared in a context of its own (now). */
static void expect_own_bits(Opened *o, CpuProgram *c, uint32_t fn, const char *when) {
  CpuProgram *own = cpu_prepare_with(o->p, fn, &(CpuOptions){.numerics = CPU_NUMERICS_ANE, .threads = 2}, &o->d);
  cr_assert_not_null(own, "%s", o->msgs.data);
  size_t la, lb;
  unsigned char *a = run_bytes(o, c, fn, &la), *b = run_bytes(o, own, fn, &lb);
  cr_assert_eq(la, lb);
  cr_assert(memcmp(a, b, la) == 0, "%s: %s differs from the program with a copy of its own", when,
            orion_function_name(o->p, fn));
  free(a);
  free(b);
  cpu_free(own);
}

Test(cpu_shared_weights, forward_and_backward_share_one_copy) {
  char path[128];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  StrBuf msgs;
  sb_init(&msgs);
  Diag cd;
  diag_init(&cd, NULL);
  cd.capture = &msgs;
  cd.suppress_warnings = true;
  OrionCompileOptions co;
  orion_compile_options_init(&co);
  co.train = true;
  OrionCompileResult r;
  cr_assert(orion_compile_text("m.oir", model, strlen(model), &co, path, &r, &cd), "%s", msgs.data ? msgs.data : "");
  orion_compile_result_free(&r);
  sb_free(&msgs);

  Opened o;
  open_pkg(&o, path);
  /* w: the forward's weight of 16 x 8 fp16 values; the backward reads the same bytes. */
  uint32_t wi = UINT32_MAX;
  for (uint32_t i = 0; i < orion_weight_count(o.p, o.fwd); i++)
    if (orion_weight(o.p, o.fwd, i)->size == 16 * 8 * 2) wi = i;
  cr_assert_neq(wi, UINT32_MAX);
  const void *wdata = orion_weight(o.p, o.fwd, wi)->data;

  CpuContext *ctx = cpu_context_open(&(CpuContextOptions){.threads = 2}, &o.d);
  CpuOptions opt = {.numerics = CPU_NUMERICS_ANE};
  CpuProgram *f = cpu_prepare_in(ctx, o.p, o.fwd, &opt, &o.d), *b = cpu_prepare_in(ctx, o.p, o.bwd, &opt, &o.d);
  cr_assert(f && b, "%s", o.msgs.data);
  uint32_t sf = slot_of(f, wdata), sb = slot_of(b, wdata);
  SharedCopy *e = f->slots[sf].shared;
  cr_assert_not_null(e, "the forward's fp32 copy of w is the context's");
  cr_assert_eq(b->slots[sb].shared, e, "the backward reads the forward's copy");
  cr_assert_eq(f->vals[sf].p, b->vals[sb].p);
  cr_assert_eq(e->users, 2u);
  cr_assert_eq(e->epoch, 1u, "converted once at prepare, not %llu times", (unsigned long long)e->epoch);
  expect_own_bits(&o, f, o.fwd, "at prepare");
  expect_own_bits(&o, b, o.bwd, "at prepare");

  /* A weight update: new values written, each program takes them up; the copy is converted once. */
  float nw[128];
  for (int i = 0; i < 128; i++) nw[i] = (float)(i % 11) / 8.0f - 0.6f;
  OrionWeightValues v = {.fn = o.fwd, .weight = wi, .values = nw};
  cr_assert(orion_write_weights(o.p, &v, 1, &o.d), "%s", o.msgs.data);
  cr_assert(cpu_reload_weights(f, &o.d) && cpu_reload_weights(b, &o.d), "%s", o.msgs.data);
  cr_assert_eq(e->epoch, 2u, "one conversion for the two reloads, not %llu", (unsigned long long)e->epoch - 1);
  cr_assert_eq(fp16_to_float(fp16_from_float(nw[5])), ((float *)f->vals[sf].p)[5]);
  expect_own_bits(&o, f, o.fwd, "after the update");
  expect_own_bits(&o, b, o.bwd, "after the update");

  /* A program reloaded again on its own reads the weights again. */
  cr_assert(cpu_reload_weights(b, &o.d), "%s", o.msgs.data);
  cr_assert_eq(e->epoch, 3u);

  /* cpu_set_weight: a value of the forward's own; the backward keeps the copy. */
  size_t before_len;
  unsigned char *before = run_bytes(&o, b, o.bwd, &before_len);
  float half[128];
  for (int i = 0; i < 128; i++) half[i] = 0.5f;
  cr_assert(cpu_set_weight(f, orion_weight(o.p, o.fwd, wi)->name, MIL_DT_FP32, half, sizeof half, &o.d), "%s",
            o.msgs.data);
  cr_assert_null(f->slots[sf].shared);
  cr_assert_eq(e->users, 1u);
  cr_assert_eq(((float *)f->vals[sf].p)[7], 0.5f);
  size_t after_len;
  unsigned char *after = run_bytes(&o, b, o.bwd, &after_len);
  cr_assert(before_len == after_len && memcmp(before, after, before_len) == 0, "the backward's w changed");
  free(before);
  free(after);
  /* Reloading the forward shares the copy again, which holds the written values. */
  cr_assert(cpu_reload_weights(f, &o.d), "%s", o.msgs.data);
  cr_assert_eq(f->slots[sf].shared, e);
  expect_own_bits(&o, f, o.fwd, "after set and reload");

  cpu_free(f);
  cpu_free(b);
  cr_assert_null(ctx->shared, "the copies go with their last program");
  cpu_context_close(ctx);
  close_pkg(&o);
}
