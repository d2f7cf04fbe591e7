/*
 * The parts of orion-run that live in their own files: the `patch`
 * subcommand and the check behind its --verify.
 */
#ifndef ORION_RUN_H
#define ORION_RUN_H

#include "orion/patch.h"

/* `orion-run patch ...` (argv[0] is "patch"); returns the exit status. */
int orion_run_patch(int argc, char **argv);

/* Compiles the package's source again with the new weights (the files given
 * to the patch: safetensors, or .npy under npy_names[i] when not NULL) and
 * checks that the patched package has the same MIL text and weight bytes and
 * computes bit-identical outputs on random inputs. */
bool orion_run_verify_patch(const char *package, const char *source, const char *const *files,
                            const char *const *npy_names, uint32_t nfiles, bool verbose, Diag *d);

#endif
