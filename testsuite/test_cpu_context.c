/*
 * CPU backend instances (cpu_context_open): the programs prepared in one
 * context run on its one pool, one at a time, with the same bits as in
 * contexts of their own; OpenBLAS's thread count is set while a context is
 * open and restored when the last closes; CPU feature detection (internal,
 * runtime/cpu/features.c) gives every thread the same answer however many
 * ask at once.
 */
#include <cblas.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "orion/cpu.h"

#define MIL_HEAD "program(1.3)\n[buildInfo = dict<string, string>({{\"coremlc-version\", \"3505.4.1\"}})]\n{\n"

/* Element-wise ops and a softmax over 65536 elements: more than one piece,
 * so the pool's threads take part. */
static const char *prog_a = MIL_HEAD
    "    func main<ios18>(tensor<fp32, [256, 256]> x) {\n"
    "        tensor<fp32, [256, 256]> a = tanh(x = x)[name = string(\"a\")];\n"
    "        tensor<fp32, [256, 256]> b = mul(x = a, y = x)[name = string(\"b\")];\n"
    "        tensor<fp32, [256, 256]> y = softmax(axis = int32(-1), x = b)[name = string(\"y\")];\n"
    "    } -> (y);\n}\n";

/* A batch of 8 matrix products (one piece each) and a row sum. */
static const char *prog_b = MIL_HEAD
    "    func main<ios18>(tensor<fp32, [8, 64, 64]> x) {\n"
    "        tensor<fp32, [8, 64, 64]> m = matmul(transpose_x = bool(false), transpose_y = bool(true), x = x, y = x)[name = string(\"m\")];\n"
    "        tensor<fp32, [8, 64, 1]> y = reduce_sum(axes = tensor<int32, [1]>([-1]), keep_dims = bool(true), x = m)[name = string(\"y\")];\n"
    "    } -> (y);\n}\n";

typedef struct Prog {
  char dir[64];
  SourceSet sources;
  Diag d;
  StrBuf diags;
  OrionProgram *p;
  float *x;
  int64_t nx;
  CpuTensor in;
} Prog;

static void prog_open(Prog *g, const char *mil, uint32_t rank, const int64_t *dims) {
  snprintf(g->dir, sizeof g->dir, "/tmp/orion-cpuctx-XXXXXX");
  cr_assert_not_null(mkdtemp(g->dir));
  char path[128];
  snprintf(path, sizeof path, "%s/model.mil", g->dir);
  const char *err;
  cr_assert(write_file_atomic(path, mil, strlen(mil), &err), "%s", err);
  srcset_init(&g->sources);
  diag_init(&g->d, &g->sources);
  sb_init(&g->diags);
  g->d.capture = &g->diags;
  g->p = orion_open(g->dir, NULL, &g->d);
  cr_assert_not_null(g->p, "%s", g->diags.data);
  g->in = (CpuTensor){.dtype = MIL_DT_FP32, .rank = rank};
  g->nx = 1;
  for (uint32_t i = 0; i < rank; i++) g->in.dims[i] = dims[i], g->nx *= dims[i];
  g->x = xcalloc((size_t)g->nx, sizeof *g->x);
  uint32_t s = 12345u;
  for (int64_t i = 0; i < g->nx; i++) {
    s = s * 1664525u + 1013904223u;
    g->x[i] = (float)((double)(s >> 8) / (double)(1u << 24) * 4 - 2);
  }
  g->in.data = g->x;
}

static void prog_close(Prog *g) {
  orion_close(g->p);
  srcset_free(&g->sources);
  sb_free(&g->diags);
  free(g->x);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g->dir);
  cr_assert_eq(system(cmd), 0);
}

/* Runs c on g's input; returns the output (caller frees with cpu_tensor_free). */
static CpuTensor run_once(Prog *g, CpuProgram *c) {
  CpuTensor out;
  cr_assert(cpu_run(c, &g->in, &out, &g->d), "%s", g->diags.data);
  return out;
}

static bool same_bits(const CpuTensor *a, const CpuTensor *b) {
  int64_t n = 1;
  for (uint32_t i = 0; i < a->rank; i++) n *= a->dims[i];
  return a->dtype == b->dtype && a->rank == b->rank && memcmp(a->data, b->data, (size_t)n * cpu_dtype_size(a->dtype)) == 0;
}

/* The threads of this process (Linux: /proc/self/task). */
static int thread_count(void) {
  DIR *dp = opendir("/proc/self/task");
  cr_assert_not_null(dp);
  int n = 0;
  for (struct dirent *e; (e = readdir(dp));) n += e->d_name[0] != '.';
  closedir(dp);
  return n;
}

static const int64_t dims_a[2] = {256, 256}, dims_b[3] = {8, 64, 64};

Test(cpu_context, programs_share_one_pool) {
  Prog a, b;
  prog_open(&a, prog_a, 2, dims_a);
  prog_open(&b, prog_b, 3, dims_b);
  CpuOptions opt = {.numerics = CPU_NUMERICS_FP32, .threads = 1}; /* ignored in a context */
  /* The reference: each program in a context of its own. */
  CpuProgram *ra = cpu_prepare_with(a.p, 0, &(CpuOptions){.numerics = CPU_NUMERICS_FP32, .threads = 3}, &a.d);
  CpuProgram *rb = cpu_prepare_with(b.p, 0, &(CpuOptions){.numerics = CPU_NUMERICS_FP32, .threads = 3}, &b.d);
  cr_assert(ra && rb, "%s%s", a.diags.data, b.diags.data);
  CpuTensor want_a = run_once(&a, ra), want_b = run_once(&b, rb);
  cpu_free(ra);
  cpu_free(rb);

  int before = thread_count();
  CpuContext *ctx = cpu_context_open(&(CpuContextOptions){.threads = 3}, &a.d);
  cr_assert_not_null(ctx);
  cr_assert_eq(cpu_context_threads(ctx), 3);
  CpuProgram *ca = cpu_prepare_in(ctx, a.p, 0, &opt, &a.d), *cb = cpu_prepare_in(ctx, b.p, 0, &opt, &b.d);
  cr_assert(ca && cb, "%s%s", a.diags.data, b.diags.data);
  cr_assert_eq(cpu_threads(ca), 3);
  cr_assert_eq(cpu_threads(cb), 3);
  /* One pool: the context's two workers, none per program. */
  cr_assert_eq(thread_count(), before + 2);
  for (int round = 0; round < 3; round++) {
    CpuTensor ya = run_once(&a, ca), yb = run_once(&b, cb);
    cr_assert(same_bits(&ya, &want_a), "program a differs in the shared context (round %d)", round);
    cr_assert(same_bits(&yb, &want_b), "program b differs in the shared context (round %d)", round);
    cpu_tensor_free(&ya);
    cpu_tensor_free(&yb);
  }
  cpu_free(ca);
  cpu_free(cb);
  cr_assert_eq(thread_count(), before + 2); /* the pool is the context's */
  cpu_context_close(ctx);
  cr_assert_eq(thread_count(), before);
  cpu_tensor_free(&want_a);
  cpu_tensor_free(&want_b);
  prog_close(&a);
  prog_close(&b);
}

typedef struct Runner {
  Prog *g;
  CpuProgram *c;
  const CpuTensor *want;
  int runs, wrong;
} Runner;

static void *run_many(void *arg) {
  Runner *r = arg;
  for (int i = 0; i < r->runs; i++) {
    CpuTensor y;
    Diag *d = &r->g->d;
    if (!cpu_run(r->c, &r->g->in, &y, d)) {
      r->wrong++;
      continue;
    }
    r->wrong += !same_bits(&y, r->want);
    cpu_tensor_free(&y);
  }
  return NULL;
}

/* Two threads running programs of one context at once: the runs take turns
 * on the one pool, and every result is right. (Unserialized, one run's job
 * replaces the other's in the pool: wrong results, or a run that waits
 * forever, which the timeout ends.) */
Test(cpu_context, concurrent_runs_in_one_context_serialize, .timeout = 60) {
  Prog a, b;
  prog_open(&a, prog_a, 2, dims_a);
  prog_open(&b, prog_b, 3, dims_b);
  CpuOptions opt = {.numerics = CPU_NUMERICS_ANE};
  CpuContext *ctx = cpu_context_open(&(CpuContextOptions){.threads = 3}, &a.d);
  CpuProgram *ca = cpu_prepare_in(ctx, a.p, 0, &opt, &a.d), *cb = cpu_prepare_in(ctx, b.p, 0, &opt, &b.d);
  cr_assert(ca && cb, "%s%s", a.diags.data, b.diags.data);
  CpuTensor want_a = run_once(&a, ca), want_b = run_once(&b, cb);
  Runner ra = {&a, ca, &want_a, 400, 0}, rb = {&b, cb, &want_b, 400, 0};
  pthread_t ta, tb;
  cr_assert_eq(pthread_create(&ta, NULL, run_many, &ra), 0);
  cr_assert_eq(pthread_create(&tb, NULL, run_many, &rb), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  cr_assert_eq(ra.wrong, 0, "%d of program a's runs went wrong", ra.wrong);
  cr_assert_eq(rb.wrong, 0, "%d of program b's runs went wrong", rb.wrong);
  cpu_tensor_free(&want_a);
  cpu_tensor_free(&want_b);
  cpu_free(ca);
  cpu_free(cb);
  cpu_context_close(ctx);
  prog_close(&a);
  prog_close(&b);
}

/* Opening a context sets OpenBLAS to one thread; closing the last open one
 * restores what the caller had; a private context (cpu_prepare) does the
 * same around the program's life. */
Test(cpu_context, openblas_thread_count_is_restored) {
  openblas_set_num_threads(3);
  cr_assert_eq(openblas_get_num_threads(), 3, "OpenBLAS does not take 3 threads here");
  CpuContext *c1 = cpu_context_open(NULL, NULL);
  cr_assert_eq(openblas_get_num_threads(), 1);
  CpuContext *c2 = cpu_context_open(&(CpuContextOptions){.threads = 2}, NULL);
  cr_assert_eq(openblas_get_num_threads(), 1);
  cpu_context_close(c1);
  cr_assert_eq(openblas_get_num_threads(), 1, "closing one of two open contexts restored the count");
  cpu_context_close(c2);
  cr_assert_eq(openblas_get_num_threads(), 3);

  Prog a;
  prog_open(&a, prog_a, 2, dims_a);
  CpuProgram *c = cpu_prepare(a.p, 0, CPU_NUMERICS_FP32, &a.d);
  cr_assert_not_null(c, "%s", a.diags.data);
  cr_assert_eq(openblas_get_num_threads(), 1);
  cpu_free(c);
  cr_assert_eq(openblas_get_num_threads(), 3);
  cpu_context_close(NULL);
  prog_close(&a);
}

enum { ASKERS = 8 };

typedef struct Asker {
  pthread_barrier_t *go;
  const CpuFeatures *got;
  CpuFeatures value;
} Asker;

static void *ask(void *arg) {
  Asker *a = arg;
  pthread_barrier_wait(a->go);
  a->got = cpu_features();
  a->value = *a->got;
  return NULL;
}

/* Eight threads released together all ask first: one detection, one answer. */
Test(cpu_context, feature_detection_from_many_threads_agrees) {
  pthread_barrier_t go;
  cr_assert_eq(pthread_barrier_init(&go, NULL, ASKERS), 0);
  Asker as[ASKERS];
  pthread_t th[ASKERS];
  for (int i = 0; i < ASKERS; i++) {
    as[i] = (Asker){.go = &go};
    cr_assert_eq(pthread_create(&th[i], NULL, ask, &as[i]), 0);
  }
  for (int i = 0; i < ASKERS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&go);
  const CpuFeatures *f = cpu_features();
  for (int i = 0; i < ASKERS; i++) {
    cr_assert_eq(as[i].got, f);
    cr_assert_eq(as[i].value.f16c, f->f16c, "thread %d saw f16c %d", i, as[i].value.f16c);
    cr_assert_eq(as[i].value.avx2, f->avx2, "thread %d saw avx2 %d", i, as[i].value.avx2);
  }
#if defined(__x86_64__)
  cr_assert_eq(f->avx2, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
#endif
}
