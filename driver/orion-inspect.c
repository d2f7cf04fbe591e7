/*
 * orion-inspect: shows what a .anepkg holds (functions, inputs and outputs
 * in binding order with their surface sizes, the weights table) and verifies
 * every checksum. Exit codes: 0 the package is sound, 1 it is not, 2 usage, 3 out of memory.
 */
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "tool_memory.h"
#include "orion-inspect.h"
#include "orion/manifest.h"
#include "orion/patch.h"

enum { OPT_NO_WEIGHTS = 1, OPT_JSON, OPT_HELP, OPT_VERSION };

static const CliOption inspect_options[] = {
    {OPT_NO_WEIGHTS, 0, "no-weights", CLI_NO_VALUE, 0, NULL, "do not list the weights (they are still verified)", NULL},
    {OPT_JSON, 0, "json", CLI_NO_VALUE, 0, NULL, "print the report as one JSON object", NULL},
    {OPT_HELP, 'h', "help", CLI_NO_VALUE, 0, NULL, "show this help", NULL},
    {OPT_VERSION, 0, "version", CLI_NO_VALUE, 0, NULL, "show the version", NULL},
};

static const CliSpec inspect_spec = {
    .program = "orion-inspect",
    .usage = "usage: orion-inspect [options] PACKAGE.anepkg\n",
    .description = "Prints the contents of an orion package and verifies its checksums\n"
                   "(MIL files, the weight file, and every weight).\n",
    .options = inspect_options,
    .noptions = sizeof inspect_options / sizeof *inspect_options,
    .epilogue = "exit status: 0 the package is sound, 1 it is missing or damaged, 2 usage error, 3 out of memory\n",
    .help_column = 19,
};

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

/* The training contract: how the forward's results feed the backward. */
static void put_training(const PkgTraining *t) {
  printf("training: forward %s, backward %s, loss %s", t->forward, t->backward, t->loss);
  if (t->vocabulary) printf(", vocabulary %llu", (unsigned long long)t->vocabulary);
  printf(", %llu saved bytes\n", (unsigned long long)t->saved_bytes);
  printf("  backward inputs:\n");
  for (uint32_t i = 0; i < t->ninputs; i++) {
    const PkgTrainInput *in = &t->inputs[i];
    if (in->from == PKG_TRAIN_FROM_LOSS_SCALE) printf("    %-20s <- the loss scale\n", in->input);
    else printf("    %-20s <- forward %s %s\n", in->input, in->from == PKG_TRAIN_FROM_OUTPUT ? "output" : "input", in->name);
  }
  printf("  gradients:\n");
  for (uint32_t i = 0; i < t->ngradients; i++)
    printf("    %-20s -> %s %s\n", t->gradients[i].output, t->gradients[i].input ? "input" : "param", t->gradients[i].param);
  for (uint32_t i = 0; i < t->nrows; i++)
    printf("    %-20s -> rows of param %s by input %s\n", t->rows[i].output, t->rows[i].param, t->rows[i].indices);
  printf("  trainable params: %u\n", t->nparams);
  if (t->nadapters) printf("  LoRA adapters: %u\n", t->nadapters);
  for (uint32_t i = 0; i < t->nadapters; i++)
    printf("    %s (rank %u, alpha %g)\n", t->adapters[i].module, t->adapters[i].rank, t->adapters[i].alpha);
}

typedef struct InspectArgs {
  const char *path;
  bool list_weights, json;
} InspectArgs;

static int take_option(void *ctx, int id, const char *v, const char *spelling) {
  (void)v, (void)spelling;
  InspectArgs *a = ctx;
  switch (id) {
  case OPT_HELP: cli_print_help(&inspect_spec, stdout); return 0;
  case OPT_VERSION: printf("orion-inspect %s\n", ORION_VERSION); return 0;
  case OPT_NO_WEIGHTS: a->list_weights = false; return -1;
  case OPT_JSON: a->json = true; return -1;
  default: return -1;
  }
}

static int take_operand(void *ctx, const char *v) {
  return cli_one_operand(&inspect_spec, "package", &((InspectArgs *)ctx)->path, v);
}

int main(int argc, char **argv) {
  tool_memory_init("orion-inspect", NULL, NULL);
  InspectArgs a = {.list_weights = true};
  int rc = cli_parse(&inspect_spec, argc, argv, take_option, take_operand, &a);
  if (rc >= 0) return rc;
  if (!a.path) return cli_usage_error("orion-inspect", "no package");
  const char *path = a.path;
  bool list_weights = a.list_weights, json = a.json;
  Diag d;
  diag_init(&d, NULL);
  d.program = "orion-inspect";
  Package pkg;
  if (!package_read(path, &pkg, &d)) return 1;
  if (json) {
    bool pending = package_has_journal(path), ok = package_verify(&pkg, &d);
    char *text = inspect_json(&pkg, path, pending, list_weights, ok);
    puts(text);
    free(text);
    package_free(&pkg);
    return ok ? 0 : 1;
  }
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
      /* Named as the manifest's key names it: xxh64 in format 1, xxh3 from 2 on. */
      printf("  offset %llu  %llu bytes  %s %s\n", (unsigned long long)w->offset, (unsigned long long)w->bytes,
             package_weight_checksum_name(pkg.format_version), w->checksum);
    }
  }
  if (pkg.training) put_training(pkg.training);
  bool ok = package_verify(&pkg, &d);
  printf("checksums: %s\n", ok ? "all verified" : "FAILED");
  package_free(&pkg);
  return ok ? 0 : 1;
}
