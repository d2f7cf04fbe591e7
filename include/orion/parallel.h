/*
 * Work items over up to two threads (support/parallel.c).
 */
#ifndef ORION_PARALLEL_H
#define ORION_PARALLEL_H

#include <stddef.h>

/* Calls fn(ctx, i) for i in [0, n) on up to two threads (the caller and one
 * more it starts and joins), each i exactly once, in no fixed order: fn must
 * write only what item i owns. */
void parallel_for_two(size_t n, void (*fn)(void *ctx, size_t i), void *ctx);

#endif
