/*
 * The stand-in for AppleNeuralEngine.framework (Linux CI, GNU Objective-C):
 * the classes and selectors the ane backend uses (runtime/ane/), with the
 * method signatures the reference system sends, executing what it is given
 * on orion's CPU backend (standin_exec.c) and refusing what the device
 * refuses, in the device's error style (an error object answering -code and
 * -localizedDescription).
 *
 * Memory follows Apple's conventions, so that the backend's ownership is
 * the one it needs on a Mac: factories return autoreleased objects (the
 * stand-in's objc_autoreleasePoolPush/Pop drain them), -retain/-release
 * count, and an error handed out through an NSError ** is autoreleased.
 *
 * Of the descriptor factory's variants it has by default only the one
 * every stored source still uses, +modelWithMILText:weights:optionsPlist:,
 * so the backend's probe has to fall back past the newer variant to find
 * it. Built again with switches for the probe's tests (testsuite/ane/
 * meson.build): ANE_STANDIN_NEWER_FACTORY adds the newer variant
 * (...isMILModel:), ANE_STANDIN_WITHOUT_REQUEST leaves _ANERequest out, as a
 * framework that has changed would. ANE_STANDIN_INIT_DESCRIPTOR_ONLY has,
 * of the variants, only the initializer
 * -initWithNetworkText:weights:optionsPlist:isMILModel: (sent to +alloc),
 * ANE_STANDIN_WITHOUT_DESCRIPTOR_FACTORY none, and ANE_STANDIN_WITHOUT_LOAD
 * a model without -loadWithQoS:options:error:.
 */
#include <objc/runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin_cf.h"
#include "standin_exec.h"

#if defined(ANE_STANDIN_INIT_DESCRIPTOR_ONLY) || defined(ANE_STANDIN_WITHOUT_DESCRIPTOR_FACTORY)
#define ANE_STANDIN_DESCRIPTOR_FACTORY_GONE
#endif

/* NSObject's part that the backend relies on: allocation, reference counts,
 * autorelease and the respondsToSelector: family (GNU libobjc has no
 * Foundation). */
__attribute__((objc_root_class))
@interface ANEStandinObject {
  Class isa;
  long extra_retains;
}
+ (id)alloc;
- (id)init;
- (id)retain;
- (void)release;
- (id)autorelease;
- (void)dealloc;
+ (BOOL)respondsToSelector:(SEL)sel;
- (BOOL)respondsToSelector:(SEL)sel;
+ (BOOL)instancesRespondToSelector:(SEL)sel;
@end

/* The autorelease pool: one stack of objects; a push is its depth. */
static id *pool;
static size_t pool_len, pool_cap;

void *objc_autoreleasePoolPush(void);
void objc_autoreleasePoolPop(void *marker);

void *objc_autoreleasePoolPush(void) { return (void *)(uintptr_t)(pool_len + 1); }

void objc_autoreleasePoolPop(void *marker) {
  size_t depth = (size_t)(uintptr_t)marker - 1;
  while (pool_len > depth) [pool[--pool_len] release];
  if (pool_len == 0) {
    free(pool);
    pool = NULL;
    pool_cap = 0;
  }
}

@implementation ANEStandinObject
+ (id)alloc {
  return class_createInstance(self, 0);
}
- (id)init {
  return self;
}
- (id)retain {
  extra_retains++;
  return self;
}
- (void)release {
  if (extra_retains-- == 0) [self dealloc];
}
- (id)autorelease {
  if (pool_len == pool_cap) {
    pool_cap = pool_cap ? 2 * pool_cap : 16;
    pool = realloc(pool, pool_cap * sizeof *pool);
  }
  pool[pool_len++] = self;
  return self;
}
- (void)dealloc {
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

/* NSString's one method the backend sends. */
@interface ANEStandinString : ANEStandinObject {
  char *text;
}
+ (id)stringWithText:(const char *)text;
- (const char *)UTF8String;
@end

@implementation ANEStandinString
+ (id)stringWithText:(const char *)t {
  ANEStandinString *s = [[self alloc] init];
  s->text = strdup(t);
  return [s autorelease];
}
- (const char *)UTF8String {
  return text;
}
- (void)dealloc {
  free(text);
  [super dealloc];
}
@end

/* NSError's: the device's code and its message. */
@interface ANEStandinError : ANEStandinObject {
  long code;
  id description;
}
+ (id)errorWithCode:(long)code description:(char *)text;
- (long)code;
- (id)localizedDescription;
@end

@implementation ANEStandinError
/* Takes text (malloc'd). */
+ (id)errorWithCode:(long)c description:(char *)text {
  ANEStandinError *e = [[self alloc] init];
  e->code = c;
  e->description = [[ANEStandinString stringWithText:text ? text : "unknown error"] retain];
  free(text);
  return [e autorelease];
}
- (long)code {
  return code;
}
- (id)localizedDescription {
  return description;
}
- (void)dealloc {
  [description release];
  [super dealloc];
}
@end

static void set_error(id *error, long code, char *text) {
  id e = [ANEStandinError errorWithCode:code description:text];
  if (error) *error = e;
}

/* The device's identity, class methods only as on a Mac: the architecture
 * the backend keys its programs and cached choice by (standin_exec.h). A
 * selector ORION_ANE_STANDIN_DEVICE_INFO drops is not answered, as on a
 * framework that lacks it, so that the backend's fallbacks are tested. */
@interface _ANEDeviceInfo : ANEStandinObject
+ (id)aneArchitectureType;
+ (id)aneSubType;
@end

@implementation _ANEDeviceInfo
+ (BOOL)respondsToSelector:(SEL)sel {
  const char *drop = getenv(STANDIN_DEVICE_INFO_ENV), *name = sel_getName(sel);
  bool subtype_only = drop && !strcmp(drop, "subtype"), none = drop && !strcmp(drop, "none");
  if ((subtype_only || none) && !strcmp(name, "aneArchitectureType")) return NO;
  if (none && !strcmp(name, "aneSubType")) return NO;
  return [super respondsToSelector:sel];
}
+ (id)aneArchitectureType {
  return [ANEStandinString stringWithText:ane_standin_ane_arch()];
}
+ (id)aneSubType {
  return [ANEStandinString stringWithText:"standin-sub"];
}
@end

@interface _ANEInMemoryModelDescriptor : ANEStandinObject {
@public
  char *mil;
  size_t mil_len;
  StandinWeight *weights;
  size_t nweights;
}
#ifndef ANE_STANDIN_DESCRIPTOR_FACTORY_GONE
+ (id)modelWithMILText:(id)text weights:(id)weights optionsPlist:(id)options;
#endif
#ifdef ANE_STANDIN_NEWER_FACTORY
+ (id)modelWithMILText:(id)text weights:(id)weights optionsPlist:(id)options isMILModel:(BOOL)isMIL;
#endif
#ifdef ANE_STANDIN_INIT_DESCRIPTOR_ONLY
- (id)initWithNetworkText:(id)text weights:(id)weights optionsPlist:(id)options isMILModel:(BOOL)isMIL;
#endif
@end

/* Keeps in d copies of the MIL (NSData) and of each weight of the
 * dictionary {path: {"offset": NSNumber, "data": NSData}}; NO when they are
 * not that. A C function, not a method: a method would be one more variant
 * for the backend's probe to find. */
#ifndef ANE_STANDIN_WITHOUT_DESCRIPTOR_FACTORY
static BOOL descriptor_keep(_ANEInMemoryModelDescriptor *d, id text, id w) {
  size_t len;
  const uint8_t *bytes = standin_cf_data(text, &len);
  long n = w ? standin_cf_count(w) : 0;
  if (!bytes || n < 0) return NO;
  d->mil = malloc(len + 1);
  memcpy(d->mil, bytes, len);
  d->mil[len] = '\0';
  d->mil_len = len;
  d->weights = calloc((size_t)n + 1, sizeof *d->weights);
  for (long i = 0; i < n; i++) {
    const char *key = standin_cf_string(standin_cf_dictionary_key(w, i));
    const void *entry = standin_cf_dictionary_value(w, i);
    int64_t offset;
    const uint8_t *data = standin_cf_data(standin_cf_dictionary_get(entry, "data"), &len);
    if (!key || !data || !standin_cf_number(standin_cf_dictionary_get(entry, "offset"), &offset) || offset < 0)
      return NO;
    StandinWeight *sw = &d->weights[d->nweights++];
    sw->key = strdup(key);
    sw->offset = (uint64_t)offset;
    sw->data = malloc(len ? len : 1);
    memcpy(sw->data, data, len);
    sw->len = len;
  }
  return YES;
}
#endif

@implementation _ANEInMemoryModelDescriptor
#ifndef ANE_STANDIN_DESCRIPTOR_FACTORY_GONE
/* nil unless the text and weights are what descriptor_keep takes. */
+ (id)modelWithMILText:(id)text weights:(id)w optionsPlist:(id)options {
  _ANEInMemoryModelDescriptor *d = [[self alloc] init];
  if (!descriptor_keep(d, text, w)) {
    [d release];
    return nil;
  }
  return [d autorelease];
}
#endif
#ifdef ANE_STANDIN_INIT_DESCRIPTOR_ONLY
/* An initializer, by Apple's rules: the caller owns the result, and on
 * failure self is released and nil returned. Only MIL text is understood. */
- (id)initWithNetworkText:(id)text weights:(id)w optionsPlist:(id)options isMILModel:(BOOL)isMIL {
  if (!isMIL || !descriptor_keep(self, text, w)) {
    [self release];
    return nil;
  }
  return self;
}
#endif
#ifdef ANE_STANDIN_NEWER_FACTORY
+ (id)modelWithMILText:(id)text weights:(id)w optionsPlist:(id)options isMILModel:(BOOL)isMIL {
  return [self modelWithMILText:text weights:w optionsPlist:options];
}
#endif
- (void)dealloc {
  for (size_t i = 0; i < nweights; i++) {
    free(weights[i].key);
    free(weights[i].data);
  }
  free(weights);
  free(mil);
  [super dealloc];
}
@end

@interface _ANEIOSurfaceObject : ANEStandinObject {
@public
  IOSurfaceRef surface;
}
+ (id)objectWithIOSurface:(IOSurfaceRef)surface;
@end

@implementation _ANEIOSurfaceObject
+ (id)objectWithIOSurface:(IOSurfaceRef)s {
  if (!s) return nil;
  _ANEIOSurfaceObject *o = [[self alloc] init];
  o->surface = s;
  return [o autorelease];
}
@end

#ifndef ANE_STANDIN_WITHOUT_REQUEST
@interface _ANERequest : ANEStandinObject {
@public
  IOSurfaceRef *inputs, *outputs; /* by binding index */
  long ninputs, noutputs;
  int64_t procedure;
}
+ (id)requestWithInputs:(id)inputs
           inputIndices:(id)inputIndices
                outputs:(id)outputs
          outputIndices:(id)outputIndices
          weightsBuffer:(id)weightsBuffer
              perfStats:(id)perfStats
         procedureIndex:(id)procedureIndex;
@end

/* surfaces[indices[i]] = objects[i]'s surface; false unless the indices are each of 0..n-1 once. */
static bool bind_surfaces(id objects, id indices, IOSurfaceRef **surfaces, long *n) {
  *n = standin_cf_count(objects);
  if (*n < 0 || standin_cf_count(indices) != *n) return false;
  *surfaces = calloc((size_t)*n + 1, sizeof **surfaces);
  for (long i = 0; i < *n; i++) {
    int64_t at;
    _ANEIOSurfaceObject *o = (id)standin_cf_array_at(objects, i);
    if (!standin_cf_number(standin_cf_array_at(indices, i), &at) || at < 0 || at >= *n || (*surfaces)[at] ||
        object_getClass(o) != objc_getClass("_ANEIOSurfaceObject"))
      return false;
    (*surfaces)[at] = o->surface;
  }
  return true;
}

@implementation _ANERequest
+ (id)requestWithInputs:(id)ins
           inputIndices:(id)inputIndices
                outputs:(id)outs
          outputIndices:(id)outputIndices
          weightsBuffer:(id)weightsBuffer
              perfStats:(id)perfStats
         procedureIndex:(id)procedureIndex {
  _ANERequest *r = [[self alloc] init];
  if (!bind_surfaces(ins, inputIndices, &r->inputs, &r->ninputs) ||
      !bind_surfaces(outs, outputIndices, &r->outputs, &r->noutputs) ||
      !standin_cf_number(procedureIndex, &r->procedure)) {
    [r release];
    return nil;
  }
  return [r autorelease];
}
- (void)dealloc {
  free(inputs);
  free(outputs);
  [super dealloc];
}
@end
#endif

@interface _ANEInMemoryModel : ANEStandinObject {
  _ANEInMemoryModelDescriptor *descriptor;
  StandinProgram *program;
  BOOL loaded;
  BOOL unloaded; /* loaded once and unloaded since: a load now is a reload */
  StandinWeightMode mode;
  id identifier;
}
+ (id)inMemoryModelWithDescriptor:(id)descriptor;
- (id)hexStringIdentifier;
- (BOOL)compileWithQoS:(unsigned int)qos options:(id)options error:(id *)error;
#ifndef ANE_STANDIN_WITHOUT_LOAD
- (BOOL)loadWithQoS:(unsigned int)qos options:(id)options error:(id *)error;
#endif
- (BOOL)evaluateWithQoS:(unsigned int)qos options:(id)options request:(id)request error:(id *)error;
- (BOOL)unloadWithQoS:(unsigned int)qos error:(id *)error;
- (BOOL)directory:(char *)dir length:(size_t)len;
@end

/* FNV-1a over the MIL and the weights: one identifier per content, as the
 * device's (the reference's delta reload relies on equal content giving
 * the same directory). */
static uint64_t fnv(uint64_t h, const void *data, size_t len) {
  const uint8_t *b = data;
  for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

@implementation _ANEInMemoryModel
+ (id)inMemoryModelWithDescriptor:(id)d {
  if (!d || object_getClass(d) != objc_getClass("_ANEInMemoryModelDescriptor")) return nil;
  _ANEInMemoryModel *m = [[self alloc] init];
  m->descriptor = [d retain];
  _ANEInMemoryModelDescriptor *desc = d;
  uint64_t h = fnv(0xcbf29ce484222325ull, desc->mil, desc->mil_len);
  for (size_t i = 0; i < desc->nweights; i++) {
    h = fnv(h, desc->weights[i].key, strlen(desc->weights[i].key));
    h = fnv(h, desc->weights[i].data, desc->weights[i].len);
  }
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  m->identifier = [[ANEStandinString stringWithText:hex] retain];
  return [m autorelease];
}
- (id)hexStringIdentifier {
  return identifier;
}
- (BOOL)compileWithQoS:(unsigned int)qos options:(id)options error:(id *)error {
  long code = 0;
  char *text = NULL;
  standin_program_free(program);
  program = NULL;
  loaded = unloaded = NO;
  if (standin_fail_silently()) return NO;
  if (!standin_weight_mode(&mode, &code, &text)) {
    set_error(error, code, text);
    return NO;
  }
  program = standin_compile(descriptor->mil, descriptor->mil_len, descriptor->weights, descriptor->nweights, &code,
                            &text);
  if (!program) set_error(error, code, text);
  char dir[4096];
  if (program && mode == STANDIN_WEIGHTS_PATCH_DATA && [self directory:dir length:sizeof dir])
    (void)standin_write_data(dir, descriptor->weights, descriptor->nweights);
  return program != NULL;
}
/* The reference's directory for this model: $TMPDIR/<hexStringIdentifier>. */
- (BOOL)directory:(char *)dir length:(size_t)len {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, len, "%s/%s", tmp && *tmp ? tmp : "/tmp", [identifier UTF8String]);
  return YES;
}
#ifndef ANE_STANDIN_WITHOUT_LOAD
- (BOOL)loadWithQoS:(unsigned int)qos options:(id)options error:(id *)error {
  if (!program) {
    set_error(error, STANDIN_ERROR_EVALUATE, strdup("load failed: the model is not compiled"));
    return NO;
  }
  char dir[4096];
  long code = 0;
  char *text = NULL;
  if (unloaded && (mode == STANDIN_WEIGHTS_RELOAD || mode == STANDIN_WEIGHTS_PATCH_DATA) &&
      [self directory:dir length:sizeof dir] &&
      !standin_reload(&program, dir, mode, descriptor->mil, descriptor->mil_len, descriptor->weights,
                      descriptor->nweights, &code, &text)) {
    set_error(error, code, text);
    return NO;
  }
  loaded = YES;
  return YES;
}
#endif
- (BOOL)evaluateWithQoS:(unsigned int)qos options:(id)options request:(id)request error:(id *)error {
#ifndef ANE_STANDIN_WITHOUT_REQUEST
  long code = 0;
  char *text = NULL;
  if (!loaded) {
    set_error(error, STANDIN_ERROR_EVALUATE, strdup("program evaluation failed: the model is not loaded"));
    return NO;
  }
  if (!request || object_getClass(request) != objc_getClass("_ANERequest")) {
    set_error(error, STANDIN_ERROR_EVALUATE, strdup("program evaluation failed: no request"));
    return NO;
  }
  _ANERequest *r = request;
  if (standin_evaluate(program, r->procedure, r->inputs, r->ninputs, r->outputs, r->noutputs, &code, &text))
    return YES;
  set_error(error, code, text);
#endif
  return NO;
}
- (BOOL)unloadWithQoS:(unsigned int)qos error:(id *)error {
  if (!loaded) {
    set_error(error, STANDIN_ERROR_EVALUATE, strdup("unload failed: the model is not loaded"));
    return NO;
  }
  loaded = NO;
  unloaded = YES;
  return YES;
}
- (void)dealloc {
  standin_program_free(program);
  [descriptor release];
  [identifier release];
  [super dealloc];
}
@end
