/*
 * The ane backend's binding to its framework (runtime/ane/ane_framework.h)
 * against the Linux stand-in (standin_objects.m, six builds): the classes
 * and selectors bound, the descriptor factory's variants probed in order
 * (the newer one when present, the initializer when it is the only one,
 * else the fallback), and the exact errors for a missing framework, a
 * missing class, a missing selector, a descriptor class with none of the
 * variants and the path's defaults. Each test
 * runs in its own process (Criterion), so the classes one stand-in build
 * registers never meet another's.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ane_device_info.h"
#include "ane_framework.h"

static const char *standin(const char *name, char *buf, size_t len) {
  const char *dir = getenv("ANE_STANDIN_DIR");
  cr_assert_not_null(dir, "ANE_STANDIN_DIR (meson test sets it)");
  snprintf(buf, len, "%s/%s", dir, name);
  return buf;
}

Test(framework, binds_every_class_and_falls_back_to_the_older_descriptor_factory) {
  char path[4096], why[1024] = "";
  AneFramework fw;
  bool ok = ane_framework_open(&fw, standin("libane_standin.so", path, sizeof path), why, sizeof why);
  cr_assert(ok, "%s", why);
  cr_assert_str_eq(class_getName(fw.descriptor), "_ANEInMemoryModelDescriptor");
  cr_assert_str_eq(class_getName(fw.model), "_ANEInMemoryModel");
  cr_assert_str_eq(class_getName(fw.request), "_ANERequest");
  cr_assert_str_eq(class_getName(fw.surface_object), "_ANEIOSurfaceObject");
  cr_assert_str_eq(fw.descriptor_from_mil_name, "modelWithMILText:weights:optionsPlist:");
  cr_assert_str_eq(sel_getName(fw.descriptor_from_mil), "modelWithMILText:weights:optionsPlist:");
  cr_assert_str_eq(sel_getName(fw.compile), "compileWithQoS:options:error:");
  cr_assert_str_eq(sel_getName(fw.evaluate), "evaluateWithQoS:options:request:error:");
  cr_assert_str_eq(sel_getName(fw.surface_object_new), "objectWithIOSurface:");
  ane_framework_close(&fw);
  cr_assert_null(fw.handle);
}

Test(framework, prefers_the_newer_descriptor_factory_when_both_are_there) {
  char path[4096], why[1024] = "";
  AneFramework fw;
  cr_assert(ane_framework_open(&fw, standin("libane_standin_newer.so", path, sizeof path), why, sizeof why), "%s",
            why);
  cr_assert_str_eq(fw.descriptor_from_mil_name, "modelWithMILText:weights:optionsPlist:isMILModel:");
  ane_framework_close(&fw);
}

static const char *const all_variants =
    "+modelWithMILText:weights:optionsPlist:isMILModel:, -initWithNetworkText:weights:optionsPlist:isMILModel:, "
    "+modelWithMILText:weights:optionsPlist:";

/* The macOS 15.4.1 and 16.4.1 header dumps' initializer, found by
 * instancesRespondToSelector: and bound with the class's +alloc. */
Test(framework, finds_the_initializer_when_it_is_the_only_variant) {
  char path[4096], why[1024] = "";
  AneFramework fw;
  cr_assert(ane_framework_open(&fw, standin("libane_standin_init_only.so", path, sizeof path), why, sizeof why),
            "%s", why);
  cr_assert_str_eq(fw.descriptor_from_mil_name, "initWithNetworkText:weights:optionsPlist:isMILModel:");
  cr_assert_str_eq(sel_getName(fw.descriptor_from_mil), "initWithNetworkText:weights:optionsPlist:isMILModel:");
  cr_assert(fw.descriptor_variant->instance);
  cr_assert(fw.descriptor_variant->takes_is_mil);
  cr_assert_str_eq(ane_descriptor_variant_kind(fw.descriptor_variant), "-");
  cr_assert_str_eq(sel_getName(fw.descriptor_alloc), "alloc");
  char list[512];
  ane_descriptor_variants_list(list, sizeof list);
  cr_assert_str_eq(list, all_variants);
  ane_framework_close(&fw);
}

Test(framework, a_descriptor_class_with_none_of_the_variants_is_named_with_them_all) {
  char path[4096], why[1024] = "", want[8192];
  AneFramework fw;
  standin("libane_standin_no_factory.so", path, sizeof path);
  cr_assert_not(ane_framework_open(&fw, path, why, sizeof why));
  snprintf(want, sizeof want, "the ane backend's framework '%s': _ANEInMemoryModelDescriptor responds to none of %s",
           path, all_variants);
  cr_assert_str_eq(why, want);
  cr_assert_null(fw.handle);
}

Test(framework, a_missing_selector_is_named) {
  char path[4096], why[1024] = "", want[8192];
  AneFramework fw;
  standin("libane_standin_no_load.so", path, sizeof path);
  cr_assert_not(ane_framework_open(&fw, path, why, sizeof why));
  snprintf(want, sizeof want,
           "the ane backend's framework '%s': _ANEInMemoryModel does not respond to -loadWithQoS:options:error:", path);
  cr_assert_str_eq(why, want);
  cr_assert_null(fw.handle);
}

/* A selector the stand-in does not have is not answered: the probe does not
 * take a class's silence for a yes (the GNU runtime's lookup of a missing
 * method returns a forwarding stub, never NULL). */
Test(framework, an_instance_selector_is_checked_not_assumed) {
  char path[4096], why[1024] = "";
  AneFramework fw;
  cr_assert(ane_framework_open(&fw, standin("libane_standin.so", path, sizeof path), why, sizeof why), "%s", why);
  SEL q = sel_registerName("instancesRespondToSelector:");
  typedef BOOL (*RespondsFn)(id, SEL, SEL);
  cr_assert(ANE_SEND(&fw.objc, fw.model, q, RespondsFn)((id)fw.model, q, fw.load));
  cr_assert_not(ANE_SEND(&fw.objc, fw.model, q, RespondsFn)((id)fw.model, q, sel_registerName("loadWithQoS:error:")));
  ane_framework_close(&fw);
}

Test(framework, a_missing_class_is_named) {
  char path[4096], why[1024] = "", want[8192];
  AneFramework fw;
  standin("libane_standin_no_request.so", path, sizeof path);
  cr_assert_not(ane_framework_open(&fw, path, why, sizeof why));
  snprintf(want, sizeof want, "the ane backend's framework '%s' has no class _ANERequest", path);
  cr_assert_str_eq(why, want);
  cr_assert_null(fw.handle);
}

Test(framework, a_missing_framework_is_a_clear_error) {
  char why[1024] = "";
  AneFramework fw;
  cr_assert_not(ane_framework_open(&fw, "/nonexistent/libane_standin.so", why, sizeof why));
  const char *want = "the ane backend cannot open its framework '/nonexistent/libane_standin.so' (set "
                     "ORION_ANE_FRAMEWORK to another path): ";
  cr_assert_eq(strncmp(why, want, strlen(want)), 0, "%s", why);
}

/* meson test sets ORION_ANE_FRAMEWORK to the stand-in. */
Test(framework, the_path_is_the_argument_else_the_environment_else_apples) {
  cr_assert_str_eq(ane_framework_path("/x/y.so"), "/x/y.so");
  const char *env = getenv(ANE_FRAMEWORK_ENV);
  cr_assert_not_null(env);
  cr_assert_str_eq(ane_framework_path(NULL), env);
  char why[1024] = "";
  AneFramework fw;
  cr_assert(ane_framework_open(&fw, NULL, why, sizeof why), "%s", why);
  cr_assert_str_eq(fw.path, env);
  ane_framework_close(&fw);
  cr_assert_str_eq(ANE_FRAMEWORK_DEFAULT,
                   "/System/Library/PrivateFrameworks/AppleNeuralEngine.framework/AppleNeuralEngine");
}

/* The ANE architecture from _ANEDeviceInfo (ane_device_info.h): the first
 * selector that answers, each switch of the stand-in dropping one more, and
 * "unknown" with the reason when none does. */
Test(framework, the_architecture_is_the_first_device_info_selector_that_answers) {
  char path[4096], why[1024] = "", line[1024];
  AneFramework fw;
  cr_assert(ane_framework_open(&fw, standin("libane_standin.so", path, sizeof path), why, sizeof why), "%s", why);
  static const struct {
    const char *device_info, *arch, *name, *line;
  } cases[] = {
      {NULL, NULL, "standin",
       "ANE architecture standin (+[_ANEDeviceInfo aneArchitectureType]; probed in order: +aneArchitectureType, "
       "+aneSubType)"},
      {NULL, "h16g", "h16g",
       "ANE architecture h16g (+[_ANEDeviceInfo aneArchitectureType]; probed in order: +aneArchitectureType, "
       "+aneSubType)"},
      {NULL, "h 16/g", "h_16_g",
       "ANE architecture h_16_g (+[_ANEDeviceInfo aneArchitectureType]; probed in order: +aneArchitectureType, "
       "+aneSubType)"},
      {"subtype", "h16g", "standin-sub",
       "ANE architecture standin-sub (+[_ANEDeviceInfo aneSubType]; probed in order: +aneArchitectureType, "
       "+aneSubType)"},
      {"none", NULL, "unknown",
       "ANE architecture unknown (_ANEDeviceInfo responds to none of +aneArchitectureType, +aneSubType; probed in "
       "order: +aneArchitectureType, +aneSubType)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (cases[i].device_info) setenv("ORION_ANE_STANDIN_DEVICE_INFO", cases[i].device_info, 1);
    else unsetenv("ORION_ANE_STANDIN_DEVICE_INFO");
    if (cases[i].arch) setenv("ORION_ANE_STANDIN_ANE_ARCH", cases[i].arch, 1);
    else unsetenv("ORION_ANE_STANDIN_ANE_ARCH");
    AneArchitecture a;
    ane_device_architecture(&fw, &a);
    cr_assert_str_eq(a.name, cases[i].name, "case %zu", i);
    ane_device_architecture_describe(&a, line, sizeof line);
    cr_assert_str_eq(line, cases[i].line, "case %zu", i);
  }
  unsetenv("ORION_ANE_STANDIN_DEVICE_INFO");
  unsetenv("ORION_ANE_STANDIN_ANE_ARCH");
  ane_framework_close(&fw);
}
