/*
 * The probes' programs: MIL text written by hand (the compiler would take
 * concat and gelu out, which is what the probes ask the device about), in
 * either dialect, each in a directory of its own inside the session's
 * private directory, opened as a bare model directory and prepared on the
 * session's backend.
 */
#include "probe_internal.h"

#include "orion/fp16.h"
#include "orion/temporaries.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

double probe_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void probe_say(ProbeSession *s, bool verbose_only, const char *fmt, ...) {
  if (!s->opt.progress || (verbose_only && !s->opt.verbose)) return;
  StrBuf sb;
  sb_init(&sb);
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  s->opt.progress(s->opt.progress_ctx, sb.data ? sb.data : "");
  sb_free(&sb);
}

/* ---- MIL text ---- */

/* The two dialects differ in how rank-0 values are spelt: program(1.3)
 * writes string("x") and fp16 x, program(1.0) tensor<string, []>("x") and
 * tensor<fp16, []> x. */
typedef struct Dialect {
  bool v13;
  StrBuf *out;
} Dialect;

static void scalar_type(Dialect *m, const char *dt) {
  if (m->v13) sb_puts(m->out, dt);
  else sb_printf(m->out, "tensor<%s, []>", dt);
}

static void scalar_value(Dialect *m, const char *dt, const char *v) {
  scalar_type(m, dt);
  sb_printf(m->out, "(%s)", v);
}

static void name_attr(Dialect *m, const char *name) {
  sb_puts(m->out, "[name = ");
  StrBuf q;
  sb_init(&q);
  sb_printf(&q, "\"%s\"", name);
  scalar_value(m, "string", q.data);
  sb_free(&q);
  sb_puts(m->out, "]");
}

/* A rank-0 const: "    T name = const()[name = ..., val = T(v)];". */
static void scalar_const(Dialect *m, const char *dt, const char *name, const char *v) {
  sb_puts(m->out, "        ");
  scalar_type(m, dt);
  sb_printf(m->out, " %s = const()[name = ", name);
  StrBuf q;
  sb_init(&q);
  sb_printf(&q, "\"%s\"", name);
  scalar_value(m, "string", q.data);
  sb_free(&q);
  sb_puts(m->out, ", val = ");
  scalar_value(m, dt, v);
  sb_puts(m->out, "];\n");
}

static void tensor_type(StrBuf *out, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t d3) {
  sb_printf(out, "tensor<fp16, [%llu, %llu, %llu, %llu]>", (unsigned long long)d0, (unsigned long long)d1,
            (unsigned long long)d2, (unsigned long long)d3);
}

char *probe_mil_text(MilTarget target, ProbeOp op, uint64_t c, uint64_t w, double constant) {
  StrBuf sb;
  sb_init(&sb);
  Dialect m = {.v13 = target >= MIL_IOS18, .out = &sb};
  sb_printf(&sb, "program(%s)\n", mil_program_version(target));
  if (m.v13)
    sb_puts(&sb, "[buildInfo = dict<string, string>({{\"coremlc-component-MIL\", \"3510.2.1\"}, {\"coremlc-version\", "
                 "\"3505.4.1\"}, {\"coremltools-component-milinternal\", \"\"}, {\"coremltools-version\", \"9.0\"}})]\n");
  else
    sb_puts(&sb, "[buildInfo = dict<tensor<string, []>, tensor<string, []>>({{\"coremlc-component-MIL\", \"3402.3.2\"}, "
                 "{\"coremlc-version\", \"3402.4.1\"}, {\"coremltools-component-milinternal\", \"\"}, "
                 "{\"coremltools-version\", \"8.1\"}})]\n");
  sb_printf(&sb, "{\n    func main<%s>(", mil_target_name(target));
  switch (op) {
  case PROBE_OP_CONCAT:
    tensor_type(&sb, 1, c, 1, w);
    sb_puts(&sb, " a, ");
    tensor_type(&sb, 1, c, 1, w);
    sb_puts(&sb, " b) {\n");
    scalar_const(&m, "int32", "axis", "1");
    scalar_const(&m, "bool", "interleave", "false");
    sb_puts(&sb, "        ");
    tensor_type(&sb, 1, 2 * c, 1, w);
    sb_puts(&sb, " y = concat(axis = axis, interleave = interleave, values = (a, b))");
    break;
  case PROBE_OP_MATMUL:
    tensor_type(&sb, 1, 1, c, c);
    sb_puts(&sb, " x, ");
    tensor_type(&sb, 1, 1, c, c);
    sb_puts(&sb, " y) {\n");
    /* The ANE's MIL parser wants the transposes as named bool consts (ANE012). */
    scalar_const(&m, "bool", "transpose_x", "false");
    scalar_const(&m, "bool", "transpose_y", "false");
    sb_puts(&sb, "        ");
    tensor_type(&sb, 1, 1, c, c);
    sb_puts(&sb, " z = matmul(transpose_x = transpose_x, transpose_y = transpose_y, x = x, y = y)");
    break;
  default:
    tensor_type(&sb, 1, c, 1, w);
    sb_puts(&sb, " x) {\n");
    if (op == PROBE_OP_GELU) scalar_const(&m, "string", "mode", "\"EXACT\"");
    if (op == PROBE_OP_ADD_CONST) {
      char v[64];
      snprintf(v, sizeof v, "%a", constant);
      scalar_const(&m, "fp16", "k", v);
    }
    sb_puts(&sb, "        ");
    tensor_type(&sb, 1, c, 1, w);
    sb_puts(&sb, op == PROBE_OP_GELU ? " y = gelu(mode = mode, x = x)"
                 : op == PROBE_OP_ADD_CONST ? " y = add(x = x, y = k)"
                                            : " y = relu(x = x)");
    break;
  }
  name_attr(&m, op == PROBE_OP_MATMUL ? "z" : "y");
  sb_printf(&sb, ";\n    } -> (%s);\n}\n", op == PROBE_OP_MATMUL ? "z" : "y");
  return sb.data;
}

/* ---- programs ---- */

/* The messages as one string the caller owns (sb is left empty). */
static char *take_messages(StrBuf *sb, const char *fallback) {
  while (sb->len && (sb->data[sb->len - 1] == '\n' || sb->data[sb->len - 1] == ' ')) sb->data[--sb->len] = 0;
  char *s = sb->len ? sb->data : xstrdup(fallback);
  if (!sb->len) sb_free(sb);
  sb_init(sb);
  return s;
}

static bool write_text(const char *path, const char *text, char **error) {
  FILE *f = fopen(path, "w");
  bool ok = f && fputs(text, f) >= 0;
  if (f && fclose(f) != 0) ok = false;
  if (!ok) {
    StrBuf sb;
    sb_init(&sb);
    sb_printf(&sb, "cannot write %s: %s", path, strerror(errno));
    *error = sb.data;
  }
  return ok;
}

static void fill_tensor(OrionTensor *t, const OrionTensorInfo *info, float fill) {
  *t = (OrionTensor){.dtype = info->dtype, .rank = info->rank};
  size_t n = 1;
  for (uint32_t i = 0; i < info->rank; i++) n *= (size_t)(t->dims[i] = info->dims[i]);
  t->data = xmalloc(n * sizeof(uint16_t) + 1);
  uint16_t v = fp16_from_float(fill), *p = t->data;
  for (size_t i = 0; i < n; i++) p[i] = v;
}

ProbeProgram *probe_program_open(ProbeSession *s, const char *mil, float fill, char **error) {
  ProbeProgram *pp = xcalloc(1, sizeof *pp);
  srcset_init(&pp->sources);
  StrBuf path, messages;
  sb_init(&path);
  sb_init(&messages);
  sb_printf(&path, "%s/p%u", s->dir, s->serial++);
  pp->dir = xstrdup(path.data);
  Diag d;
  diag_init(&d, &pp->sources);
  d.capture = &messages;
  d.program = "orion-run";
  bool ok = mkdir(pp->dir, 0755) == 0;
  if (!ok) sb_printf(&messages, "cannot make %s: %s", pp->dir, strerror(errno));
  sb_puts(&path, "/model.mil");
  if (ok && !write_text(path.data, mil, error)) goto fail;
  test_pause_at("probe-program"); /* a program written in the private directory (testsuite/cli/probe.sh) */
  if (ok) pp->program = orion_open(pp->dir, &(OrionOpenOptions){.reload = ORION_RELOAD_AUTO}, &d);
  if (ok && !pp->program) ok = false;
  /* Surfaces of the tensors' own size: the device's minimum is what is measured. */
  OrionPrepareOptions po = {.exact_surfaces = true, .keep_refused_on_device = true};
  if (ok) pp->exec = orion_backend_prepare(s->backend, pp->program, 0, &po, &d);
  if (ok && !pp->exec) ok = false;
  if (!ok) {
    *error = take_messages(&messages, "the backend refused the program without a message");
    goto fail;
  }
  s->report->prepared++;
  pp->nin = orion_input_count(pp->program, 0);
  pp->nout = orion_output_count(pp->program, 0);
  for (uint32_t i = 0; i < pp->nin && i < 2; i++) fill_tensor(&pp->in[i], orion_input(pp->program, 0, i), fill);
  for (uint32_t i = 0; i < pp->nout && i < 2; i++) fill_tensor(&pp->out[i], orion_output(pp->program, 0, i), 0);
  sb_free(&messages);
  sb_free(&path);
  return pp;
fail:
  sb_free(&messages);
  sb_free(&path);
  probe_program_close(pp);
  return NULL;
}

bool probe_program_run(ProbeProgram *pp, double *ms, char **error) {
  StrBuf messages;
  sb_init(&messages);
  Diag d;
  diag_init(&d, &pp->sources);
  d.capture = &messages;
  d.program = "orion-run";
  double t0 = probe_now_ms();
  bool ok = orion_exec_run(pp->exec, pp->in, pp->out, &d);
  if (ms) *ms = probe_now_ms() - t0;
  if (!ok) *error = take_messages(&messages, "the run failed without a message");
  else sb_free(&messages);
  return ok;
}

void probe_program_close(ProbeProgram *pp) {
  if (!pp) return;
  orion_exec_release(pp->exec);
  orion_close(pp->program);
  for (uint32_t i = 0; i < 2; i++) {
    free(pp->in[i].data);
    free(pp->out[i].data);
  }
  if (pp->dir) remove_tree(pp->dir);
  free(pp->dir);
  srcset_free(&pp->sources);
  free(pp);
}

bool probe_try(ProbeSession *s, const char *mil, char **error) {
  ProbeProgram *pp = probe_program_open(s, mil, 0.25f, error);
  bool ok = pp && probe_program_run(pp, NULL, error);
  probe_program_close(pp);
  if (!ok && s->opt.pace_ms) {
    struct timespec ts = {.tv_sec = s->opt.pace_ms / 1000, .tv_nsec = (long)(s->opt.pace_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  return ok;
}
