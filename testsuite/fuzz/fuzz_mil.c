/*
 * libFuzzer target for the MIL text reader: any bytes must end in a program
 * or in diagnostics, never a crash, hang or leak. Beyond memory safety, each
 * outcome is held to what mil_reader.h promises: a rejection reported at
 * least one error (and no more than the error limit); an accepted program
 * reported nothing, resolved every name to a definition, and gave each
 * inline tensor literal exactly one data array of the declared element count.
 */
#include <stdlib.h>
#include <string.h>

#include "orion/mil_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_literal(const MilLiteral *l) {
  if (l->payload == MIL_PAYLOAD_BLOB && !l->blob_path) abort();
  if (l->payload != MIL_PAYLOAD_INLINE || l->type.kind != MIL_TYPE_TENSOR) return;
  int arrays = (l->floats != NULL) + (l->ints != NULL) + (l->bools != NULL) + (l->strings != NULL);
  if (arrays != 1) abort();
  uint64_t want = mil_type_elements(&l->type);
  if (want != UINT64_MAX && want != l->count) abort();
  for (uint64_t i = 0; i < l->count; i++) /* every element is readable */
    if (l->strings && !l->strings[i]) abort();
}

static void check_attrs(const MilAttr *a, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (!a[i].name || !a[i].value) abort();
    check_literal(a[i].value);
  }
}

static void check_program(const MilProgram *p) {
  if (!p->version) abort();
  check_attrs(p->attrs, p->nattrs);
  for (uint32_t f = 0; f < p->nfuncs; f++) {
    const MilFunc *fn = &p->funcs[f];
    if (!fn->opset || fn->ios == 0) abort();
    check_attrs(fn->attrs, fn->nattrs);
    for (uint32_t s = 0; s < fn->nstmts; s++) {
      const MilStmt *st = &fn->stmts[s];
      if (!st->op || st->nresults == 0) abort();
      check_attrs(st->attrs, st->nattrs);
      for (uint32_t a = 0; a < st->nargs; a++)
        for (uint32_t k = 0; k < st->args[a].nitems; k++) {
          const MilOperand *o = &st->args[a].items[k];
          if (!mil_operand_type(fn, o)) abort();
          if (o->kind == MIL_OPERAND_LITERAL) check_literal(o->literal);
          else if (o->def_stmt != MIL_DEF_PARAM && o->def_stmt >= s) abort(); /* SSA order */
        }
    }
    for (uint32_t r = 0; r < fn->nreturns; r++)
      if (!mil_operand_type(fn, &fn->returns[r])) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  SourceSet sources;
  srcset_init(&sources);
  StrBuf cap;
  sb_init(&cap);
  Diag d;
  diag_init(&d, &sources);
  d.capture = &cap;
  MilProgram *p = mil_read_string("fuzz.mil", (const char *)data, size, &d);
  if (p) {
    if (d.nerrors || cap.len) abort();
    check_program(p);
    mil_program_free(p);
  } else if (d.nerrors == 0 || d.nerrors > d.error_limit || cap.len == 0) {
    abort();
  }
  sb_free(&cap);
  srcset_free(&sources);
  return 0;
}
