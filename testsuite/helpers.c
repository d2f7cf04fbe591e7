/*
 * The helpers of helpers.h that need only the support library: captured
 * diagnostics, files read whole, temporary directories and the committed
 * fixtures under ORION_SOURCE_ROOT. Tests of any library link them.
 */
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

void capture_init(Capture *c, const char *program) {
  srcset_init(&c->sources);
  sb_init(&c->text);
  diag_init(&c->d, &c->sources);
  c->d.capture = &c->text;
  c->d.program = program;
}

void capture_free(Capture *c) {
  sb_free(&c->text);
  srcset_free(&c->sources);
}

const char *captured(const Capture *c) { return c->text.data ? c->text.data : ""; }

char *slurp(const char *path, size_t *len) {
  char *data;
  size_t n;
  const char *err;
  cr_assert(read_file(path, 1u << 30, &data, &n, &err), "cannot read %s: %s", path, err);
  if (len) *len = n;
  return data;
}

void test_dir_make(char *dir, size_t cap, const char *name) {
  int n = snprintf(dir, cap, "/tmp/orion-%s-XXXXXX", name);
  cr_assert(n > 0 && (size_t)n < cap, "no room for the name of the directory '%s'", name);
  cr_assert_not_null(mkdtemp(dir), "cannot make %s", dir);
}

void test_dir_remove(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0, "cannot remove %s", dir);
}

void source_path(char *buf, size_t cap, const char *rel) {
  const char *r = getenv("ORION_SOURCE_ROOT");
  cr_assert(r && *r, "ORION_SOURCE_ROOT is not set (meson test sets it)");
  snprintf(buf, cap, "%s/%s", r, rel);
}

void require_mil_corpus(void) {
  char dir[4096];
  source_path(dir, sizeof dir, "../shared/corpus/mil");
  if (access(dir, R_OK) == 0) return;
  const char *ci = getenv("CI");
  if (ci && strcmp(ci, "true") == 0) cr_assert_fail("no MIL corpus at %s (under CI it must be there)", dir);
  cr_skip_test("no MIL corpus at %s (a checkout without ../shared beside it; under CI this fails)", dir);
}

cJSON *load_json_fixture(const char *rel) {
  char path[4096];
  source_path(path, sizeof path, rel);
  size_t len;
  char *text = slurp(path, &len);
  cJSON *j = cJSON_ParseWithLength(text, len);
  free(text);
  cr_assert_not_null(j, "%s is not JSON", path);
  return j;
}
