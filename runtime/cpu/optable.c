/*
 * The op table: CPU_OPS (cpu_internal.h), one entry per MIL op the backend
 * runs, with its family and kernel, indexed by the op's MilOpId (the MIL op
 * table's, include/orion/mil_ops.def); looked up once per statement, at
 * prepare.
 */
#include "cpu_internal.h"

#define CPU_OP_ENTRY(id, family, kernel, variant, binder) \
  [MIL_OP_##id] = {kernel, binder, variant, family, MIL_OP_##id},
static const OpEntry op_table[MIL_OP_COUNT] = {CPU_OPS(CPU_OP_ENTRY)};
#undef CPU_OP_ENTRY

/* The backend's own pseudo-op, which MIL does not have: reshape and
 * identity planned as views. */
const OpEntry view_entry = {k_view, bind_view, 0, OF_VIEW, MIL_OP_COUNT};

const OpEntry *cpu_op(MilOpId op) { return (unsigned)op < MIL_OP_COUNT && op_table[op].fn ? &op_table[op] : NULL; }
