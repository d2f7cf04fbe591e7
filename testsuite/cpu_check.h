/*
 * The CPU backend tests' shared helpers (cpu_check.c), used by test_cpu.c,
 * test_cpu_buffers.c, test_cpu_ops.c, test_cpu_ops_corpus.c and
 * test_cpu_fusion.c. The tests assert with Criterion inside them.
 */
#ifndef ORION_TEST_CPU_CHECK_H
#define ORION_TEST_CPU_CHECK_H

#include "helpers.h"
#include "ir_eval.h"
#include "orion/cpu.h"

#define MIL_HEAD "program(1.3)\n[buildInfo = dict<string, string>({{\"coremlc-version\", \"3505.4.1\"}})]\n{\n"
#define S_(n) "string(\"" n "\")"

/* The scratch directory of the running test (make_dir ... cleanup). */
extern char dir[64];

/* A named integer input's range [low, high) (gather indices). */
typedef struct IntRange {
  const char *input;
  int64_t low, high;
} IntRange;

/* Loads a package (or bare directory) and prepares function 0. */
typedef struct Loaded {
  SourceSet sources;
  Diag d;
  StrBuf diags;
  OrionProgram *p;
  CpuProgram *c;
} Loaded;

void make_dir(void);
void cleanup(void);
/* `text` with every "$F" replaced by dt ("fp16" or "fp32"); caller frees. */
char *with_dtype(const char *text, const char *dt);
/* Compiles text into path (a .anepkg) as orionc does. */
void compile_pkg(const char *text, const char *path);
/* make_dir, then text compiled into dir/m.anepkg, whose path goes into path[cap]. */
void make_pkg(const char *text, char *path, size_t cap);
double cpu_elem(const CpuTensor *t, uint64_t i);
/* |a - b| / max(1, |b|); equal infinities and NaN against NaN are 0. */
double err_of(double a, double b);
void load(Loaded *l, const char *path, CpuNumerics mode);
/* load, asserting that the function prepared. */
void load_prepared(Loaded *l, const char *path, CpuNumerics mode);
void unload(Loaded *l);
/* Compiles and runs `text` on the CPU and with ir_eval on the same random
 * inputs (seeded by seed); asserts every output is within tol and returns
 * the largest error. */
double check(const char *label, const char *text, CpuNumerics mode, double tol, const IntRange *ranges, uint64_t seed);
/* The text of examples/NAME (caller frees). */
char *example(const char *name);
/* Makes the scratch directory with mil as its model.mil. */
void write_bare(const char *mil);
/* Loads the bare program in dir with options. */
void load_opts(Loaded *l, const CpuOptions *o);
/* Loads the program at path with options, asserting that it opened and prepared. */
void load_path_opts(Loaded *l, const char *path, const CpuOptions *o);
CpuTensor f32_tensor(float *data, uint32_t rank, const int64_t *dims);
float *out_f32(const CpuTensor *t);
bool *out_bool(const CpuTensor *t);
/* Deterministic values in [-2, 2] in steps of 1/8 when coarse (so that
 * comparisons see equal values), else any float. */
void fill_random(float *p, int64_t n, uint32_t seed, bool coarse);
int64_t prod(const int64_t *d, uint32_t r);
/* The offset in an operand of dims `id` (rank ir, NumPy broadcasting) of
 * output element `flat` of dims `od` (rank orank). */
int64_t bcast_index(int64_t flat, const int64_t *od, uint32_t orank, const int64_t *id, uint32_t ir);
/* Runs the program in dir with 1 and 3 threads in `mode`, checks the two
 * agree bit for bit, and returns the first run's outputs (caller frees). */
void run_twice(CpuNumerics mode, const CpuTensor *in, CpuTensor *out, uint32_t nout);
/* Expects preparing (or running) the program in dir to fail with `want` in the messages. */
void expect_error(const CpuTensor *in, uint32_t nout, const char *want);

#endif
