/*
 * libFuzzer target for the .oir frontend: any bytes must end in a module or
 * in diagnostics, never a crash, hang or leak. A module that comes out must
 * also print, parse back to the same text, and survive inlining.
 */
#include <stdlib.h>
#include <string.h>

#include "orion/frontend.h"
#include "orion/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static IrModule *parse(const char *text, size_t len, SourceSet *ss, Diag *d, StrBuf *diags) {
  srcset_init(ss);
  diag_init(d, ss);
  d->capture = diags;
  return oir_parse_string("fuzz.oir", text, len, d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  SourceSet ss;
  Diag d;
  StrBuf diags;
  sb_init(&diags);
  IrModule *m = parse((const char *)data, size, &ss, &d, &diags);
  if (m) {
    StrBuf a, b, diags2;
    sb_init(&a);
    sb_init(&b);
    sb_init(&diags2);
    ir_print_module(m, &a);
    SourceSet ss2;
    Diag d2;
    IrModule *m2 = parse(a.data, a.len, &ss2, &d2, &diags2);
    if (!m2) {
      fprintf(stderr, "printed module does not parse:\n%s\n%s", a.data, diags2.data);
      abort();
    }
    ir_print_module(m2, &b);
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) {
      fprintf(stderr, "round trip differs:\n%s\n---\n%s", a.data, b.data);
      abort();
    }
    PassCtx ctx = {.d = &d2};
    if (pass_inline(m2, &ctx)) ir_verify(m2, &d2);
    ir_module_free(m2);
    srcset_free(&ss2);
    sb_free(&a);
    sb_free(&b);
    sb_free(&diags2);
  }
  ir_module_free(m);
  srcset_free(&ss);
  sb_free(&diags);
  return 0;
}
