/*
 * What the ane backend's limits, program cache and weight updates need from
 * a device: a small table of operations (function pointers and a context)
 * that the real backend implements over the framework's lifecycle and the
 * tests implement with a fake device. Pure C, built on every host.
 */
#ifndef ORION_ANE_DEVICE_H
#define ORION_ANE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a device failure should be treated. The zero value is a rejection, so
 * an implementation that does not classify its errors is never retried: a
 * retry loop must not hammer the shared compile service by accident. */
typedef enum AneFailureKind {
  ANE_FAILURE_REJECTED,  /* the device refuses this program: the same request fails again */
  ANE_FAILURE_TRANSIENT, /* the service failed or restarted: the same request may succeed later */
} AneFailureKind;

typedef struct AneDeviceError {
  int64_t code;        /* the device's error code (NSError code, 0x50004, ...), 0 if none */
  AneFailureKind kind;
  char message[256];   /* the device's description, NUL-terminated ("" if none) */
} AneDeviceError;

/* A program to compile: the package content and what the compiled image
 * depends on besides it. Weights are given as bytes, or (when the caller
 * has them) as the manifest's checksums of them; exactly one of the two. */
typedef struct AneProgramSource {
  const char *name;            /* for messages: the package or function */
  const char *mil_text;        /* the MIL program text */
  size_t mil_len;
  const void *weights;         /* the weight file's bytes, or NULL */
  size_t weights_len;
  const char *weights_digest;  /* or the manifest's weight checksums (one text), or NULL */
  const char *os_build;        /* "25F84": the compiler that made the image */
  const char *ane_arch;        /* "h16": the device it is for */
  bool weights_as_inputs;      /* the program takes its weights as inputs (a different program) */
} AneProgramSource;

/* The lifecycle, as the backend has it. A program handle is the device's
 * own (an in-memory model); these functions never see it inside. */
typedef struct AneDeviceOps {
  void *ctx;
  /* Compiles src into a new program handle (not loaded). */
  bool (*compile)(void *ctx, const AneProgramSource *src, void **program, AneDeviceError *err);
  /* Compiles an existing program again from what it has on disk now. */
  bool (*recompile)(void *ctx, void *program, AneDeviceError *err);
  bool (*load)(void *ctx, void *program, AneDeviceError *err);
  void (*unload)(void *ctx, void *program);
  /* Frees a program that is not loaded. */
  void (*release)(void *ctx, void *program);
} AneDeviceOps;

#endif
