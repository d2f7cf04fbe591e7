/*
 * What the probe files share (runtime/probe/): the session (the backend,
 * the options, the private directory), the MIL texts of the probe programs
 * and a prepared program with its own inputs and outputs.
 */
#ifndef ORION_PROBE_INTERNAL_H
#define ORION_PROBE_INTERNAL_H

#include "orion/probe.h"

typedef struct ProbeSession {
  OrionBackend *backend;
  OrionProbeOptions opt; /* defaults filled in */
  OrionProbeReport *report;
  char *dir;       /* the private temporary directory, removed at the end */
  uint32_t serial; /* numbers the program directories in it */
} ProbeSession;

/* ---- programs (probe_program.c) ---- */

typedef enum ProbeOp {
  PROBE_OP_RELU,      /* y = relu(x), x [1, C, 1, W] */
  PROBE_OP_CONCAT,    /* y = concat((a, b), axis 1): a, b [1, C, 1, W] */
  PROBE_OP_GELU,      /* y = gelu(x, EXACT) */
  PROBE_OP_ADD_CONST, /* y = x + constant: a distinct program per constant */
  PROBE_OP_MATMUL,    /* z = matmul(x, y), both [1, 1, C, C] (W unused) */
} ProbeOp;

/* The program's MIL text in target's dialect; the caller frees it. */
char *probe_mil_text(MilTarget target, ProbeOp op, uint64_t c, uint64_t w, double constant);

/* A program opened from its own directory and prepared, with inputs filled
 * with `fill` and outputs allocated. */
typedef struct ProbeProgram {
  SourceSet sources; /* the MIL's, for the messages: alive as long as the program */
  char *dir;
  OrionProgram *program;
  OrionExec *exec;
  OrionTensor in[2], out[2];
  uint32_t nin, nout;
} ProbeProgram;

/* Writes the MIL into a new directory of the session, opens and prepares
 * it; NULL with *error (the messages, to free) when that fails. */
ProbeProgram *probe_program_open(ProbeSession *s, const char *mil, float fill, char **error);
/* One run; its wall time in *ms (may be NULL). False with *error on failure. */
bool probe_program_run(ProbeProgram *pp, double *ms, char **error);
/* Releases, closes and removes the program's directory; NULL is fine. */
void probe_program_close(ProbeProgram *pp);
/* Opens, runs once and closes: whether the backend accepted the program
 * (*error set when not). */
bool probe_try(ProbeSession *s, const char *mil, char **error);

/* Monotonic milliseconds. */
double probe_now_ms(void);
/* Progress lines (opt.progress); verbose ones only with opt.verbose. */
void probe_say(ProbeSession *s, bool verbose_only, const char *fmt, ...) ORION_PRINTF(3, 4);

/* ---- the probes (probe_limits.c, probe_timing.c) ---- */

void probe_dialects(ProbeSession *s, OrionProbeDialects *out);
void probe_channels(ProbeSession *s, OrionProbeSearch *out);
/* Below max_channels (the channel probe's result, or a default). */
void probe_surface(ProbeSession *s, uint64_t max_channels, OrionProbeSearch *out);
void probe_acceptance(ProbeSession *s, ProbeOp op, uint64_t channels, OrionProbeAcceptance *out);
void probe_compiles(ProbeSession *s, uint64_t channels, OrionProbeCompiles *out);
void probe_sram(ProbeSession *s, uint64_t min_surface_bytes, OrionProbeSram *out);
void probe_dispatch(ProbeSession *s, uint64_t channels, OrionProbeDispatch *out);

#endif
