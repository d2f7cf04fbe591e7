/*
 * orion-inspect: shows what a .anepkg holds (functions, inputs and outputs
 * in binding order with their surface sizes, the weights table) and verifies
 * every checksum. Exit codes: 0 the package is sound, 1 it is not, 2 usage.
 */
#include <stdlib.h>
#include <string.h>

#include "orion/manifest.h"
#include "orion/patch.h"

static void usage(FILE *out) {
  fputs("usage: orion-inspect [options] PACKAGE.anepkg\n"
        "\n"
        "Prints the contents of an orion package and verifies its checksums\n"
        "(MIL files, the weight file, and every weight).\n"
        "\n"
        "options:\n"
        "  --no-weights     do not list the weights (they are still verified)\n"
        "  -h, --help       show this help\n"
        "  --version        show the version\n"
        "\n"
        "exit status: 0 the package is sound, 1 it is missing or damaged, 2 usage error\n",
        out);
}

static void put_tensor(const PkgTensor *t) {
  printf("%s[", orion_dtype_name(t->dtype));
  for (uint32_t i = 0; i < t->rank; i++) printf("%s%lld", i ? "," : "", (long long)t->dims[i]);
  printf("]");
}

static void put_bindings(const char *title, const PkgTensor *t, uint32_t n) {
  printf("  %s (binding order):\n", title);
  for (uint32_t b = 0; b < n; b++)
    for (uint32_t i = 0; i < n; i++) {
      if (t[i].binding != b) continue;
      printf("    %2u  %-20s ", b, t[i].name);
      put_tensor(&t[i]);
      printf("  %llu bytes", (unsigned long long)t[i].bytes);
      if (strcmp(t[i].name, t[i].mil_name)) printf("  (MIL name %s)", t[i].mil_name);
      printf("\n");
    }
}

int main(int argc, char **argv) {
  const char *path = NULL;
  bool list_weights = true;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--version")) {
      printf("orion-inspect %s\n", ORION_VERSION);
      return 0;
    } else if (!strcmp(argv[i], "--no-weights")) {
      list_weights = false;
    } else if (argv[i][0] == '-') {
      return cli_usage_error("orion-inspect", "unknown option '%s'", argv[i]);
    } else if (path) {
      fprintf(stderr, "orion-inspect: error: more than one package ('%s')\n", argv[i]);
      return 2;
    } else {
      path = argv[i];
    }
  }
  if (!path) {
    return cli_usage_error("orion-inspect", "no package");
  }
  Diag d;
  diag_init(&d, NULL);
  d.program = "orion-inspect";
  Package pkg;
  if (!package_read(path, &pkg, &d)) return 1;
  printf("package %s\n", path);
  printf("  format %u, compiled by %s for %s (program %s) from %s\n", pkg.format_version, pkg.compiler_version,
         pkg.target, pkg.program_version, pkg.source_name);
  if (pkg.chip) printf("  chip %s\n", pkg.chip);
  printf("  weights %s: %llu bytes, generation %llu\n", PACKAGE_WEIGHTS, (unsigned long long)pkg.weights_size,
         (unsigned long long)pkg.weights_generation);
  /* Inspecting changes nothing: an interrupted update is shown, not completed. */
  if (package_has_journal(path))
    printf("  an interrupted weight update is pending (weights/weight.bin.journal): this is the state before it;\n"
           "  opening the package or 'orion-run patch --recover' completes it\n");
  printf("  minimum surface %llu bytes; lint %s (%u errors, %u warnings)\n", (unsigned long long)pkg.min_surface_bytes,
         pkg.lint_checked ? "checked" : "not run", pkg.lint_errors, pkg.lint_warnings);
  for (uint32_t i = 0; i < pkg.nfunctions; i++) {
    const PkgFunction *f = &pkg.functions[i];
    printf("function %s (%s), surfaces of %llu bytes\n", f->name, f->mil_file, (unsigned long long)f->surface_bytes);
    put_bindings("inputs", f->inputs, f->ninputs);
    put_bindings("outputs", f->outputs, f->noutputs);
    for (uint32_t g = 0; g < f->ngroups; g++) {
      printf("  output %s = concat(", f->groups[g].name);
      for (uint32_t k = 0; k < f->groups[g].nparts; k++) printf("%s%s", k ? ", " : "", f->groups[g].parts[k]);
      printf(", axis %u)\n", f->groups[g].axis);
    }
    uint64_t total = 0;
    for (uint32_t k = 0; k < f->nweights; k++) total += f->weights[k].bytes;
    printf("  weights: %u, %llu bytes\n", f->nweights, (unsigned long long)total);
    if (!list_weights) continue;
    for (uint32_t k = 0; k < f->nweights; k++) {
      const PkgTensor *w = &f->weights[k];
      printf("    %-28s ", w->name);
      put_tensor(w);
      printf("  offset %llu  %llu bytes  xxh64 %s\n", (unsigned long long)w->offset, (unsigned long long)w->bytes,
             w->xxh64);
    }
  }
  bool ok = package_verify(&pkg, &d);
  printf("checksums: %s\n", ok ? "all verified" : "FAILED");
  package_free(&pkg);
  return ok ? 0 : 1;
}
