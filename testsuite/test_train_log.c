/*
 * The JSONL training log and its SVG loss curve (orion/train_log.h): what is
 * written reads back exactly, bad lines are reported at file:line:col with
 * their exact message, a line cut short by a kill is dropped with a warning,
 * a resumed run's lines replace the earlier ones, and the plot of the
 * committed log testsuite/train/small.jsonl is byte for byte the golden SVG.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/support.h"
#include "orion/train_log.h"

typedef struct Reading {
  SourceSet sources;
  StrBuf text;
  Diag d;
  OrionTrainLogData data;
  bool ok;
} Reading;

static char *scratch_file(const char *content) {
  char *path = xstrdup("/tmp/orion-log-test-XXXXXX");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  size_t n = strlen(content);
  cr_assert_eq(write(fd, content, n), (ssize_t)n);
  close(fd);
  return path;
}

static void read_log(Reading *r, const char *path) {
  srcset_init(&r->sources);
  sb_init(&r->text);
  sb_putc(&r->text, 0);
  r->text.len = 0;
  diag_init(&r->d, &r->sources);
  r->d.capture = &r->text;
  r->ok = orion_train_log_read(path, &r->data, &r->d);
}

static void done(Reading *r) {
  orion_train_log_data_free(&r->data);
  sb_free(&r->text);
  srcset_free(&r->sources);
}

/* Reads `content` as a log and expects `ok` and messages `want` (with "F"
 * standing for the file's name at the start of each line). */
static void expect(const char *content, bool ok, const char *want) {
  char *path = scratch_file(content);
  Reading r;
  read_log(&r, path);
  StrBuf w;
  sb_init(&w);
  for (const char *s = want; *s; s++) {
    if (*s == 'F' && (s == want || s[-1] == '\n')) sb_puts(&w, path);
    else sb_putc(&w, *s);
  }
  cr_assert_eq(r.ok, ok, "%s", r.text.data);
  cr_assert_str_eq(r.text.data, w.data ? w.data : "");
  sb_free(&w);
  done(&r);
  unlink(path);
  free(path);
}

#define LINE(step, rest) "{\"step\":" #step ",\"loss\":2.5,\"lr\":0.001,\"tokens_per_s\":100,\"skipped\":false,\"loss_scale\":1" rest "}\n"

Test(train_log, what_is_written_reads_back_exactly) {
  char *path = scratch_file("");
  Diag d;
  diag_init(&d, NULL);
  OrionTrainLog *log = orion_train_log_open(path, false, &d);
  cr_assert_not_null(log);
  OrionTrainLogEntry in[3] = {
      {.step = 1, .loss = 10.25, .lr = 1e-4, .tokens_per_s = 1234.5, .loss_scale = 65536, .has_times = true,
       .forward_ms = 1.5, .backward_ms = 3.25, .optimizer_ms = 0.125, .update_ms = 0.0625},
      {.step = 2, .loss = HUGE_VAL, .lr = 0.30000000000000004, .tokens_per_s = 99, .skipped = true,
       .loss_scale = 32768},
      {.step = 3, .loss = 9.0, .lr = 2e-4, .tokens_per_s = 1e6, .loss_scale = 32768, .has_eval = true,
       .eval_loss = 9.5, .has_grad_norm = true, .grad_norm = (double)NAN},
  };
  for (int i = 0; i < 3; i++) cr_assert(orion_train_log_write(log, &in[i], &d));
  cr_assert(orion_train_log_close(log, &d));
  char *text;
  size_t len;
  const char *err;
  cr_assert(read_file(path, 1u << 20, &text, &len, &err));
  cr_assert_str_eq(text,
                   "{\"step\":1,\"loss\":10.25,\"lr\":0.0001,\"tokens_per_s\":1234.5,\"skipped\":false,"
                   "\"loss_scale\":65536.0,\"time_ms\":{\"forward\":1.5,\"backward\":3.25,\"optimizer\":0.125,"
                   "\"update\":0.0625}}\n"
                   "{\"step\":2,\"loss\":\"inf\",\"lr\":0.30000000000000004,\"tokens_per_s\":99.0,\"skipped\":true,"
                   "\"loss_scale\":32768.0}\n"
                   "{\"step\":3,\"loss\":9.0,\"lr\":0.0002,\"tokens_per_s\":1000000.0,\"skipped\":false,"
                   "\"loss_scale\":32768.0,\"eval_loss\":9.5,\"grad_norm\":\"nan\"}\n");
  free(text);
  Reading r;
  read_log(&r, path);
  cr_assert(r.ok, "%s", r.text.data);
  cr_assert_eq(r.data.n, 3);
  for (int i = 0; i < 3; i++) {
    const OrionTrainLogEntry *a = &in[i], *b = &r.data.entries[i];
    cr_assert_eq(a->step, b->step);
    cr_assert(a->loss == b->loss && a->lr == b->lr && a->tokens_per_s == b->tokens_per_s);
    cr_assert(a->skipped == b->skipped && a->loss_scale == b->loss_scale && a->has_eval == b->has_eval);
    cr_assert(a->has_grad_norm == b->has_grad_norm && a->has_times == b->has_times);
    cr_assert(a->forward_ms == b->forward_ms && a->update_ms == b->update_ms);
  }
  cr_assert_eq(r.data.entries[2].eval_loss, 9.5);
  cr_assert(isnan(r.data.entries[2].grad_norm));
  done(&r);
  /* Appending (a resumed run) keeps what is there. */
  log = orion_train_log_open(path, true, &d);
  cr_assert(orion_train_log_write(log, &in[0], &d) && orion_train_log_close(log, &d));
  cr_assert(read_file(path, 1u << 20, &text, &len, &err));
  int lines = 0;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  cr_assert_eq(lines, 4);
  cr_assert_eq(memcmp(strrchr(text, '\n') - 17, "\"update\":0.0625}}\n", 18), 0);
  cr_assert_eq(d.nerrors, 0);
  free(text);
  unlink(path);
  free(path);
}

Test(train_log, an_empty_log_reads_as_no_steps) {
  expect("", true, "");
  expect("\n  \n", true, "");
}

Test(train_log, a_line_cut_short_by_a_kill_is_dropped_with_a_warning) {
  char *path = scratch_file(LINE(1, "") LINE(2, "") "{\"step\":3,\"loss\":2.");
  Reading r;
  read_log(&r, path);
  cr_assert(r.ok);
  cr_assert_eq(r.data.n, 2);
  StrBuf want;
  sb_init(&want);
  sb_printf(&want,
            "%s:3:1: warning: the last line is cut short (a run killed while writing it?); it is ignored\n"
            "    3 | {\"step\":3,\"loss\":2.\n"
            "      | ^\n",
            path);
  cr_assert_str_eq(r.text.data, want.data);
  sb_free(&want);
  done(&r);
  unlink(path);
  free(path);
  /* A last line without its newline that is whole is a step. */
  path = scratch_file(LINE(1, "") "{\"step\":2,\"loss\":2,\"lr\":0,\"tokens_per_s\":1,\"skipped\":true,\"loss_scale\":1}");
  read_log(&r, path);
  cr_assert(r.ok);
  cr_assert_eq(r.data.n, 2);
  cr_assert_str_eq(r.text.data, "");
  done(&r);
  unlink(path);
  free(path);
}

Test(train_log, bad_lines_are_errors_at_their_line) {
  expect(LINE(1, "") "{\"step\":2,\"loss\":2.5,}\n", false,
         "F:2:22: error: not valid JSON\n"
         "    2 | {\"step\":2,\"loss\":2.5,}\n"
         "      |                      ^\n");
  expect(LINE(1, "") "{\"step\":2,\"lr\":0.001,\"tokens_per_s\":100,\"skipped\":false,\"loss_scale\":1}\n", false,
         "F:2:1: error: 'loss' is missing\n"
         "    2 | {\"step\":2,\"lr\":0.001,\"tokens_per_s\":100,\"skipped\":false,\"loss_scale\":1}\n"
         "      | ^\n");
  expect(LINE(0, ""), false,
         "F:1:1: error: 'step' is not a whole number from 1\n"
         "    1 | {\"step\":0,\"loss\":2.5,\"lr\":0.001,\"tokens_per_s\":100,\"skipped\":false,\"loss_scale\":1}\n"
         "      | ^\n");
  expect(LINE(1, ",\"eval_loss\":\"low\""), false,
         "F:1:1: error: 'eval_loss' is not a number\n"
         "    1 | {\"step\":1,\"loss\":2.5,\"lr\":0.001,\"tokens_per_s\":100,\"skipped\":false,\"loss_scale\":1,\"eval_loss\":\"low\"}\n"
         "      | ^\n");
  expect("[1,2]\n", false,
         "F:1:1: error: a line of the log is not a JSON object\n"
         "    1 | [1,2]\n"
         "      | ^\n");
  expect("{\"step\":1} trailing\n", false,
         "F:1:12: error: not valid JSON\n"
         "    1 | {\"step\":1} trailing\n"
         "      |            ^\n");
}

Test(train_log, a_resumed_run_replaces_the_steps_it_logs_again) {
  char *path = scratch_file(LINE(1, "") LINE(2, "") LINE(3, "") LINE(2, ",\"eval_loss\":3") LINE(3, ""));
  Reading r;
  read_log(&r, path);
  cr_assert(r.ok);
  cr_assert_eq(r.data.n, 3);
  cr_assert_eq(r.data.entries[1].step, 2);
  cr_assert(r.data.entries[1].has_eval);
  cr_assert_eq(r.data.entries[2].step, 3);
  cr_assert_eq(strncmp(strchr(r.text.data, ':'), ":4:1: note: steps 2 to 3 are logged again (a resumed run): the later lines are used\n", 84), 0,
               "%s", r.text.data);
  done(&r);
  unlink(path);
  free(path);
}

/* ---- the SVG ------------------------------------------------------------------ */

static char *source_path(const char *rel) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  cr_assert_not_null(root, "ORION_SOURCE_ROOT is not set");
  size_t n = strlen(root) + strlen(rel) + 2;
  char *p = xmalloc(n);
  snprintf(p, n, "%s/%s", root, rel);
  return p;
}

static char *plot(const OrionTrainLogData *data, const OrionPlotOptions *o, size_t *len) {
  char *svg = NULL;
  FILE *mem = open_memstream(&svg, len);
  cr_assert(orion_plot_loss_svg(data, o, mem));
  fclose(mem);
  return svg;
}

static void golden(const char *svg_rel, const OrionPlotOptions *o) {
  char *log = source_path("testsuite/train/small.jsonl"), *want_path = source_path(svg_rel);
  Reading r;
  read_log(&r, log);
  cr_assert(r.ok, "%s", r.text.data);
  cr_assert_eq(r.data.n, 40);
  size_t len, len2;
  char *svg = plot(&r.data, o, &len), *again = plot(&r.data, o, &len2);
  cr_assert(len == len2 && memcmp(svg, again, len) == 0, "two plots of one log differ");
  char *want;
  size_t want_len;
  const char *err;
  cr_assert(read_file(want_path, 1u << 24, &want, &want_len, &err), "%s: %s", want_path, err);
  cr_assert(len == want_len && memcmp(svg, want, len) == 0, "the plot differs from %s", want_path);
  free(want);
  free(svg);
  free(again);
  done(&r);
  free(log);
  free(want_path);
}

Test(train_plot, the_small_log_plots_as_the_golden_svg) {
  golden("testsuite/train/small.svg", &(OrionPlotOptions){.title = "small <test> & log"});
}

Test(train_plot, log_scale_plots_as_its_golden_svg) {
  golden("testsuite/train/small-log.svg", &(OrionPlotOptions){.log_scale = true, .width = 640, .height = 400});
}

Test(train_plot, nothing_to_draw_writes_nothing) {
  OrionTrainLogData empty = {0};
  char *svg = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&svg, &len);
  cr_assert_not(orion_plot_loss_svg(&empty, NULL, mem));
  OrionTrainLogEntry e = {.step = 1, .loss = -1, .lr = 1, .tokens_per_s = 1, .loss_scale = 1};
  OrionTrainLogData negative = {&e, 1};
  cr_assert_not(orion_plot_loss_svg(&negative, &(OrionPlotOptions){.log_scale = true}, mem));
  cr_assert(orion_plot_loss_svg(&negative, NULL, mem)); /* on a linear axis -1 is drawn */
  fclose(mem);
  cr_assert_gt(len, 0);
  cr_assert_eq(strncmp(svg, "<?xml", 5), 0);
  free(svg);
}
