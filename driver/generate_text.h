/*
 * The few tokenizer calls of `orion-run generate`, behind one small
 * interface: generate_text.c implements it on the tokenizer library
 * (orion/tokenizer.h); generate_notext.c, linked while this build has no
 * tokenizer library, reports that --tokenizer is not available.
 */
#ifndef ORION_GENERATE_TEXT_H
#define ORION_GENERATE_TEXT_H

#include "orion/support.h"

typedef struct GenText GenText;

/* NULL after reporting why. */
GenText *gen_text_open(const char *path, Diag *d);
void gen_text_free(GenText *t);
uint32_t gen_text_vocab(const GenText *t);
/* The end-of-text id, -1 if none. */
int32_t gen_text_eos(const GenText *t);
/* The prompt's ids (bos in front where the tokenizer wants it): malloc'd. */
bool gen_text_encode(const GenText *t, const char *text, size_t len, int32_t **ids, size_t *n, Diag *d);
/* Streaming: appends to out the text that id completes (whole UTF-8
 * characters); false for an id out of range. */
bool gen_text_push(GenText *t, int32_t id, StrBuf *out);
/* Appends what is held back at the end. */
void gen_text_finish(GenText *t, StrBuf *out);

#endif
