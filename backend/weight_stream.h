/*
 * A weight file written while it is built. The builder fills an address
 * range that stands for the whole file (reserved, not committed) and says
 * which bytes are done; a writer thread sends finished pages to the disk
 * (with O_DIRECT where the file system takes it, so the bytes are neither
 * copied into the page cache nor faulted in as file pages) and gives their
 * memory back (moved ahead of the builder for reuse, so the kernel need not
 * zero fresh pages), so a compile's resident memory stays a few tens of
 * megabytes whatever the model's size, and generating weights overlaps
 * writing them.
 *
 * Bytes are either final (a prefix of the file that grows) or tentative (a
 * run after it, such as the weight being generated now, which becomes final
 * or, if it turns out to duplicate an earlier weight, is taken back). The
 * first page, which holds the header's blob count, is written last.
 *
 * One thread (the builder) calls everything here, except that the threads
 * it generates weights on may claim (weight_stream_claim); the writer thread
 * is internal. Memory: the regions being filled, up to 32 MiB of reused
 * regions ahead of them, and up to 256 MiB queued for a disk slower than the
 * generator. The reserved range is not committed memory, except under strict
 * overcommit (vm.overcommit_memory = 2), where the whole file's size counts.
 */
#ifndef ORION_WEIGHT_STREAM_H
#define ORION_WEIGHT_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct WeightStream WeightStream;

/* Creates `path` (which must not exist) for a file of at most `bound` bytes.
 * Returns NULL with errno set when the file or the address range cannot be
 * had (the caller can then build the file in memory instead). */
WeightStream *weight_stream_open(const char *path, size_t bound);
/* Where byte 0 of the file is; byte i is at base + i. Bytes not yet written
 * hold anything (reused memory): every byte of the file must be written. */
uint8_t *weight_stream_base(const WeightStream *s);
/* The builder will write bytes below `end` (before writing them): the
 * writer reuses the memory of written regions by moving it past the
 * furthest claim, so every write must be claimed first. */
void weight_stream_claim(WeightStream *s, size_t end);
/* Every byte below `end` is final. */
void weight_stream_final(WeightStream *s, size_t end);
/* Bytes [from, to) are written and stay as they are unless taken back; from
 * starts a new tentative run when it differs from the current run's start. */
void weight_stream_tentative(WeightStream *s, size_t from, size_t to);
/* Takes back the tentative run: its bytes will be written again when final. */
void weight_stream_rollback(WeightStream *s);
/* Whether the n bytes at file offset `offset` equal `bytes` (which may lie in
 * the stream's own range, written or not). For confirming duplicates. */
bool weight_stream_same(WeightStream *s, uint64_t offset, const void *bytes, size_t n);
/* Writes everything (the first page last), cuts the file to `len` bytes and
 * waits until it is on the disk. Returns false with errno set on any write
 * error, including an earlier one of the writer thread. */
bool weight_stream_finish(WeightStream *s, size_t len);
/* How many written regions had their memory reused ahead (0 on kernels
 * without MREMAP_DONTUNMAP, which free it instead). */
size_t weight_stream_reused(WeightStream *s);
/* The first write error (an errno value) so far, 0 if none. */
int weight_stream_error(WeightStream *s);
/* Stops the writer and frees everything; the file stays. NULL is a no-op. */
void weight_stream_close(WeightStream *s);

#endif
