/*
 * The tools' allocations through one funnel: libxml2 and cJSON each have a
 * single process-wide allocator setting, and a tool (not a library) may own it.
 */
#define _XOPEN_SOURCE 700
#include "tool_memory.h"

#include "orion/support.h"

#include <cjson/cJSON.h>
#include <libxml/xmlmemory.h>
#include <stdlib.h>

static void (*tool_cleanup)(void *ctx);
static void *tool_ctx;
static const char *volatile temp_dirs[2];

void tool_temp_dir(unsigned slot, const char *path) {
  if (slot < sizeof temp_dirs / sizeof *temp_dirs) temp_dirs[slot] = path;
}

/* Inner directories first: one may lie inside the other. */
static void clean_up(void *ctx) {
  (void)ctx;
  if (tool_cleanup) tool_cleanup(tool_ctx);
  for (size_t i = sizeof temp_dirs / sizeof *temp_dirs; i-- > 0;)
    if (temp_dirs[i]) remove_tree(temp_dirs[i]);
}

void tool_memory_init(const char *program, void (*cleanup)(void *ctx), void *ctx) {
  tool_cleanup = cleanup;
  tool_ctx = ctx;
  xalloc_on_failure(program, clean_up, NULL);
  xmlMemSetup(free, xmalloc, xrealloc, xstrdup);
  cJSON_Hooks hooks = {.malloc_fn = xmalloc, .free_fn = free};
  cJSON_InitHooks(&hooks);
}
