/*
 * Resolving the system functions and making surfaces (ane_iosurface.h).
 */
#include "ane_iosurface.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* dlsym's object pointer stored into a function pointer, as POSIX allows. */
static bool resolve(void *handle, const char *name, void *fn, size_t fn_size, const char *where, char *why,
                    size_t len) {
  void *sym = dlsym(handle, name);
  if (!sym) {
    snprintf(why, len, "the ane backend's framework '%s' lacks %s", where, name);
    return false;
  }
  memcpy(fn, &sym, fn_size);
  return true;
}

/* A constant: the variable's address, then its value. */
static bool resolve_string(void *handle, const char *name, CFStringRef *out, const char *where, char *why,
                           size_t len) {
  const CFStringRef *var = dlsym(handle, name);
  if (!var) {
    snprintf(why, len, "the ane backend's framework '%s' lacks %s", where, name);
    return false;
  }
  *out = *var;
  return true;
}

#define CF(field, name) resolve(cf, name, &sys->field, sizeof sys->field, cf_where, why, len)
#define SURFACE(field, name) resolve(surface, name, &sys->field, sizeof sys->field, surface_where, why, len)
#define SURFACE_KEY(field, name) resolve_string(surface, name, &sys->field, surface_where, why, len)

bool ane_system_bind_libraries(AneSystem *sys, void *cf, const char *cf_where, void *surface,
                               const char *surface_where, char *why, size_t len) {
  memset(sys, 0, sizeof *sys);
  bool ok = CF(number_create, "CFNumberCreate") && CF(dictionary_create, "CFDictionaryCreate") &&
            CF(data_create, "CFDataCreate") && CF(string_create, "CFStringCreateWithCString") &&
            CF(array_create, "CFArrayCreate") && CF(release, "CFRelease") &&
            SURFACE(surface_create, "IOSurfaceCreate") && SURFACE(lock, "IOSurfaceLock") &&
            SURFACE(unlock, "IOSurfaceUnlock") && SURFACE(base_address, "IOSurfaceGetBaseAddress") &&
            SURFACE(alloc_size, "IOSurfaceGetAllocSize");
  if (ok) {
    sys->key_callbacks = dlsym(cf, "kCFTypeDictionaryKeyCallBacks");
    sys->value_callbacks = dlsym(cf, "kCFTypeDictionaryValueCallBacks");
    sys->array_callbacks = dlsym(cf, "kCFTypeArrayCallBacks");
    if (!sys->key_callbacks || !sys->value_callbacks || !sys->array_callbacks) {
      snprintf(why, len, "the ane backend's framework '%s' lacks %s", cf_where,
               !sys->key_callbacks     ? "kCFTypeDictionaryKeyCallBacks"
               : !sys->value_callbacks ? "kCFTypeDictionaryValueCallBacks"
                                       : "kCFTypeArrayCallBacks");
      ok = false;
    }
  }
  ok = ok && SURFACE_KEY(width, "kIOSurfaceWidth") && SURFACE_KEY(height, "kIOSurfaceHeight") &&
       SURFACE_KEY(bytes_per_element, "kIOSurfaceBytesPerElement") &&
       SURFACE_KEY(bytes_per_row, "kIOSurfaceBytesPerRow") && SURFACE_KEY(alloc_size_key, "kIOSurfaceAllocSize") &&
       SURFACE_KEY(pixel_format, "kIOSurfacePixelFormat");
  if (!ok) memset(sys, 0, sizeof *sys);
  return ok;
}

#if defined(__APPLE__)
/* Never built yet (docs/ane-backend.md, "The macOS build"). The system's
 * own libraries, not whatever AppleNeuralEngine.framework happens to
 * link: the functions are CoreFoundation's and IOSurface's API. Their
 * handles stay open while sys is in use and are not closed after: both
 * are in the system's shared cache, which is never unmapped, so a dlclose
 * would only count a reference down. */
bool ane_system_bind(AneSystem *sys, void *handle, const char *where, char *why, size_t len) {
  (void)handle, (void)where;
  void *cf = dlopen(ANE_COREFOUNDATION_PATH, RTLD_NOW | RTLD_LOCAL);
  void *surface = cf ? dlopen(ANE_IOSURFACE_PATH, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!surface) {
    const char *error = dlerror();
    snprintf(why, len, "the ane backend cannot open '%s': %s", cf ? ANE_IOSURFACE_PATH : ANE_COREFOUNDATION_PATH,
             error ? error : "unknown error");
    if (cf) dlclose(cf);
    memset(sys, 0, sizeof *sys);
    return false;
  }
  if (ane_system_bind_libraries(sys, cf, ANE_COREFOUNDATION_PATH, surface, ANE_IOSURFACE_PATH, why, len))
    return true;
  dlclose(surface);
  dlclose(cf);
  return false;
}
#else
/* The stand-in framework defines the functions itself. */
bool ane_system_bind(AneSystem *sys, void *handle, const char *where, char *why, size_t len) {
  return ane_system_bind_libraries(sys, handle, where, handle, where, why, len);
}
#endif

IOSurfaceRef ane_iosurface_create(const AneSystem *sys, uint64_t bytes) {
  int64_t width = (int64_t)bytes, one = 1, zero = 0;
  const void *keys[] = {sys->width, sys->height, sys->bytes_per_element, sys->bytes_per_row, sys->alloc_size_key,
                        sys->pixel_format};
  const int64_t *values[] = {&width, &one, &one, &width, &width, &zero};
  enum { N = sizeof keys / sizeof *keys };
  const void *numbers[N];
  CFIndex made = 0;
  for (; made < N; made++) {
    numbers[made] = sys->number_create(NULL, kCFNumberSInt64Type, values[made]);
    if (!numbers[made]) break;
  }
  IOSurfaceRef s = NULL;
  if (made == N) {
    CFDictionaryRef props = sys->dictionary_create(NULL, keys, numbers, N, sys->key_callbacks, sys->value_callbacks);
    if (props) {
      s = sys->surface_create(props);
      sys->release(props);
    }
  }
  for (CFIndex i = 0; i < made; i++) sys->release(numbers[i]);
  return s;
}
