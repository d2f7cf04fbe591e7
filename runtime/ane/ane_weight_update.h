/*
 * The weight-update operations (ane_update.h's AneUpdateOps) over the
 * lifecycle, and the self-test's probe program: the real backend's side of
 * ane_update.c. A weights handle is an AneWeightSet (the weight files under
 * their @model_path keys).
 *
 *   reload-files  the files rewritten in the program's directory
 *                 ($TMPDIR/<hexStringIdentifier>/), each atomically (a
 *                 temporary file renamed over it), between an unload and a
 *                 load (ane_update_apply);
 *   patch-data    the program's image `data` in that directory rewritten
 *                 instead: the files' bytes in ASCII order of their keys (for
 *                 one weight file the file itself, as orion-reference.md §3.3
 *                 writes it; what a Mac's `data` holds for several is not
 *                 known);
 *   recompile     the files rewritten, then the device's compile again;
 *   inputs        the weights bound as the inputs of a program compiled with
 *                 them as inputs (ane_weight_inputs.h): for the probe, the
 *                 set whose values its next evaluation writes into the
 *                 weight's surface; the backend's own functions write their
 *                 weight surfaces themselves (ane_backend.c).
 *
 * The probe: y = x * w on [1, 4, 1, 8] fp16, w a constant from its own
 * weight file, 0.5 before and 2.0 after; x = 1..32 (every product exact).
 * Its inputs variant takes w as the input orion_weight__w.
 */
#ifndef ORION_ANE_WEIGHT_UPDATE_H
#define ORION_ANE_WEIGHT_UPDATE_H

#include "ane_device_ops.h"
#include "ane_update.h"

typedef struct AneWeightSet {
  const AneWeightFile *files;
  uint32_t n;
} AneWeightSet;

#define ANE_PROBE_VALUES 32u
#define ANE_PROBE_BLOB_BYTES (64u + 64u + 2u * ANE_PROBE_VALUES)

typedef struct AneUpdater {
  AneLifecycle *lc;
  uint64_t probe_surface_bytes; /* the probe's surfaces (the device's minimum) */
  const char *os_build, *ane_arch;
  /* The probe's two weight sets (self-test handles) and their sources. */
  uint8_t blob[2][ANE_PROBE_BLOB_BYTES];
  AneWeightFile file[2];
  AneWeightSet set[2];
  char digest[2][256];
  AneLifecycleSource source[2];
  AneLifecycleSource inputs_source; /* the probe with w as an input, no weight files */
  const void *bound;                /* the set bound to the inputs variant */
} AneUpdater;

void ane_updater_init(AneUpdater *u, AneLifecycle *lc, uint64_t probe_surface_bytes, const char *os_build,
                      const char *ane_arch);
AneUpdateOps ane_updater_ops(AneUpdater *u);
/* The self-test's description for ane_update_self_test: the probe's two
 * weight sets, bit-exact comparison, the cache in $XDG_CACHE_HOME/orion. */
AneSelfTest ane_updater_self_test(AneUpdater *u);

#endif
