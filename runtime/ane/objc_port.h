/*
 * The one place the ane backend differs between Apple's Objective-C runtime
 * and the GNU one (libobjc, which the Linux stand-in framework is built
 * against): how a message is dispatched. Apple's objc_msgSend is called
 * through a cast to the method's exact type; the GNU runtime looks the
 * method's implementation up (objc_msg_lookup) and that is called through
 * the same cast. Everything else (objc_getClass, sel_registerName,
 * respondsToSelector:) is the same on both.
 *
 * The runtime's functions are not linked: they are resolved with dlsym
 * through the framework's handle (AneObjc, ane_framework_open), so orion's
 * runtime library does not load an Objective-C runtime into every program
 * that links it, only into one that opens the ane backend.
 *
 *   typedef id (*NewFn)(id, SEL);
 *   id obj = ANE_SEND(&fw->objc, cls, sel, NewFn)(cls, sel);
 */
#ifndef ORION_ANE_OBJC_PORT_H
#define ORION_ANE_OBJC_PORT_H

#include <objc/message.h>
#include <objc/runtime.h>

typedef struct AneObjc {
  Class (*get_class)(const char *name);
  SEL (*sel)(const char *name);
  Class (*meta_class)(const char *name); /* a class object's class: object_getClass is inline in GNU's header */
  BOOL (*class_responds)(Class cls, SEL sel);
  const char *(*class_name)(Class cls);
#if defined(__APPLE__)
  void (*msg_send)(void); /* objc_msgSend, only ever called through a cast */
#else
  IMP (*msg_lookup)(id receiver, SEL sel);
#endif
} AneObjc;

/* Through void (*)(void): a cast between unrelated function types is what
 * the call needs, and -Wcast-function-type accepts it only from there. */
#if defined(__APPLE__)
#define ANE_SEND(objc, receiver, sel, fn_type) ((fn_type)(objc)->msg_send)
#else
#define ANE_SEND(objc, receiver, sel, fn_type) \
  ((fn_type)(void (*)(void))(objc)->msg_lookup((id)(receiver), (sel)))
#endif

#endif
