/* The ANE architecture from _ANEDeviceInfo (ane_device_info.h). */
#include "ane_device_info.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef id (*GetFn)(id, SEL);
typedef const char *(*Utf8Fn)(id, SEL);
typedef BOOL (*RespondsFn)(id, SEL, SEL);

static const char *const architecture_selectors[] = {"aneArchitectureType", "aneSubType"};
#define NSELECTORS (sizeof architecture_selectors / sizeof *architecture_selectors)

const char *const *ane_device_info_architecture_selectors(size_t *n) {
  *n = NSELECTORS;
  return architecture_selectors;
}

void ane_device_name_copy(char *out, size_t len, const char *name) {
  size_t n = 0;
  for (const char *c = name; c && *c && n + 1 < len && n < 64; c++)
    out[n++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
                       *c == '_' || *c == '-'
                   ? *c
                   : '_';
  if (!n) snprintf(out, len, "unknown");
  else out[n] = '\0';
}

/* The text of an NSString the framework returned, read only if it answers -UTF8String. */
static const char *string_text(const AneObjc *o, id s) {
  if (!s) return NULL;
  SEL q = o->sel("respondsToSelector:"), sel = o->sel("UTF8String");
  if (!ANE_SEND(o, s, q, RespondsFn)(s, q, sel)) return NULL;
  return ANE_SEND(o, s, sel, Utf8Fn)(s, sel);
}

static void list_selectors(char *out, size_t len) {
  size_t used = 0;
  for (size_t i = 0; i < NSELECTORS && used < len; i++) {
    int n = snprintf(out + used, len - used, "%s+%s", i ? ", " : "", architecture_selectors[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

void ane_device_architecture(const AneFramework *fw, AneArchitecture *out) {
  snprintf(out->name, sizeof out->name, "unknown");
  char tried[160];
  list_selectors(tried, sizeof tried);
  Class cls = fw->objc.get_class(ANE_DEVICE_INFO_CLASS);
  if (!cls) {
    snprintf(out->found, sizeof out->found, "the framework has no class %s", ANE_DEVICE_INFO_CLASS);
    return;
  }
  void *pool = fw->pool_push();
  snprintf(out->found, sizeof out->found, "%s responds to none of %s", ANE_DEVICE_INFO_CLASS, tried);
  for (size_t i = 0; i < NSELECTORS; i++) {
    SEL sel = fw->objc.sel(architecture_selectors[i]);
    if (!ane_framework_class_responds(fw, cls, sel)) continue;
    const char *text = string_text(&fw->objc, ANE_SEND(&fw->objc, (id)cls, sel, GetFn)((id)cls, sel));
    if (!text || !*text) { /* answered, but with nothing usable: the next variant may say */
      snprintf(out->found, sizeof out->found, "+[%s %s] gave no string", ANE_DEVICE_INFO_CLASS,
               architecture_selectors[i]);
      continue;
    }
    ane_device_name_copy(out->name, sizeof out->name, text);
    snprintf(out->found, sizeof out->found, "+[%s %s]", ANE_DEVICE_INFO_CLASS, architecture_selectors[i]);
    break;
  }
  fw->pool_pop(pool);
}

void ane_device_architecture_describe(const AneArchitecture *a, char *out, size_t len) {
  char tried[160];
  list_selectors(tried, sizeof tried);
  snprintf(out, len, "ANE architecture %s (%s; probed in order: %s)", a->name, a->found, tried);
}
