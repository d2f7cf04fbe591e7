/*
 * GPT-2 byte-level BPE, shared by its loader (bpe_load.c) and its encoder
 * (bpe.c). Pieces are kept as the raw bytes they stand for: the files'
 * printable stand-ins (GPT-2's bytes_to_unicode, 'Ġ' for a space) are
 * undone once when loading.
 */
#ifndef ORION_BPE_INTERNAL_H
#define ORION_BPE_INTERNAL_H

#include "text_internal.h"

/* Limits, reported by name when a file or a text is over them. */
#define BPE_MAX_FILE_BYTES (256u * 1024u * 1024u) /* vocab.json, merges.txt */
#define BPE_MAX_IDS (1u << 24)                     /* the largest id + 1 */
#define BPE_MAX_WORD_BYTES (16u * 1024u * 1024u)   /* one pre-tokenized word */

/* The one special token GPT-2 knows (ORION_ENCODE_SPECIAL). */
#define BPE_ENDOFTEXT "<|endoftext|>"

typedef struct Bpe {
  char *bytes;         /* every piece's bytes, one after another */
  uint32_t *piece_off; /* per id */
  uint32_t *piece_len; /* per id; UINT32_MAX: no token has this id */
  uint32_t nids;       /* the largest id + 1 */
  /* piece bytes -> id: open addressing, slots hold id + 1 (0 = empty) */
  uint32_t *piece_slots;
  uint32_t piece_mask;
  int32_t byte_id[256]; /* the id of each single byte, -1 when the vocabulary lacks it */
  /* (left id, right id) -> rank and merged id: open addressing */
  uint64_t *merge_keys; /* UINT64_MAX = empty */
  uint32_t *merge_rank;
  int32_t *merge_id;
  uint32_t merge_mask;
  uint32_t nmerges;
  int32_t endoftext; /* id of "<|endoftext|>", -1 without */
  pcre2_code *pretokenizer;
} Bpe;

/* The id of a piece's bytes, -1 when the vocabulary has none. */
int32_t bpe_piece_id(const Bpe *b, const char *bytes, size_t len);
/* The merge of two ids: its rank (UINT32_MAX when none) and *merged. */
uint32_t bpe_merge_rank(const Bpe *b, int32_t left, int32_t right, int32_t *merged);
void bpe_free(void *impl);

extern const TokOps bpe_ops;

#endif
