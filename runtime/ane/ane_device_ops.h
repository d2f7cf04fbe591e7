/*
 * The device operations (ane_device.h) implemented by the real backend over
 * the lifecycle (ane_model.h), so that every compile goes through the
 * budget, the device program cache and its paced retries
 * (ane_program_cache.h). A program handle is an AneDeviceProgram: the
 * lifecycle's model with copies of what it was compiled from.
 *
 * Which failures are transient (docs/ane-backend.md): a compile or load the
 * device answers NO to without an error object is the compile service
 * failing or restarting (ane-guide's reason to pace retries), so it is
 * retried; every failure with an error object (the stand-in's code 1, the
 * device's 0x20004 and others) is a refusal of this program and is not.
 */
#ifndef ORION_ANE_DEVICE_OPS_H
#define ORION_ANE_DEVICE_OPS_H

#include "ane_device.h"
#include "ane_model.h"
#include "orion/support.h"

/* What the lifecycle compiles: the cache's source (first member, so the
 * compile operation finds the rest from it) and the weight files. */
typedef struct AneLifecycleSource {
  AneProgramSource src;
  const AneWeightFile *files;
  uint32_t nfiles;
} AneLifecycleSource;

typedef struct AneDeviceProgram {
  AneModel model;
  char *what; /* "function 'main'" */
  char *mil;
  size_t mil_len;
  AneWeightFile *files; /* copies: keys and data */
  uint32_t nfiles;
} AneDeviceProgram;

typedef struct AneLifecycle {
  const AneFramework *fw;
  const AneSystem *sys;
  /* The last failed operation's message in the lifecycle's words (""
   * after a success); the backend reports it for a rejection. */
  char why[2048];
  bool transient; /* ... and it was a transient failure (retried) */
} AneLifecycle;

/* ops over lc (which must outlive them). */
AneDeviceOps ane_lifecycle_ops(AneLifecycle *lc);

/* Writes the program's directory again if it was removed (it is removed
 * while no prepared function holds the program). */
bool ane_device_program_ensure_directory(AneLifecycle *lc, AneDeviceProgram *p, char *why, size_t len);

/* "<key> <sha256 of the bytes>\n" per weight file: the cache key's weights. */
void ane_weight_files_digest(const AneWeightFile *files, uint32_t n, StrBuf *out);

/* The OS build whose compiler makes the images: on macOS kern.osversion; on
 * the stand-in what its ane_standin_os_build() says; "unknown" otherwise.
 * (The ANE architecture is the framework's: ane_device_info.h.) */
void ane_device_os_build(const AneFramework *fw, char *out, size_t len);

/* A real sleep, for the paced retries (AneSleep). */
void ane_sleep_ms(void *ctx, uint32_t ms);

#endif
