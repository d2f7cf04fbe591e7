/*
 * The tools' allocations through one funnel: libxml2 and cJSON each have a
 * single process-wide allocator setting, and a tool (not a library) may own it.
 */
#define _XOPEN_SOURCE 700
#include "tool_memory.h"

#include "orion/support.h"
#include "orion/temporaries.h"

#include <cjson/cJSON.h>
#include <libxml/xmlmemory.h>
#include <stdlib.h>

static void (*tool_cleanup)(void *ctx);
static void *tool_ctx;

/* The registry is the one the signal cleanup empties: whatever a signal would
 * remove, running out of memory removes. After the first failure nothing
 * more is made to fail (support/memory.c), so this may allocate. */
static void clean_up(void *ctx) {
  (void)ctx;
  if (tool_cleanup) tool_cleanup(tool_ctx);
  temp_remove_all_and_freeze();
}

void tool_memory_init(const char *program, void (*cleanup)(void *ctx), void *ctx) {
  tool_cleanup = cleanup;
  tool_ctx = ctx;
  xalloc_on_failure(program, clean_up, NULL);
  xmlMemSetup(free, xmalloc, xrealloc, xstrdup);
  cJSON_Hooks hooks = {.malloc_fn = xmalloc, .free_fn = free};
  cJSON_InitHooks(&hooks);
}
