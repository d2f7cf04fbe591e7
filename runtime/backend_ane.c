/*
 * The ane backend's entry in the registry on platforms where it cannot be
 * built (everything but macOS): the registry knows the name, so selecting
 * it says why it is not there instead of "unknown backend". The backend
 * itself (runtime/ane/, macOS only) replaces this file there; its supports
 * is where orion_ane_check (orion/ane_check.h) refuses what the device would.
 */
#include "orion/backend.h"

#include <stdio.h>

#include "ane_unavailable.h"

static bool ane_available(char *why, size_t len) {
  snprintf(why, len, "%s", ORION_ANE_NOT_MACOS);
  return false;
}

/* The other entries are never called: orion_backend_open asks available first. */
const OrionBackendVtable orion_backend_ane = {
    .name = "ane",
    .description = "Apple's Neural Engine through AppleNeuralEngine.framework (macOS only)",
    .available = ane_available,
};
