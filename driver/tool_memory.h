/*
 * Out of memory in a tool: every allocation through support/memory.c's
 * funnel (libxml2's and cJSON's too), one message, every registered
 * temporary removed (orion/temporaries.h: the registry SIGINT and SIGTERM
 * empty too), exit status ORION_EXIT_OUT_OF_MEMORY.
 */
#ifndef ORION_TOOL_MEMORY_H
#define ORION_TOOL_MEMORY_H

/* Called first thing in main. cleanup (may be NULL) runs after the message,
 * before the registered temporaries are removed. */
void tool_memory_init(const char *program, void (*cleanup)(void *ctx), void *ctx);

#endif
