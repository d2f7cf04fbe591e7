/*
 * libFuzzer target for the JSONL training log reader and the loss-curve
 * plotter (orion/train_log.h): any bytes are read or rejected with messages,
 * never a crash, hang or read out of bounds, and whatever reads plots
 * (or says there is nothing to draw), on both axis kinds.
 */
#include <stdio.h>
#include <stdlib.h>

#include "orion/train_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  SourceSet sources;
  srcset_init(&sources);
  StrBuf messages;
  sb_init(&messages);
  Diag d;
  diag_init(&d, &sources);
  d.capture = &messages;
  OrionTrainLogData log;
  if (orion_train_log_parse("fuzz.jsonl", (const char *)data, size, &log, &d)) {
    char *svg = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&svg, &len);
    if (mem) {
      orion_plot_loss_svg(&log, NULL, mem);
      orion_plot_loss_svg(&log, &(OrionPlotOptions){.log_scale = true, .title = "t"}, mem);
      fclose(mem);
    }
    free(svg);
    orion_train_log_data_free(&log);
  }
  sb_free(&messages);
  srcset_free(&sources);
  return 0;
}
