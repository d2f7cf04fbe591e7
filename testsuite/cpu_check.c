/*
 * What the CPU backend tests share (test_cpu*.c): the scratch directory,
 * compiling an .oir text into a package, loading and running packages and
 * hand-written MIL in a bare directory, and the comparison with ir_eval.
 */
#include "cpu_check.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion/fp16.h"
#include "orion/package.h"
#include "orion/passes.h"

char dir[64];

void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/orion-cpu-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

void cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* `text` with every "$F" replaced by dt ("fp16" or "fp32"); caller frees. */
char *with_dtype(const char *text, const char *dt) {
  StrBuf sb;
  sb_init(&sb);
  for (const char *s = text; *s;) {
    if (s[0] == '$' && s[1] == 'F') {
      sb_puts(&sb, dt);
      s += 2;
    } else {
      sb_putc(&sb, *s++);
    }
  }
  return sb.data;
}

/* Compiles text into dir/name.anepkg as orionc does. */
void compile_pkg(const char *text, const char *path) {
  Parsed p;
  parsed_open(&p, text);
  cr_assert_not_null(p.m, "%s", p.diags.data);
  cr_assert(passes_legalize(p.m, &p.d), "%s", p.diags.data);
  PackageOptions po = {.target = MIL_IOS18, .source_name = "t.oir", .source_text = text, .source_len = strlen(text)};
  cr_assert(package_write(p.m, path, &po, &p.d), "%s", p.diags.data);
  parsed_close(&p);
}

static MilDType mil_dt(IrDType t) {
  switch (t) {
  case DT_FP16: return MIL_DT_FP16;
  case DT_FP32: return MIL_DT_FP32;
  case DT_INT32: return MIL_DT_INT32;
  case DT_BOOL: return MIL_DT_BOOL;
  default: cr_assert_fail("dtype %s is not used by these tests", ir_dtype_name(t)); return MIL_DT_NONE;
  }
}

static CpuTensor to_cpu(const EvalTensor *e) {
  CpuTensor t = {.dtype = mil_dt(e->type.dtype), .rank = e->type.rank};
  uint64_t n = ir_type_elements(&e->type);
  for (uint32_t i = 0; i < t.rank; i++) t.dims[i] = e->type.dims[i];
  t.data = xcalloc(n ? n : 1, cpu_dtype_size(t.dtype));
  for (uint64_t i = 0; i < n; i++) {
    double v = e->data[i];
    switch (t.dtype) {
    case MIL_DT_FP16: ((uint16_t *)t.data)[i] = fp16_from_double(v); break;
    case MIL_DT_FP32: ((float *)t.data)[i] = (float)v; break;
    case MIL_DT_INT32: ((int32_t *)t.data)[i] = (int32_t)v; break;
    default: ((bool *)t.data)[i] = v != 0; break;
    }
  }
  return t;
}

double cpu_elem(const CpuTensor *t, uint64_t i) {
  switch (t->dtype) {
  case MIL_DT_FP16: return (double)fp16_to_float(((const uint16_t *)t->data)[i]);
  case MIL_DT_FP32: return (double)((const float *)t->data)[i];
  case MIL_DT_INT32: return ((const int32_t *)t->data)[i];
  default: return ((const bool *)t->data)[i] ? 1 : 0;
  }
}

/* |a - b| / max(1, |b|); equal infinities and NaN against NaN are 0. */
double err_of(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : HUGE_VAL;
  if (isinf(a) || isinf(b)) return a == b ? 0 : HUGE_VAL;
  return fabs(a - b) / fmax(1.0, fabs(b));
}

void make_pkg(const char *text, char *path, size_t cap) {
  make_dir();
  int n = snprintf(path, cap, "%s/m.anepkg", dir);
  cr_assert(n > 0 && (size_t)n < cap, "no room for the package path under %s", dir);
  compile_pkg(text, path);
}

void load_prepared(Loaded *l, const char *path, CpuNumerics mode) {
  load(l, path, mode);
  cr_assert_not_null(l->c, "%s", l->diags.data);
}

void load(Loaded *l, const char *path, CpuNumerics mode) {
  srcset_init(&l->sources);
  diag_init(&l->d, &l->sources);
  sb_init(&l->diags);
  l->d.capture = &l->diags;
  l->p = orion_open(path, NULL, &l->d);
  cr_assert_not_null(l->p, "%s", l->diags.data);
  l->c = cpu_prepare(l->p, 0, mode, &l->d);
}

void unload(Loaded *l) {
  cpu_free(l->c);
  orion_close(l->p);
  srcset_free(&l->sources);
  sb_free(&l->diags);
}

/* Compiles and runs `text` on the CPU and with ir_eval on the same random
 * inputs (seeded by seed); asserts every output is within tol and returns
 * the largest error. */
double check(const char *label, const char *text, CpuNumerics mode, double tol, const IntRange *ranges,
                    uint64_t seed) {
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/m.anepkg", dir);
  compile_pkg(text, path);
  Loaded l;
  load(&l, path, mode);
  cr_assert_not_null(l.c, "%s: %s", label, l.diags.data);

  Parsed ref;
  parsed_open(&ref, text);
  cr_assert_not_null(ref.m, "%s", ref.diags.data);
  cr_assert(passes_legalize(ref.m, &ref.d), "%s", ref.diags.data);
  IrFuncId f = ir_func_lookup(ref.m, "main");
  IrFunc *fn = ir_func(ref.m, f);
  cr_assert_eq(fn->ninputs, orion_input_count(l.p, 0));
  cr_assert_eq(fn->noutputs, orion_output_count(l.p, 0));
  EvalTensor *in = xcalloc(fn->ninputs + 1, sizeof *in);
  CpuTensor *cin = xcalloc(fn->ninputs + 1, sizeof *cin);
  for (uint32_t i = 0; i < fn->ninputs; i++) {
    const IrValue *v = ir_value(ref.m, fn->inputs[i]);
    cr_assert_str_eq(v->name, orion_input(l.p, 0, i)->name);
    const IntRange *r = ranges;
    while (r && r->input && strcmp(r->input, v->name)) r++;
    uint64_t s = seed * 1000 + i;
    in[i] = r && r->input ? eval_random_ints(&v->type, s, r->low, r->high) : eval_random_input(&v->type, s);
    cin[i] = to_cpu(&in[i]);
  }
  EvalTensor *want = NULL;
  char err[1024];
  cr_assert(ir_eval(ref.m, f, in, &want, err, sizeof err), "%s: ir_eval: %s", label, err);
  CpuTensor *got = xcalloc(fn->noutputs + 1, sizeof *got);
  cr_assert(cpu_run(l.c, cin, got, &l.d), "%s: %s", label, l.diags.data);

  double worst = 0;
  for (uint32_t o = 0; o < fn->noutputs; o++) {
    const EvalTensor *w = &want[o];
    cr_assert_eq(got[o].dtype, mil_dt(w->type.dtype), "%s: output %u dtype", label, o);
    cr_assert_eq(got[o].rank, w->type.rank, "%s: output %u rank", label, o);
    for (uint32_t k = 0; k < w->type.rank; k++) cr_assert_eq(got[o].dims[k], w->type.dims[k]);
    uint64_t n = ir_type_elements(&w->type);
    for (uint64_t i = 0; i < n; i++) {
      double e = err_of(cpu_elem(&got[o], i), w->data[i]);
      cr_assert_leq(e, tol, "%s: output %u ('%s') element %llu: cpu %.9g, reference %.9g", label, o,
                    orion_output(l.p, 0, o)->name, (unsigned long long)i, cpu_elem(&got[o], i), w->data[i]);
      if (e > worst) worst = e;
    }
    cpu_tensor_free(&got[o]);
  }
  fprintf(stderr, "cpu %-28s %-4s max error %.3g (tolerance %g)\n", label, mode == CPU_NUMERICS_ANE ? "ane" : "fp32",
          worst, tol);
  free(got);
  eval_tensors_free(want, fn->noutputs);
  for (uint32_t i = 0; i < fn->ninputs; i++) {
    eval_tensor_free(&in[i]);
    free(cin[i].data);
  }
  free(in);
  free(cin);
  parsed_close(&ref);
  unload(&l);
  cleanup();
  return worst;
}

char *example(const char *name) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  cr_assert_not_null(root, "ORION_SOURCE_ROOT is not set");
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/%s", root, name);
  char *data;
  size_t len;
  const char *err;
  cr_assert(read_file(path, 1u << 24, &data, &len, &err), "%s: %s", path, err);
  return data;
}

void write_bare(const char *mil) {
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/model.mil", dir);
  const char *err;
  cr_assert(write_file_atomic(path, mil, strlen(mil), &err), "%s", err);
}

/* Loads the bare program in dir with options. */
static void open_with(Loaded *l, const char *path, const CpuOptions *o) {
  srcset_init(&l->sources);
  diag_init(&l->d, &l->sources);
  sb_init(&l->diags);
  l->d.capture = &l->diags;
  l->p = orion_open(path, NULL, &l->d);
  cr_assert_not_null(l->p, "%s", l->diags.data);
  l->c = cpu_prepare_with(l->p, 0, o, &l->d);
}

void load_opts(Loaded *l, const CpuOptions *o) { open_with(l, dir, o); }

void load_path_opts(Loaded *l, const char *path, const CpuOptions *o) {
  open_with(l, path, o);
  cr_assert_not_null(l->c, "%s", l->diags.data);
}

CpuTensor f32_tensor(float *data, uint32_t rank, const int64_t *dims) {
  CpuTensor t = {.dtype = MIL_DT_FP32, .rank = rank, .data = data};
  memcpy(t.dims, dims, rank * sizeof *dims);
  return t;
}

float *out_f32(const CpuTensor *t) { return t->data; }
bool *out_bool(const CpuTensor *t) { return t->data; }

/* Deterministic values in [-2, 2] in steps of 1/8 when coarse (so that
 * comparisons see equal values), else any float. */
void fill_random(float *p, int64_t n, uint32_t seed, bool coarse) {
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    double u = (double)(s >> 8) / (double)(1u << 24);
    p[i] = coarse ? (float)(floor(u * 33) / 8 - 2) : (float)(u * 4 - 2);
  }
}

int64_t prod(const int64_t *d, uint32_t r) {
  int64_t n = 1;
  for (uint32_t i = 0; i < r; i++) n *= d[i];
  return n;
}

/* The offset in an operand of dims `id` (rank ir, NumPy broadcasting) of
 * output element `flat` of dims `od` (rank orank). */
int64_t bcast_index(int64_t flat, const int64_t *od, uint32_t orank, const int64_t *id, uint32_t ir) {
  int64_t off = 0, stride = 1;
  for (uint32_t k = 0; k < orank; k++) {
    uint32_t oi = orank - 1 - k;
    int64_t coord = flat % od[oi];
    flat /= od[oi];
    if (k >= ir) continue;
    uint32_t ii = ir - 1 - k;
    off += (id[ii] == 1 ? 0 : coord) * stride;
    stride *= id[ii];
  }
  return off;
}

/* Runs the program in dir with 1 and 3 threads in `mode`, checks the two
 * agree bit for bit, and returns the first run's outputs (caller frees). */
void run_twice(CpuNumerics mode, const CpuTensor *in, CpuTensor *out, uint32_t nout) {
  CpuTensor other[16];
  cr_assert_leq(nout, 16);
  for (uint32_t threads = 1; threads <= 3; threads += 2) {
    Loaded l;
    CpuOptions o = {.numerics = mode, .threads = threads};
    load_opts(&l, &o);
    cr_assert_not_null(l.c, "%s", l.diags.data);
    cr_assert(cpu_run(l.c, in, threads == 1 ? out : other, &l.d), "%s", l.diags.data);
    unload(&l);
  }
  for (uint32_t k = 0; k < nout; k++) {
    size_t bytes = (size_t)prod(out[k].dims, out[k].rank) * cpu_dtype_size(out[k].dtype);
    cr_assert(memcmp(out[k].data, other[k].data, bytes) == 0, "output %u differs between 1 and 3 threads", k);
    cpu_tensor_free(&other[k]);
  }
}

/* Expects preparing (or, with `run`, running) the program in dir to fail with `want` in the messages. */
void expect_error(const CpuTensor *in, uint32_t nout, const char *want) {
  Loaded l;
  CpuOptions o = {.numerics = CPU_NUMERICS_FP32, .threads = 1};
  load_opts(&l, &o);
  if (l.c) {
    CpuTensor out[16];
    cr_assert_leq(nout, 16);
    cr_assert_not(cpu_run(l.c, in, out, &l.d), "the run succeeded; wanted %s", want);
  }
  char full[512];
  snprintf(full, sizeof full, "%s/model.mil:%s", dir, want);
  cr_assert_not_null(strstr(l.diags.data, full), "got:\n%s\nwant:\n%s", l.diags.data, full);
  unload(&l);
}
