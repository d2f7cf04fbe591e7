/*
 * Hugging Face model import (orion-convert): a model directory (config.json
 * with model.safetensors, or shards with model.safetensors.index.json) of the
 * GPT-2 or llama family becomes a readable .oir holding the prefill_T and
 * decode entries of the generation contract (docs/generation.md). Params
 * read the safetensors files by key; nothing is copied.
 */
#ifndef ORION_CONVERT_H
#define ORION_CONVERT_H

#include "orion/support.h"

#include <stdbool.h>
#include <stdint.h>

#define CONVERT_MAX_BUCKETS 16

typedef struct ConvertOptions {
  const char *model_dir;
  /* Where the .oir goes: its directory is what the weight files' paths are
   * written relative to (it must exist). */
  const char *output;
  /* The prefill buckets, increasing and distinct after sorting; none: 128
   * clamped to the model's positions. */
  int64_t seqs[CONVERT_MAX_BUCKETS];
  uint32_t nseqs;
  int64_t ctx; /* the KV cache's length; 0: min(positions, 512), at least the largest bucket */
  bool fp32;   /* activations and params fp32 (default fp16) */
} ConvertOptions;

/* The .oir text into *out (appended). On failure returns false with a
 * lowercase message in err naming the file, key or tensor at fault. */
bool convert_model(const ConvertOptions *opt, StrBuf *out, char *err, size_t errlen);

/* The config.json reader alone, on text in memory (the fuzz target's entry):
 * true if it describes a model convert_model supports, else false with the
 * message (`name` prefixes it, "config.json"). */
bool convert_check_config(const char *name, const char *text, size_t len, char *err, size_t errlen);

#endif
