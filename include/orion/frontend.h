/*
 * The .oir frontend: text -> AST (flex/bison) -> graph IR (builder) -> verified IR.
 */
#ifndef ORION_FRONTEND_H
#define ORION_FRONTEND_H

#include "orion/ir.h"

/* Parses, builds and verifies .oir source. Returns NULL when any error was
 * reported (the diagnostics say why); never a partial module. The text is
 * registered in d->sources under `name`. */
IrModule *oir_parse_string(const char *name, const char *text, size_t len, Diag *d);
/* Same, reading the file; "-" reads standard input. Relative weight paths in
 * the module are taken relative to the file's directory. */
IrModule *oir_parse_file(const char *path, Diag *d);

#endif
