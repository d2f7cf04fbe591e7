/*
 * The one place the ane backend differs between Apple's Objective-C runtime
 * and the GNU one (libobjc, which the Linux stand-in framework is built
 * against): how a message is dispatched. Apple's objc_msgSend is called
 * through a cast to the method's exact type; the GNU runtime looks the
 * method's implementation up (objc_msg_lookup) and that is called through
 * the same cast. Everything else (objc_getClass, sel_registerName,
 * respondsToSelector:) is the same on both.
 *
 *   typedef id (*NewFn)(id, SEL);
 *   id obj = ANE_SEND(cls, sel, NewFn)(cls, sel);
 */
#ifndef ORION_ANE_OBJC_PORT_H
#define ORION_ANE_OBJC_PORT_H

#include <objc/message.h>
#include <objc/runtime.h>

/* Through void (*)(void): a cast between unrelated function types is what
 * the call needs, and -Wcast-function-type accepts it only from there. */
#if defined(__APPLE__)
#define ANE_SEND(receiver, sel, fn_type) ((fn_type)(void (*)(void))objc_msgSend)
#else
#define ANE_SEND(receiver, sel, fn_type) ((fn_type)(void (*)(void))objc_msg_lookup((id)(receiver), (sel)))
#endif

#endif
