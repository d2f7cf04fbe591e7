/* Paced compiles within the budget (ane_compile.h). */
#include <inttypes.h>

#include "ane_compile.h"

AneRetryPolicy ane_retry_default(AneSleep *sleep, void *sleep_ctx) {
  return (AneRetryPolicy){ANE_RETRY_DEFAULT_MAX, ANE_RETRY_DEFAULT_FIRST_MS, sleep, sleep_ctx};
}

void ane_device_error_print(const AneDeviceError *err, StrBuf *out) {
  if (err->code) sb_printf(out, "code 0x%" PRIx64, (uint64_t)err->code);
  else sb_puts(out, "no error code");
  if (err->message[0]) sb_printf(out, ": %.*s", (int)sizeof err->message, err->message);
}

static void report_failure(const AneProgramSource *src, const AneDeviceError *err, uint32_t attempts, Diag *d) {
  StrBuf sb;
  sb_init(&sb);
  ane_device_error_print(err, &sb);
  if (err->kind == ANE_FAILURE_REJECTED)
    diag_error(d, (SrcSpan){0}, "the ANE compiler rejected '%s' (%s); not retried: the device refuses this program",
               src->name, sb.data);
  else
    diag_error(d, (SrcSpan){0}, "the ANE compiler failed on '%s' (%s) after %u attempt%s", src->name, sb.data,
               attempts, attempts == 1 ? "" : "s");
  sb_free(&sb);
}

bool ane_compile_paced(const AneDeviceOps *ops, AneBudget *budget, const AneRetryPolicy *retry,
                       const AneProgramSource *src, void *existing, bool from_reserve, void **program,
                       AneCompileStats *stats, Diag *d) {
  uint32_t max_retries = retry && retry->sleep ? retry->max_retries : 0;
  uint64_t pause = retry ? retry->first_pause_ms : 0;
  for (uint32_t attempt = 0;; attempt++) {
    StrBuf what;
    sb_init(&what);
    sb_printf(&what, "'%s'", src->name);
    bool charged = ane_budget_charge(budget, from_reserve, what.data, d);
    sb_free(&what);
    if (!charged) return false;
    if (stats) stats->compiles++;
    AneDeviceError err = {0};
    bool ok = existing ? ops->recompile(ops->ctx, existing, &err) : ops->compile(ops->ctx, src, program, &err);
    if (ok) {
      if (existing) *program = existing;
      return true;
    }
    if (err.kind == ANE_FAILURE_REJECTED || attempt == max_retries) {
      if (stats) stats->failures++;
      report_failure(src, &err, attempt + 1, d);
      return false;
    }
    if (stats) stats->retries++;
    retry->sleep(retry->sleep_ctx, pause > UINT32_MAX ? UINT32_MAX : (uint32_t)pause);
    pause *= 2;
  }
}
