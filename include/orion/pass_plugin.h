/*
 * The out-of-tree pass API. A plugin is a shared library that exports
 *
 *   const uint32_t orion_pass_plugin_api_version = ORION_PASS_PLUGIN_API_VERSION;
 *   bool orion_pass_plugin_init(const OrionPassHost *host);
 *
 * `orionc --load-pass=plugin.so` loads it, checks the version, and calls the
 * init function, which registers its passes with host->register_pass. The
 * passes then run like built-in ones (--passes=, --print-after=, ...) and use
 * the IR API of orion/ir.h, which orionc (and orion-run, for patch --verify)
 * exports. See docs/writing-a-pass.md.
 *
 * Version history: 1 = the first (PassInfo, PassCtx, the IR API of ir.h).
 *
 * Ids: IrValueId and IrOpId are single-member structs ({uint32_t id}), no
 * longer bare uint32_t, so a plugin that mixes them up does not compile.
 * Their size, alignment and calling convention are those of uint32_t on the
 * 64-bit ABIs orion supports (x86-64 System V, AArch64 and Apple arm64), so
 * the binary interface, and with it the version, did not change: a plugin
 * built against the integer ids still loads. Its source needs ir_id_eq,
 * ir_id_is_none, IR_NO_VALUE / IR_NO_OP and `.id` to compile again.
 */
#ifndef ORION_PASS_PLUGIN_H
#define ORION_PASS_PLUGIN_H

#include "orion/passes.h"

#define ORION_PASS_PLUGIN_API_VERSION 1u

typedef struct OrionPassHost {
  uint32_t api_version; /* the host's ORION_PASS_PLUGIN_API_VERSION */
  const char *host_version; /* ORION_VERSION */
  bool (*register_pass)(const PassInfo *info, Diag *d);
  Diag *diag;
} OrionPassHost;

typedef bool (*OrionPassPluginInit)(const OrionPassHost *host);

/* Loads a plugin into the pass registry (the host side). */
bool passes_load_plugin(const char *path, Diag *d);

#endif
