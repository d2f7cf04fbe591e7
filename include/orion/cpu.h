/*
 * The CPU reference backend: executes one function of a loaded MIL program
 * (orion_open) on the CPU, fast enough for real models.
 *
 * Preparing (cpu_prepare) checks the whole function once: every op must be
 * one the backend knows (otherwise `FILE:LINE:COL: error: op 'X' is not
 * supported by the CPU backend`), every value must have a fixed shape, and
 * every op's arguments are checked against the declared results (scalar,
 * string and list arguments must be constants, except the few that MIL
 * lets a program compute: slice begin/end/size, tile reps, pad amounts and
 * range_1d bounds, which are checked when they are known). It
 * then plans the run: every const (inline literal or BLOBFILE weight) is
 * converted once, every constexpr_* op (affine_dequantize, cast,
 * blockwise_shift_scale, and lut_to_dense and sparse_to_dense in their iOS16 form) evaluated once into a const, or read in place from the weight file's mapping (fp32 and
 * int32 weights, and fp16 weights that only feed linear/conv, which are
 * converted panel by panel inside the matrix product); reshape and identity
 * are views; every other value gets a slice of one buffer, laid out from the
 * values' lifetimes so that values alive at the same time never overlap.
 * The program runs on its context's pool of threads. Running allocates
 * nothing (except what cpu_run returns): cpu_run_into reads fp32/int32
 * inputs in the caller's buffers and has the op that computes an fp32/int32
 * output write it straight into the caller's buffer.
 *
 * Numerics. Every op computes from its operands' values at least at fp32
 * precision (sgemm accumulates in fp32, the other kernels in fp32 or double)
 * and its result is then rounded:
 *   CPU_NUMERICS_FP32: float results to fp32, whatever their declared float
 *     dtype (an fp16-declared tensor holds fp32 values; an explicit cast to
 *     fp16 still rounds, as converting is what the op is for);
 *   CPU_NUMERICS_ANE: fp16-declared results to fp16 (nearest even, overflow
 *     to +-inf) after every op, fp32-declared results to fp32.
 * int32 results are exact (saturated to the int32 range); bool results are
 * 0 or 1. Each element-wise op's scalar function, NaN, infinities and
 * signed zeros included, is orion/op_semantics.h's, the one constant
 * folding uses (docs/numerics.md). Results do not depend on the number of threads: work is split into
 * pieces of a fixed size, each computed the same way by whichever thread
 * takes it.
 *
 * Threads. A backend instance, CpuContext, owns a pool of worker threads
 * (the caller's thread is one of them). Every program prepared in it
 * (cpu_prepare_in) runs on that one pool, and they run one at a time: a run
 * started while another program of the context is running waits for it to
 * end. cpu_prepare and cpu_prepare_with open a private context for the
 * program (cpu_free closes it), so programs prepared with them may run
 * concurrently. A CpuProgram runs one run at a time (its planned buffers
 * belong to it).
 *
 * OpenBLAS. Opening a context sets OpenBLAS's thread count to 1, a setting
 * that is process-wide: the backend splits each matrix product over its own
 * pool (measured faster than OpenBLAS's threads on this work, the two would
 * fight over the cores, and results stay independent of the thread count).
 * Closing the last open context restores the count OpenBLAS had when the
 * first of them was opened. A caller using OpenBLAS itself while a context
 * is open gets one thread.
 */
#ifndef ORION_CPU_H
#define ORION_CPU_H

#include "orion/backend.h"

typedef enum CpuNumerics { CPU_NUMERICS_ANE, CPU_NUMERICS_FP32 } CpuNumerics;

typedef struct CpuOptions {
  CpuNumerics numerics;
  /* cpu_prepare_with: threads running the program, the caller's included.
   * 0: the value of the environment variable ORION_CPU_THREADS if set, else
   * the online cores. Ignored by cpu_prepare_in (the context's count rules). */
  uint32_t threads;
  /* Fail a run at the first non-finite value (inf or NaN): each fp16/fp32
   * input, then each float result of every statement (after its rounding in
   * ANE mode), is scanned in order; the first non-finite element is
   * reported as an error at the statement (or the parameter), naming the op,
   * the value and the element's index, and the run returns false. Constants
   * are not checked (a mask of -inf is often written on purpose; an op that
   * copies it into its result is reported). Off: nothing is scanned. */
  bool check_finite;
  /* Time every statement of every run (see cpu_profile_count). Off: no clock
   * is read. */
  bool profile;
  /* Run every statement on its own, as the MIL writes it: no fusion (the
   * checking backend compares such a run with the fused one). */
  bool unfused;
} CpuOptions;

/* A dense row-major tensor at the API boundary: the backend interface's
 * (orion/backend.h). */
typedef OrionTensor CpuTensor;

typedef struct CpuProgram CpuProgram;

typedef struct CpuContextOptions {
  /* Threads of the pool, the caller's included. 0: the value of the
   * environment variable ORION_CPU_THREADS if set, else the online cores. */
  uint32_t threads;
} CpuContextOptions;

/* A backend instance: a thread pool shared by the programs prepared in it
 * (see "Threads" and "OpenBLAS" above). */
typedef struct CpuContext CpuContext;

/* Opens a context and starts its pool (NULL opt: threads 0). Fewer threads
 * than asked for are used when the system refuses to start some. Returns
 * NULL after reporting through d (nothing fails today). */
CpuContext *cpu_context_open(const CpuContextOptions *opt, Diag *d);
/* Stops the pool and frees the context; every program prepared in it must
 * have been freed first. NULL is fine. */
void cpu_context_close(CpuContext *ctx);
/* The number of threads of the context's pool. */
uint32_t cpu_context_threads(const CpuContext *ctx);

/* Prepares function fn of p (which must outlive the result) for execution
 * in context ctx (which must outlive it too). opt->threads is ignored: the
 * program runs on the context's threads. Returns NULL after reporting every
 * problem through d. */
CpuProgram *cpu_prepare_in(CpuContext *ctx, OrionProgram *p, uint32_t fn, const CpuOptions *opt, Diag *d);

/* The same in a private context of opt->threads threads, which the program
 * owns (cpu_free closes it). cpu_prepare is cpu_prepare_with {mode, threads 0}. */
CpuProgram *cpu_prepare(OrionProgram *p, uint32_t fn, CpuNumerics mode, Diag *d);
CpuProgram *cpu_prepare_with(OrionProgram *p, uint32_t fn, const CpuOptions *opt, Diag *d);

/* Whether the backend can run every statement of function fn of p: each
 * one it cannot (an op it does not know, a flexible shape) is reported at
 * its location. cpu_prepare makes the same checks and more. */
bool cpu_supports(const OrionProgram *p, uint32_t fn, Diag *d);

/* Runs the prepared function. `inputs` holds orion_input_count() tensors in
 * orion_input() order, each of exactly the declared dtype and shape; fp32
 * and int32 inputs are read in place (they must not change during the run).
 * `outputs` holds orion_output_count() caller tensors in orion_output()
 * order, each of exactly the declared dtype and shape, with data the caller
 * owns (not overlapping any input); fp32 and int32 outputs are written by
 * the op that computes them, others converted into them at the end.
 * Returns false after reporting through d (at the MIL statement when one is
 * to blame); the outputs' contents are then unspecified. */
bool cpu_run_into(CpuProgram *c, const CpuTensor *inputs, const CpuTensor *outputs, Diag *d);

/* The same, returning freshly allocated outputs: on success fills `outputs`
 * (free each with cpu_tensor_free) and returns true; on failure leaves every
 * output zeroed. */
bool cpu_run(CpuProgram *c, const CpuTensor *inputs, CpuTensor *outputs, Diag *d);

/* Weight updates without re-planning (the plan and buffers stay).
 *
 * cpu_reload_weights: after the BLOBFILE weights of the loaded program
 * changed in place (the loader re-mapped the weight file and updated the
 * `data` pointers orion_weight() returns; sizes and dtypes are unchanged),
 * re-reads every BLOBFILE const from those pointers, dropping values set
 * with cpu_set_weight. False (reported through d) if a weight's size or
 * dtype changed.
 *
 * cpu_set_weight: replaces the value of the BLOBFILE const named const_name
 * (the const's result name, as orion_weight()'s `name`) with `bytes` bytes
 * of fp16 or fp32 data (dtype MIL_DT_FP16 or MIL_DT_FP32), converted to the
 * const's declared dtype (fp32 to fp16 rounds to nearest even). The data is
 * copied; the mapping is never written. False (reported through d) for an
 * unknown name, a const that is not a float BLOBFILE, another dtype, or a
 * byte size other than the const's elements times the dtype's size. */
bool cpu_reload_weights(CpuProgram *c, Diag *d);
bool cpu_set_weight(CpuProgram *c, const char *const_name, MilDType dtype, const void *data, size_t bytes, Diag *d);

/* Profiling (CpuOptions.profile): the time each statement took, summed
 * over the runs since cpu_prepare_with or the last cpu_profile_reset. The
 * entries are the function's statements other than consts and constexpr_*
 * ops (evaluated at prepare), in statement order. */
typedef OrionStmtTime CpuStmtTime;

/* Entries: 0 when the program was prepared without profiling. */
uint32_t cpu_profile_count(const CpuProgram *c);
/* Entry i (< cpu_profile_count), NULL past the end. */
const CpuStmtTime *cpu_profile_stmt(const CpuProgram *c, uint32_t i);
/* Zeroes every entry's runs and time. */
void cpu_profile_reset(CpuProgram *c);

/* The number of threads the program runs on (its context's). */
uint32_t cpu_threads(const CpuProgram *c);
/* Bytes of the planned buffer holding every intermediate value. */
size_t cpu_planned_bytes(const CpuProgram *c);

/* Frees a tensor's data that cpu_run allocated and zeroes it; NULL is fine. */
void cpu_tensor_free(CpuTensor *t);
/* Frees a prepared program (and closes its private context, if it has one:
 * cpu_prepare, cpu_prepare_with); NULL is fine. */
void cpu_free(CpuProgram *c);

/* Bytes of one element of a dtype the API accepts (fp16, fp32, int32, bool); 0 otherwise. */
size_t cpu_dtype_size(MilDType t);

#endif
