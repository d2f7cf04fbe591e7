/*
 * LoRA training contracts (orionc --train --lora, docs/lora.md "Training
 * adapters"): examples/train/tiny.oir compiled through the library with an
 * adapter on its fc layer; the contract's gradients belong to the adapter
 * inputs, no param trains, Adapters records module, rank and alpha; read back
 * as written, and every inconsistency refused with its exact message. The
 * differentiation itself is checked against PyTorch by cli/train_lora.sh.
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/compile.h"
#include "orion/manifest.h"
#include "contract_check.h"

#define TINY ORION_SOURCE_ROOT "/examples/train/tiny.oir"

static char dir[] = "/tmp/orion-train-lora-XXXXXX";
static char *manifest;

/* Compiles tiny.oir with --train and the given --lora specs into dir/NAME; the
 * diagnostics go to msgs (may be NULL). */
static bool compile_lora(const LoraSpec *specs, uint32_t n, const char *name, StrBuf *msgs) {
  StrBuf out;
  sb_init(&out);
  sb_printf(&out, "%s/%s", dir, name);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  o.train = true;
  o.passes.pass_options.lora = specs;
  o.passes.pass_options.nlora = n;
  Diag d;
  diag_init(&d, NULL);
  StrBuf sink;
  sb_init(&sink);
  d.capture = msgs ? msgs : &sink;
  OrionCompileResult r;
  bool ok = orion_compile_file(TINY, &o, out.data, &r, &d);
  orion_compile_result_free(&r);
  sb_free(&sink);
  sb_free(&out);
  return ok;
}

static void setup(void) {
  cr_assert_not_null(mkdtemp(dir));
  const LoraSpec fc = {"fc", 2, 4.0};
  StrBuf msgs;
  sb_init(&msgs);
  cr_assert(compile_lora(&fc, 1, "t.anepkg", &msgs), "%s", msgs.data);
  sb_free(&msgs);
  StrBuf path;
  sb_init(&path);
  sb_printf(&path, "%s/t.anepkg/Manifest.plist", dir);
  size_t len;
  const char *err;
  cr_assert(read_file(path.data, 1u << 20, &manifest, &len, &err), "%s", err);
  sb_free(&path);
}

static void teardown(void) {
  free(manifest);
  remove_tree(dir);
}

TestSuite(train_lora_contract, .init = setup, .fini = teardown);

Test(train_lora_contract, adapters_train_params_frozen) {
  Package p;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_parse_manifest(manifest, strlen(manifest), "P/Manifest.plist", &p, &d));
  const PkgTraining *t = p.training;
  cr_assert_not_null(t);
  cr_assert_eq(t->nparams, 0, "every param is frozen");
  cr_assert_eq(t->ngradients, 2);
  cr_assert(t->gradients[0].input && t->gradients[1].input);
  cr_assert_str_eq(t->gradients[0].output, "grad.fc.lora_A");
  cr_assert_str_eq(t->gradients[0].param, "fc.lora_A");
  cr_assert_str_eq(t->gradients[1].param, "fc.lora_B");
  cr_assert_eq(t->nadapters, 1);
  cr_assert_str_eq(t->adapters[0].module, "fc");
  cr_assert_eq(t->adapters[0].rank, 2);
  cr_assert_float_eq(t->adapters[0].alpha, 4.0, 0);
  /* The adapters are fp32 inputs of the fp32 forward ([rank, in], [out, rank]); the backward reads them. */
  const PkgFunction *fwd = package_function(&p, t->forward);
  const PkgTensor *a = NULL;
  for (uint32_t i = 0; i < fwd->ninputs; i++)
    if (!strcmp(fwd->inputs[i].name, "fc.lora_A")) a = &fwd->inputs[i];
  cr_assert_not_null(a);
  cr_assert_eq(a->dtype, ORION_DT_FP32);
  cr_assert(a->rank == 2 && a->dims[0] == 2 && a->dims[1] == 8);
  bool read = false;
  for (uint32_t i = 0; i < t->ninputs; i++)
    read = read || (t->inputs[i].from == PKG_TRAIN_FROM_INPUT && !strcmp(t->inputs[i].name, "fc.lora_B"));
  cr_assert(read, "the backward reads lora_B (the gradient of x A^T is g B)");
  package_free(&p);
}

static void refused(const char *from, const char *to, const char *want) {
  contract_refused(manifest, "<key>Training</key>", from, to, want);
}

Test(train_lora_contract, refusals) {
  refused("<integer>2</integer>\n          <key>Alpha</key>", "<integer>3</integer>\n          <key>Alpha</key>",
          "Training: the adapter 'fc' of rank 3 needs the forward input 'fc.lora_A' [rank, in]");
  refused("<real>4</real>", "<real>-1</real>", "'Alpha' of an adapter must be a positive finite number");
  refused("<integer>2</integer>\n          <key>Alpha</key>", "<integer>0</integer>\n          <key>Alpha</key>",
          "'Rank' of the adapter 'fc' must be at least 1");
  refused("grad.fc.lora_B</string>\n          <key>Input</key>\n          <string>fc.lora_B</string>",
          "grad.fc.lora_B</string>\n          <key>Input</key>\n          <string>fc.lora_A</string>",
          "Training: the adapter input 'fc.lora_A' has two gradients, 'grad.fc.lora_A' and 'grad.fc.lora_B'");
  refused("grad.fc.lora_B</string>\n          <key>Input</key>\n          <string>fc.lora_B</string>",
          "grad.fc.lora_B</string>\n          <key>Input</key>\n          <string>tokens</string>",
          "Training: the gradient 'grad.fc.lora_B' belongs to 'tokens', which is not the lora_A or lora_B input of an "
          "adapter in Adapters");
  refused("<key>Output</key>\n          <string>grad.fc.lora_B</string>",
          "<key>Output</key>\n          <string>grad.fc.lora_A</string>",
          "Training: the gradient 'grad.fc.lora_A' is fp32[2,8] but the adapter input 'fc.lora_B' needs fp32[8,2]");
  refused("<key>Output</key>\n          <string>grad.fc.lora_B</string>\n          <key>Input</key>",
          "<key>Output</key>\n          <string>grad.fc.lora_B</string>\n          <key>Param</key>",
          "Training: the gradient 'grad.fc.lora_B' belongs to 'fc.lora_B', which is not a trainable param");
  refused("<array/>\n      <key>Adapters</key>", "<array><string>fc.weight</string></array>\n      <key>Adapters</key>",
          "Training: LoRA training (Adapters) freezes every param, but TrainableParams lists 1");
  refused("<key>Module</key>\n          <string>fc</string>", "<key>Module</key>\n          <string>head</string>",
          "Training: the gradient 'grad.fc.lora_A' belongs to 'fc.lora_A', which is not the lora_A or lora_B input of "
          "an adapter in Adapters");
}

Test(train_lora_contract, compile_errors) {
  const LoraSpec none = {"nothing*", 2, 2.0};
  StrBuf msgs;
  sb_init(&msgs);
  cr_assert_not(compile_lora(&none, 1, "none.anepkg", &msgs));
  cr_assert(strstr(msgs.data, "error: --lora: pattern 'nothing*' matches no linear layer with a constant weight\n"),
            "%s", msgs.data);
  sb_free(&msgs);
  /* Two layers, each its own adapter; ranks and alphas kept per layer. */
  const LoraSpec two[] = {{"fc", 2, 4.0}, {"head", 3, 1.5}};
  sb_init(&msgs);
  cr_assert(compile_lora(two, 2, "two.anepkg", &msgs), "%s", msgs.data);
  sb_free(&msgs);
  StrBuf path;
  sb_init(&path);
  sb_printf(&path, "%s/two.anepkg", dir);
  Package p;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_read(path.data, &p, &d));
  cr_assert_eq(p.training->nadapters, 2);
  cr_assert_str_eq(p.training->adapters[1].module, "head");
  cr_assert_eq(p.training->adapters[1].rank, 3);
  cr_assert_float_eq(p.training->adapters[1].alpha, 1.5, 0);
  cr_assert_eq(p.training->ngradients, 4);
  package_free(&p);
  sb_free(&path);
}
