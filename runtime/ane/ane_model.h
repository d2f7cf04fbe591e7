/*
 * The ane backend's lifecycle of one program on the framework
 * (orion-reference.md §3.1): descriptor from the MIL text and the weight
 * files → _ANEInMemoryModel → compile → load → evaluate with a request of
 * IOSurface objects → unload. The reference's temporary directory
 * ($TMPDIR/<hexStringIdentifier>/, model.mil and weights/…) is written as it
 * writes it and removed at release, by the process holding its advisory
 * lock only: one content compiled by two processes is one directory. Every call runs inside an autorelease
 * pool; what is kept past a call (the model, the surface objects, the
 * request) is retained and released at the end, as Apple's conventions
 * want of a C caller.
 *
 * A failure is a clause naming the backend and, where the device answered
 * with an error object, its -code and -localizedDescription.
 */
#ifndef ORION_ANE_MODEL_H
#define ORION_ANE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ane_framework.h"
#include "ane_iosurface.h"

/* One weight file: its key, "@model_path/<path under the model directory>". */
typedef struct AneWeightFile {
  const char *key;
  const void *data;
  size_t len;
} AneWeightFile;

/* How the device answered the last failed call: whether it was the device
 * (not orion or the framework's binding) and with which error object. */
typedef struct AneModelFailure {
  bool device;    /* the device's compile/load/evaluate returned NO */
  bool has_error; /* ... with an error object */
  bool has_code;  /* ... answering -code */
  long code;
} AneModelFailure;

typedef struct AneModel {
  id model; /* retained */
  char *dir; /* $TMPDIR/<hexStringIdentifier>: removed by ane_model_free (when not shared) */
  int dir_lock;    /* 1 + the descriptor holding the directory's flock, or 0 */
  bool dir_shared; /* the directory is held by another process: never written nor removed here */
  bool loaded;
  AneModelFailure failure;
} AneModel;

/* Compiles and loads the MIL (what names it in messages: "function 'main'"). */
bool ane_model_compile(AneModel *m, const AneFramework *fw, const AneSystem *sys, const char *what, const char *mil,
                       size_t mil_len, const AneWeightFile *weights, uint32_t nweights, char *why, size_t len);
/* ane_model_compile in its two steps: the descriptor, the model, its
 * directory and the device's compile; then the load. m->failure says how a
 * failed step failed (the model stays, for ane_model_free). */
bool ane_model_build(AneModel *m, const AneFramework *fw, const AneSystem *sys, const char *what, const char *mil,
                     size_t mil_len, const AneWeightFile *weights, uint32_t nweights, char *why, size_t len);
bool ane_model_load(AneModel *m, const AneFramework *fw, const AneSystem *sys, const char *what, char *why,
                    size_t len);
/* Unloads a loaded model (it stays compiled). */
void ane_model_unload(AneModel *m, const AneFramework *fw);
/* Writes the reference's directory again (after ane_model_remove_directory). */
bool ane_model_write_directory(AneModel *m, const AneFramework *fw, const char *mil, size_t mil_len,
                               const AneWeightFile *weights, uint32_t nweights, char *why, size_t len);
/* Removes the directory (one held by another process is left) and lets go
 * of its lock; the compiled model stays. */
void ane_model_remove_directory(AneModel *m);
/* Whether another process holds the model's directory (its lock): then
 * nothing here writes it, and weight updates of the model recompile. */
bool ane_model_dir_shared(const AneModel *m);
/* Unloads, releases and removes the directory; a zeroed model is fine. */
void ane_model_free(AneModel *m, const AneFramework *fw);

/* A request's surfaces, allocated once and reused across evaluations:
 * inputs[k] and outputs[k] are bound at index k, all of `bytes` bytes. */
typedef struct AneRequest {
  uint32_t ninputs, noutputs;
  uint64_t bytes;
  IOSurfaceRef *inputs, *outputs;
  id *objects; /* the _ANEIOSurfaceObjects, inputs then outputs (retained) */
  id request;  /* retained */
} AneRequest;

bool ane_request_make(AneRequest *r, const AneFramework *fw, const AneSystem *sys, uint32_t ninputs,
                      uint32_t noutputs, uint64_t bytes, uint32_t procedure, char *why, size_t len);
void ane_request_free(AneRequest *r, const AneFramework *fw, const AneSystem *sys);

/* Evaluates the loaded model on the request's surfaces. */
bool ane_model_evaluate(const AneModel *m, const AneFramework *fw, const AneRequest *r, const char *what, char *why,
                        size_t len);

#endif
