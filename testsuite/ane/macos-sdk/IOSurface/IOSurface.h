/* The IOSurface declarations the ane backend's Apple branch uses, for a
 * compile check on Linux (../README.md); signatures as Apple documents them. */
#pragma once
#include <CoreFoundation/CoreFoundation.h>

typedef struct __IOSurface *IOSurfaceRef;
typedef int kern_return_t;
enum { kIOSurfaceLockReadOnly = 1 };

IOSurfaceRef IOSurfaceCreate(CFDictionaryRef properties);
kern_return_t IOSurfaceLock(IOSurfaceRef buffer, uint32_t options, uint32_t *seed);
kern_return_t IOSurfaceUnlock(IOSurfaceRef buffer, uint32_t options, uint32_t *seed);
void *IOSurfaceGetBaseAddress(IOSurfaceRef buffer);
size_t IOSurfaceGetAllocSize(IOSurfaceRef buffer);

extern const CFStringRef kIOSurfaceWidth, kIOSurfaceHeight, kIOSurfaceBytesPerElement, kIOSurfaceBytesPerRow,
    kIOSurfaceAllocSize, kIOSurfacePixelFormat;
