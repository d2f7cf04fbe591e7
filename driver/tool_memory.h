/*
 * Out of memory in a tool: every allocation through support/memory.c's
 * funnel (libxml2's and cJSON's too), one message, the tool's temporary
 * directories removed, exit status ORION_EXIT_OUT_OF_MEMORY.
 */
#ifndef ORION_TOOL_MEMORY_H
#define ORION_TOOL_MEMORY_H

/* Called first thing in main. cleanup (may be NULL) runs after the message;
 * the directories named by tool_temp_dir are removed after it. */
void tool_memory_init(const char *program, void (*cleanup)(void *ctx), void *ctx);

/* A temporary directory of the tool's own, removed if memory runs out while
 * it is set: slot 0 or 1 (nested ones), path borrowed until it is set to NULL. */
void tool_temp_dir(unsigned slot, const char *path);

#endif
