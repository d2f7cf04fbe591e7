/*
 * Training contracts that name output groups: split-concat splits a concat
 * returned as an output into parts (OutputGroups in the manifest), and the
 * contract keeps naming the whole value. llama_slice.oir (RoPE by slice, neg
 * and concat) compiled with --train on the default pipeline saves the rotated
 * q and k that way; the reader joins the parts' types for the checks and
 * refuses a group whose parts do not make the value the backward reads.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/compile.h"
#include "orion/manifest.h"
#include "contract_check.h"

#define MODELS ORION_SOURCE_ROOT "/testsuite/train/models"

static char dir[] = "/tmp/orion-train-groups-XXXXXX";
static char *manifest; /* the compiled llama_slice package's Manifest.plist */
static char *summary;  /* the compile's --summary text */

static void setup(void) {
  cr_assert_not_null(mkdtemp(dir));
  StrBuf out;
  sb_init(&out);
  sb_printf(&out, "%s/l.anepkg", dir);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.train = true; /* no --allow: the compile's constraint check refuses any concat left */
  o.summary = true;
  Diag d;
  diag_init(&d, NULL);
  StrBuf msgs;
  sb_init(&msgs);
  d.capture = &msgs;
  d.suppress_warnings = true;
  OrionCompileResult r;
  cr_assert(orion_compile_file(MODELS "/llama_slice.oir", &o, out.data, &r, &d), "%s", msgs.data ? msgs.data : "");
  summary = xstrdup(r.summary.data ? r.summary.data : "");
  orion_compile_result_free(&r);
  sb_free(&msgs);
  sb_puts(&out, "/Manifest.plist");
  size_t len;
  const char *err;
  cr_assert(read_file(out.data, 1u << 22, &manifest, &len, &err), "%s", err);
  sb_free(&out);
}

static void teardown(void) {
  free(manifest);
  free(summary);
  remove_tree(dir);
}

TestSuite(train_groups, .init = setup, .fini = teardown);

Test(train_groups, saved_values_as_groups) {
  Package p;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_parse_manifest(manifest, strlen(manifest), "P/Manifest.plist", &p, &d));
  cr_assert_not_null(p.training);
  const PkgFunction *fwd = package_function(&p, "main.fwd");
  cr_assert_not_null(fwd);
  static const char *const split[] = {"saved.layers.0.qr", "saved.layers.0.kr", "saved.layers.1.qr", "saved.layers.1.kr"};
  for (size_t i = 0; i < sizeof split / sizeof *split; i++) {
    const PkgGroup *g = package_output_group(fwd, split[i]);
    cr_assert_not_null(g, "%s", split[i]);
    cr_assert_eq(g->axis, 3);
    cr_assert_eq(g->nparts, 2);
    bool read = false;
    for (uint32_t k = 0; k < p.training->ninputs; k++)
      read = read || (p.training->inputs[k].from == PKG_TRAIN_FROM_OUTPUT && !strcmp(p.training->inputs[k].name, split[i]));
    cr_assert(read, "the contract reads %s", split[i]);
  }
  cr_assert_null(package_output_group(fwd, "saved.layers.0.vh"));
  /* SavedBytes counts a group once, as its parts' bytes, and --summary reports the same bytes. */
  cr_assert_eq(p.training->saved_bytes, package_training_saved_bytes(&p, p.training));
  char want[96];
  snprintf(want, sizeof want, "saved 23 values (%.2f KiB, %llu bytes)", (double)p.training->saved_bytes / 1024,
           (unsigned long long)p.training->saved_bytes);
  cr_assert(strstr(summary, want), "wanted '%s' in\n%s", want, summary);
  package_free(&p);
}

/* The manifest with the first `from` after `after` replaced by `to` must be
 * refused with exactly `want` (after "P/Manifest.plist: manifest: "). */
static void refused(const char *after, const char *from, const char *to, const char *want) {
  contract_refused(manifest, after, from, to, want);
}

#define GROUP "<key>OutputGroups</key>"

Test(train_groups, malformed_groups_refused) {
  refused(GROUP, "<string>saved.layers.0.qr</string>", "<string>saved.layers.0.qx</string>",
          "Training: the backward input 'layers.0.qr' comes from 'saved.layers.0.qr', which is not an output of the "
          "forward function 'main.fwd'");
  refused(GROUP, "<key>Axis</key>\n            <integer>3</integer>", "<key>Axis</key>\n            <integer>2</integer>",
          "Training: the backward input 'layers.0.qr' is fp32[2,2,16,16] but the forward output 'saved.layers.0.qr' "
          "it comes from is fp32[2,2,32,8]");
  refused(GROUP, "<key>Axis</key>\n            <integer>3</integer>", "<key>Axis</key>\n            <integer>4</integer>",
          "Training: the output group 'saved.layers.0.qr' of the function 'main.fwd' has parts that do not join "
          "along axis 4");
}
