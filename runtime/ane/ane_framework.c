/*
 * Binding the ane backend to the framework (ane_framework.h). The names are
 * the ones the reference system and its peers use (orion-reference.md §3.1,
 * peers.md §4.7); the descriptor factory has drifted across macOS
 * versions, so its variants are tried in the order the Go binding probes
 * them.
 */
#include "ane_framework.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef BOOL (*RespondsFn)(id, SEL, SEL);

/* The descriptor factory's variants in the Go binding's order: the class
 * factory with the MIL flag, the initializer (the one the macOS 15.4.1 and
 * 16.4.1 header dumps show beside the older factory), then the factory the
 * reference and every stored peer send. */
const AneDescriptorVariant ane_descriptor_variants[] = {
    {"modelWithMILText:weights:optionsPlist:isMILModel:", false, true},
    {"initWithNetworkText:weights:optionsPlist:isMILModel:", true, true},
    {"modelWithMILText:weights:optionsPlist:", false, false},
};
const size_t ane_descriptor_variant_count = sizeof ane_descriptor_variants / sizeof *ane_descriptor_variants;

const char *ane_descriptor_variant_kind(const AneDescriptorVariant *v) { return v->instance ? "-" : "+"; }

void ane_descriptor_variants_list(char *out, size_t len) {
  size_t at = 0;
  if (len) out[0] = '\0';
  for (size_t i = 0; i < ane_descriptor_variant_count && at < len; i++) {
    const AneDescriptorVariant *v = &ane_descriptor_variants[i];
    int n = snprintf(out + at, len - at, "%s%s%s", i ? ", " : "", ane_descriptor_variant_kind(v), v->selector);
    if (n < 0) break;
    at += (size_t)n;
  }
}

const char *ane_framework_path(const char *path) {
  if (path) return path;
  const char *env = getenv(ANE_FRAMEWORK_ENV);
  return env && *env ? env : ANE_FRAMEWORK_DEFAULT;
}

/* Sends query (respondsToSelector: or instancesRespondToSelector:) to a
 * class object, having first made sure the class answers it at all. */
static bool class_answers(const AneObjc *o, Class cls, const char *query, SEL sel) {
  SEL q = o->sel(query);
  if (!o->class_responds(o->meta_class(o->class_name(cls)), q)) return false;
  return ANE_SEND(o, cls, q, RespondsFn)((id)cls, q, sel) != 0;
}

static bool bind_class(AneFramework *fw, Class *out, const char *name, char *why, size_t len) {
  *out = fw->objc.get_class(name);
  if (!*out) snprintf(why, len, "the ane backend's framework '%s' has no class %s", fw->path, name);
  return *out != NULL;
}

/* A class method (factory) of cls, or an instance method of its objects. */
static bool bind_selector(AneFramework *fw, SEL *out, Class cls, bool instance, const char *name, char *why,
                          size_t len) {
  SEL sel = fw->objc.sel(name);
  if (!class_answers(&fw->objc, cls, instance ? "instancesRespondToSelector:" : "respondsToSelector:", sel)) {
    snprintf(why, len, "the ane backend's framework '%s': %s does not respond to %s%s", fw->path,
             fw->objc.class_name(cls), instance ? "-" : "+", name);
    return false;
  }
  *out = sel;
  return true;
}

/* The first variant the descriptor class answers; an initializer also
 * needs the class's +alloc. */
static bool bind_descriptor_factory(AneFramework *fw, char *why, size_t len) {
  for (size_t i = 0; i < ane_descriptor_variant_count; i++) {
    const AneDescriptorVariant *v = &ane_descriptor_variants[i];
    SEL sel = fw->objc.sel(v->selector);
    if (!class_answers(&fw->objc, fw->descriptor, v->instance ? "instancesRespondToSelector:" : "respondsToSelector:",
                       sel))
      continue;
    if (v->instance && !bind_selector(fw, &fw->descriptor_alloc, fw->descriptor, false, "alloc", why, len))
      return false;
    fw->descriptor_variant = v;
    fw->descriptor_from_mil = sel;
    fw->descriptor_from_mil_name = v->selector;
    return true;
  }
  char variants[512];
  ane_descriptor_variants_list(variants, sizeof variants);
  snprintf(why, len, "the ane backend's framework '%s': _ANEInMemoryModelDescriptor responds to none of %s",
           fw->path, variants);
  return false;
}

/* dlsym's object pointer stored into a function pointer, as POSIX allows. */
static bool resolve(AneFramework *fw, const char *name, void *fn, size_t fn_size, char *why, size_t len) {
  void *sym = dlsym(fw->handle, name);
  if (!sym) {
    snprintf(why, len, "the ane backend's framework '%s' lacks %s (the Objective-C runtime's)", fw->path, name);
    return false;
  }
  memcpy(fn, &sym, fn_size);
  return true;
}

#define RESOLVE(field, name) resolve(fw, name, &fw->objc.field, sizeof fw->objc.field, why, len)

/* The Objective-C runtime the framework was linked with. */
static bool bind_objc(AneFramework *fw, char *why, size_t len) {
  return RESOLVE(get_class, "objc_getClass") && RESOLVE(sel, "sel_registerName") &&
         RESOLVE(meta_class, "objc_getMetaClass") && RESOLVE(class_responds, "class_respondsToSelector") &&
         RESOLVE(class_name, "class_getName") &&
#if defined(__APPLE__)
         RESOLVE(msg_send, "objc_msgSend");
#else
         RESOLVE(msg_lookup, "objc_msg_lookup");
#endif
}

/* dlsym's object pointers stored into function pointers, as POSIX allows. */
static bool bind_pool(AneFramework *fw, char *why, size_t len) {
  void *push = dlsym(fw->handle, "objc_autoreleasePoolPush"), *pop = dlsym(fw->handle, "objc_autoreleasePoolPop");
  if (!push || !pop) {
    snprintf(why, len, "the ane backend's framework '%s' lacks %s", fw->path,
             push ? "objc_autoreleasePoolPop" : "objc_autoreleasePoolPush");
    return false;
  }
  memcpy(&fw->pool_push, &push, sizeof push);
  memcpy(&fw->pool_pop, &pop, sizeof pop);
  return true;
}

bool ane_framework_open(AneFramework *fw, const char *path, char *why, size_t len) {
  memset(fw, 0, sizeof *fw);
  fw->path = ane_framework_path(path);
  fw->handle = dlopen(fw->path, RTLD_NOW | RTLD_LOCAL);
  if (!fw->handle) {
    const char *err = dlerror();
    snprintf(why, len, "the ane backend cannot open its framework '%s' (set %s to another path): %s", fw->path,
             ANE_FRAMEWORK_ENV, err ? err : "unknown error");
    return false;
  }
  bool ok = bind_objc(fw, why, len) && bind_class(fw, &fw->descriptor, "_ANEInMemoryModelDescriptor", why, len) &&
            bind_class(fw, &fw->model, "_ANEInMemoryModel", why, len) &&
            bind_class(fw, &fw->request, "_ANERequest", why, len) &&
            bind_class(fw, &fw->surface_object, "_ANEIOSurfaceObject", why, len) &&
            bind_descriptor_factory(fw, why, len) &&
            bind_selector(fw, &fw->model_from_descriptor, fw->model, false, "inMemoryModelWithDescriptor:", why,
                          len) &&
            bind_selector(fw, &fw->compile, fw->model, true, "compileWithQoS:options:error:", why, len) &&
            bind_selector(fw, &fw->load, fw->model, true, "loadWithQoS:options:error:", why, len) &&
            bind_selector(fw, &fw->evaluate, fw->model, true, "evaluateWithQoS:options:request:error:", why, len) &&
            bind_selector(fw, &fw->unload, fw->model, true, "unloadWithQoS:error:", why, len) &&
            bind_selector(fw, &fw->request_new, fw->request, false,
                          "requestWithInputs:inputIndices:outputs:outputIndices:weightsBuffer:perfStats:"
                          "procedureIndex:",
                          why, len) &&
            bind_selector(fw, &fw->surface_object_new, fw->surface_object, false, "objectWithIOSurface:", why, len) &&
            bind_selector(fw, &fw->hex_identifier, fw->model, true, "hexStringIdentifier", why, len) &&
            bind_pool(fw, why, len);
  if (!ok) ane_framework_close(fw);
  return ok;
}

bool ane_framework_class_responds(const AneFramework *fw, Class cls, SEL sel) {
  return class_answers(&fw->objc, cls, "respondsToSelector:", sel);
}

void ane_framework_close(AneFramework *fw) { memset(fw, 0, sizeof *fw); }
