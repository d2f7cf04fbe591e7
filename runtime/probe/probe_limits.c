/*
 * The probes of limits and acceptance: the largest channel count, the
 * smallest surface, concat and gelu, and the compile budget. A search
 * assumes acceptance is monotone in the size (a device that takes C
 * channels takes fewer; one that takes S bytes takes more) and tries a
 * logarithmic number of programs.
 */
#include "probe_internal.h"

#include "orion/fp16.h"

#include <stdlib.h>
#include <string.h>

/* Tries size c (channels), records the attempt. */
static bool attempt(ProbeSession *s, OrionProbeSearch *out, const char *what, uint64_t c, char **error) {
  char *mil = probe_mil_text(s->opt.target, PROBE_OP_RELU, c, ORION_PROBE_WIDTH, 0);
  char *err = NULL;
  bool ok = probe_try(s, mil, &err);
  free(mil);
  out->attempts = xrealloc(out->attempts, sizeof *out->attempts * (out->nattempts + 1));
  out->attempts[out->nattempts++] = (OrionProbeAttempt){.size = c, .accepted = ok, .error = err ? xstrdup(err) : NULL};
  probe_say(s, true, "  %s: %llu channels (%llu bytes) %s", what, (unsigned long long)c,
            (unsigned long long)(c * ORION_PROBE_WIDTH * 2), ok ? "accepted" : "rejected");
  if (error) {
    free(*error);
    *error = err;
  } else {
    free(err);
  }
  return ok;
}

/* The boundary of a monotone acceptance in [lo, hi], from `start`:
 * accept_low says small sizes are the accepted ones (channels) or large
 * ones are (surfaces). Doubling or halving away from the start until the
 * verdict changes, then bisection. */
static void search(ProbeSession *s, OrionProbeSearch *out, const char *what, uint64_t lo, uint64_t hi, uint64_t start,
                   bool accept_low) {
  out->ran = true;
  out->lo = lo;
  out->hi = hi;
  char *error = NULL;
  uint64_t acc = 0, rej = 0; /* 0: none seen */
  uint64_t c = start;
  bool ok = attempt(s, out, what, c, &error);
  /* Moving towards rejection when accepted (up for channels), towards acceptance when not. */
  bool up = ok == accept_low;
  for (;;) {
    if (ok) acc = c;
    else rej = c;
    if (acc && rej) break;
    uint64_t next = up ? (c > hi / 2 ? hi : c * 2) : (c / 2 < lo ? lo : c / 2);
    if (next == c) break; /* at the end of the range with one verdict throughout */
    c = next;
    ok = attempt(s, out, what, c, &error);
  }
  while (acc && rej && (acc > rej ? acc - rej : rej - acc) > 1) {
    uint64_t mid = acc / 2 + rej / 2 + (acc % 2 + rej % 2) / 2;
    if (attempt(s, out, what, mid, &error)) acc = mid;
    else {
      rej = mid;
    }
  }
  out->found = acc && rej;
  out->none = !acc;
  out->all_accepted = acc && !rej;
  out->accepted = acc;
  out->rejected = rej;
  /* The boundary's error: the last rejection seen is the rejected neighbour's. */
  if (!out->all_accepted) {
    for (uint32_t i = out->nattempts; i-- > 0;)
      if (!out->attempts[i].accepted && out->attempts[i].size == (out->none ? c : rej)) {
        out->error = xstrdup(out->attempts[i].error);
        break;
      }
  }
  free(error);
}

void probe_dialects(ProbeSession *s, OrionProbeDialects *out) {
  out->ran = true;
  for (int t = MIL_IOS16; t <= MIL_IOS18; t++) {
    /* 768 channels: the table's default minimum surface, 49152 bytes. */
    char *mil = probe_mil_text((MilTarget)t, PROBE_OP_RELU, 768, ORION_PROBE_WIDTH, 0);
    out->accepted[t] = probe_try(s, mil, &out->error[t]);
    free(mil);
    probe_say(s, true, "  dialect: %s %s", mil_target_name((MilTarget)t), out->accepted[t] ? "accepted" : "rejected");
    if (out->accepted[t]) {
      out->found = true;
      out->newest = (MilTarget)t;
    }
  }
}

void probe_channels(ProbeSession *s, OrionProbeSearch *out) {
  /* 1024 channels: a 64 KiB surface, above every reported minimum. */
  uint64_t start = s->opt.max_channels < 1024 ? s->opt.max_channels : 1024;
  search(s, out, "channels", 1, s->opt.max_channels, start, true);
}

void probe_surface(ProbeSession *s, uint64_t max_channels, OrionProbeSearch *out) {
  uint64_t hi = s->opt.max_surface_bytes / (ORION_PROBE_WIDTH * 2);
  if (hi > max_channels) hi = max_channels;
  if (hi < 1) hi = 1;
  search(s, out, "surface", 1, hi, hi, false);
}

void probe_acceptance(ProbeSession *s, ProbeOp op, uint64_t channels, OrionProbeAcceptance *out) {
  out->ran = true;
  out->rule = op == PROBE_OP_CONCAT ? "ANE001" : "ANE010";
  char *mil = probe_mil_text(s->opt.target, op, channels, ORION_PROBE_WIDTH, 0);
  out->accepted = probe_try(s, mil, &out->error);
  free(mil);
}

/* Whether every element of an fp16 output is `want`. */
static bool holds(const OrionTensor *t, float want) {
  size_t n = 1;
  for (uint32_t i = 0; i < t->rank; i++) n *= (size_t)t->dims[i];
  uint16_t w = fp16_from_float(want);
  const uint16_t *p = t->data;
  for (size_t i = 0; i < n; i++)
    if (p[i] != w) return false;
  return true;
}

void probe_compiles(ProbeSession *s, uint64_t channels, OrionProbeCompiles *out) {
  out->ran = true;
  out->cap = s->opt.max_compiles;
  /* Every program stays loaded until the end: the budget reported is of
   * programs held at once as well as of compiles. */
  ProbeProgram **held = xcalloc(out->cap, sizeof *held);
  for (uint32_t i = 0; i < out->cap; i++) {
    /* y = x + (i + 1) on zeros: each program distinct (no cache can serve
     * it), and a silently failed compile shows as a wrong value. */
    float k = (float)(i + 1);
    char *mil = probe_mil_text(s->opt.target, PROBE_OP_ADD_CONST, channels, ORION_PROBE_WIDTH, (double)k);
    char *err = NULL;
    held[i] = probe_program_open(s, mil, 0, &err);
    free(mil);
    bool ok = held[i] && probe_program_run(held[i], NULL, &err);
    if (ok && !holds(&held[i]->out[0], k)) {
      ok = false;
      StrBuf sb;
      sb_init(&sb);
      sb_printf(&sb, "program %u computed a wrong result (x + %g on zeros is not %g everywhere)", i + 1, (double)k,
                (double)k);
      err = sb.data;
    }
    if (!ok) {
      out->failed = true;
      out->budget = s->report->prepared - (held[i] ? 1 : 0);
      out->error = err;
      break;
    }
    out->this_probe++;
    if ((i + 1) % 25 == 0) probe_say(s, false, "  compiles: %u programs loaded", i + 1);
  }
  for (uint32_t i = 0; i < out->cap; i++) probe_program_close(held[i]);
  free(held);
}
