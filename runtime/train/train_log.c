/*
 * The JSONL training log: written a whole line per write(2) on an O_APPEND
 * descriptor, so that a run killed at any moment leaves only whole lines
 * (or, if the kernel cut the one write short, a last line the reader
 * recognizes and drops); read back, with file:line:col messages, for the
 * loss curve.
 */
#include "orion/train_log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct OrionTrainLog {
  int fd;
  char *path;
};

/* ---- writing -------------------------------------------------------------- */

OrionTrainLog *orion_train_log_open(const char *path, bool append, Diag *d) {
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644);
  if (fd < 0) {
    diag_error(d, (SrcSpan){0}, "cannot open the training log '%s': %s", path, strerror(errno));
    return NULL;
  }
  OrionTrainLog *log = xcalloc(1, sizeof *log);
  log->fd = fd;
  log->path = xstrdup(path);
  return log;
}

/* A number as JSON; the non-finite ones (JSON has none) as strings. */
static void put_number(StrBuf *sb, const char *key, double v) {
  sb_printf(sb, ",\"%s\":", key);
  if (!isfinite(v)) sb_putc(sb, '"');
  sb_put_double(sb, v);
  if (!isfinite(v)) sb_putc(sb, '"');
}

void orion_train_log_format(const OrionTrainLogEntry *e, StrBuf *sb) {
  sb_printf(sb, "{\"step\":%llu", (unsigned long long)e->step);
  put_number(sb, "loss", e->loss);
  put_number(sb, "lr", e->lr);
  put_number(sb, "tokens_per_s", e->tokens_per_s);
  sb_printf(sb, ",\"skipped\":%s", e->skipped ? "true" : "false");
  put_number(sb, "loss_scale", e->loss_scale);
  if (e->has_eval) put_number(sb, "eval_loss", e->eval_loss);
  if (e->has_grad_norm) put_number(sb, "grad_norm", e->grad_norm);
  if (e->has_times) {
    sb_puts(sb, ",\"time_ms\":{");
    StrBuf t;
    sb_init(&t);
    put_number(&t, "forward", e->forward_ms);
    put_number(&t, "backward", e->backward_ms);
    put_number(&t, "optimizer", e->optimizer_ms);
    put_number(&t, "update", e->update_ms);
    sb_puts(sb, t.data + 1); /* without the leading comma */
    sb_free(&t);
    sb_putc(sb, '}');
  }
  sb_puts(sb, "}\n");
}

bool orion_train_log_write(OrionTrainLog *log, const OrionTrainLogEntry *e, Diag *d) {
  StrBuf sb;
  sb_init(&sb);
  orion_train_log_format(e, &sb);
  ssize_t w;
  do w = write(log->fd, sb.data, sb.len);
  while (w < 0 && errno == EINTR);
  bool ok = w == (ssize_t)sb.len;
  if (!ok)
    diag_error(d, (SrcSpan){0}, "cannot write the training log '%s': %s", log->path,
               w < 0 ? strerror(errno) : "short write (disk full?)");
  sb_free(&sb);
  return ok;
}

bool orion_train_log_close(OrionTrainLog *log, Diag *d) {
  if (!log) return true;
  bool ok = close(log->fd) == 0;
  if (!ok) diag_error(d, (SrcSpan){0}, "cannot write the training log '%s': %s", log->path, strerror(errno));
  free(log->path);
  free(log);
  return ok;
}

/* ---- reading -------------------------------------------------------------- */

typedef struct LineReader {
  Diag *d;
  uint32_t file;
  uint32_t start, end; /* the line's bytes, without its newline */
} LineReader;

/* A point of the line (shown with a caret, not the whole line underlined). */
static SrcSpan at(const LineReader *r, uint32_t off) {
  return (SrcSpan){r->file, r->start + off, r->start + off};
}

static bool number_field(LineReader *r, const cJSON *o, const char *key, bool required, bool *present, double *v) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, key);
  if (present) *present = e != NULL;
  if (!e) {
    if (!required) return true;
    diag_error(r->d, at(r, 0), "'%s' is missing", key);
    return false;
  }
  if (cJSON_IsNumber(e)) {
    *v = e->valuedouble;
    return true;
  }
  if (cJSON_IsString(e)) {
    const char *s = e->valuestring;
    if (!strcmp(s, "nan")) *v = (double)NAN;
    else if (!strcmp(s, "inf")) *v = HUGE_VAL;
    else if (!strcmp(s, "-inf")) *v = -HUGE_VAL;
    else s = NULL;
    if (s) return true;
  }
  diag_error(r->d, at(r, 0), "'%s' is not a number", key);
  return false;
}

/* The line as one JSON value and nothing after it; NULL with *bad_at the
 * offset where it stops being one. */
static cJSON *parse_line(const LineReader *r, const char *text, uint32_t *bad_at) {
  const char *end = NULL;
  cJSON *o = cJSON_ParseWithLengthOpts(text + r->start, r->end - r->start, &end, false);
  const char *stop = text + r->end;
  if (o) {
    while (end < stop && (*end == ' ' || *end == '\t' || *end == '\r')) end++;
    if (end == stop) return o;
    cJSON_Delete(o);
  } else {
    end = cJSON_GetErrorPtr();
  }
  *bad_at = end && end >= text + r->start && end <= stop ? (uint32_t)(end - (text + r->start)) : 0;
  return NULL;
}

/* One line into an entry; false after reporting. */
static bool parse_entry(LineReader *r, const char *text, OrionTrainLogEntry *e) {
  *e = (OrionTrainLogEntry){0};
  uint32_t bad_at = 0;
  cJSON *o = parse_line(r, text, &bad_at);
  if (!o) {
    diag_error(r->d, at(r, bad_at), "not valid JSON");
    return false;
  }
  if (!cJSON_IsObject(o)) {
    diag_error(r->d, at(r, 0), "a line of the log is not a JSON object");
    cJSON_Delete(o);
    return false;
  }
  bool ok = true;
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
  if (!step) {
    diag_error(r->d, at(r, 0), "'step' is missing");
    ok = false;
  } else if (!cJSON_IsNumber(step) || !(step->valuedouble >= 1 && step->valuedouble <= 9007199254740992.0) ||
             step->valuedouble != floor(step->valuedouble)) {
    diag_error(r->d, at(r, 0), "'step' is not a whole number from 1");
    ok = false;
  } else {
    e->step = (uint64_t)step->valuedouble;
  }
  ok = ok && number_field(r, o, "loss", true, NULL, &e->loss) && number_field(r, o, "lr", true, NULL, &e->lr) &&
       number_field(r, o, "tokens_per_s", true, NULL, &e->tokens_per_s);
  if (ok) {
    const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(o, "skipped");
    if (!skipped) ok = (diag_error(r->d, at(r, 0), "'skipped' is missing"), false);
    else if (!cJSON_IsBool(skipped)) ok = (diag_error(r->d, at(r, 0), "'skipped' is not true or false"), false);
    else e->skipped = cJSON_IsTrue(skipped);
  }
  ok = ok && number_field(r, o, "loss_scale", true, NULL, &e->loss_scale) &&
       number_field(r, o, "eval_loss", false, &e->has_eval, &e->eval_loss) &&
       number_field(r, o, "grad_norm", false, &e->has_grad_norm, &e->grad_norm);
  const cJSON *times = cJSON_GetObjectItemCaseSensitive(o, "time_ms");
  if (ok && times) {
    e->has_times = true;
    if (!cJSON_IsObject(times)) ok = (diag_error(r->d, at(r, 0), "'time_ms' is not an object"), false);
    else
      ok = number_field(r, times, "forward", true, NULL, &e->forward_ms) &&
           number_field(r, times, "backward", true, NULL, &e->backward_ms) &&
           number_field(r, times, "optimizer", true, NULL, &e->optimizer_ms) &&
           number_field(r, times, "update", true, NULL, &e->update_ms);
  }
  cJSON_Delete(o);
  return ok;
}

static bool parse_log(uint32_t file, OrionTrainLogData *out, Diag *d);

static bool blank(const char *s, uint32_t a, uint32_t b) {
  for (uint32_t i = a; i < b; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
  return true;
}

bool orion_train_log_read(const char *path, OrionTrainLogData *out, Diag *d) {
  *out = (OrionTrainLogData){0};
  uint32_t file = srcset_load(path, d);
  return file && parse_log(file, out, d);
}

bool orion_train_log_parse(const char *name, const char *text, size_t len, OrionTrainLogData *out, Diag *d) {
  *out = (OrionTrainLogData){0};
  uint32_t file = srcset_load_string(name, text, len, d);
  return file && parse_log(file, out, d);
}

static bool parse_log(uint32_t file, OrionTrainLogData *out, Diag *d) {
  const SourceFile *f = srcset_get(d->sources, file);
  const char *text = f->text;
  uint32_t len = (uint32_t)f->len, cap = 0;
  uint32_t errors = d->nerrors;
  LineReader r = {.d = d, .file = file};
  for (uint32_t pos = 0; pos < len && !diag_should_stop(d);) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    r.start = pos;
    r.end = nl ? (uint32_t)(nl - text) : len;
    pos = r.end + 1;
    if (blank(text, r.start, r.end)) continue;
    if (!nl) {
      /* The last line without its newline: whole if it parses, else the
       * line a killed run was writing. */
      uint32_t bad_at;
      cJSON *o = parse_line(&r, text, &bad_at);
      bool whole = o != NULL;
      cJSON_Delete(o);
      if (!whole) {
        diag_warning(d, at(&r, 0), "the last line is cut short (a run killed while writing it?); it is ignored");
        break;
      }
    }
    OrionTrainLogEntry e;
    if (!parse_entry(&r, text, &e)) continue;
    if (out->n && e.step <= out->entries[out->n - 1].step) {
      /* A resumed run goes on from its checkpoint's step: its lines replace
       * the earlier run's from there on. */
      uint32_t keep = out->n;
      while (keep && out->entries[keep - 1].step >= e.step) keep--;
      diag_note(d, at(&r, 0), "steps %llu to %llu are logged again (a resumed run): the later lines are used",
                (unsigned long long)e.step, (unsigned long long)out->entries[out->n - 1].step);
      out->n = keep;
    }
    xgrow((void **)&out->entries, sizeof *out->entries, &cap, out->n + 1);
    out->entries[out->n++] = e;
  }
  if (d->nerrors != errors) {
    orion_train_log_data_free(out);
    return false;
  }
  return true;
}

void orion_train_log_data_free(OrionTrainLogData *data) {
  free(data->entries);
  *data = (OrionTrainLogData){0};
}
