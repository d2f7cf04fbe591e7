/*
 * Loading out-of-tree passes (orion/pass_plugin.h): dlopen, version check,
 * init. The library stays loaded for the life of the process, since its
 * passes are in the registry.
 */
#include <dlfcn.h>
#include <string.h>

#include "orion/pass_plugin.h"

bool passes_load_plugin(const char *path, Diag *d) {
  /* dlopen searches the library path for names without a slash; a plugin is a file. */
  char local[4096];
  if (!strchr(path, '/')) {
    snprintf(local, sizeof local, "./%s", path);
    path = local;
  }
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    diag_error(d, (SrcSpan){0}, "cannot load pass plugin '%s': %s", path, dlerror());
    return false;
  }
  const uint32_t *version = (const uint32_t *)dlsym(lib, "orion_pass_plugin_api_version");
  void *init_sym = dlsym(lib, "orion_pass_plugin_init");
  if (!version || !init_sym) {
    diag_error(d, (SrcSpan){0}, "'%s' is not an orion pass plugin: it lacks %s", path,
               !version ? "orion_pass_plugin_api_version" : "orion_pass_plugin_init");
    dlclose(lib);
    return false;
  }
  if (*version != ORION_PASS_PLUGIN_API_VERSION) {
    diag_error(d, (SrcSpan){0}, "pass plugin '%s' was built for plugin API version %u; this orionc has version %u", path,
               *version, ORION_PASS_PLUGIN_API_VERSION);
    dlclose(lib);
    return false;
  }
  OrionPassPluginInit init;
  memcpy(&init, &init_sym, sizeof init); /* object pointer to function pointer, as POSIX allows */
  OrionPassHost host = {ORION_PASS_PLUGIN_API_VERSION, ORION_VERSION, pass_register, d};
  uint32_t before = d->nerrors;
  if (!init(&host)) {
    if (d->nerrors == before) diag_error(d, (SrcSpan){0}, "pass plugin '%s' failed to initialize", path);
    return false;
  }
  return true;
}
