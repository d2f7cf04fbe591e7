/*
 * The partition's cost model (docs/ane-backend.md, "What runs on the device
 * and what on the CPU"): whether a device segment does enough arithmetic to
 * pay for its crossings, counted from the MIL types alone, so that the
 * placement is deterministic (no timing). A segment's work is the FLOPs of
 * its statements; its crossings cost the bytes copied through its surfaces
 * (each input copied in, each output copied out, two bytes per element:
 * the surfaces hold fp16) plus the dispatch's overhead, a number of FLOPs
 * (the constraint table's figure dispatch_overhead_flops where a rule
 * states one, else ANE_DISPATCH_OVERHEAD_FLOPS_DEFAULT). A segment pays
 * when work >= crossings. Pure C over the MIL reader's structures.
 */
#ifndef ORION_ANE_PARTITION_COST_H
#define ORION_ANE_PARTITION_COST_H

#include "ane_partition.h"
#include "orion/constraint_table.h"

/* No device has given orion a dispatch figure in FLOPs yet (the figures of
 * peers.md §4.3 are times: about 0.1-0.2 ms a dispatch, which depends on
 * the host's speed to weigh against arithmetic), so by default the copies
 * alone are weighed. */
#define ANE_DISPATCH_OVERHEAD_FLOPS_DEFAULT 0u
#define ANE_DISPATCH_OVERHEAD_FIGURE "dispatch_overhead_flops"

typedef struct AneCostModel {
  uint64_t dispatch_flops; /* a dispatch's overhead */
} AneCostModel;

/* The model with the table's dispatch figure (the first rule stating
 * ANE_DISPATCH_OVERHEAD_FIGURE), else the default; t may be NULL. */
AneCostModel ane_cost_model(const ConstraintTable *t);
/* The FLOPs of statement s of f from its types: a matmul or linear 2 per
 * multiply-add (output elements times the contracted extent), a conv 2 per
 * output element and weight element of its output channel, attention its
 * two products, data movement (reshape, transpose, slice, squeeze,
 * expand_dims, identity, const) none, any other op one per element of its
 * largest operand or result. */
uint64_t ane_stmt_flops(const MilFunc *f, uint32_t s);
uint64_t ane_segment_flops(const MilFunc *f, const AneSegment *g);
/* The bytes copied through g's surfaces: 2 per element of each input and output. */
uint64_t ane_segment_copy_bytes(const MilFunc *f, const AneSegment *g);
/* Whether device segment g does at least as many FLOPs as its crossings cost. */
bool ane_segment_pays(const MilFunc *f, const AneSegment *g, const AneCostModel *cost);

#endif
