/*
 * A function of the ane backend that runs in parts (ane_partition.h: its
 * int32/bool statements and those the device refuses on the CPU): each
 * device segment a program of its own, compiled, loaded and run through the
 * lifecycle (prepared on the same ane backend as the function: one compile
 * budget, one device program cache, one self-test choice), each CPU segment
 * on orion's CPU backend in the caller's numerics. The values that
 * cross a boundary are kept in buffers of their own between the segments;
 * a device segment copies them through its surfaces (fp32 converted to fp16
 * and back) as any function of the backend does.
 *
 * A segment is a bare model directory written under $TMPDIR: its MIL and the
 * function's weight files as they are now, opened with orion's runtime and
 * removed once prepared (the mappings hold the bytes). A weight change of a
 * program written in place (opened writable_weights: training) copies the
 * new bytes into each device segment's own writable mapping and hands the
 * segment to the backend's weights_changed, which updates it by the
 * self-test's strategy (reload-files and patch-data: no compile; recompile:
 * one per changed segment). Any other weight change (a reload) and every
 * CPU segment rebuild the segment from the program's new bytes; a device
 * segment whose content did not change is then the cache's hit.
 */
#ifndef ORION_ANE_PARTS_H
#define ORION_ANE_PARTS_H

#include "orion/backend.h"

typedef struct AneParts AneParts;
struct AneCostModel;

/* Whether function fn of p has a statement the CPU must run. */
bool ane_parts_wanted(const OrionProgram *p, uint32_t fn);
/* Prepares fn of p in parts; mil is the text of fn's MIL file (copied);
 * placed (NULL: none) the statements the constraint table puts on the CPU
 * too and cost (NULL: none) the cost model that joins short device runs to
 * their CPU neighbours (ane_partition_plan_placed). The
 * device segments are prepared through device's functions on device_impl
 * (the ane backend's own: ane_backend.c), released by ane_parts_free. */
AneParts *ane_parts_prepare(const OrionBackendVtable *device, void *device_impl, OrionProgram *p, uint32_t fn,
                            const char *mil, size_t mil_len, const uint32_t *placed, const struct AneCostModel *cost,
                            const OrionPrepareOptions *opt, Diag *d);
bool ane_parts_run(AneParts *a, const OrionTensor *in, const OrionTensor *out, Diag *d);
/* The program's weights changed: every segment takes them (above). */
bool ane_parts_weights_changed(AneParts *a, Diag *d);
void ane_parts_free(AneParts *a);

#endif
