/*
 * A compile through the device's ops, within the compile budget, with paced
 * retries: a transient failure (the device's error says so, ane_device.h) is
 * tried again up to max_retries times after a growing pause, because a
 * failed compile restarts the shared compile service and quick retries fail
 * again; a rejection is reported at once. Every attempt is a compile the
 * device performs, so every attempt is charged to the budget. The pause goes
 * through an injected sleep function: nothing here sleeps by itself.
 */
#ifndef ORION_ANE_COMPILE_H
#define ORION_ANE_COMPILE_H

#include "ane_budget.h"
#include "ane_device.h"

/* Reports recommend about 15 s between compile attempts (ane-guide ch.19). */
#define ANE_RETRY_DEFAULT_MAX 3u
#define ANE_RETRY_DEFAULT_FIRST_MS 15000u

typedef void AneSleep(void *ctx, uint32_t ms);

typedef struct AneRetryPolicy {
  uint32_t max_retries;    /* after the first attempt */
  uint32_t first_pause_ms; /* before the first retry; doubled before each next one */
  AneSleep *sleep;         /* NULL: no retries are made */
  void *sleep_ctx;
} AneRetryPolicy;

/* ANE_RETRY_DEFAULT_* with a sleep function (the backend passes one that
 * sleeps; tests pass a recorder). */
AneRetryPolicy ane_retry_default(AneSleep *sleep, void *sleep_ctx);

typedef struct AneCompileStats {
  uint64_t compiles; /* attempts the device was asked for */
  uint64_t retries;
  uint64_t failures; /* compiles that failed in the end */
} AneCompileStats;

/* Compiles src (a new program when existing is NULL, else existing again
 * through ops->recompile). from_reserve charges a budget reservation. On
 * failure, reports the device's code and message and NULL / false. */
bool ane_compile_paced(const AneDeviceOps *ops, AneBudget *budget, const AneRetryPolicy *retry,
                       const AneProgramSource *src, void *existing, bool from_reserve, void **program,
                       AneCompileStats *stats, Diag *d);

/* "code 0x50004: <message>" or "no error code" for messages. */
void ane_device_error_print(const AneDeviceError *err, StrBuf *out);

#endif
