/*
 * generate_text.h for a build without the tokenizer library: --tokenizer
 * is an error that says so (--ids and --print-ids work without it). The
 * build links generate_text.c instead once the library is part of it.
 */
#include "generate_text.h"

GenText *gen_text_open(const char *path, Diag *d) {
  diag_error(d, (SrcSpan){0}, "cannot open the tokenizer '%s': this orion-run is built without the tokenizer "
                              "library (use --ids and --print-ids)", path);
  return NULL;
}

/* Never reached: there is no GenText to call them with. */
void gen_text_free(GenText *t) { (void)t; }
uint32_t gen_text_vocab(const GenText *t) { (void)t; return 0; }
int32_t gen_text_eos(const GenText *t) { (void)t; return -1; }
bool gen_text_encode(const GenText *t, const char *text, size_t len, int32_t **ids, size_t *n, Diag *d) {
  (void)t, (void)text, (void)len, (void)ids, (void)n, (void)d;
  return false;
}
bool gen_text_push(GenText *t, int32_t id, StrBuf *out) { (void)t, (void)id, (void)out; return false; }
void gen_text_finish(GenText *t, StrBuf *out) { (void)t, (void)out; }
