/*
 * Source files and the one diagnostics module.
 *
 * Format (as gcc and clang print it, so editors and CI annotators parse it):
 *   file:line:col: error: message
 *       3 |   y = foo(x);
 *         |       ^~~
 * Messages are counted, never exit; callers check diag_should_stop() to stop
 * early once the error limit is reached.
 */
#include "orion/support.h"

#include <stdlib.h>
#include <string.h>

void srcset_init(SourceSet *ss) {
  ss->files = NULL;
  ss->count = 1; /* id 0 = no file */
  ss->cap = 0;
  xgrow((void **)&ss->files, sizeof *ss->files, &ss->cap, 1);
  memset(&ss->files[0], 0, sizeof ss->files[0]);
}

void srcset_free(SourceSet *ss) {
  for (uint32_t i = 1; i < ss->count; i++) {
    free(ss->files[i].name);
    free(ss->files[i].text);
    free(ss->files[i].line_starts);
  }
  free(ss->files);
  ss->files = NULL;
  ss->count = ss->cap = 0;
}

uint32_t srcset_add(SourceSet *ss, const char *name, const char *text, size_t len) {
  xgrow((void **)&ss->files, sizeof *ss->files, &ss->cap, ss->count + 1);
  SourceFile *f = &ss->files[ss->count];
  f->name = xstrdup(name);
  f->text = xmalloc(len + 1);
  memcpy(f->text, text, len);
  f->text[len] = 0;
  f->len = len;
  f->line_starts = NULL;
  f->nlines = 0;
  return ss->count++;
}

const SourceFile *srcset_get(const SourceSet *ss, uint32_t id) {
  return (id > 0 && id < ss->count) ? &ss->files[id] : NULL;
}

static void build_lines(SourceFile *f) {
  uint32_t cap = 0, n = 0;
  xgrow((void **)&f->line_starts, sizeof *f->line_starts, &cap, 1);
  f->line_starts[n++] = 0;
  for (size_t i = 0; i < f->len; i++)
    if (f->text[i] == '\n') {
      xgrow((void **)&f->line_starts, sizeof *f->line_starts, &cap, n + 1);
      f->line_starts[n++] = (uint32_t)(i + 1);
    }
  f->nlines = n;
}

void srcset_linecol(SourceSet *ss, uint32_t file, uint32_t off, uint32_t *line, uint32_t *col) {
  SourceFile *f = (file > 0 && file < ss->count) ? &ss->files[file] : NULL;
  if (!f) {
    *line = *col = 0;
    return;
  }
  if (!f->line_starts) build_lines(f);
  if (off > f->len) off = (uint32_t)f->len;
  uint32_t lo = 0, hi = f->nlines; /* last line start <= off */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (f->line_starts[mid] <= off) lo = mid; else hi = mid;
  }
  *line = lo + 1;
  *col = off - f->line_starts[lo] + 1;
}

uint32_t srcset_load_string(const char *name, const char *text, size_t len, Diag *d) {
  if (len > MAX_SOURCE_BYTES) {
    diag_error(d, (SrcSpan){0}, "'%s' is too large (limit is %u bytes)", name, MAX_SOURCE_BYTES);
    return 0;
  }
  return srcset_add(d->sources, name, text, len);
}

uint32_t srcset_load(const char *path, Diag *d) {
  char *text;
  size_t len;
  const char *err;
  bool is_stdin = strcmp(path, "-") == 0;
  if (!read_file(is_stdin ? "/dev/stdin" : path, MAX_SOURCE_BYTES, &text, &len, &err)) {
    if (strcmp(err, "file too large") == 0)
      diag_error(d, (SrcSpan){0}, "'%s' is too large (limit is %u bytes)", path, MAX_SOURCE_BYTES);
    else
      diag_error(d, (SrcSpan){0}, "cannot read '%s': %s", path, err);
    return 0;
  }
  uint32_t file = srcset_add(d->sources, is_stdin ? "<stdin>" : path, text, len);
  free(text);
  return file;
}

void diag_init(Diag *d, SourceSet *sources) {
  memset(d, 0, sizeof *d);
  d->sources = sources;
  d->out = stderr;
  d->error_limit = DEFAULT_ERROR_LIMIT;
}

bool diag_has_errors(const Diag *d) { return d->nerrors > 0; }

bool diag_should_stop(const Diag *d) {
  return d->error_limit && d->nerrors >= d->error_limit;
}

/* Longest source line shown; longer lines are cut around the span. */
#define MAX_SHOWN_LINE 160

static void emit(Diag *d, const StrBuf *sb) {
  if (d->capture) sb_putn(d->capture, sb->data, sb->len);
  else {
    fwrite(sb->data, 1, sb->len, d->out);
    fflush(d->out);
  }
}

/* Length of a valid UTF-8 sequence at s (1 for ASCII), 0 if invalid: such
 * bytes are shown as '?' so that a binary file cannot garble the terminal. */
static size_t utf8_length(const char *s, size_t avail) {
  const unsigned char *u = (const unsigned char *)s;
  size_t n = u[0] < 0x80 ? 1 : (u[0] & 0xe0) == 0xc0 ? 2 : (u[0] & 0xf0) == 0xe0 ? 3 : (u[0] & 0xf8) == 0xf0 ? 4 : 0;
  if (n == 0 || n > avail || (n == 2 && u[0] < 0xc2)) return 0;
  for (size_t i = 1; i < n; i++)
    if ((u[i] & 0xc0) != 0x80) return 0;
  return n;
}

static void put_source_line(StrBuf *sb, const SourceFile *f, uint32_t line, uint32_t start, uint32_t end,
                            uint32_t lstart) {
  /* At most MAX_SHOWN_LINE bytes past the span are shown, so the search for
   * the line's end stops there: a report costs the same on a 64 MiB line. */
  size_t limit = (size_t)start + MAX_SHOWN_LINE + 1 < f->len ? (size_t)start + MAX_SHOWN_LINE + 1 : f->len;
  size_t lend = start;
  while (lend < limit && f->text[lend] != '\n') lend++;
  bool whole = lend == f->len || f->text[lend] == '\n';
  if (whole && lend > lstart && f->text[lend - 1] == '\r') lend--;
  /* Window of the line to show. */
  size_t from = lstart, to = lend;
  if (to - from > MAX_SHOWN_LINE) {
    from = start > lstart + MAX_SHOWN_LINE / 4 ? start - MAX_SHOWN_LINE / 4 : lstart;
    to = from + MAX_SHOWN_LINE < lend ? from + MAX_SHOWN_LINE : lend;
  }
  if (end > to) end = (uint32_t)to;
  if (end <= start) end = start + 1;
  char gutter[16];
  int gw = snprintf(gutter, sizeof gutter, "%5u", line);
  sb_printf(sb, "%s | ", gutter);
  for (size_t i = from; i < to;) {
    size_t n = utf8_length(f->text + i, to - i);
    unsigned char c = (unsigned char)f->text[i];
    if (n > 1) sb_putn(sb, f->text + i, n);
    else sb_putc(sb, (c == '\t' || (c >= 0x20 && c < 0x7f)) ? (char)c : '?');
    i += n ? n : 1;
  }
  sb_putc(sb, '\n');
  sb_printf(sb, "%*s | ", gw, "");
  for (size_t i = from; i < start && i < to; i++) sb_putc(sb, f->text[i] == '\t' ? '\t' : ' ');
  sb_putc(sb, '^');
  for (uint32_t i = start + 1; i < end; i++) sb_putc(sb, '~');
  sb_putc(sb, '\n');
}

/* One report: at `span` when it names a registered source, else at `place`
 * ("file:line[:col]") when given, else under the program's name. */
static void report(Diag *d, DiagLevel level, SrcSpan span, const char *place, const char *fmt, va_list ap)
    ORION_PRINTF(5, 0);

void diag_vreport(Diag *d, DiagLevel level, SrcSpan span, const char *fmt, va_list ap) {
  report(d, level, span, NULL, fmt, ap);
}

void diag_report_line(Diag *d, DiagLevel level, const char *file, uint32_t line, uint32_t col, const char *fmt, ...) {
  char place[4096 + 32];
  if (col) snprintf(place, sizeof place, "%s:%u:%u", file, line, col);
  else snprintf(place, sizeof place, "%s:%u", file, line);
  va_list ap;
  va_start(ap, fmt);
  report(d, level, (SrcSpan){0}, place, fmt, ap);
  va_end(ap);
}

static void report(Diag *d, DiagLevel level, SrcSpan span, const char *place, const char *fmt, va_list ap) {
  if (level == DIAG_WARNING && d->suppress_warnings) {
    d->last_suppressed = true;
    return;
  }
  /* A note belongs to the message before it: drop it with that message. */
  if (level == DIAG_NOTE && d->last_suppressed) return;
  if (level != DIAG_NOTE) d->last_suppressed = false;
  if (diag_should_stop(d)) return; /* the limit line has been printed; stay quiet */
  static const char *const names[] = {"note", "warning", "error"};
  StrBuf sb;
  sb_init(&sb);
  const SourceFile *f = d->sources ? srcset_get(d->sources, span.file) : NULL;
  uint32_t line = 0, col = 0;
  if (f) {
    srcset_linecol(d->sources, span.file, span.start, &line, &col);
    sb_printf(&sb, "%s:%u:%u: ", f->name, line, col);
  } else if (place) {
    sb_printf(&sb, "%s: ", place);
  } else {
    sb_printf(&sb, "%s: ", d->program ? d->program : "orionc");
  }
  bool promoted = level == DIAG_WARNING && d->warnings_as_errors;
  if (promoted) level = DIAG_ERROR;
  sb_printf(&sb, "%s: ", names[level]);
  size_t message_start = sb.len;
  sb_vprintf(&sb, fmt, ap);
  if (d->observe && place) {
    /* An observer knows spans only: the place is kept in the text it is given. */
    StrBuf placed;
    sb_init(&placed);
    sb_printf(&placed, "%s: %s", place, sb.data + message_start);
    d->observe(d->observe_ctx, level, span, placed.data);
    sb_free(&placed);
  } else if (d->observe) {
    d->observe(d->observe_ctx, level, span, sb.data + message_start);
  }
  if (promoted) sb_puts(&sb, " [-Werror]");
  sb_putc(&sb, '\n');
  if (f) {
    uint32_t start = span.start > f->len ? (uint32_t)f->len : span.start;
    uint32_t end = span.end > f->len ? (uint32_t)f->len : span.end;
    /* Underline only up to the end of the first line of the span. */
    uint32_t lstart = start - (col - 1);
    if (end > start && end - start > MAX_SHOWN_LINE) end = start + MAX_SHOWN_LINE; /* never shown further */
    uint32_t eol = start;
    while (eol < end && f->text[eol] != '\n') eol++;
    end = eol;
    put_source_line(&sb, f, line, start, end, lstart);
  }
  if (level == DIAG_ERROR) d->nerrors++;
  else if (level == DIAG_WARNING) d->nwarnings++;
  if (level == DIAG_ERROR && diag_should_stop(d) && !d->limit_reported) {
    d->limit_reported = true;
    sb_printf(&sb, "%s: fatal error: too many errors emitted, stopping now (limit is %u; see -ferror-limit)\n",
              d->program ? d->program : "orionc", d->error_limit);
  }
  emit(d, &sb);
  sb_free(&sb);
}

void diag_report(Diag *d, DiagLevel level, SrcSpan span, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(d, level, span, fmt, ap);
  va_end(ap);
}

void diag_remark(Diag *d, SrcSpan span, const char *fmt, ...) {
  if (d->suppress_warnings) {
    d->last_suppressed = true;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(d, DIAG_NOTE, span, fmt, ap);
  va_end(ap);
}

int cli_usage_error(const char *program, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: error: ", program);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry '%s --help' for more information.\n", program);
  return 2;
}

void ice(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("orion: internal compiler error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\nplease report this as a bug\n", stderr);
  va_end(ap);
  abort();
}
