/*
 * The ane backend's IOSurfaces: the system functions it needs
 * (iosurface_port.h) resolved from opened libraries with dlsym — the
 * stand-in framework on Linux, CoreFoundation's and IOSurface's own on
 * macOS — so a missing one is a clear error; and a
 * surface made the way the reference makes its tensors (orion-reference.md
 * §3.1: width = bytes, height 1, one byte per element, bytes per row =
 * alloc size = bytes, pixel format 0).
 */
#ifndef ORION_ANE_IOSURFACE_H
#define ORION_ANE_IOSURFACE_H

#include <stdbool.h>
#include <stdint.h>

#include "iosurface_port.h"

typedef struct AneSystem {
  CFNumberRef (*number_create)(CFAllocatorRef, CFNumberType, const void *);
  CFDictionaryRef (*dictionary_create)(CFAllocatorRef, const void **, const void **, CFIndex,
                                       const CFDictionaryKeyCallBacks *, const CFDictionaryValueCallBacks *);
  CFDataRef (*data_create)(CFAllocatorRef, const uint8_t *, CFIndex);
  CFStringRef (*string_create)(CFAllocatorRef, const char *, CFStringEncoding);
  CFArrayRef (*array_create)(CFAllocatorRef, const void **, CFIndex, const CFArrayCallBacks *);
  void (*release)(CFTypeRef);
  IOSurfaceRef (*surface_create)(CFDictionaryRef);
  kern_return_t (*lock)(IOSurfaceRef, uint32_t, uint32_t *);
  kern_return_t (*unlock)(IOSurfaceRef, uint32_t, uint32_t *);
  void *(*base_address)(IOSurfaceRef);
  size_t (*alloc_size)(IOSurfaceRef);
  const CFDictionaryKeyCallBacks *key_callbacks;
  const CFDictionaryValueCallBacks *value_callbacks;
  const CFArrayCallBacks *array_callbacks;
  CFStringRef width, height, bytes_per_element, bytes_per_row, alloc_size_key, pixel_format;
} AneSystem;

/* Where the system functions are on macOS. */
#define ANE_COREFOUNDATION_PATH "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation"
#define ANE_IOSURFACE_PATH "/System/Library/Frameworks/IOSurface.framework/IOSurface"

/* Resolves the CoreFoundation functions and constants from cf and the
 * IOSurface ones from surface (dlopen'd libraries called cf_where and
 * surface_where, for the message); on failure writes into why a clause
 * naming the ane backend and the missing symbol. */
bool ane_system_bind_libraries(AneSystem *sys, void *cf, const char *cf_where, void *surface,
                               const char *surface_where, char *why, size_t len);

/* For the framework opened as handle (called where): off macOS, everything
 * from handle (the stand-in defines the system functions); on macOS from
 * ANE_COREFOUNDATION_PATH and ANE_IOSURFACE_PATH, opened here (handle is
 * not used). */
bool ane_system_bind(AneSystem *sys, void *handle, const char *where, char *why, size_t len);

/* A surface of bytes bytes (NULL if the system refuses it); free it with
 * sys->release. */
IOSurfaceRef ane_iosurface_create(const AneSystem *sys, uint64_t bytes);

#endif
