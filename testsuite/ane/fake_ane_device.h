/*
 * A fake ANE device behind the ops tables of runtime/ane/ane_device.h and
 * ane_update.h, for the limits, cache and weight-update tests: every call is
 * logged ("compile a; load a; ..."), failures are scripted per compile, and
 * the disputed weight-update behaviours (peers.md §4.9) are switches.
 */
#ifndef FAKE_ANE_DEVICE_H
#define FAKE_ANE_DEVICE_H

#include "ane_budget.h"
#include "ane_device.h"
#include "ane_update.h"
#include "orion/support.h"

#define FAKE_WEIGHTS 4
#define FAKE_MAX_SCRIPT 16

typedef struct FakeWeights {
  uint16_t w[FAKE_WEIGHTS]; /* fp16 bits; the probe's outputs are the weights it runs with */
} FakeWeights;

typedef struct FakeDevice {
  StrBuf log;
  /* The n-th compile (0-based, counting recompiles) fails with this when code != 0. */
  AneDeviceError compile_fails[FAKE_MAX_SCRIPT];
  bool fail_loads;
  uint32_t compiles;
  uint32_t live; /* programs compiled and not released */
  /* The disputed behaviours. */
  bool reload_reads_files;      /* (b): unload + load honours patched weight files */
  bool load_reads_patched_data; /* loading honours the compiled program's patched data */
  bool inputs_supported;        /* weights compiled as inputs are accepted */
  bool recompile_reuses_image;  /* a recompile of the same model gives its old image back */
  /* The probe's weights and sources. */
  FakeWeights old_w, new_w;
  AneProgramSource sources[4]; /* old, new, old as inputs, new as inputs */
} FakeDevice;

typedef struct FakeProgram {
  char name[64];
  bool loaded, as_inputs;
  FakeWeights image, files, data, bound;
  bool data_patched;
} FakeProgram;

void fake_init(FakeDevice *f);
void fake_free(FakeDevice *f);
AneDeviceOps fake_device_ops(FakeDevice *f);
AneUpdateOps fake_update_ops(FakeDevice *f);
/* A source named name whose weights are the bytes of w (MIL text "mil <name>"). */
AneProgramSource fake_source(const char *name, const char *mil, const FakeWeights *w);
/* b as the constraint table sets it: ANE005, 119 compiles per process. */
void fake_budget_init(AneBudget *b);
/* A recorder for paced retries: appends "sleep MS; " to the log. */
void fake_sleep(void *ctx, uint32_t ms);

#endif
