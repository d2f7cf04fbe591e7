/*
 * The lint reporters: human text in the toolchain's diagnostics format, a
 * versioned JSON object with the findings, what kept inputs from being
 * checked and a summary, and SARIF 2.1.0 for CI code scanning. The JSON
 * writer is small and local so that key order, indentation and escaping are
 * fixed (CI diffs and golden tests compare the bytes), and so that any bytes
 * a MIL file or a path may contain come out as valid UTF-8.
 */
#include <string.h>

#include "lint_internal.h"

/* ---- locations ---- */

/* Length of the valid UTF-8 sequence at u (at most avail bytes), 0 if the
 * bytes there are not one: such a byte stands for one U+FFFD. */
static size_t utf8_sequence(const unsigned char *u, size_t avail) {
  unsigned char c = u[0];
  if (c < 0x80) return 1;
  size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (n == 0 || n > avail || (n == 2 && c < 0xc2)) return 0;
  uint32_t cp = c & (0x7f >> n);
  for (size_t i = 1; i < n; i++) {
    if ((u[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (u[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

/* Code points in n bytes, an invalid byte counting as one (as it is shown). */
static uint32_t count_code_points(const char *s, size_t n) {
  uint32_t count = 0;
  for (size_t i = 0; i < n; count++) {
    size_t k = utf8_sequence((const unsigned char *)s + i, n - i);
    i += k ? k : 1;
  }
  return count;
}

typedef struct Where {
  const char *file; /* NULL if there is none */
  uint32_t line, col, end_col; /* 0 when only the file is known */
} Where;

typedef enum ColumnUnit { COLUMN_BYTES, COLUMN_CODE_POINTS } ColumnUnit;

static Where locate_span(const LintReport *r, SrcSpan span, const char *path, ColumnUnit unit) {
  Where w = {path, 0, 0, 0};
  const SourceFile *sf = span.file && r->sources ? srcset_get(r->sources, span.file) : NULL;
  if (!sf) return w;
  w.file = sf->name;
  srcset_linecol(r->sources, span.file, span.start, &w.line, &w.col);
  /* The span's end on its first line (as the caret underlines it). */
  uint32_t start = span.start > sf->len ? (uint32_t)sf->len : span.start;
  uint32_t end = span.end > sf->len ? (uint32_t)sf->len : span.end;
  uint32_t eol = start;
  while (eol < sf->len && sf->text[eol] != '\n') eol++;
  if (end > eol) end = eol;
  if (unit == COLUMN_CODE_POINTS) {
    uint32_t line_start = start - (w.col - 1);
    w.col = 1 + count_code_points(sf->text + line_start, start - line_start);
    w.end_col = w.col + (end > start ? count_code_points(sf->text + start, end - start) : 1);
    return w;
  }
  if (end <= start) end = start + 1;
  w.end_col = w.col + (end - start);
  return w;
}

static Where locate(const LintReport *r, const LintFinding *f) {
  return locate_span(r, f->span, f->path, COLUMN_BYTES);
}

/* ---- text ---- */

static void put_prefix(StrBuf *out, const Where *w) {
  if (w->file && w->line) sb_printf(out, "%s:%u:%u: ", w->file, w->line, w->col);
  else if (w->file) sb_printf(out, "%s: ", w->file);
  else sb_puts(out, "orion-lint: ");
}

void lint_format_text(const LintReport *r, StrBuf *out) {
  /* The Diag module draws the source line and caret; the first line it
   * writes is replaced by ours, which carries the rule id. */
  StrBuf cap;
  sb_init(&cap);
  Diag d;
  diag_init(&d, r->sources);
  d.error_limit = 0;
  d.capture = &cap;
  for (uint32_t i = 0; i < r->n; i++) {
    const LintFinding *f = &r->items[i];
    Where w = locate(r, f);
    put_prefix(out, &w);
    sb_printf(out, "%s[%s]: %s\n", constraint_severity_name(f->severity), f->rule->id, f->message);
    if (w.line) {
      cap.len = 0;
      diag_report(&d, DIAG_NOTE, f->span, "-");
      const char *nl = cap.data ? memchr(cap.data, '\n', cap.len) : NULL;
      if (nl) sb_putn(out, nl + 1, cap.len - (size_t)(nl + 1 - cap.data));
    }
    put_prefix(out, &w);
    sb_printf(out, "note: workaround: %s\n", f->rule->workaround);
    if (f->rule->fixed_by && !f->unfixable) { /* an unfixable finding says why the pass cannot */
      put_prefix(out, &w);
      sb_printf(out, "note: fixed by pass '%s'%s\n", f->rule->fixed_by, f->will_be_fixed ? ", which runs next" : "");
    }
    if (f->rule->disputed) {
      put_prefix(out, &w);
      sb_printf(out, "note: reports disagree about this rule (orion-lint --explain %s)\n", f->rule->id);
    }
  }
  sb_free(&cap);
}

/* ---- JSON writer ---- */

typedef struct Json {
  StrBuf *sb;
  int depth;
  bool items; /* the open container has items */
  bool started;
} Json;

/* A string literal: escapes per RFC 8259, and any byte that is not part of
 * valid UTF-8 becomes U+FFFD. */
static void put_json_string(StrBuf *sb, const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  sb_putc(sb, '"');
  while (*u) {
    unsigned char c = *u;
    if (c == '"' || c == '\\') {
      sb_putc(sb, '\\');
      sb_putc(sb, (char)c);
      u++;
    } else if (c < 0x20 || c == 0x7f) {
      static const char *const named[] = {['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n", ['\r'] = "\\r",
                                          ['\t'] = "\\t"};
      if (c < sizeof named / sizeof *named && named[c]) sb_puts(sb, named[c]);
      else sb_printf(sb, "\\u%04x", c);
      u++;
    } else {
      size_t n = utf8_sequence(u, 4); /* the NUL ends a short sequence: it is no continuation byte */
      if (n) {
        sb_putn(sb, (const char *)u, n);
        u += n;
      } else {
        sb_puts(sb, "\\ufffd");
        u++;
      }
    }
  }
  sb_putc(sb, '"');
}

static void j_prefix(Json *j, const char *key) {
  if (j->started) {
    sb_puts(j->sb, j->items ? ",\n" : "\n");
    for (int i = 0; i < j->depth; i++) sb_puts(j->sb, "  ");
  }
  j->started = true;
  j->items = true;
  if (key) {
    put_json_string(j->sb, key);
    sb_puts(j->sb, ": ");
  }
}

static void j_open(Json *j, const char *key, char bracket) {
  j_prefix(j, key);
  sb_putc(j->sb, bracket);
  j->depth++;
  j->items = false;
}

static void j_close(Json *j, char bracket) {
  j->depth--;
  if (j->items) {
    sb_putc(j->sb, '\n');
    for (int i = 0; i < j->depth; i++) sb_puts(j->sb, "  ");
  }
  sb_putc(j->sb, bracket);
  j->items = true;
}

static void j_str(Json *j, const char *key, const char *v) {
  j_prefix(j, key);
  if (v) put_json_string(j->sb, v);
  else sb_puts(j->sb, "null");
}

static void j_uint(Json *j, const char *key, uint64_t v, bool present) {
  j_prefix(j, key);
  if (present) sb_printf(j->sb, "%llu", (unsigned long long)v);
  else sb_puts(j->sb, "null");
}

static void j_bool(Json *j, const char *key, bool v) {
  j_prefix(j, key);
  sb_puts(j->sb, v ? "true" : "false");
}

static void j_end(Json *j) { sb_putc(j->sb, '\n'); }

/* ---- JSON ---- */

static void json_location(Json *j, const Where *w) {
  j_str(j, "file", w->file);
  j_uint(j, "line", w->line, w->line != 0);
  j_uint(j, "column", w->col, w->line != 0);
  j_uint(j, "end_column", w->end_col, w->line != 0);
}

/* Findings at exactly this level (the summary counts each once). */
static uint32_t count_at(const LintReport *r, DiagLevel level) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->n; i++) n += r->items[i].severity == level;
  return n;
}

void lint_format_json(const LintReport *r, StrBuf *out) {
  Json j = {out, 0, false, false};
  uint32_t input_errors = lint_report_input_errors(r);
  j_open(&j, NULL, '{');
  j_str(&j, "format", "orion-lint");
  j_uint(&j, "format_version", LINT_JSON_FORMAT_VERSION, true);
  j_open(&j, "tool", '{');
  j_str(&j, "name", "orion-lint");
  j_str(&j, "version", ORION_VERSION);
  j_close(&j, '}');
  j_bool(&j, "complete", input_errors == 0);
  j_open(&j, "findings", '[');
  for (uint32_t i = 0; i < r->n; i++) {
    const LintFinding *f = &r->items[i];
    const Constraint *c = f->rule;
    Where w = locate(r, f);
    j_open(&j, NULL, '{');
    j_str(&j, "rule", c->id);
    j_str(&j, "name", c->name);
    j_str(&j, "severity", constraint_severity_name(f->severity));
    j_str(&j, "category", constraint_category_name(c->category));
    j_str(&j, "message", f->message);
    json_location(&j, &w);
    j_str(&j, "function", f->function);
    j_str(&j, "fixed_by", c->fixed_by);
    j_bool(&j, "will_be_fixed", f->will_be_fixed);
    j_str(&j, "unfixed_severity", constraint_severity_name(f->unfixed_severity));
    j_str(&j, "workaround", c->workaround);
    j_bool(&j, "disputed", c->disputed);
    j_close(&j, '}');
  }
  j_close(&j, ']');
  /* What kept an input from being checked, and the warnings and notes about reading it. */
  j_open(&j, "input_messages", '[');
  for (uint32_t i = 0; i < r->nnotices; i++) {
    const LintNotice *n = &r->notices[i];
    Where w = locate_span(r, n->span, n->path, COLUMN_BYTES);
    j_open(&j, NULL, '{');
    j_str(&j, "severity", constraint_severity_name(n->level));
    j_str(&j, "message", n->message);
    json_location(&j, &w);
    j_close(&j, '}');
  }
  j_close(&j, ']');
  j_open(&j, "summary", '{');
  j_uint(&j, "errors", count_at(r, DIAG_ERROR), true);
  j_uint(&j, "warnings", count_at(r, DIAG_WARNING), true);
  j_uint(&j, "notes", count_at(r, DIAG_NOTE), true);
  uint32_t fixed = 0;
  for (uint32_t i = 0; i < r->n; i++) fixed += r->items[i].will_be_fixed;
  j_uint(&j, "will_be_fixed", fixed, true);
  j_uint(&j, "input_errors", input_errors, true);
  j_close(&j, '}');
  j_close(&j, '}');
  j_end(&j);
}

/* ---- SARIF ---- */

#define SARIF_SCHEMA "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

/* The ruleId of results about input that could not be checked (no rule of the table). */
#define SARIF_INPUT_RULE "input-error"

static const char *sarif_level(DiagLevel l) { return l == DIAG_ERROR ? "error" : l == DIAG_WARNING ? "warning" : "note"; }

/* A relative reference as is, an absolute path as a file: URI; bytes
 * outside the unreserved set (and '/') percent-encoded. */
static void put_uri(StrBuf *sb, const char *path) {
  if (path[0] == '/') sb_puts(sb, "file://");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    unsigned char c = *p;
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c);
    if (plain && c) sb_putc(sb, (char)c);
    else sb_printf(sb, "%%%02X", c);
  }
}

static void sarif_rule(Json *j, const Constraint *c) {
  StrBuf help, uri;
  sb_init(&help);
  sb_init(&uri);
  sb_puts(&help, c->workaround);
  if (c->fixed_by) sb_printf(&help, " (fixed by the orion pass '%s')", c->fixed_by);
  /* The installed page (meson installs docs/constraints.md there): an absolute URI, as SARIF wants. */
  put_uri(&uri, ORION_CONSTRAINTS_DOC_PATH);
  sb_putc(&uri, '#');
  constraints_doc_anchor(c, &uri);
  j_open(j, NULL, '{');
  j_str(j, "id", c->id);
  j_str(j, "name", c->name);
  j_open(j, "shortDescription", '{');
  j_str(j, "text", c->summary);
  j_close(j, '}');
  j_open(j, "fullDescription", '{');
  j_str(j, "text", c->symptom);
  j_close(j, '}');
  j_open(j, "help", '{');
  j_str(j, "text", help.data);
  j_close(j, '}');
  j_str(j, "helpUri", uri.data);
  j_open(j, "defaultConfiguration", '{');
  j_str(j, "level", sarif_level(c->severity));
  j_close(j, '}');
  j_open(j, "properties", '{');
  j_str(j, "category", constraint_category_name(c->category));
  j_bool(j, "disputed", c->disputed);
  if (c->disputed) j_str(j, "dispute_note", c->dispute_note);
  if (c->notes) j_str(j, "notes", c->notes);
  j_open(j, "checks", '[');
  static const unsigned kinds[] = {CHECK_STATIC_IR, CHECK_STATIC_PACKAGE, CHECK_RUNTIME, CHECK_ADVISORY};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
    if (c->checks & kinds[k]) {
      StrBuf s;
      sb_init(&s);
      constraint_checks_print(kinds[k], &s);
      j_str(j, NULL, s.data);
      sb_free(&s);
    }
  j_close(j, ']');
  j_str(j, "fixed_by", c->fixed_by);
  j_str(j, "source", c->source);
  j_open(j, "tags", '[');
  j_str(j, NULL, constraint_category_name(c->category));
  j_close(j, ']');
  j_close(j, '}');
  j_close(j, '}');
  sb_free(&help);
  sb_free(&uri);
}

/* "locations": one physical location when there is a file. */
static void sarif_locations(Json *j, const Where *w) {
  j_open(j, "locations", '[');
  if (w->file) {
    j_open(j, NULL, '{');
    j_open(j, "physicalLocation", '{');
    j_open(j, "artifactLocation", '{');
    StrBuf uri;
    sb_init(&uri);
    put_uri(&uri, w->file);
    j_str(j, "uri", uri.data ? uri.data : "");
    sb_free(&uri);
    j_close(j, '}');
    if (w->line) {
      j_open(j, "region", '{');
      j_uint(j, "startLine", w->line, true);
      j_uint(j, "startColumn", w->col, true);
      j_uint(j, "endColumn", w->end_col, true);
      j_close(j, '}');
    }
    j_close(j, '}');
    j_close(j, '}');
  }
  j_close(j, ']');
}

static void sarif_finding(Json *j, const ConstraintTable *t, const LintReport *r, const LintFinding *f) {
  Where w = locate_span(r, f->span, f->path, COLUMN_CODE_POINTS);
  uint32_t index = 0;
  for (uint32_t k = 0; k < t->nrules; k++)
    if (!strcmp(t->rules[k].id, f->rule->id)) index = k;
  j_open(j, NULL, '{');
  j_str(j, "ruleId", f->rule->id);
  j_uint(j, "ruleIndex", index, true);
  j_str(j, "level", sarif_level(f->severity));
  j_open(j, "message", '{');
  j_str(j, "text", f->message);
  j_close(j, '}');
  sarif_locations(j, &w);
  j_open(j, "properties", '{');
  j_str(j, "function", f->function);
  j_str(j, "fixedBy", f->rule->fixed_by);
  j_bool(j, "willBeFixed", f->will_be_fixed);
  j_close(j, '}');
  j_close(j, '}');
}

void lint_format_sarif(const ConstraintTable *t, const LintReport *r, StrBuf *out) {
  Json j = {out, 0, false, false};
  j_open(&j, NULL, '{');
  j_str(&j, "$schema", SARIF_SCHEMA);
  j_str(&j, "version", "2.1.0");
  j_open(&j, "runs", '[');
  j_open(&j, NULL, '{');
  j_open(&j, "tool", '{');
  j_open(&j, "driver", '{');
  j_str(&j, "name", "orion-lint");
  j_str(&j, "version", ORION_VERSION);
  j_open(&j, "rules", '[');
  for (uint32_t i = 0; i < t->nrules; i++) sarif_rule(&j, &t->rules[i]);
  j_close(&j, ']');
  j_close(&j, '}');
  j_close(&j, '}');
  j_open(&j, "invocations", '[');
  j_open(&j, NULL, '{');
  j_bool(&j, "executionSuccessful", lint_report_input_errors(r) == 0);
  j_open(&j, "toolExecutionNotifications", '[');
  for (uint32_t i = 0; i < r->nnotices; i++) {
    const LintNotice *n = &r->notices[i];
    Where w = locate_span(r, n->span, n->path, COLUMN_CODE_POINTS);
    j_open(&j, NULL, '{');
    j_str(&j, "level", sarif_level(n->level));
    j_open(&j, "message", '{');
    j_str(&j, "text", n->message);
    j_close(&j, '}');
    sarif_locations(&j, &w);
    j_close(&j, '}');
  }
  j_close(&j, ']');
  j_close(&j, '}');
  j_close(&j, ']');
  j_str(&j, "columnKind", "unicodeCodePoints");
  j_open(&j, "results", '[');
  for (uint32_t i = 0; i < r->n; i++) sarif_finding(&j, t, r, &r->items[i]);
  /* An input that cannot be checked shows where code scanning shows findings. */
  for (uint32_t i = 0; i < r->nnotices; i++) {
    const LintNotice *n = &r->notices[i];
    if (n->level != DIAG_ERROR) continue;
    Where w = locate_span(r, n->span, n->path, COLUMN_CODE_POINTS);
    j_open(&j, NULL, '{');
    j_str(&j, "ruleId", SARIF_INPUT_RULE);
    j_str(&j, "level", "error");
    j_open(&j, "message", '{');
    j_str(&j, "text", n->message);
    j_close(&j, '}');
    sarif_locations(&j, &w);
    j_close(&j, '}');
  }
  j_close(&j, ']');
  j_close(&j, '}');
  j_close(&j, ']');
  j_close(&j, '}');
  j_end(&j);
}
