/*
 * The few IOSurface and CoreFoundation functions the ane backend calls to
 * make its surfaces and the framework's arguments (the MIL as data, the
 * weights dictionary, the request's arrays: CoreFoundation objects that are
 * toll-free bridged to NSData, NSString, NSDictionary, NSNumber and NSArray
 * on Apple). On Apple they are the system's; elsewhere this header
 * declares them with the system's signatures (opaque types, the constants
 * it uses) and the stand-in framework (testsuite/ane/standin_iosurface.c)
 * defines them. The backend resolves them with dlsym (ane_iosurface.c), so
 * neither build links them.
 */
#ifndef ORION_ANE_IOSURFACE_PORT_H
#define ORION_ANE_IOSURFACE_PORT_H

#if defined(__APPLE__)
#include <CoreFoundation/CoreFoundation.h>
#include <IOSurface/IOSurface.h>
#else
#include <stddef.h>
#include <stdint.h>

typedef const void *CFTypeRef;
typedef long CFIndex;
typedef const struct __CFAllocator *CFAllocatorRef;
typedef const struct __CFString *CFStringRef;
typedef const struct __CFNumber *CFNumberRef;
typedef const struct __CFDictionary *CFDictionaryRef;
typedef const struct __CFData *CFDataRef;
typedef const struct __CFArray *CFArrayRef;
typedef uint32_t CFStringEncoding;
typedef struct CFArrayCallBacks CFArrayCallBacks;
typedef struct __IOSurface *IOSurfaceRef;
typedef struct CFDictionaryKeyCallBacks CFDictionaryKeyCallBacks;
typedef struct CFDictionaryValueCallBacks CFDictionaryValueCallBacks;
typedef CFIndex CFNumberType;
typedef int kern_return_t;
enum { kCFNumberSInt64Type = 4 };
enum { kCFStringEncodingUTF8 = 0x08000100 };
enum { kIOSurfaceLockReadOnly = 1 };

CFNumberRef CFNumberCreate(CFAllocatorRef allocator, CFNumberType type, const void *value);
CFDictionaryRef CFDictionaryCreate(CFAllocatorRef allocator, const void **keys, const void **values, CFIndex count,
                                   const CFDictionaryKeyCallBacks *key_callbacks,
                                   const CFDictionaryValueCallBacks *value_callbacks);
CFDataRef CFDataCreate(CFAllocatorRef allocator, const uint8_t *bytes, CFIndex length);
CFStringRef CFStringCreateWithCString(CFAllocatorRef allocator, const char *text, CFStringEncoding encoding);
CFArrayRef CFArrayCreate(CFAllocatorRef allocator, const void **values, CFIndex count,
                         const CFArrayCallBacks *callbacks);
void CFRelease(CFTypeRef object);
IOSurfaceRef IOSurfaceCreate(CFDictionaryRef properties);
kern_return_t IOSurfaceLock(IOSurfaceRef surface, uint32_t options, uint32_t *seed);
kern_return_t IOSurfaceUnlock(IOSurfaceRef surface, uint32_t options, uint32_t *seed);
void *IOSurfaceGetBaseAddress(IOSurfaceRef surface);
size_t IOSurfaceGetAllocSize(IOSurfaceRef surface);

extern const CFDictionaryKeyCallBacks kCFTypeDictionaryKeyCallBacks;
extern const CFDictionaryValueCallBacks kCFTypeDictionaryValueCallBacks;
extern const CFArrayCallBacks kCFTypeArrayCallBacks;
extern const CFStringRef kIOSurfaceWidth, kIOSurfaceHeight, kIOSurfaceBytesPerElement, kIOSurfaceBytesPerRow,
    kIOSurfaceAllocSize, kIOSurfacePixelFormat;
#endif

#endif
