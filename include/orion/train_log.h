/*
 * The training log (runtime/train/train_log.c): one JSON object per line
 * per optimizer step (JSONL), each line written with one write(2) so that a
 * killed run leaves whole lines; a reader for it; and the SVG loss curve
 * drawn from what it read (runtime/train/plot.c). The schema is in
 * docs/training.md, "Checkpoints and logs".
 */
#ifndef ORION_TRAIN_LOG_H
#define ORION_TRAIN_LOG_H

#include <stdio.h>

#include "orion/support.h"

typedef struct OrionTrainLogEntry {
  uint64_t step;       /* 1-based optimizer step */
  double loss;         /* mean loss of the step's batches, before the update */
  double lr;           /* the learning rate the step used */
  double tokens_per_s; /* training throughput of the step */
  bool skipped;        /* gradients not finite: no update, scale lowered */
  double loss_scale;   /* the scale the step ran with (1 without scaling) */
  bool has_eval;
  double eval_loss;    /* with has_eval */
  bool has_grad_norm;
  double grad_norm;    /* global gradient norm before clipping */
  bool has_times;
  double forward_ms, backward_ms, optimizer_ms, update_ms; /* where the step's time went */
} OrionTrainLogEntry;

/* ---- writing -------------------------------------------------------------- */

typedef struct OrionTrainLog OrionTrainLog;

/* Opens (creates, or with `append` continues: a resumed run) a log; NULL
 * after reporting why. */
OrionTrainLog *orion_train_log_open(const char *path, bool append, Diag *d);
/* One line for the step, written at once (no fsync: the log is not the
 * durable record, checkpoints are). Non-finite numbers are written as the
 * strings "nan", "inf", "-inf". */
bool orion_train_log_write(OrionTrainLog *log, const OrionTrainLogEntry *e, Diag *d);
/* The line orion_train_log_write writes, with its newline, appended to sb. */
void orion_train_log_format(const OrionTrainLogEntry *e, StrBuf *sb);
bool orion_train_log_close(OrionTrainLog *log, Diag *d);

/* ---- reading -------------------------------------------------------------- */

typedef struct OrionTrainLogData {
  OrionTrainLogEntry *entries; /* in step order */
  uint32_t n;
} OrionTrainLogData;

/* Reads a log into `out`, reporting at FILE:LINE:COL through d (whose
 * sources it adds the file to; d->sources must be set). A last line cut
 * short (no newline, not valid JSON: a run killed while writing it) is
 * ignored with a warning; any other bad line is an error. When the steps go
 * back (a run resumed from a checkpoint appended to its log), the later
 * lines replace the earlier ones from that step on, with a note. An empty
 * log reads as no entries. */
bool orion_train_log_read(const char *path, OrionTrainLogData *out, Diag *d);
/* The same on a log in memory, reported under `name` (the fuzz target's entry). */
bool orion_train_log_parse(const char *name, const char *text, size_t len, OrionTrainLogData *out, Diag *d);
void orion_train_log_data_free(OrionTrainLogData *data);

/* ---- the loss curve -------------------------------------------------------- */

typedef struct OrionPlotOptions {
  const char *title; /* NULL: "Training loss" */
  bool log_scale;    /* logarithmic loss axis (values <= 0 are left out) */
  uint32_t width, height; /* pixels; 0: 800 x 500 */
} OrionPlotOptions;

/* Writes the SVG loss curve of a log: the train loss as a line, the eval
 * loss (where evaluated) as a second line with markers, axes with ticks and
 * labels (step, loss), a legend and the title. The same log and options give
 * the same bytes. Returns false, writing nothing, when the log has no train
 * loss to draw (no entries, or none finite: positive with log_scale). */
bool orion_plot_loss_svg(const OrionTrainLogData *log, const OrionPlotOptions *options, FILE *out);

#endif
