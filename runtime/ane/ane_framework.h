/*
 * The ane backend's binding to AppleNeuralEngine.framework (or to the
 * Linux stand-in, testsuite/ane/): the framework opened with dlopen, the
 * classes the lifecycle needs looked up, and every selector it sends
 * checked with respondsToSelector: — where the framework has drifted
 * (docs/ane-backend.md, the variants of peers.md §4.7), the known variants
 * are probed in order and the one found is recorded. A framework that is
 * missing or lacks a class or selector is a clear error at open, not a
 * crash at the first message.
 */
#ifndef ORION_ANE_FRAMEWORK_H
#define ORION_ANE_FRAMEWORK_H

#include <stdbool.h>
#include <stddef.h>

#include "objc_port.h"

/* Where the framework is: the environment variable names another file (the
 * stand-in's shared library in the tests); the default is Apple's. */
#define ANE_FRAMEWORK_ENV "ORION_ANE_FRAMEWORK"
#define ANE_FRAMEWORK_DEFAULT "/System/Library/PrivateFrameworks/AppleNeuralEngine.framework/AppleNeuralEngine"

/* A variant of the descriptor factory (peers.md §4.7; docs/ane-backend.md
 * says which the dumped frameworks have). A class method is sent to the
 * descriptor class and returns an autoreleased object; an instance method
 * is an initializer sent to a fresh +alloc, checked with
 * instancesRespondToSelector:, and returns an object the caller owns. */
typedef struct AneDescriptorVariant {
  const char *selector;
  bool instance;
  bool takes_is_mil; /* a last BOOL argument, isMILModel: (YES: the text is MIL) */
} AneDescriptorVariant;

/* The variants in the order they are probed (the Go binding's). */
extern const AneDescriptorVariant ane_descriptor_variants[];
extern const size_t ane_descriptor_variant_count;

/* "+" for a class method, "-" for an instance method. */
const char *ane_descriptor_variant_kind(const AneDescriptorVariant *v);

/* Writes the variants in probe order, "+a, -b, +c", into out[len]. */
void ane_descriptor_variants_list(char *out, size_t len);

typedef struct AneFramework {
  void *handle;
  const char *path;
  AneObjc objc; /* the Objective-C runtime's functions, through handle */
  Class descriptor, model, request, surface_object;
  /* The descriptor factory that was found (a variant), its selector and
   * name; descriptor_alloc is +alloc, bound only for an instance variant. */
  const AneDescriptorVariant *descriptor_variant;
  SEL descriptor_from_mil, descriptor_alloc;
  const char *descriptor_from_mil_name;
  SEL model_from_descriptor, compile, load, evaluate, unload, request_new, surface_object_new, hex_identifier;
  /* The runtime's autorelease pool (the framework's factories autorelease):
   * libobjc's on Apple, found through the framework's handle; the
   * stand-in's own on Linux. */
  void *(*pool_push)(void);
  void (*pool_pop)(void *);
} AneFramework;

/* The framework's path: path if given, else $ORION_ANE_FRAMEWORK if set,
 * else ANE_FRAMEWORK_DEFAULT. */
const char *ane_framework_path(const char *path);

/* Opens the framework at ane_framework_path(path) and binds it. On failure
 * writes into why a clause naming the ane backend (no final period) and
 * returns false. */
bool ane_framework_open(AneFramework *fw, const char *path, char *why, size_t len);

/* Whether class cls answers the class method sel (respondsToSelector:,
 * sent only once the class is known to answer that). */
bool ane_framework_class_responds(const AneFramework *fw, Class cls, SEL sel);

/* Forgets the binding. The library stays mapped: an Objective-C runtime
 * cannot unregister the classes a framework brought. */
void ane_framework_close(AneFramework *fw);

#endif
