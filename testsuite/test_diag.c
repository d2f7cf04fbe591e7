/*
 * The diagnostics module: exact format, carets under spans, tabs, notes,
 * the error limit, -Werror promotion, -w suppression, long lines (and the
 * cost of reporting on them).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "orion/support.h"

typedef struct Fixture {
  SourceSet ss;
  Diag d;
  StrBuf out;
  uint32_t file;
} Fixture;

static void setup(Fixture *f, const char *text) {
  srcset_init(&f->ss);
  diag_init(&f->d, &f->ss);
  sb_init(&f->out);
  f->d.capture = &f->out;
  f->file = srcset_add(&f->ss, "m.oir", text, strlen(text));
}

static void teardown(Fixture *f) {
  sb_free(&f->out);
  srcset_free(&f->ss);
}

Test(diag, format_with_caret_and_underline) {
  Fixture f;
  setup(&f, "func main() {\n  y = frob(x);\n}\n");
  diag_error(&f.d, (SrcSpan){f.file, 20, 24}, "unknown op '%s'", "frob");
  cr_assert_str_eq(f.out.data, "m.oir:2:7: error: unknown op 'frob'\n"
                               "    2 |   y = frob(x);\n"
                               "      |       ^~~~\n");
  cr_assert_eq(f.d.nerrors, 1);
  teardown(&f);
}

Test(diag, tabs_keep_the_caret_aligned) {
  Fixture f;
  setup(&f, "\ty = x;\n");
  diag_warning(&f.d, (SrcSpan){f.file, 5, 6}, "w");
  cr_assert_str_eq(f.out.data, "m.oir:1:6: warning: w\n    1 | \ty = x;\n      | \t    ^\n");
  cr_assert_eq(f.d.nwarnings, 1);
  cr_assert_eq(f.d.nerrors, 0);
  teardown(&f);
}

Test(diag, span_over_lines_is_cut_at_the_first_line_end) {
  Fixture f;
  setup(&f, "ab\ncd\n");
  diag_error(&f.d, (SrcSpan){f.file, 0, 5}, "e");
  cr_assert_str_eq(f.out.data, "m.oir:1:1: error: e\n    1 | ab\n      | ^~\n");
  teardown(&f);
}

Test(diag, location_at_end_of_file) {
  Fixture f;
  setup(&f, "abc");
  diag_error(&f.d, (SrcSpan){f.file, 3, 3}, "end");
  cr_assert_str_eq(f.out.data, "m.oir:1:4: error: end\n    1 | abc\n      |    ^\n");
  teardown(&f);
}

Test(diag, no_location) {
  Fixture f;
  setup(&f, "");
  diag_error(&f.d, (SrcSpan){0}, "cannot read '%s'", "x");
  cr_assert_str_eq(f.out.data, "orionc: error: cannot read 'x'\n");
  teardown(&f);
}

/* A place in a file that is no registered source (a manifest): no source line shown; -Werror and counts as usual. */
Test(diag, report_at_a_line_of_an_unregistered_file) {
  Fixture f;
  setup(&f, "");
  diag_report_line(&f.d, DIAG_ERROR, "P/Manifest.plist", 12, 7, "manifest: input has no '%s'", "Name");
  diag_report_line(&f.d, DIAG_ERROR, "P/Manifest.plist", 70009, 0, "no column");
  f.d.warnings_as_errors = true;
  diag_report_line(&f.d, DIAG_WARNING, "f", 1, 1, "promoted");
  cr_assert_str_eq(f.out.data, "P/Manifest.plist:12:7: error: manifest: input has no 'Name'\n"
                               "P/Manifest.plist:70009: error: no column\n"
                               "f:1:1: error: promoted [-Werror]\n");
  cr_assert_eq(f.d.nerrors, 3);
  teardown(&f);
}

static void keep_message(void *ctx, DiagLevel level, SrcSpan span, const char *message) {
  sb_printf(ctx, "%d %u [%s]\n", (int)level, span.file, message);
}

/* An observer, which knows spans only, gets the place in the message's text. */
Test(diag, observer_keeps_an_unregistered_place) {
  Fixture f;
  setup(&f, "");
  StrBuf seen;
  sb_init(&seen);
  f.d.observe = keep_message;
  f.d.observe_ctx = &seen;
  diag_report_line(&f.d, DIAG_ERROR, "P/Manifest.plist", 12, 7, "manifest: bad");
  diag_error(&f.d, (SrcSpan){0}, "plain");
  cr_assert_str_eq(seen.data, "2 0 [P/Manifest.plist:12:7: manifest: bad]\n2 0 [plain]\n");
  sb_free(&seen);
  teardown(&f);
}

Test(diag, error_limit_stops_and_says_so_once) {
  Fixture f;
  setup(&f, "x\n");
  f.d.error_limit = 2;
  for (int i = 0; i < 5; i++) diag_error(&f.d, (SrcSpan){f.file, 0, 1}, "e%d", i);
  cr_assert(diag_should_stop(&f.d));
  cr_assert_eq(f.d.nerrors, 2);
  cr_assert_str_eq(f.out.data, "m.oir:1:1: error: e0\n    1 | x\n      | ^\n"
                               "m.oir:1:1: error: e1\n    1 | x\n      | ^\n"
                               "orionc: fatal error: too many errors emitted, stopping now (limit is 2; see -ferror-limit)\n");
  teardown(&f);
}

Test(diag, werror_promotes_and_w_suppresses_with_notes) {
  Fixture f;
  setup(&f, "x\n");
  f.d.warnings_as_errors = true;
  diag_warning(&f.d, (SrcSpan){0}, "unused");
  cr_assert_str_eq(f.out.data, "orionc: error: unused [-Werror]\n");
  cr_assert_eq(f.d.nerrors, 1);
  f.out.len = 0;
  f.out.data[0] = 0;
  f.d.warnings_as_errors = false;
  f.d.suppress_warnings = true;
  diag_warning(&f.d, (SrcSpan){0}, "quiet");
  diag_note(&f.d, (SrcSpan){0}, "its note");
  diag_error(&f.d, (SrcSpan){0}, "loud");
  diag_note(&f.d, (SrcSpan){0}, "kept");
  cr_assert_str_eq(f.out.data, "orionc: error: loud\norionc: note: kept\n");
  teardown(&f);
}

Test(diag, remarks_print_as_notes_and_w_drops_them_with_their_notes) {
  for (int quiet = 0; quiet < 2; quiet++) {
    Fixture f;
    setup(&f, "x\n");
    f.d.suppress_warnings = quiet;
    diag_remark(&f.d, (SrcSpan){0}, "binding order");
    diag_note(&f.d, (SrcSpan){0}, "its note");
    diag_error(&f.d, (SrcSpan){0}, "loud");
    cr_assert_str_eq(f.out.data, quiet ? "orionc: error: loud\n"
                                       : "orionc: note: binding order\norionc: note: its note\norionc: error: loud\n");
    cr_assert_eq(f.d.nwarnings, 0, "a remark is no warning");
    cr_assert_eq(f.d.nerrors, 1);
    teardown(&f);
  }
}

Test(diag, long_lines_are_windowed_and_binary_is_masked) {
  Fixture f;
  char text[1001];
  memset(text, 'a', 1000);
  text[1000] = 0;
  text[600] = '\x01';
  setup(&f, text);
  diag_error(&f.d, (SrcSpan){f.file, 600, 601}, "bad");
  /* 40 bytes of context before the span, 160 shown in all. */
  const char *line = strchr(f.out.data, '\n') + 1;
  cr_assert_eq(strncmp(line, "    1 | ", 8), 0);
  const char *shown = line + 8;
  cr_assert_eq(strcspn(shown, "\n"), 160);
  cr_assert_eq(shown[40], '?');
  const char *caret = strchr(shown, '\n') + 1;
  cr_assert_eq(strncmp(caret + 8 + 40, "^\n", 2), 0, "%s", caret);
  teardown(&f);
}

Test(diag, long_spans_are_cut_at_the_window_and_crlf_is_not_shown) {
  Fixture f;
  char text[2001];
  memset(text, 'a', 2000);
  memcpy(text + 1998, "\r\n", 2);
  text[2000] = 0;
  setup(&f, text);
  diag_error(&f.d, (SrcSpan){f.file, 100, 1990}, "long");
  const char *line = strchr(f.out.data, '\n') + 1 + 8;
  cr_assert_eq(strcspn(line, "\n"), 160);
  const char *caret = strchr(line, '\n') + 1 + 8;
  cr_assert_eq(strspn(caret, " "), 40);
  cr_assert_eq(strspn(caret + 41, "~"), 119, "underlined to the end of the window: %s", caret);
  sb_free(&f.out);
  sb_init(&f.out);
  f.d.capture = &f.out;
  diag_error(&f.d, (SrcSpan){f.file, 1990, 1991}, "near the end");
  line = strchr(f.out.data, '\n') + 1 + 8;
  cr_assert_eq(strcspn(line, "\n"), 1998 - 1950, "from 40 before the span to the line end, without the CR");
  teardown(&f);
}

/* Leaves readable only the whole pages of a file's text that [from, to)
 * touches; with from == to, all of it again. */
static void readable_only(const SourceFile *sf, size_t from, size_t to) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), base = (uintptr_t)sf->text;
  uintptr_t first = (base + page - 1) / page * page, last = (base + sf->len + 1) / page * page;
  uintptr_t lo = from == to ? first : (base + from) / page * page;
  uintptr_t hi = from == to ? last : (base + to + page - 1) / page * page;
  lo = lo < first ? first : lo > last ? last : lo;
  hi = hi < lo ? lo : hi > last ? last : hi;
  cr_assert_eq(mprotect((void *)first, lo - first, PROT_NONE), 0);
  cr_assert_eq(mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE), 0);
  cr_assert_eq(mprotect((void *)hi, last - hi, PROT_NONE), 0);
}

/* A report reads only the window it shows, so many reports about one huge
 * line (a minified or hostile file) cost nothing like the line's length
 * each. Checked by the pages rather than a clock: all of the line but the
 * pages of the window is unreadable while a report is made, so a read
 * anywhere else ends the test with SIGSEGV, however fast the machine. */
Test(diag, reports_on_a_huge_line_read_only_their_window) {
  Fixture f;
  size_t n = 64u << 20;
  char *text = malloc(n + 1);
  memset(text, ' ', n);
  text[n] = 0;
  setup(&f, text);
  free(text);
  const SourceFile *sf = srcset_get(&f.ss, f.file);
  diag_warning(&f.d, (SrcSpan){f.file, 0, (uint32_t)n}, "w"); /* the one pass that indexes the lines */
  uint32_t reports = 0;
  for (size_t at = 5000; at < n - 4096; at += n / 61 + 777) {
    f.out.len = 0;
    /* What the window needs: 40 bytes before the span, 160 after, and the byte
     * that says whether the line ends there. */
    readable_only(sf, at - 40, at + 162);
    diag_warning(&f.d, (SrcSpan){f.file, (uint32_t)at, (uint32_t)n}, "w");
    readable_only(sf, 0, 0);
    const char *caret = strchr(strchr(f.out.data, '\n') + 1, '\n') + 1 + 8;
    cr_assert_eq(strspn(caret, " "), 40, "report at %zu", at);
    cr_assert_eq(strspn(caret + 41, "~"), 119, "report at %zu", at);
    reports++;
  }
  cr_assert_geq(reports, 60);
  teardown(&f);
}

Test(diag, line_and_column_lookup) {
  Fixture f;
  setup(&f, "a\nbc\n\nd");
  uint32_t line, col;
  srcset_linecol(&f.ss, f.file, 3, &line, &col);
  cr_assert_eq(line, 2);
  cr_assert_eq(col, 2);
  srcset_linecol(&f.ss, f.file, 6, &line, &col);
  cr_assert_eq(line, 4);
  cr_assert_eq(col, 1);
  teardown(&f);
}

Test(support, shortest_exact_doubles) {
  StrBuf sb;
  sb_init(&sb);
  double vals[] = {0.1, 1e-5, 3.0, -2.5, 1.0 / 3.0, 65504.0, 1e300};
  const char *want[] = {"0.1", "1e-05", "3.0", "-2.5", "0.3333333333333333", "65504.0", "1e+300"};
  for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
    sb.len = 0;
    sb_put_double(&sb, vals[i]);
    cr_assert_str_eq(sb.data, want[i]);
  }
  sb_free(&sb);
}

Test(support, strmap) {
  StrMap m;
  strmap_init(&m);
  char keys[300][8];
  for (int i = 0; i < 300; i++) {
    snprintf(keys[i], sizeof keys[i], "k%d", i);
    strmap_put(&m, keys[i], (uint32_t)i + 1);
  }
  for (int i = 0; i < 300; i++) cr_assert_eq(strmap_get(&m, keys[i]), (uint32_t)i + 1);
  cr_assert_eq(strmap_get(&m, "absent"), 0);
  strmap_put(&m, keys[5], 99);
  cr_assert_eq(strmap_get(&m, "k5"), 99);
  cr_assert_eq(m.count, 300);
  strmap_free(&m);
}

/* Diag.observe sees each message as reported (level, span, the message
 * without location or level), and none that is suppressed. */
typedef struct Seen {
  DiagLevel level[4];
  SrcSpan span[4];
  char message[4][64];
  uint32_t n;
} Seen;

static void observe(void *ctx, DiagLevel level, SrcSpan span, const char *message) {
  Seen *s = ctx;
  if (s->n == 4) return;
  s->level[s->n] = level;
  s->span[s->n] = span;
  snprintf(s->message[s->n], sizeof s->message[s->n], "%s", message);
  s->n++;
}

Test(diag, observe_hook) {
  Fixture f;
  setup(&f, "func main() {\n  y = frob(x);\n}\n");
  Seen seen = {.n = 0};
  f.d.observe = observe;
  f.d.observe_ctx = &seen;
  diag_error(&f.d, (SrcSpan){f.file, 20, 24}, "unknown op '%s'", "frob");
  f.d.suppress_warnings = true;
  diag_warning(&f.d, (SrcSpan){f.file, 16, 17}, "dropped");
  diag_note(&f.d, (SrcSpan){0}, "dropped with it");
  f.d.suppress_warnings = false;
  diag_warning(&f.d, (SrcSpan){f.file, 16, 17}, "kept");
  diag_note(&f.d, (SrcSpan){0}, "a note");
  cr_assert_eq(seen.n, 3);
  cr_assert_eq(seen.level[0], DIAG_ERROR);
  cr_assert_eq(seen.span[0].start, 20);
  cr_assert_str_eq(seen.message[0], "unknown op 'frob'");
  cr_assert_eq(seen.level[1], DIAG_WARNING);
  cr_assert_str_eq(seen.message[1], "kept");
  cr_assert_eq(seen.level[2], DIAG_NOTE);
  cr_assert_str_eq(seen.message[2], "a note");
  teardown(&f);
}

/* did-you-mean (support/suggest.c): one edit per three characters, swaps count once. */
Test(suggest, edit_distance_counts_swaps_once) {
  cr_assert_eq(edit_distance("bias", "bias"), 0);
  cr_assert_eq(edit_distance("bais", "bias"), 1);
  cr_assert_eq(edit_distance("numerix", "numerics"), 2);
  cr_assert_eq(edit_distance("", "abc"), 3);
  cr_assert_eq(edit_distance("kitten", "sitting"), 3);
}

Test(suggest, nearest_close_enough_candidate) {
  Suggestion s;
  suggestion_init(&s, "--numerix");
  suggestion_consider(&s, "--input");
  suggestion_consider(&s, "--numerics");
  suggestion_consider(&s, "--numerics-x");
  cr_assert_str_eq(s.best, "--numerics");
  suggestion_init(&s, "z");
  suggestion_consider(&s, "x"); /* one edit in one character is not a typo */
  cr_assert_null(s.best);
  suggestion_init(&s, "frobnicate");
  suggestion_consider(&s, "fp16-range-guard");
  cr_assert_null(s.best);
}
