/*
 * The probe session: the private directory, the order of the probes (each
 * later one sized by what the earlier ones found), the report's names,
 * summary and release.
 */
#include "probe_internal.h"

#include "orion/temporaries.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const probe_names[ORION_PROBE_COUNT] = {"dialect", "channels", "surface", "concat",
                                                           "gelu",    "sram",     "dispatch", "compiles"};

const char *orion_probe_name(OrionProbeKind k) { return k < ORION_PROBE_COUNT ? probe_names[k] : "?"; }

bool orion_probe_from_name(const char *name, OrionProbeKind *out) {
  for (int k = 0; k < ORION_PROBE_COUNT; k++)
    if (!strcmp(name, probe_names[k])) {
      *out = (OrionProbeKind)k;
      return true;
    }
  return false;
}

/* The table's default minimum surface (49152 bytes) in channels of the probe's width. */
#define DEFAULT_SURFACE_CHANNELS 768u

static OrionProbeOptions with_defaults(const OrionProbeOptions *opt) {
  OrionProbeOptions o = opt ? *opt : (OrionProbeOptions){.target = MIL_IOS18};
  if (!o.max_compiles) o.max_compiles = 200;
  if (!o.max_surface_bytes) o.max_surface_bytes = 1u << 20;
  if (!o.max_channels) o.max_channels = 262144;
  if (!o.max_working_set) o.max_working_set = 96u << 20;
  if (!o.repeats) o.repeats = 5;
  if (!o.dispatch_runs) o.dispatch_runs = 100;
  return o;
}

bool orion_probe_run(OrionBackend *b, const OrionProbeOptions *opt, OrionProbeReport *r, Diag *d) {
  *r = (OrionProbeReport){0};
  ProbeSession s = {.backend = b, .opt = with_defaults(opt), .report = r};
  r->backend = xstrdup(orion_backend_name(b));
  const char *parent = s.opt.temp_parent ? s.opt.temp_parent : getenv("TMPDIR");
  if (!parent || !*parent) parent = "/tmp";
  StrBuf dir;
  sb_init(&dir);
  sb_printf(&dir, "%s/orion-probe-XXXXXX", parent);
  if (!temp_make_dir(dir.data)) {
    diag_error(d, (SrcSpan){0}, "cannot make a directory for the probe programs in %s: %s", parent, strerror(errno));
    sb_free(&dir);
    return false;
  }
  s.dir = dir.data;
  unsigned only = s.opt.only ? s.opt.only : (1u << ORION_PROBE_COUNT) - 1;
#define WANT(k) (only & (1u << (k)))
  if (WANT(ORION_PROBE_DIALECT)) {
    probe_say(&s, false, "probing the MIL dialects");
    probe_dialects(&s, &r->dialects);
    if (!r->dialects.accepted[s.opt.target] && r->dialects.found) {
      probe_say(&s, false, "%s was rejected: the other probes use %s", mil_target_name(s.opt.target),
                mil_target_name(r->dialects.newest));
      s.opt.target = r->dialects.newest;
    }
  }
  r->target = s.opt.target;
  uint64_t limit = s.opt.max_channels;
  if (WANT(ORION_PROBE_CHANNELS)) {
    probe_say(&s, false, "probing the largest channel count (up to %llu)", (unsigned long long)limit);
    probe_channels(&s, &r->channels);
    if (r->channels.accepted) limit = r->channels.accepted;
  }
  /* The other programs at the smallest surface known to work, inside the channel limit. */
  uint64_t channels = DEFAULT_SURFACE_CHANNELS;
  if (WANT(ORION_PROBE_SURFACE)) {
    probe_say(&s, false, "probing the smallest surface (up to %llu bytes)", (unsigned long long)s.opt.max_surface_bytes);
    probe_surface(&s, limit, &r->surface);
    if (r->surface.accepted) channels = r->surface.accepted;
  }
  if (channels > limit) channels = limit;
  uint64_t half = limit / 2 ? limit / 2 : 1; /* concat's output has twice the channels */
  if (WANT(ORION_PROBE_CONCAT)) {
    probe_say(&s, false, "probing concat");
    probe_acceptance(&s, PROBE_OP_CONCAT, channels < half ? channels : half, &r->concat);
  }
  if (WANT(ORION_PROBE_GELU)) {
    probe_say(&s, false, "probing gelu");
    probe_acceptance(&s, PROBE_OP_GELU, channels, &r->gelu);
  }
  if (WANT(ORION_PROBE_SRAM)) {
    probe_say(&s, false, "probing the SRAM cliff (working sets up to %llu bytes)",
              (unsigned long long)s.opt.max_working_set);
    /* The smallest surface found, else the caller's figure: below it every size is refused. */
    probe_sram(&s, r->surface.accepted ? r->surface.accepted * ORION_PROBE_WIDTH * 2 : s.opt.min_surface_bytes,
               &r->sram);
  }
  if (WANT(ORION_PROBE_DISPATCH)) {
    probe_say(&s, false, "probing the dispatch overhead (%u runs)", s.opt.dispatch_runs);
    probe_dispatch(&s, channels, &r->dispatch);
  }
  if (WANT(ORION_PROBE_COMPILES)) {
    probe_say(&s, false, "probing the compile budget (up to %u programs)", s.opt.max_compiles);
    probe_compiles(&s, channels, &r->compiles);
  }
#undef WANT
  temp_remove(s.dir);
  sb_free(&dir);
  return true;
}

static void free_search(OrionProbeSearch *s) {
  for (uint32_t i = 0; i < s->nattempts; i++) free(s->attempts[i].error);
  free(s->attempts);
  free(s->error);
}

void orion_probe_report_free(OrionProbeReport *r) {
  if (!r) return;
  free(r->backend);
  for (int t = 0; t < CONSTRAINT_TARGET_COUNT; t++) free(r->dialects.error[t]);
  free_search(&r->channels);
  free_search(&r->surface);
  free(r->concat.error);
  free(r->gelu.error);
  free(r->sram.points);
  free(r->sram.error);
  free(r->dispatch.error);
  free(r->compiles.error);
  *r = (OrionProbeReport){0};
}

/* The first line of an error, for the summary. */
static void first_line(StrBuf *out, const char *s) {
  const char *nl = strchr(s, '\n');
  sb_putn(out, s, nl ? (size_t)(nl - s) : strlen(s));
}

static void put_acceptance(StrBuf *out, const char *what, const OrionProbeAcceptance *a) {
  if (!a->ran) return;
  sb_printf(out, "  %-15s %s", what, a->accepted ? "accepted" : "rejected: ");
  if (!a->accepted) first_line(out, a->error);
  sb_putc(out, '\n');
}

void orion_probe_report_summary(const OrionProbeReport *r, StrBuf *out) {
  const OrionProbeSearch *c = &r->channels, *s = &r->surface;
  if (r->dialects.ran) {
    sb_printf(out, "  %-15s ", "dialects:");
    for (int t = MIL_IOS16; t <= MIL_IOS18; t++)
      sb_printf(out, "%s%s %s", t ? ", " : "", mil_target_name((MilTarget)t), r->dialects.accepted[t] ? "accepted" : "rejected");
    sb_putc(out, '\n');
  }
  if (c->ran) {
    sb_printf(out, "  %-15s ", "channels:");
    if (c->found)
      sb_printf(out, "%llu accepted, %llu rejected (%u programs)\n", (unsigned long long)c->accepted,
                (unsigned long long)c->rejected, c->nattempts);
    else if (c->all_accepted)
      sb_printf(out, "every count up to the cap, %llu, accepted\n", (unsigned long long)c->hi);
    else sb_puts(out, "no channel count accepted\n");
  }
  if (s->ran) {
    sb_printf(out, "  %-15s ", "min surface:");
    uint64_t bytes = ORION_PROBE_WIDTH * 2;
    if (s->found)
      sb_printf(out, "%llu bytes accepted, %llu rejected (%u programs)\n", (unsigned long long)(s->accepted * bytes),
                (unsigned long long)(s->rejected * bytes), s->nattempts);
    else if (!s->none)
      sb_printf(out, "every size down to %llu bytes accepted\n", (unsigned long long)(s->accepted * bytes));
    else sb_printf(out, "no size up to %llu bytes accepted\n", (unsigned long long)(s->hi * bytes));
  }
  put_acceptance(out, "concat:", &r->concat);
  put_acceptance(out, "gelu:", &r->gelu);
  if (r->sram.ran) {
    sb_printf(out, "  %-15s %u sizes measured, ", "sram cliff:", r->sram.npoints);
    if (r->sram.knee_found) sb_printf(out, "time per FLOP rises past %llu bytes\n", (unsigned long long)r->sram.knee_bytes);
    else sb_puts(out, "no cliff found\n");
  }
  if (r->dispatch.ran) {
    sb_printf(out, "  %-15s ", "dispatch:");
    if (r->dispatch.ok)
      sb_printf(out, "%.4g ms best, %.4g ms median of %u runs\n", r->dispatch.best_ms, r->dispatch.median_ms,
                r->dispatch.runs);
    else {
      sb_puts(out, "failed: ");
      first_line(out, r->dispatch.error);
      sb_putc(out, '\n');
    }
  }
  if (r->compiles.ran) {
    sb_printf(out, "  %-15s ", "compile budget:");
    if (r->compiles.failed) {
      sb_printf(out, "%u programs, then: ", r->compiles.budget);
      first_line(out, r->compiles.error);
      sb_putc(out, '\n');
    } else {
      sb_printf(out, "no failure in %u programs (the cap; %u in this process)\n", r->compiles.cap, r->prepared);
    }
  }
}
