/*
 * The lifecycle over the binding (ane_model.h).
 */
#include "ane_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "orion/support.h"
#include "orion/temporaries.h"

#define QOS 21 /* the reference's; QoS has no measured effect (peers.md §4.8) */
#define MODEL_PATH "@model_path/"

typedef id (*FactoryFn)(id, SEL, id);
typedef id (*DescriptorFn)(id, SEL, id, id, id);
typedef id (*DescriptorMilFn)(id, SEL, id, id, id, BOOL);
typedef BOOL (*CompileFn)(id, SEL, unsigned int, id, id *);
typedef BOOL (*EvaluateFn)(id, SEL, unsigned int, id, id, id *);
typedef BOOL (*UnloadFn)(id, SEL, unsigned int, id *);
typedef id (*RequestFn)(id, SEL, id, id, id, id, id, id, id);
typedef id (*SurfaceObjectFn)(id, SEL, IOSurfaceRef);
typedef id (*GetFn)(id, SEL);
typedef void (*ReleaseFn)(id, SEL);
typedef const char *(*Utf8Fn)(id, SEL);
typedef long (*CodeFn)(id, SEL);
typedef BOOL (*RespondsFn)(id, SEL, SEL);

/* A CoreFoundation object as the Objective-C object it is on Apple (toll-free bridged). */
static id as_id(const void *cf) { return (id)(uintptr_t)cf; }

static bool responds(const AneObjc *o, id obj, const char *name) {
  SEL q = o->sel("respondsToSelector:"), sel = o->sel(name);
  return obj && ANE_SEND(o, obj, q, RespondsFn)(obj, q, sel);
}

static id send_get(const AneObjc *o, id obj, const char *name) {
  SEL sel = o->sel(name);
  return ANE_SEND(o, obj, sel, GetFn)(obj, sel);
}

static id retain(const AneObjc *o, id obj) { return obj ? send_get(o, obj, "retain") : obj; }

static void release(const AneObjc *o, id obj) {
  SEL sel = o->sel("release");
  if (obj) ANE_SEND(o, obj, sel, ReleaseFn)(obj, sel);
}

/* An NSString's text, or NULL. */
static const char *utf8(const AneObjc *o, id s) {
  if (!responds(o, s, "UTF8String")) return NULL;
  SEL sel = o->sel("UTF8String");
  return ANE_SEND(o, s, sel, Utf8Fn)(s, sel);
}

/* "the ane backend: the device refused to compile function 'main' (error
 * 1): ..." from an NSError, read only through the selectors it answers. */
static void device_error(const AneObjc *o, char *why, size_t len, const char *action, const char *what, id err) {
  if (!err) {
    snprintf(why, len, "the ane backend: the device failed to %s %s, without an error", action, what);
    return;
  }
  long code = 0;
  bool has_code = responds(o, err, "code");
  if (has_code) {
    SEL sel = o->sel("code");
    code = ANE_SEND(o, err, sel, CodeFn)(err, sel);
  }
  const char *text =
      responds(o, err, "localizedDescription") ? utf8(o, send_get(o, err, "localizedDescription")) : NULL;
  if (has_code)
    snprintf(why, len, "the ane backend: the device failed to %s %s (error code %ld, 0x%lx): %s", action, what, code,
             (unsigned long)code, text ? text : "no description");
  else
    snprintf(why, len, "the ane backend: the device failed to %s %s: %s", action, what, text ? text : "no description");
}

static bool write_file(const char *dir, const char *rel, const void *data, size_t n, char *why, size_t len) {
  StrBuf path;
  sb_init(&path);
  sb_printf(&path, "%s/%s", dir, rel);
  bool ok = true;
  for (char *slash = strchr(path.data + strlen(dir) + 1, '/'); ok && slash; slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    ok = mkdir(path.data, 0700) == 0 || errno == EEXIST;
    *slash = '/';
  }
  FILE *f = ok ? fopen(path.data, "wb") : NULL;
  ok = f && fwrite(data, 1, n, f) == n;
  if (f && fclose(f) != 0) ok = false;
  if (!ok) snprintf(why, len, "the ane backend cannot write '%s': %s", path.data, strerror(errno));
  sb_free(&path);
  return ok;
}

/* Two processes compiling one content share its directory (the framework
 * names it). An advisory lock on the directory tells who writes it: the
 * holder; a process that finds it held by another open file description
 * (another process, or another model of this one) leaves it as it is, never
 * registers it for removal, and its updates recompile (ane_model_dir_shared).
 * A directory removed between the open and the lock is made again.
 * Registered for removal only once the lock shows it is ours: registered
 * before, a signal between the mkdir and a lock that fails would remove
 * another process's directory. A signal before the registration leaves the
 * directory (empty, or as its holder made it): the next compile of the same
 * content takes it, since its name is the content's identifier. */
static bool lock_directory(AneModel *m, char *why, size_t len) {
  for (int attempt = 0; attempt < 8; attempt++) {
    struct stat st;
    if (mkdir(m->dir, 0700) != 0 && !(errno == EEXIST && lstat(m->dir, &st) == 0 && S_ISDIR(st.st_mode))) {
      if (errno == ENOENT) continue; /* removed between the mkdir and the lstat */
      break;
    }
    int fd = open(m->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue; /* gone since: made again */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int saved = errno;
      close(fd);
      if (saved != EWOULDBLOCK) {
        snprintf(why, len, "the ane backend cannot lock '%s': %s", m->dir, strerror(saved));
        return false;
      }
      m->dir_shared = true; /* another's: never registered, so no signal removes it */
      return true;
    }
    struct stat held, named;
    if (fstat(fd, &held) == 0 && stat(m->dir, &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      temp_track(m->dir); /* ours: an interrupted run removes it (SIGINT, SIGTERM) */
      m->dir_lock = fd + 1;
      return true;
    }
    close(fd); /* the holder removed it before our lock: ours is a new one */
  }
  snprintf(why, len, "the ane backend cannot make '%s': %s", m->dir, strerror(errno));
  return false;
}

/* The reference's directory: $TMPDIR/<hexStringIdentifier>/ with model.mil
 * and each weight file at its key's path. */
static bool write_directory(AneModel *m, const AneFramework *fw, const char *mil, size_t mil_len,
                            const AneWeightFile *w, uint32_t nw, char *why, size_t len) {
  SEL sel = fw->hex_identifier;
  const char *hex = utf8(&fw->objc, ANE_SEND(&fw->objc, m->model, sel, GetFn)(m->model, sel));
  if (!hex || !*hex || strchr(hex, '/') || !strcmp(hex, "..")) {
    snprintf(why, len, "the ane backend's framework '%s' gave the model no usable -hexStringIdentifier", fw->path);
    return false;
  }
  const char *tmp = getenv("TMPDIR");
  StrBuf dir;
  sb_init(&dir);
  sb_printf(&dir, "%s/%s", tmp && *tmp ? tmp : "/tmp", hex);
  m->dir = xstrdup(dir.data);
  sb_free(&dir);
  if (!lock_directory(m, why, len)) {
    free(m->dir); /* not ours: never removed */
    m->dir = NULL;
    return false;
  }
  if (m->dir_shared) return true; /* the other process's files stay as they are */
  bool ok = write_file(m->dir, "model.mil", mil, mil_len, why, len);
  for (uint32_t i = 0; ok && i < nw; i++)
    ok = write_file(m->dir, w[i].key + strlen(MODEL_PATH), w[i].data, w[i].len, why, len);
  return ok;
}

/* The CoreFoundation objects made for one call, released together once
 * the framework has taken them (the stand-in's containers hold plain
 * pointers, so nothing inside one is released before the container). */
typedef struct Made {
  const void **v;
  size_t n, cap;
} Made;

static const void *keep(Made *m, const void *obj) {
  if (!obj) return NULL;
  if (m->n == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 16;
    m->v = xrealloc(m->v, m->cap * sizeof *m->v);
  }
  m->v[m->n++] = obj;
  return obj;
}

static void release_made(Made *m, const AneSystem *sys) {
  while (m->n) sys->release(m->v[--m->n]);
  free(m->v);
  memset(m, 0, sizeof *m);
}

/* {key: {"offset": 0, "data": bytes}} for every weight file, as the reference passes them. */
static CFDictionaryRef weights_dictionary(Made *made, const AneSystem *sys, const AneWeightFile *w, uint32_t nw) {
  const void **keys = xcalloc(nw + 1, sizeof *keys), **values = xcalloc(nw + 1, sizeof *values);
  const void *offset_key = keep(made, sys->string_create(NULL, "offset", kCFStringEncodingUTF8));
  const void *data_key = keep(made, sys->string_create(NULL, "data", kCFStringEncodingUTF8));
  int64_t zero = 0;
  const void *offset = keep(made, sys->number_create(NULL, kCFNumberSInt64Type, &zero));
  bool ok = offset_key && data_key && offset;
  for (uint32_t i = 0; ok && i < nw; i++) {
    const void *data = keep(made, sys->data_create(NULL, w[i].data, (CFIndex)w[i].len));
    keys[i] = keep(made, sys->string_create(NULL, w[i].key, kCFStringEncodingUTF8));
    const void *entry_keys[] = {offset_key, data_key}, *entry_values[] = {offset, data};
    values[i] = data && keys[i] ? keep(made, sys->dictionary_create(NULL, entry_keys, entry_values, 2,
                                                                    sys->key_callbacks, sys->value_callbacks))
                                : NULL;
    ok = keys[i] && values[i];
  }
  const void *dict =
      ok ? keep(made, sys->dictionary_create(NULL, keys, values, (CFIndex)nw, sys->key_callbacks, sys->value_callbacks))
         : NULL;
  free(keys);
  free(values);
  return dict;
}

static id make_descriptor(const AneFramework *fw, const AneSystem *sys, const char *mil, size_t mil_len,
                          const AneWeightFile *w, uint32_t nw) {
  Made made = {0};
  const void *text = keep(&made, sys->data_create(NULL, (const uint8_t *)mil, (CFIndex)mil_len));
  CFDictionaryRef weights = weights_dictionary(&made, sys, w, nw);
  const AneDescriptorVariant *v = fw->descriptor_variant;
  id receiver = (id)fw->descriptor, desc = nil;
  SEL sel = fw->descriptor_from_mil;
  /* An initializer's object is owned here: autoreleased, it is held as a
   * factory's would be, by the pool around the build. */
  if (text && weights && v->instance)
    receiver = ANE_SEND(&fw->objc, receiver, fw->descriptor_alloc, GetFn)(receiver, fw->descriptor_alloc);
  if (text && weights && receiver) {
    if (v->takes_is_mil)
      desc = ANE_SEND(&fw->objc, receiver, sel, DescriptorMilFn)(receiver, sel, as_id(text), as_id(weights), nil, YES);
    else
      desc = ANE_SEND(&fw->objc, receiver, sel, DescriptorFn)(receiver, sel, as_id(text), as_id(weights), nil);
    if (desc && v->instance) desc = send_get(&fw->objc, desc, "autorelease");
  }
  release_made(&made, sys);
  return desc;
}

static bool check_keys(const AneWeightFile *weights, uint32_t nweights, char *why, size_t len) {
  for (uint32_t i = 0; i < nweights; i++)
    if (strncmp(weights[i].key, MODEL_PATH, strlen(MODEL_PATH)) || strstr(weights[i].key, "..")) {
      snprintf(why, len, "the ane backend cannot pass weight file '%s' to the device: not under %s", weights[i].key,
               MODEL_PATH);
      return false;
    }
  return true;
}

static void note_failure(AneModel *m, const AneObjc *o, id err) {
  m->failure = (AneModelFailure){.device = true, .has_error = err != nil};
  if (err && responds(o, err, "code")) {
    SEL sel = o->sel("code");
    m->failure.has_code = true;
    m->failure.code = ANE_SEND(o, err, sel, CodeFn)(err, sel);
  }
}

bool ane_model_build(AneModel *m, const AneFramework *fw, const AneSystem *sys, const char *what, const char *mil,
                     size_t mil_len, const AneWeightFile *weights, uint32_t nweights, char *why, size_t len) {
  memset(m, 0, sizeof *m);
  if (!check_keys(weights, nweights, why, len)) return false;
  void *pool = fw->pool_push();
  bool ok = false;
  CFDictionaryRef options = sys->dictionary_create(NULL, NULL, NULL, 0, sys->key_callbacks, sys->value_callbacks);
  id desc = options ? make_descriptor(fw, sys, mil, mil_len, weights, nweights) : nil;
  id cls = (id)fw->model;
  if (!desc)
    snprintf(why, len, "the ane backend's framework '%s' made no model descriptor of %s (%s%s)", fw->path, what,
             ane_descriptor_variant_kind(fw->descriptor_variant), fw->descriptor_from_mil_name);
  else if (!(m->model = retain(&fw->objc, ANE_SEND(&fw->objc, cls, fw->model_from_descriptor,
                                                   FactoryFn)(cls, fw->model_from_descriptor, desc))))
    snprintf(why, len, "the ane backend's framework '%s' made no in-memory model of %s", fw->path, what);
  else if (write_directory(m, fw, mil, mil_len, weights, nweights, why, len)) {
    id err = nil;
    if (!ANE_SEND(&fw->objc, m->model, fw->compile, CompileFn)(m->model, fw->compile, QOS, as_id(options), &err)) {
      note_failure(m, &fw->objc, err);
      device_error(&fw->objc, why, len, "compile", what, err);
    } else
      ok = true;
  }
  if (options) sys->release(options);
  fw->pool_pop(pool);
  return ok;
}

bool ane_model_load(AneModel *m, const AneFramework *fw, const AneSystem *sys, const char *what, char *why,
                    size_t len) {
  if (m->loaded) return true;
  void *pool = fw->pool_push();
  CFDictionaryRef options = sys->dictionary_create(NULL, NULL, NULL, 0, sys->key_callbacks, sys->value_callbacks);
  id err = nil;
  bool ok = options && ANE_SEND(&fw->objc, m->model, fw->load, CompileFn)(m->model, fw->load, QOS, as_id(options),
                                                                          &err);
  if (!options)
    snprintf(why, len, "the ane backend cannot make the options of a load of %s", what);
  else if (!ok) {
    note_failure(m, &fw->objc, err);
    device_error(&fw->objc, why, len, "load", what, err);
  }
  m->loaded = ok;
  if (options) sys->release(options);
  fw->pool_pop(pool);
  return ok;
}

bool ane_model_compile(AneModel *m, const AneFramework *fw, const AneSystem *sys, const char *what, const char *mil,
                       size_t mil_len, const AneWeightFile *weights, uint32_t nweights, char *why, size_t len) {
  bool ok = ane_model_build(m, fw, sys, what, mil, mil_len, weights, nweights, why, len) &&
            ane_model_load(m, fw, sys, what, why, len);
  if (!ok) ane_model_free(m, fw);
  return ok;
}

void ane_model_unload(AneModel *m, const AneFramework *fw) {
  if (!m->model || !m->loaded) return;
  void *pool = fw->pool_push();
  id err = nil;
  (void)ANE_SEND(&fw->objc, m->model, fw->unload, UnloadFn)(m->model, fw->unload, QOS, &err);
  fw->pool_pop(pool);
  m->loaded = false;
}

bool ane_model_write_directory(AneModel *m, const AneFramework *fw, const char *mil, size_t mil_len,
                               const AneWeightFile *weights, uint32_t nweights, char *why, size_t len) {
  ane_model_remove_directory(m);
  if (!check_keys(weights, nweights, why, len)) return false;
  void *pool = fw->pool_push();
  bool ok = write_directory(m, fw, mil, mil_len, weights, nweights, why, len);
  fw->pool_pop(pool);
  return ok;
}

/* Removed before the lock goes, so that no process takes the lock of a directory about to vanish. */
void ane_model_remove_directory(AneModel *m) {
  if (m->dir && !m->dir_shared) temp_remove(m->dir);
  if (m->dir_lock) close(m->dir_lock - 1);
  free(m->dir);
  m->dir = NULL;
  m->dir_lock = 0;
  m->dir_shared = false;
}

bool ane_model_dir_shared(const AneModel *m) { return m->dir && m->dir_shared; }

void ane_model_free(AneModel *m, const AneFramework *fw) {
  if (m->model) {
    void *pool = fw->pool_push();
    id err = nil;
    if (m->loaded) (void)ANE_SEND(&fw->objc, m->model, fw->unload, UnloadFn)(m->model, fw->unload, QOS, &err);
    release(&fw->objc, m->model);
    fw->pool_pop(pool);
  }
  ane_model_remove_directory(m);
  memset(m, 0, sizeof *m);
}

/* An array of n CFNumbers 0..n-1 (the request's indices). */
static const void *index_array(Made *made, const AneSystem *sys, uint32_t n) {
  const void **v = xcalloc(n + 1, sizeof *v);
  bool ok = true;
  for (uint32_t i = 0; i < n; i++) {
    int64_t k = i;
    ok = ok && (v[i] = keep(made, sys->number_create(NULL, kCFNumberSInt64Type, &k))) != NULL;
  }
  const void *a = ok ? keep(made, sys->array_create(NULL, v, (CFIndex)n, sys->array_callbacks)) : NULL;
  free(v);
  return a;
}

bool ane_request_make(AneRequest *r, const AneFramework *fw, const AneSystem *sys, uint32_t ninputs, uint32_t noutputs,
                      uint64_t bytes, uint32_t procedure, char *why, size_t len) {
  memset(r, 0, sizeof *r);
  r->ninputs = ninputs;
  r->noutputs = noutputs;
  r->bytes = bytes;
  r->inputs = xcalloc(ninputs + 1, sizeof *r->inputs);
  r->outputs = xcalloc(noutputs + 1, sizeof *r->outputs);
  r->objects = xcalloc(ninputs + noutputs + 1, sizeof *r->objects);
  void *pool = fw->pool_push();
  bool ok = true;
  id cls = (id)fw->surface_object;
  for (uint32_t i = 0; ok && i < ninputs + noutputs; i++) {
    IOSurfaceRef s = ane_iosurface_create(sys, bytes);
    if (i < ninputs)
      r->inputs[i] = s;
    else
      r->outputs[i - ninputs] = s;
    r->objects[i] = s ? retain(&fw->objc, ANE_SEND(&fw->objc, cls, fw->surface_object_new,
                                                   SurfaceObjectFn)(cls, fw->surface_object_new, s))
                      : nil;
    ok = r->objects[i] != nil;
  }
  if (!ok) snprintf(why, len, "the ane backend cannot make a surface of %llu bytes", (unsigned long long)bytes);
  Made made = {0};
  if (ok) {
    int64_t p = procedure;
    /* Through void *: clang's -Wcast-qual refuses id * to const void ** directly. */
    const void **objects = (const void **)(void *)r->objects;
    const void *ins = keep(&made, sys->array_create(NULL, objects, (CFIndex)ninputs, sys->array_callbacks));
    const void *outs =
        keep(&made, sys->array_create(NULL, objects + ninputs, (CFIndex)noutputs, sys->array_callbacks));
    const void *in_idx = index_array(&made, sys, ninputs), *out_idx = index_array(&made, sys, noutputs);
    const void *proc = keep(&made, sys->number_create(NULL, kCFNumberSInt64Type, &p));
    id rcls = (id)fw->request;
    if (ins && outs && in_idx && out_idx && proc)
      r->request = retain(&fw->objc, ANE_SEND(&fw->objc, rcls, fw->request_new,
                                              RequestFn)(rcls, fw->request_new, as_id(ins), as_id(in_idx), as_id(outs),
                                                         as_id(out_idx), nil, nil, as_id(proc)));
    ok = r->request != nil;
    if (!ok)
      snprintf(why, len, "the ane backend's framework '%s' made no request of %u inputs and %u outputs", fw->path,
               ninputs, noutputs);
  }
  release_made(&made, sys);
  fw->pool_pop(pool);
  if (!ok) ane_request_free(r, fw, sys);
  return ok;
}

void ane_request_free(AneRequest *r, const AneFramework *fw, const AneSystem *sys) {
  if (r->objects || r->request) {
    void *pool = fw->pool_push();
    release(&fw->objc, r->request);
    for (uint32_t i = 0; r->objects && i < r->ninputs + r->noutputs; i++) release(&fw->objc, r->objects[i]);
    fw->pool_pop(pool);
  }
  for (uint32_t i = 0; r->inputs && i < r->ninputs; i++)
    if (r->inputs[i]) sys->release(r->inputs[i]);
  for (uint32_t i = 0; r->outputs && i < r->noutputs; i++)
    if (r->outputs[i]) sys->release(r->outputs[i]);
  free(r->inputs);
  free(r->outputs);
  free(r->objects);
  memset(r, 0, sizeof *r);
}

bool ane_model_evaluate(const AneModel *m, const AneFramework *fw, const AneRequest *r, const char *what, char *why,
                        size_t len) {
  void *pool = fw->pool_push();
  id err = nil;
  bool ok = ANE_SEND(&fw->objc, m->model, fw->evaluate, EvaluateFn)(m->model, fw->evaluate, QOS, nil, r->request, &err);
  if (!ok) device_error(&fw->objc, why, len, "evaluate", what, err);
  fw->pool_pop(pool);
  return ok;
}
