/* What the runtime's own modules (the ANE simulation, ane_check.c) read of a
 * loaded program beyond orion/runtime.h: not for library users. */
#ifndef ORION_LOADER_INTERNAL_H
#define ORION_LOADER_INTERNAL_H

#include "orion/manifest.h"
#include "orion/runtime.h"

/* The path orion_open was given (messages name files under it). */
const char *orion_program_path(const OrionProgram *p);
/* The manifest as verified at open or at the last reload; NULL for a bare directory. */
const Package *orion_program_manifest(const OrionProgram *p);
/* The MIL program function fn was read from (its attributes, its file). */
const MilProgram *orion_function_program(const OrionProgram *p, uint32_t fn);
/* The mapped bytes of a weight file named by a path relative to the model
 * directory, if the loader mapped it; NULL otherwise. */
const uint8_t *orion_program_weight_file(const OrionProgram *p, const char *relpath, size_t *len);
/* The weight files the loader mapped, i < orion_program_weight_file_count:
 * each one's path under the model directory and its current bytes (after a
 * reload the new mapping's; in a writable program with what
 * orion_write_weights wrote), for a backend that hands them to a device
 * compiler (runtime/ane/). */
uint32_t orion_program_weight_file_count(const OrionProgram *p);
const uint8_t *orion_program_weight_file_at(const OrionProgram *p, uint32_t i, const char **relpath, size_t *len);

/* For orion_write_weights (runtime/weight_write.c): the data of weight i of
 * fn, writable, or NULL when the program was not opened writable_weights. */
void *orion_weight_data_writable(OrionProgram *p, uint32_t fn, uint32_t i);
/* Records that [data, data + len) of a weight file's mapping was written. */
void orion_program_note_weight_written(OrionProgram *p, const void *data, size_t len);
/* Writes the written bytes of each weight file's mapping into the file (not synced). */
bool orion_program_write_back(OrionProgram *p, Diag *d);
bool orion_program_weights_written(const OrionProgram *p);
/* After the manifest was made to match: it becomes the program's (taken
 * from *manifest, which is left empty), with its generation. */
void orion_program_weights_committed(OrionProgram *p, Package *manifest);
/* For a bare directory written by a backend itself (the ane backend's
 * segments, runtime/ane/ane_parts.c): every input and output whose surface
 * size is not known gets the size of its data in fp16, as a manifest would
 * have recorded it. A package's sizes are left alone. */
void orion_program_size_bare_surfaces(OrionProgram *p);
#endif
