/*
 * The CPU reference backend: an interpreter that executes one function of a
 * loaded MIL program (orion_open) on the CPU, statement by statement.
 *
 * This is the first increment: every result is allocated as its op runs;
 * matmul, linear and 1x1 conv run on OpenBLAS sgemm (threaded by OpenBLAS,
 * OPENBLAS_NUM_THREADS limits it), the other ops are plain loops.
 *
 * Preparing (cpu_prepare) checks the whole function once: every op must be
 * one the interpreter knows (otherwise `FILE:LINE:COL: error: op 'X' is not
 * supported by the CPU backend`), every value must have a fixed shape, and
 * every const (inline literal or BLOBFILE weight) is converted once.
 * Running (cpu_run) takes the inputs in the order orion_input() lists them
 * and returns freshly allocated outputs in the order orion_output() lists.
 *
 * Numerics. Every op computes from its operands' values at least at fp32
 * precision (sgemm accumulates in fp32, the loops in double) and its result
 * is then rounded:
 *   CPU_NUMERICS_FP32: float results to fp32, whatever their declared float
 *     dtype (an fp16-declared tensor holds fp32 values; an explicit cast to
 *     fp16 still rounds, as converting is what the op is for);
 *   CPU_NUMERICS_ANE: fp16-declared results to fp16 (nearest even, overflow
 *     to +-inf) after every op, fp32-declared results to fp32.
 * int32 results are exact; bool results are 0 or 1.
 */
#ifndef ORION_CPU_H
#define ORION_CPU_H

#include "orion/runtime.h"

typedef enum CpuNumerics { CPU_NUMERICS_ANE, CPU_NUMERICS_FP32 } CpuNumerics;

/* A dense row-major tensor at the API boundary. Element storage by dtype:
 * MIL_DT_FP16 uint16_t (IEEE binary16 bits), MIL_DT_FP32 float,
 * MIL_DT_INT32 int32_t, MIL_DT_BOOL bool. */
typedef struct CpuTensor {
  MilDType dtype;
  uint32_t rank;
  int64_t dims[MIL_MAX_RANK];
  void *data;
} CpuTensor;

typedef struct CpuProgram CpuProgram;

/* Prepares function fn of p (which must outlive the result) for execution.
 * Returns NULL after reporting every problem through d. */
CpuProgram *cpu_prepare(OrionProgram *p, uint32_t fn, CpuNumerics mode, Diag *d);

/* Runs the prepared function. `inputs` holds orion_input_count() tensors in
 * orion_input() order, each of exactly the declared dtype and shape.
 * On success fills `outputs` (orion_output_count() entries, in orion_output()
 * order; free each with cpu_tensor_free) and returns true; on failure reports
 * through d (at the MIL statement when one is to blame) and leaves every
 * output zeroed. */
bool cpu_run(CpuProgram *c, const CpuTensor *inputs, CpuTensor *outputs, Diag *d);

/* Frees a tensor's data that cpu_run allocated and zeroes it; NULL is fine. */
void cpu_tensor_free(CpuTensor *t);
/* Frees a prepared program; NULL is fine. */
void cpu_free(CpuProgram *c);

/* Bytes of one element of a dtype the API accepts (fp16, fp32, int32, bool); 0 otherwise. */
size_t cpu_dtype_size(MilDType t);

#endif
