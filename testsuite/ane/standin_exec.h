/*
 * What the stand-in's _ANEInMemoryModel does with a compiled program, in C
 * over orion's runtime (standin_exec.c): compile = write the descriptor's
 * MIL and weights as a bare model directory of its own, open it with orion,
 * refuse what the device refuses (orion_ane_check: the constraint table's
 * rules) and prepare every function on orion's CPU backend in ane numerics;
 * evaluate = check the request's surfaces as the device does, read the
 * inputs in ASCII order of their MIL names, run, write the outputs likewise.
 *
 * The weights are baked at compile: the stand-in's directory is its own
 * copy, removed once opened, so a later change to any weight file is not
 * seen until the program is compiled again, as on the device.
 *
 * orion's runtime is not linked into the stand-in: its functions are weak
 * references resolved from the process that loads the framework (orion-run,
 * the tests; linked with export_dynamic), so the stand-in and that process
 * share one copy of the runtime and its state. In a process without the
 * runtime the stand-in still loads (the binding's tests) and a compile
 * fails saying so.
 */
#ifndef ORION_STANDIN_EXEC_H
#define ORION_STANDIN_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iosurface_port.h"

/* The device's error codes as the stand-in reports them: 0x1d is the code
 * reported for a request the device refuses at evaluation (peers.md §4.5);
 * no stored source gives the compiler's, so the stand-in's compile
 * failures carry code 1. */
enum { STANDIN_ERROR_COMPILE = 1, STANDIN_ERROR_EVALUATE = 0x1d };

typedef struct StandinWeight {
  char *key; /* "@model_path/weights/weight.bin" */
  uint64_t offset;
  uint8_t *data;
  size_t len;
} StandinWeight;

typedef struct StandinProgram StandinProgram;

/* On failure returns NULL and sets *code and *description (malloc'd). */
StandinProgram *standin_compile(const char *mil, size_t mil_len, const StandinWeight *weights, size_t nweights,
                                long *code, char **description);
void standin_program_free(StandinProgram *p);

/* Runs function procedure on the request's surfaces: inputs[k] and
 * outputs[k] are the surfaces bound at index k. */
bool standin_evaluate(StandinProgram *p, int64_t procedure, IOSurfaceRef const *inputs, long ninputs,
                      IOSurfaceRef const *outputs, long noutputs, long *code, char **description);

/* The disputed weight-update behaviours (peers.md §4.9), chosen by
 * $ORION_ANE_STANDIN_WEIGHTS (docs/ane-backend.md):
 *   baked (default)  weights are baked at compile: nothing but a compile sees new ones;
 *   reload           a load after an unload reads the weight files in the model's
 *                    directory ($TMPDIR/<hexStringIdentifier>/) again;
 *   patch-data       compile writes the program's image, `data` in that directory
 *                    (the weight files' bytes in ASCII order of their keys; for one
 *                    weight file, the file itself, as the reference writes it), and a
 *                    load after an unload reads the weights back from it;
 *   inputs           as baked, but a program may take its weights as inputs
 *                    (ane_weight_inputs.h's names): only those change a result
 *                    without a compile. Under the other switches such a
 *                    program is refused at compile (code 1). */
#define STANDIN_WEIGHTS_ENV "ORION_ANE_STANDIN_WEIGHTS"
typedef enum StandinWeightMode {
  STANDIN_WEIGHTS_BAKED,
  STANDIN_WEIGHTS_RELOAD,
  STANDIN_WEIGHTS_PATCH_DATA,
  STANDIN_WEIGHTS_INPUTS,
} StandinWeightMode;

/* The switch's value; false (with the device's compile error) for another. */
bool standin_weight_mode(StandinWeightMode *mode, long *code, char **description);
/* Writes the image `data` into dir (patch-data's compile). */
bool standin_write_data(const char *dir, const StandinWeight *weights, size_t nweights);
/* A load after an unload under reload or patch-data: *program again from
 * the weights read back from dir (not a compile: not counted). */
bool standin_reload(StandinProgram **program, const char *dir, StandinWeightMode mode, const char *mil,
                    size_t mil_len, const StandinWeight *weights, size_t nweights, long *code, char **description);

/* The compile service failing: the first $ORION_ANE_STANDIN_SILENT_FAILURES
 * compiles of the process (counted) answer NO without an error object, as
 * reported of the device when its compile service restarts. True when this
 * compile is one of them. */
#define STANDIN_SILENT_FAILURES_ENV "ORION_ANE_STANDIN_SILENT_FAILURES"
/* And the device's compile limit: every compile of the process past the
 * first $ORION_ANE_STANDIN_COMPILE_LIMIT (default: the table's
 * compiles_per_process, ANE005's 119) answers NO without an error object,
 * as reported of the device (peers.md §4.4), until the process ends;
 * counted like the others. A malformed value fails the compile (code 1),
 * naming the variable. */
#define STANDIN_COMPILE_LIMIT_ENV "ORION_ANE_STANDIN_COMPILE_LIMIT"
#define STANDIN_COMPILE_LIMIT_MAX 1000000ul
bool standin_fail_silently(void);

/* Compiles asked for since the stand-in was loaded (the tests read it). */
unsigned long ane_standin_compile_count(void);

/* What the backend keys compiled programs and the cached weight-update
 * choice by, where a Mac has kern.osversion and its ANE: the OS build is
 * $ORION_ANE_STANDIN_OS_BUILD if set (a test's "new OS build"), else
 * "standin-1". The architecture is what the stand-in's _ANEDeviceInfo
 * answers (standin_objects.m): +aneArchitectureType is
 * $ORION_ANE_STANDIN_ANE_ARCH if set (a test's "other chip"), else
 * "standin"; +aneSubType "standin-sub"; ORION_ANE_STANDIN_DEVICE_INFO=subtype
 * drops the first selector (respondsToSelector: says NO), =none both. */
#define STANDIN_OS_BUILD_ENV "ORION_ANE_STANDIN_OS_BUILD"
#define STANDIN_ANE_ARCH_ENV "ORION_ANE_STANDIN_ANE_ARCH"
#define STANDIN_DEVICE_INFO_ENV "ORION_ANE_STANDIN_DEVICE_INFO"
const char *ane_standin_os_build(void);
const char *ane_standin_ane_arch(void);

#endif
