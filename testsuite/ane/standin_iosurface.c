/*
 * The stand-in's IOSurface and CoreFoundation functions (runtime/ane/
 * iosurface_port.h): enough for the ane backend to make, lock and free its
 * surfaces. A surface is zeroed memory of the property dictionary's
 * kIOSurfaceAllocSize bytes; numbers and dictionaries are tagged objects
 * that CFRelease frees (no reference counts: the backend releases each once).
 */
#include <stdlib.h>
#include <string.h>

#include "iosurface_port.h"

typedef enum { STANDIN_NUMBER = 0x4e554d42, STANDIN_DICTIONARY = 0x44494354, STANDIN_SURFACE = 0x53555246 } Tag;

struct __CFString {
  const char *name;
};
struct __CFNumber {
  Tag tag;
  int64_t value;
};
struct __CFDictionary {
  Tag tag;
  CFIndex count;
  const void **keys, **values;
};
struct __IOSurface {
  Tag tag;
  size_t size;
  void *base;
  int locks;
};
struct CFDictionaryKeyCallBacks {
  int unused;
};
struct CFDictionaryValueCallBacks {
  int unused;
};

const CFDictionaryKeyCallBacks kCFTypeDictionaryKeyCallBacks = {0};
const CFDictionaryValueCallBacks kCFTypeDictionaryValueCallBacks = {0};
static const struct __CFString width = {"IOSurfaceWidth"}, height = {"IOSurfaceHeight"},
                               bytes_per_element = {"IOSurfaceBytesPerElement"},
                               bytes_per_row = {"IOSurfaceBytesPerRow"}, alloc_size = {"IOSurfaceAllocSize"},
                               pixel_format = {"IOSurfacePixelFormat"};
const CFStringRef kIOSurfaceWidth = &width, kIOSurfaceHeight = &height, kIOSurfaceBytesPerElement = &bytes_per_element,
                  kIOSurfaceBytesPerRow = &bytes_per_row, kIOSurfaceAllocSize = &alloc_size,
                  kIOSurfacePixelFormat = &pixel_format;

CFNumberRef CFNumberCreate(CFAllocatorRef allocator, CFNumberType type, const void *value) {
  if (type != kCFNumberSInt64Type) return NULL;
  struct __CFNumber *n = malloc(sizeof *n);
  if (!n) return NULL;
  n->tag = STANDIN_NUMBER;
  memcpy(&n->value, value, sizeof n->value);
  return n;
}

CFDictionaryRef CFDictionaryCreate(CFAllocatorRef allocator, const void **keys, const void **values, CFIndex count,
                                   const CFDictionaryKeyCallBacks *key_callbacks,
                                   const CFDictionaryValueCallBacks *value_callbacks) {
  struct __CFDictionary *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->tag = STANDIN_DICTIONARY;
  d->count = count;
  d->keys = malloc((size_t)(count ? count : 1) * sizeof *d->keys);
  d->values = malloc((size_t)(count ? count : 1) * sizeof *d->values);
  if (!d->keys || !d->values) {
    CFRelease(d);
    return NULL;
  }
  memcpy(d->keys, keys, (size_t)count * sizeof *keys);
  memcpy(d->values, values, (size_t)count * sizeof *values);
  return d;
}

void CFRelease(CFTypeRef object) {
  Tag tag;
  memcpy(&tag, object, sizeof tag);
  if (tag == STANDIN_DICTIONARY) {
    struct __CFDictionary *d = (struct __CFDictionary *)(uintptr_t)object;
    free(d->keys);
    free(d->values);
  } else if (tag == STANDIN_SURFACE) {
    free(((struct __IOSurface *)(uintptr_t)object)->base);
  }
  free((void *)(uintptr_t)object);
}

static int64_t property(CFDictionaryRef d, CFStringRef key) {
  for (CFIndex i = 0; i < d->count; i++)
    if (d->keys[i] == key) return ((CFNumberRef)d->values[i])->value;
  return -1;
}

/* As the system does: NULL when the size is missing or the rows do not fit it. */
IOSurfaceRef IOSurfaceCreate(CFDictionaryRef properties) {
  int64_t size = property(properties, kIOSurfaceAllocSize);
  int64_t row = property(properties, kIOSurfaceBytesPerRow), rows = property(properties, kIOSurfaceHeight);
  if (size <= 0 || row <= 0 || rows <= 0 || row * rows > size) return NULL;
  struct __IOSurface *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->tag = STANDIN_SURFACE;
  s->size = (size_t)size;
  s->base = calloc(1, s->size);
  if (!s->base) {
    free(s);
    return NULL;
  }
  return s;
}

kern_return_t IOSurfaceLock(IOSurfaceRef surface, uint32_t options, uint32_t *seed) {
  surface->locks++;
  return 0;
}

kern_return_t IOSurfaceUnlock(IOSurfaceRef surface, uint32_t options, uint32_t *seed) {
  if (surface->locks == 0) return 1; /* unlocking what is not locked: an error, as on the system */
  surface->locks--;
  return 0;
}

/* Stricter than the system, which returns the address at any time: only
 * while locked, so a backend that touches a surface outside a lock is caught. */
void *IOSurfaceGetBaseAddress(IOSurfaceRef surface) { return surface->locks ? surface->base : NULL; }

size_t IOSurfaceGetAllocSize(IOSurfaceRef surface) { return surface->size; }
