/*
 * The op table: CPU_OPS (cpu_internal.h), one entry per MIL op the backend
 * runs, with its family and kernel; looked up by name once, at prepare.
 */
#include "cpu_internal.h"

#define CPU_OP_ENTRY(id, name, family, kernel, variant, binder) {name, kernel, binder, variant, family, OP_##id},
static const OpEntry op_table[] = {CPU_OPS(CPU_OP_ENTRY)};
#undef CPU_OP_ENTRY

const OpEntry view_entry = {"view", k_view, bind_view, 0, OF_VIEW, OP_VIEW};

const OpEntry *find_op(const char *name) {
  for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
    if (!strcmp(op_table[i].name, name)) return &op_table[i];
  return NULL;
}
