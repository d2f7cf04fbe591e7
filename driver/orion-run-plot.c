/*
 * `orion-run plot`: draws the SVG loss curve of a training log (the JSONL
 * log of orion-run train, docs/training.md) with the training runtime's
 * plotter. Parses options; the reading and drawing are library calls.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "orion-run.h"
#include "orion/train_log.h"

enum { OPT_OUTPUT = 1, OPT_LOG_SCALE, OPT_TITLE, OPT_WIDTH, OPT_HEIGHT, OPT_HELP };

static const CliOption plot_options[] = {
    {OPT_OUTPUT, 'o', "output", CLI_VALUE, 0, " FILE.svg",
     "where the SVG is written (replaced atomically);\n"
     "default, or -: standard output",
     "a file"},
    {OPT_LOG_SCALE, 0, "log-scale", CLI_NO_VALUE, 0, NULL,
     "a logarithmic loss axis (losses <= 0 are left out)", NULL},
    {OPT_TITLE, 0, "title", CLI_VALUE, CLI_EMPTY_OK, " TEXT", "the title (default: Training loss)", "a title"},
    {OPT_WIDTH, 0, "width", CLI_VALUE, 0, " PIXELS", "the picture's width, 200 to 10000 (default: 800)",
     "a number of pixels"},
    {OPT_HEIGHT, 0, "height", CLI_VALUE, 0, " PIXELS", "its height, 150 to 10000 (default: 500)",
     "a number of pixels"},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
};

static const CliSpec plot_spec = {
    .program = "orion-run plot",
    .usage = "usage: orion-run plot [options] LOG.jsonl -o FILE.svg\n",
    .description = "Draws the loss curve of a training log (one JSON object per step, as\n"
                   "orion-run train --log writes it): the train loss as a line, the eval loss\n"
                   "with markers, axes with ticks (step, loss). A last line cut short by a\n"
                   "killed run is left out with a warning; steps logged again by a resumed run\n"
                   "replace the earlier ones. The same log gives the same bytes.\n",
    .options = plot_options,
    .noptions = sizeof plot_options / sizeof *plot_options,
    .epilogue = "exit status: 0 success, 1 errors in the log (nothing written), 2 usage error\n",
    .help_column = 25,
};

#define usage_error(...) cli_usage_error("orion-run plot", __VA_ARGS__)

typedef struct PlotArgs {
  const char *log, *output;
  OrionPlotOptions plot;
} PlotArgs;

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  (void)spelling;
  PlotArgs *a = ctx;
  switch (id) {
  case OPT_HELP: cli_print_help(&plot_spec, stdout); return 0;
  case OPT_OUTPUT: a->output = v; return -1;
  case OPT_LOG_SCALE: a->plot.log_scale = true; return -1;
  case OPT_TITLE: a->plot.title = v; return -1;
  case OPT_WIDTH:
  case OPT_HEIGHT: {
    bool w = id == OPT_WIDTH;
    long lo = w ? 200 : 150;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < lo || n > 10000)
      return usage_error("--%s needs a number of pixels from %ld to 10000 (not '%s')", w ? "width" : "height", lo, v);
    *(w ? &a->plot.width : &a->plot.height) = (uint32_t)n;
    return -1;
  }
  default: return -1;
  }
}

static int parse(int argc, char **argv, PlotArgs *a) {
  *a = (PlotArgs){0};
  int rc = cli_parse_one_operand(&plot_spec, argc, argv, take_option, a, "log", &a->log, "no training log");
  if (rc >= 0) return rc;
  return -1;
}

int orion_run_plot(int argc, char **argv) {
  PlotArgs a;
  int rc = parse(argc, argv, &a);
  if (rc >= 0) return rc;
  RunDiag rd;
  run_diag_open(&rd, "orion-run");
  Diag *d = &rd.d;
  rc = 1;
  OrionTrainLogData log;
  char *svg = NULL;
  size_t len = 0;
  if (!orion_train_log_read(a.log, &log, d)) goto done;
  FILE *mem = open_memstream(&svg, &len);
  if (!mem) {
    diag_error(d, (SrcSpan){0}, "cannot draw the loss curve: %s", strerror(errno));
    goto done;
  }
  bool drawn = orion_plot_loss_svg(&log, &a.plot, mem);
  fclose(mem);
  if (!drawn) {
    if (!log.n) diag_error(d, (SrcSpan){0}, "'%s' has no training steps to plot", a.log);
    else
      diag_error(d, (SrcSpan){0}, "'%s' has no train loss to plot (none of its %u steps has a finite%s loss)", a.log,
                 log.n, a.plot.log_scale ? " positive" : "");
    goto done;
  }
  if (!a.output || !strcmp(a.output, "-")) {
    if (fwrite(svg, 1, len, stdout) != len || fflush(stdout) != 0) {
      diag_error(d, (SrcSpan){0}, "cannot write the loss curve: %s", strerror(errno));
      goto done;
    }
  } else {
    const char *err;
    if (!write_file_atomic(a.output, svg, len, &err)) {
      diag_error(d, (SrcSpan){0}, "cannot write '%s': %s", a.output, err);
      goto done;
    }
  }
  rc = 0;
done:
  free(svg);
  orion_train_log_data_free(&log);
  run_diag_close(&rd);
  return rc;
}
