/*
 * The partition of a function for the ane backend (docs/ane-backend.md,
 * "What runs on the device and what on the CPU"). The device's surfaces hold
 * fp16 (fp32 converted at the boundary), so a statement that reads or
 * produces an int32 or bool value (gather by token ids, cross_entropy's
 * targets, comparisons, position arithmetic) runs on the CPU backend, and
 * so does one the device refuses by a rule the constraint table places on
 * the CPU (ane_partition_plan_placed); each maximal run of the other
 * statements runs on the device. The runs are of
 * a list schedule, not of statement order: a statement joins the current
 * segment as soon as the values it reads are made, so independent
 * statements of the other placement do not cut a run. `const` statements are no value crossing a boundary: each segment
 * gets a copy of the consts it references (a BLOBFILE const keeps its
 * offset: every segment is handed the function's weight files whole).
 *
 * The cut is made at MIL text level: a segment is written back out as a MIL
 * program of its own (ane_partition_mil) from the statements' text as it was
 * read, with one function whose inputs are the values crossing into it and
 * whose outputs are the values it hands on, each set in ASCII order of MIL
 * names, so that declared order is binding order. Pure C over the MIL
 * reader's structures: no framework, no runtime.
 */
#ifndef ORION_ANE_PARTITION_H
#define ORION_ANE_PARTITION_H

#include "orion/mil_reader.h"

/* A value of the function: a parameter (def_stmt MIL_DEF_PARAM) or a
 * statement's result. */
typedef struct AneValue {
  const char *name;
  uint32_t def_stmt, def_index;
} AneValue;

typedef struct AneSegment {
  bool on_device;
  uint32_t *stmts; /* the non-const statements, in order */
  uint32_t nstmts;
  uint32_t *consts; /* the const statements they reference, in order */
  uint32_t nconsts;
  AneValue *inputs; /* crossing in, ASCII order of names */
  uint32_t ninputs;
  AneValue *outputs; /* used by a later segment or returned, ASCII order of names */
  uint32_t noutputs;
} AneSegment;

typedef struct AnePartition {
  AneSegment *segs;
  uint32_t nsegs;
  uint32_t cpu_stmts; /* statements that run on the CPU; 0: the function is one device program */
} AnePartition;

/* Whether statement s of f must run on the CPU (an int32/bool value read or
 * made; consts are neither). */
bool ane_partition_stmt_on_cpu(const MilFunc *f, uint32_t s);
/* Partitions f. A function without such statements gives cpu_stmts 0 and
 * one device segment of all its statements. Segments whose values nobody
 * uses (dead statements) are dropped. */
void ane_partition_plan(AnePartition *part, const MilFunc *f);
struct AneCostModel;
/* The same, with the statements the device refuses on the CPU too: placed
 * (NULL: none) has one entry per statement of f, non-zero for one that a
 * rule of the constraint table places on the CPU (orion_ane_check's
 * OrionAneCheckOptions.placed). With a cost model (ane_partition_cost.h;
 * NULL: none), a device segment between two CPU segments that does not pay
 * for its crossings runs on the CPU too, joining its neighbours, and the
 * plan is made again until every such segment pays (a device segment at
 * either end of the function keeps its place). */
void ane_partition_plan_placed(AnePartition *part, const MilFunc *f, const uint32_t *placed,
                               const struct AneCostModel *cost);
void ane_partition_free(AnePartition *part);
/* The type of value v of f. */
const MilType *ane_value_type(const MilFunc *f, const AneValue *v);
/* Appends segment seg as a MIL program (version and opset of prog and f,
 * one function `main`), its statements copied from text, the MIL file f was
 * read from. */
void ane_partition_mil(const AnePartition *part, uint32_t seg, const MilProgram *prog, const MilFunc *f,
                       const char *text, StrBuf *out);

#endif
