/*
 * Shared helpers for the Criterion unit tests. helpers.c needs only the
 * support library (and cJSON); the parsing helpers (helpers_parse.c) need
 * the front end. Failures are Criterion assertions in the calling test.
 */
#ifndef ORION_TEST_HELPERS_H
#define ORION_TEST_HELPERS_H

#include <cjson/cJSON.h>

#include "orion/frontend.h"
#include "orion/support.h"

/* ---- helpers.c ------------------------------------------------------------ */

/* A Diag whose messages are captured as text, as `program` reports them. */
typedef struct Capture {
  SourceSet sources;
  StrBuf text;
  Diag d;
} Capture;

void capture_init(Capture *c, const char *program);
/* What was reported so far ("" if nothing). */
const char *captured(const Capture *c);
void capture_free(Capture *c);

/* The whole file (asserted readable), malloc'd and NUL-terminated; its length in *len unless len is NULL. */
char *slurp(const char *path, size_t *len);

/* Makes a fresh /tmp/orion-NAME-XXXXXX into dir[cap] (asserted). */
void test_dir_make(char *dir, size_t cap, const char *name);
/* Removes dir and everything below it (asserted). */
void test_dir_remove(const char *dir);

/* ORION_SOURCE_ROOT/rel into buf[cap] (asserts that meson set the variable). */
void source_path(char *buf, size_t cap, const char *rel);
/* Skips the calling test when the MIL corpus (ORION_SOURCE_ROOT/../shared/corpus/mil, beside the checkout as
 * the design brief lays it out) is absent, unless CI=true, where its absence fails the test. */
void require_mil_corpus(void);
/* The committed JSON fixture ORION_SOURCE_ROOT/rel, parsed (asserted); cJSON_Delete it. */
cJSON *load_json_fixture(const char *rel);

/* ---- helpers_parse.c ------------------------------------------------------ */

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
