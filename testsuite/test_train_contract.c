/*
 * The training contract of a package (manifest Training): written by the
 * package writer from orionc --train-contract's JSON, read back as written,
 * and every inconsistency with the functions' signatures refused with its
 * exact message (testsuite/train/model/bigram.oir and bigram.train.json).
 */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orion/compile.h"
#include "orion/manifest.h"
#include "contract_check.h"

#define MODEL ORION_SOURCE_ROOT "/testsuite/train/model"

static char dir[] = "/tmp/orion-train-contract-XXXXXX";
static char *manifest; /* the compiled bigram package's Manifest.plist */

static void setup(void) {
  cr_assert_not_null(mkdtemp(dir));
  StrBuf out;
  sb_init(&out);
  sb_printf(&out, "%s/b.anepkg", dir);
  OrionCompileOptions o;
  orion_compile_options_init(&o);
  Diag d;
  diag_init(&d, NULL);
  StrBuf msgs; /* the constraint check's notes */
  sb_init(&msgs);
  d.capture = &msgs;
  PkgTraining *t;
  cr_assert(orion_train_contract_read_json(MODEL "/bigram.train.json", &t, &d));
  o.training = t;
  OrionCompileResult r;
  cr_assert(orion_compile_file(MODEL "/bigram.oir", &o, out.data, &r, &d), "%s", msgs.data);
  orion_compile_result_free(&r);
  sb_free(&msgs);
  package_training_free(t);
  sb_puts(&out, "/Manifest.plist");
  size_t len;
  const char *err;
  cr_assert(read_file(out.data, 1u << 20, &manifest, &len, &err), "%s", err);
  sb_free(&out);
}

static void teardown(void) {
  free(manifest);
  remove_tree(dir);
}

TestSuite(train_contract, .init = setup, .fini = teardown);

Test(train_contract, read_back_as_written) {
  Package p;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_parse_manifest(manifest, strlen(manifest), "P/Manifest.plist", &p, &d));
  const PkgTraining *t = p.training;
  cr_assert_not_null(t);
  cr_assert_str_eq(t->forward, "fwd");
  cr_assert_str_eq(t->backward, "bwd");
  cr_assert_str_eq(t->loss, "loss");
  cr_assert_eq(t->vocabulary, 8);
  cr_assert_eq(t->saved_bytes, 512, "probs and x: 2 x 2*4*8 fp32");
  cr_assert_eq(t->ninputs, 4);
  cr_assert_str_eq(t->inputs[0].input, "probs");
  cr_assert_eq(t->inputs[0].from, PKG_TRAIN_FROM_OUTPUT);
  cr_assert_eq(t->inputs[2].from, PKG_TRAIN_FROM_INPUT);
  cr_assert_str_eq(t->inputs[2].name, "targets");
  cr_assert_eq(t->inputs[3].from, PKG_TRAIN_FROM_LOSS_SCALE);
  cr_assert_null(t->inputs[3].name);
  cr_assert_eq(t->ngradients, 2);
  cr_assert_str_eq(t->gradients[0].output, "grad.W");
  cr_assert_str_eq(t->gradients[0].param, "W");
  cr_assert_eq(t->nparams, 2);
  cr_assert_eq(package_training_saved_bytes(&p, t), 512);
  package_free(&p);
}

Test(train_contract, absent_in_other_packages) {
  /* The key is optional: a manifest without it reads with no contract. */
  char *text = xstrdup(manifest);
  char *k = strstr(text, "<key>Training</key>"), *end = strstr(text, "</dict>\n</plist>");
  cr_assert(k && end);
  memmove(k, end, strlen(end) + 1);
  Package p;
  Diag d;
  diag_init(&d, NULL);
  cr_assert(package_parse_manifest(text, strlen(text), "P/Manifest.plist", &p, &d));
  cr_assert_null(p.training);
  package_free(&p);
  free(text);
}

/* The manifest with the first `from` after the Training key replaced by `to`
 * must be refused with exactly `want` (after "P/Manifest.plist: manifest: "). */
static void refused(const char *from, const char *to, const char *want) {
  contract_refused(manifest, "<key>Training</key>", from, to, want);
}

Test(train_contract, functions_and_loss) {
  refused("<string>fwd</string>", "<string>forward</string>",
          "Training: the forward function 'forward' is not a function of the package");
  refused("<string>bwd</string>", "<string>fwd</string>",
          "Training: the forward and backward functions are both 'fwd'");
  refused("<string>loss</string>", "<string>lost</string>",
          "Training: the loss 'lost' is not an output of the forward function 'fwd'");
  refused("<string>loss</string>", "<string>probs</string>",
          "Training: the loss 'probs' is fp32[2,4,8]; it must be an fp32[] scalar");
  refused("<key>Loss</key>", "<key>Los</key>", "'Training' has no 'Loss'");
  refused("<integer>512</integer>", "<integer>500</integer>",
          "Training: SavedBytes is 500 but the forward outputs the backward reads hold 512 bytes");
  refused("<key>Vocabulary</key>\n      <integer>8</integer>\n", "",
          "Training: the forward function has a 'tokens' input but the contract has no Vocabulary");
}

Test(train_contract, backward_inputs) {
  refused("<string>output</string>", "<string>outputs</string>",
          "'From' of the backward input 'probs' must be output, input or loss_scale, not 'outputs'");
  refused("<key>Name</key>\n          <string>probs</string>", "<key>Name</key>\n          <string>logits</string>",
          "Training: the backward input 'probs' comes from 'logits', which is not an output of the forward function "
          "'fwd'");
  refused("<key>Name</key>\n          <string>x</string>",
          "<key>Name</key>\n          <string>tokens</string>",
          "Training: the backward input 'x' comes from 'tokens', which is not an output of the forward function 'fwd'");
  refused("<string>output</string>\n          <key>Name</key>\n          <string>probs</string>",
          "<string>input</string>\n          <key>Name</key>\n          <string>tokens</string>",
          "Training: the backward input 'probs' is fp32[2,4,8] but the forward input 'tokens' it comes from is "
          "int32[2,4]");
  refused("<key>Input</key>\n          <string>x</string>", "<key>Input</key>\n          <string>probs</string>",
          "Training: the backward input 'probs' has two sources");
  refused("<key>Input</key>\n          <string>x</string>", "<key>Input</key>\n          <string>y</string>",
          "Training: 'y' is not an input of the backward function 'bwd'");
  refused("<key>Input</key>\n          <string>loss_scale</string>\n          <key>From</key>\n          "
          "<string>loss_scale</string>",
          "<key>Input</key>\n          <string>loss_scale</string>\n          <key>From</key>\n          "
          "<string>output</string>\n          <key>Name</key>\n          <string>probs</string>",
          "Training: the backward input 'loss_scale' is fp32[] but the forward output 'probs' it comes from is "
          "fp32[2,4,8]");
  refused("<string>x</string>\n          <key>From</key>\n          <string>output</string>\n          <key>Name</key>"
          "\n          <string>x</string>",
          "<string>x</string>\n          <key>From</key>\n          <string>loss_scale</string>",
          "Training: the backward input 'x' takes the loss scale, an fp32[] scalar, but is fp32[2,4,8]");
  refused("<dict>\n          <key>Input</key>\n          <string>x</string>\n          <key>From</key>\n          "
          "<string>output</string>\n          <key>Name</key>\n          <string>x</string>\n        </dict>",
          "", "Training: the backward input 'x' has no source");
}

Test(train_contract, gradients_and_params) {
  refused("<key>Output</key>\n          <string>grad.W</string>", "<key>Output</key>\n          <string>grad.V</string>",
          "Training: the gradient 'grad.V' is not an output of the backward function 'bwd'");
  refused("<key>Param</key>\n          <string>b</string>", "<key>Param</key>\n          <string>W</string>",
          "Training: the param 'W' has two gradients, 'grad.W' and 'grad.b'");
  refused("<key>Output</key>\n          <string>grad.b</string>", "<key>Output</key>\n          <string>grad.W</string>",
          "Training: the gradient 'grad.W' is fp32[8,8] but the param 'b' needs fp32[8]");
  refused("<dict>\n          <key>Output</key>\n          <string>grad.b</string>\n          <key>Param</key>\n          "
          "<string>b</string>\n        </dict>", "", "Training: the trainable param 'b' has no gradient");
  refused("<string>b</string>\n      </array>", "</array>",
          "Training: the gradient 'grad.b' belongs to 'b', which is not a trainable param");
  refused("<string>b</string>\n      </array>", "<string>b</string>\n        <string>b</string>\n      </array>",
          "Training: the trainable param 'b' is listed twice");
  refused("<string>b</string>\n      </array>", "<string>b</string>\n        <string>c</string>\n      </array>",
          "Training: the trainable param 'c' is not a weight of the forward function 'fwd'");
}
