/* orion-inspect's report as JSON (orion-inspect-json.c). */
#ifndef ORION_INSPECT_H
#define ORION_INSPECT_H

#include "orion/manifest.h"

/* The report of `pkg` (read from `path`) as one JSON object; free() it. */
char *inspect_json(const Package *pkg, const char *path, bool pending_update, bool list_weights, bool verified);

#endif
