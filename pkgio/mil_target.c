/*
 * MIL deployment targets (orion/mil_target.h).
 */
#include "orion/mil_target.h"

#include <string.h>

static const char *const target_names[] = {"ios16", "ios17", "ios18"};

bool mil_target_from_name(const char *name, MilTarget *out) {
  for (int t = 0; t < 3; t++)
    if (!strcmp(name, target_names[t])) {
      *out = (MilTarget)t;
      return true;
    }
  return false;
}

const char *mil_target_name(MilTarget t) { return target_names[t]; }
const char *mil_program_version(MilTarget t) { return t == MIL_IOS18 ? "1.3" : "1.0"; }
