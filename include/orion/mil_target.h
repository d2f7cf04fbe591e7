/*
 * The MIL deployment targets a package is compiled for (its manifest's
 * Target) and the program dialect of each. Part of the package I/O library
 * (pkgio/): the manifest reader checks the name, the emitter and the
 * constraint table key on it.
 */
#ifndef ORION_MIL_TARGET_H
#define ORION_MIL_TARGET_H

#include <stdbool.h>

typedef enum MilTarget { MIL_IOS16, MIL_IOS17, MIL_IOS18 } MilTarget;

/* "ios16" / "ios17" / "ios18"; false if unknown. */
bool mil_target_from_name(const char *name, MilTarget *out);
const char *mil_target_name(MilTarget t);
/* "1.0" for ios16/ios17, "1.3" for ios18. */
const char *mil_program_version(MilTarget t);

#endif
