/*
 * The stand-in for AppleNeuralEngine.framework (Linux CI, GNU Objective-C):
 * the classes and selectors the ane backend binds (runtime/ane/
 * ane_framework.c), with the method signatures the reference system sends.
 *
 * This increment carries the framework's surface only: the backend's
 * binding and selector probing run against it. The lifecycle methods
 * answer failure (nil / NO); executing programs on orion's CPU backend and
 * the device's rejections are the next increment (docs/ane-backend.md).
 *
 * Of the descriptor factory's variants it has by default only the one
 * every stored source still uses, +modelWithMILText:weights:optionsPlist:,
 * so the backend's probe has to fall back past the newer variant to find
 * it. Built again with switches for the probe's tests (testsuite/ane/
 * meson.build): ANE_STANDIN_NEWER_FACTORY adds the newer variant
 * (...isMILModel:), ANE_STANDIN_WITHOUT_REQUEST leaves _ANERequest out, as a
 * framework that has changed would.
 */
#include <objc/runtime.h>

/* NSObject's part that the backend relies on: allocation and the
 * respondsToSelector: family (GNU libobjc has no Foundation). */
__attribute__((objc_root_class))
@interface ANEStandinObject {
  Class isa;
}
+ (id)alloc;
- (id)init;
- (void)release;
+ (BOOL)respondsToSelector:(SEL)sel;
- (BOOL)respondsToSelector:(SEL)sel;
+ (BOOL)instancesRespondToSelector:(SEL)sel;
@end

@implementation ANEStandinObject
+ (id)alloc {
  return class_createInstance(self, 0);
}
- (id)init {
  return self;
}
- (void)release {
  object_dispose(self);
}
+ (BOOL)respondsToSelector:(SEL)sel {
  return class_respondsToSelector(object_getClass(self), sel);
}
- (BOOL)respondsToSelector:(SEL)sel {
  return class_respondsToSelector(object_getClass(self), sel);
}
+ (BOOL)instancesRespondToSelector:(SEL)sel {
  return class_respondsToSelector(self, sel);
}
@end

@interface _ANEInMemoryModelDescriptor : ANEStandinObject
+ (id)modelWithMILText:(id)text weights:(id)weights optionsPlist:(id)options;
#ifdef ANE_STANDIN_NEWER_FACTORY
+ (id)modelWithMILText:(id)text weights:(id)weights optionsPlist:(id)options isMILModel:(BOOL)isMIL;
#endif
@end

@implementation _ANEInMemoryModelDescriptor
+ (id)modelWithMILText:(id)text weights:(id)weights optionsPlist:(id)options {
  return nil;
}
#ifdef ANE_STANDIN_NEWER_FACTORY
+ (id)modelWithMILText:(id)text weights:(id)weights optionsPlist:(id)options isMILModel:(BOOL)isMIL {
  return nil;
}
#endif
@end

@interface _ANEInMemoryModel : ANEStandinObject
+ (id)inMemoryModelWithDescriptor:(id)descriptor;
- (BOOL)compileWithQoS:(unsigned int)qos options:(id)options error:(id *)error;
- (BOOL)loadWithQoS:(unsigned int)qos options:(id)options error:(id *)error;
- (BOOL)evaluateWithQoS:(unsigned int)qos options:(id)options request:(id)request error:(id *)error;
- (BOOL)unloadWithQoS:(unsigned int)qos error:(id *)error;
@end

@implementation _ANEInMemoryModel
+ (id)inMemoryModelWithDescriptor:(id)descriptor {
  return nil;
}
- (BOOL)compileWithQoS:(unsigned int)qos options:(id)options error:(id *)error {
  return NO;
}
- (BOOL)loadWithQoS:(unsigned int)qos options:(id)options error:(id *)error {
  return NO;
}
- (BOOL)evaluateWithQoS:(unsigned int)qos options:(id)options request:(id)request error:(id *)error {
  return NO;
}
- (BOOL)unloadWithQoS:(unsigned int)qos error:(id *)error {
  return NO;
}
@end

#ifndef ANE_STANDIN_WITHOUT_REQUEST
@interface _ANERequest : ANEStandinObject
+ (id)requestWithInputs:(id)inputs
           inputIndices:(id)inputIndices
                outputs:(id)outputs
          outputIndices:(id)outputIndices
          weightsBuffer:(id)weightsBuffer
              perfStats:(id)perfStats
         procedureIndex:(id)procedureIndex;
@end

@implementation _ANERequest
+ (id)requestWithInputs:(id)inputs
           inputIndices:(id)inputIndices
                outputs:(id)outputs
          outputIndices:(id)outputIndices
          weightsBuffer:(id)weightsBuffer
              perfStats:(id)perfStats
         procedureIndex:(id)procedureIndex {
  return nil;
}
@end
#endif

@interface _ANEIOSurfaceObject : ANEStandinObject
+ (id)objectWithIOSurface:(void *)surface;
@end

@implementation _ANEIOSurfaceObject
+ (id)objectWithIOSurface:(void *)surface {
  return nil;
}
@end
