/*
 * What the checkpoint writer and reader share: file names, the manifest's
 * field names, and the one checksum they both use.
 */
#ifndef ORION_TRAIN_CHECKPOINT_INTERNAL_H
#define ORION_TRAIN_CHECKPOINT_INTERNAL_H

#include "orion/train_checkpoint.h"
#include "orion/hash.h"

#define CKPT_MANIFEST "manifest.json"
#define CKPT_WEIGHTS "weights.safetensors"
#define CKPT_LATEST "latest"
#define CKPT_STEP_PREFIX "step-"
#define CKPT_TMP_PREFIX ".tmp-step-"
#define CKPT_TRASH_PREFIX ".trash-"
#define CKPT_LATEST_TMP ".latest.tmp"
#define CKPT_FORMAT_NAME "orion-checkpoint"
/* The manifest's last member, its checksum of the text before it. */
#define CKPT_SELF_KEY "manifest_xxh64"
#define CKPT_MAX_ID 128
#define CKPT_MAX_NAME 64

/* The file of a state slot: "state-m.safetensors". */
void ckpt_slot_file(const char *slot, char *buf, size_t n);

/* The checksum of every checkpoint file, in one place (XXH64 from
 * libxxhash, through support/'s hash.h as the package writer uses):
 * streamed, then as 16 hex digits. ckpt_hash_hex ends the state. */
typedef struct CkptHash {
  XXH64_state_t *state;
} CkptHash;
void ckpt_hash_init(CkptHash *h);
void ckpt_hash_update(CkptHash *h, const void *data, size_t n);
void ckpt_hash_hex(CkptHash *h, char hex[17]);
void ckpt_hash_discard(CkptHash *h); /* ends the state without a result */

/* The manifest text without its checksum member ends with this; the
 * checksum is of that text with "}" in place of the member. */
#define CKPT_SELF_SEP ",\n\t\"" CKPT_SELF_KEY "\":\t\""

/* Names of slots, optimizers and hyper-parameters: [a-z0-9_], 1 to 64. */
bool ckpt_plain_name(const char *s);
/* The package identity: 1 to CKPT_MAX_ID printable ASCII characters. */
bool ckpt_valid_id(const char *s);
/* The safetensors header of weights[i] (or of state slot tensors, the same
 * names and shapes): 8-byte length, JSON padded with spaces to 8. */
void ckpt_safetensors_header(const OrionCkptTensor *t, uint32_t n, StrBuf *out);

#endif
