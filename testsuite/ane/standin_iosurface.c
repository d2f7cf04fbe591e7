/*
 * The stand-in's IOSurface and CoreFoundation functions (runtime/ane/
 * iosurface_port.h): enough for the ane backend to make, lock and free its
 * surfaces and to pass the framework its MIL, weights and request arrays. A
 * surface is zeroed memory of the property dictionary's kIOSurfaceAllocSize
 * bytes; numbers, strings, data, arrays and dictionaries are tagged objects
 * that CFRelease frees (no reference counts: the backend releases each once,
 * and the stand-in's objects copy what they keep). standin_cf.h is how the
 * stand-in's classes read them.
 */
#include <stdlib.h>
#include <string.h>

#include "iosurface_port.h"
#include "standin_cf.h"

typedef enum {
  STANDIN_NUMBER = 0x4e554d42,
  STANDIN_DICTIONARY = 0x44494354,
  STANDIN_SURFACE = 0x53555246,
  STANDIN_STRING = 0x53545247,
  STANDIN_CONSTANT_STRING = 0x4b535452,
  STANDIN_DATA = 0x44415441,
  STANDIN_ARRAY = 0x41525259
} Tag;

struct __CFString {
  Tag tag;
  const char *name;
};
struct __CFData {
  Tag tag;
  CFIndex len;
  uint8_t *bytes;
};
struct __CFArray {
  Tag tag;
  CFIndex count;
  const void **values;
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
struct CFArrayCallBacks {
  int unused;
};

const CFDictionaryKeyCallBacks kCFTypeDictionaryKeyCallBacks = {0};
const CFDictionaryValueCallBacks kCFTypeDictionaryValueCallBacks = {0};
const CFArrayCallBacks kCFTypeArrayCallBacks = {0};
#define CONSTANT(name) {STANDIN_CONSTANT_STRING, name}
static const struct __CFString width = CONSTANT("IOSurfaceWidth"), height = CONSTANT("IOSurfaceHeight"),
                               bytes_per_element = CONSTANT("IOSurfaceBytesPerElement"),
                               bytes_per_row = CONSTANT("IOSurfaceBytesPerRow"),
                               alloc_size = CONSTANT("IOSurfaceAllocSize"),
                               pixel_format = CONSTANT("IOSurfacePixelFormat");
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
  if (count) { /* an empty dictionary may come with NULL arrays, as CoreFoundation allows */
    memcpy(d->keys, keys, (size_t)count * sizeof *keys);
    memcpy(d->values, values, (size_t)count * sizeof *values);
  }
  return d;
}

static Tag tag_of(CFTypeRef object) {
  Tag tag;
  memcpy(&tag, object, sizeof tag);
  return tag;
}

CFDataRef CFDataCreate(CFAllocatorRef allocator, const uint8_t *bytes, CFIndex length) {
  struct __CFData *d = calloc(1, sizeof *d);
  if (!d || length < 0) {
    free(d);
    return NULL;
  }
  d->tag = STANDIN_DATA;
  d->len = length;
  d->bytes = malloc(length ? (size_t)length : 1);
  if (!d->bytes) {
    free(d);
    return NULL;
  }
  if (length) memcpy(d->bytes, bytes, (size_t)length);
  return d;
}

CFStringRef CFStringCreateWithCString(CFAllocatorRef allocator, const char *text, CFStringEncoding encoding) {
  if (encoding != kCFStringEncodingUTF8) return NULL;
  struct __CFString *s = malloc(sizeof *s);
  char *copy = malloc(strlen(text) + 1);
  if (!s || !copy) {
    free(s);
    free(copy);
    return NULL;
  }
  strcpy(copy, text);
  s->tag = STANDIN_STRING;
  s->name = copy;
  return s;
}

CFArrayRef CFArrayCreate(CFAllocatorRef allocator, const void **values, CFIndex count,
                         const CFArrayCallBacks *callbacks) {
  struct __CFArray *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->tag = STANDIN_ARRAY;
  a->count = count;
  a->values = malloc((size_t)(count ? count : 1) * sizeof *a->values);
  if (!a->values) {
    free(a);
    return NULL;
  }
  if (count) memcpy(a->values, values, (size_t)count * sizeof *values);
  return a;
}

void CFRelease(CFTypeRef object) {
  Tag tag = tag_of(object);
  if (tag == STANDIN_CONSTANT_STRING) return;
  if (tag == STANDIN_STRING) free((void *)(uintptr_t)((CFStringRef)object)->name);
  if (tag == STANDIN_DATA) free(((struct __CFData *)(uintptr_t)object)->bytes);
  if (tag == STANDIN_ARRAY) free(((struct __CFArray *)(uintptr_t)object)->values);
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

static unsigned long surfaces_made;

unsigned long ane_standin_surface_count(void) { return surfaces_made; }

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
  surfaces_made++;
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

/* ---- reading them (standin_cf.h) ---- */

static bool is(const void *object, Tag tag) { return object && tag_of(object) == tag; }

const char *standin_cf_string(const void *object) {
  return is(object, STANDIN_STRING) || is(object, STANDIN_CONSTANT_STRING) ? ((CFStringRef)object)->name : NULL;
}

const uint8_t *standin_cf_data(const void *object, size_t *len) {
  if (!is(object, STANDIN_DATA)) return NULL;
  *len = (size_t)((CFDataRef)object)->len;
  return ((CFDataRef)object)->bytes;
}

bool standin_cf_number(const void *object, int64_t *value) {
  if (!is(object, STANDIN_NUMBER)) return false;
  *value = ((CFNumberRef)object)->value;
  return true;
}

long standin_cf_count(const void *object) {
  if (is(object, STANDIN_ARRAY)) return ((CFArrayRef)object)->count;
  if (is(object, STANDIN_DICTIONARY)) return ((CFDictionaryRef)object)->count;
  return -1;
}

const void *standin_cf_array_at(const void *array, long i) { return ((CFArrayRef)array)->values[i]; }

const void *standin_cf_dictionary_key(const void *dict, long i) { return ((CFDictionaryRef)dict)->keys[i]; }

const void *standin_cf_dictionary_value(const void *dict, long i) { return ((CFDictionaryRef)dict)->values[i]; }

const void *standin_cf_dictionary_get(const void *dict, const char *key) {
  if (!is(dict, STANDIN_DICTIONARY)) return NULL;
  CFDictionaryRef d = dict;
  for (CFIndex i = 0; i < d->count; i++) {
    const char *k = standin_cf_string(d->keys[i]);
    if (k && !strcmp(k, key)) return d->values[i];
  }
  return NULL;
}
