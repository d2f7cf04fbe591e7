/* Shared helpers for the Criterion unit tests. */
#ifndef ORION_TEST_HELPERS_H
#define ORION_TEST_HELPERS_H

#include "orion/frontend.h"

/* Parses `text` as "t.oir"; diagnostics go to *diag_text (caller frees). */
typedef struct Parsed {
  IrModule *m;
  SourceSet sources;
  Diag d;
  StrBuf diags;
} Parsed;

void parsed_open(Parsed *p, const char *text);
void parsed_close(Parsed *p);
/* Type of output `index` of function `main`, printed ("fp16[1,2]"), in a static buffer. */
const char *parsed_output_type(Parsed *p, uint32_t index);
/* Convenience: the diagnostics of parsing text (static buffer). */
const char *diags_of(const char *text);
/* Convenience: output 0's type of "func main(<inputs>) { <body> }" or the first error line. */
const char *infer_of(const char *inputs, const char *body);

#endif
