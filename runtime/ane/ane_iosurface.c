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

#define RESOLVE(field, name) resolve(handle, name, &sys->field, sizeof sys->field, where, why, len)

bool ane_system_bind(AneSystem *sys, void *handle, const char *where, char *why, size_t len) {
  memset(sys, 0, sizeof *sys);
  bool ok = RESOLVE(number_create, "CFNumberCreate") && RESOLVE(dictionary_create, "CFDictionaryCreate") &&
            RESOLVE(data_create, "CFDataCreate") && RESOLVE(string_create, "CFStringCreateWithCString") &&
            RESOLVE(array_create, "CFArrayCreate") &&
            RESOLVE(release, "CFRelease") && RESOLVE(surface_create, "IOSurfaceCreate") &&
            RESOLVE(lock, "IOSurfaceLock") && RESOLVE(unlock, "IOSurfaceUnlock") &&
            RESOLVE(base_address, "IOSurfaceGetBaseAddress") && RESOLVE(alloc_size, "IOSurfaceGetAllocSize");
  if (ok) {
    sys->key_callbacks = dlsym(handle, "kCFTypeDictionaryKeyCallBacks");
    sys->value_callbacks = dlsym(handle, "kCFTypeDictionaryValueCallBacks");
    sys->array_callbacks = dlsym(handle, "kCFTypeArrayCallBacks");
    if (!sys->key_callbacks || !sys->value_callbacks || !sys->array_callbacks) {
      snprintf(why, len, "the ane backend's framework '%s' lacks %s", where,
               !sys->key_callbacks     ? "kCFTypeDictionaryKeyCallBacks"
               : !sys->value_callbacks ? "kCFTypeDictionaryValueCallBacks"
                                       : "kCFTypeArrayCallBacks");
      ok = false;
    }
  }
  ok = ok && resolve_string(handle, "kIOSurfaceWidth", &sys->width, where, why, len) &&
       resolve_string(handle, "kIOSurfaceHeight", &sys->height, where, why, len) &&
       resolve_string(handle, "kIOSurfaceBytesPerElement", &sys->bytes_per_element, where, why, len) &&
       resolve_string(handle, "kIOSurfaceBytesPerRow", &sys->bytes_per_row, where, why, len) &&
       resolve_string(handle, "kIOSurfaceAllocSize", &sys->alloc_size_key, where, why, len) &&
       resolve_string(handle, "kIOSurfacePixelFormat", &sys->pixel_format, where, why, len);
  if (!ok) memset(sys, 0, sizeof *sys);
  return ok;
}

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
