#!/usr/bin/env bash
# A wrong training contract in a package on disk says where: every refusal
# of the contract's checks (pkgio/package_training.c) reads
# "PKG/Manifest.plist:LINE:COL: error: manifest: Training: ..." at the entry
# at fault (a BackwardInputs, Gradients or RowGradients <dict>, a
# TrainableParams <string>, the value of Loss or SavedBytes), the text after
# the location as it always was. The positions are found independently here,
# from the edited text.
#
#   train_manifest.sh ORIONC ORION_INSPECT SOURCE_ROOT
set -u
orionc=$(realpath "$1") inspect=$(realpath "$2") root=$(realpath "$3")
source "$(dirname "$0")/lib.sh"

check compile 0 "$orionc" -w --train "$root/examples/train/tiny.oir" -o tiny.anepkg

# broken NAME FROM TO AT: a copy of tiny.anepkg with the first FROM after the
# Training key replaced by TO; prints the LINE:COL where the refusal must be:
# AT=value the replaced element, AT=dict the <dict> that holds it.
broken() {
  rm -rf "$1.anepkg" && cp -r tiny.anepkg "$1.anepkg"
  python3 - "$1.anepkg/Manifest.plist" "$2" "$3" "$4" <<'PY'
import sys
path, old, new, at = sys.argv[1:]
text = open(path).read()
start = text.index("<key>Training</key>")
i = text.index(old, start)
text = text[:i] + new + text[i + len(old):]
open(path, "w").write(text)
if at == "dict":
    i = text.rindex("<dict>", 0, i)
line = text.count("\n", 0, i) + 1
col = i - (text.rindex("\n", 0, i) + 1) + 1
print(f"{line}:{col}")
PY
}

refused() { # refused NAME FROM TO AT MESSAGE
  local pos
  pos=$(broken "$1" "$2" "$3" "$4")
  check "$1" 1 "$inspect" "$1.anepkg"
  contains "$1" "$1.anepkg/Manifest.plist:$pos: error: manifest: Training: $5"
}

refused grad-output "<string>grad.fc.weight</string>" "<string>grad.nope</string>" dict \
  "the gradient 'grad.nope' is not an output of the backward function 'main.bwd'"
refused loss "<string>loss</string>" "<string>lost</string>" value \
  "the loss 'lost' is not an output of the forward function 'main.fwd'"
refused saved-bytes "<integer>2560</integer>" "<integer>2561</integer>" value \
  "SavedBytes is 2561 but the forward outputs the backward reads hold 2560 bytes"
refused input-name "<string>saved.logits</string>" "<string>saved.nope</string>" dict \
  "the backward input 'logits' comes from 'saved.nope', which is not an output of the forward function 'main.fwd'"
refused param-twice "<string>ln.b</string>
        <string>fc.weight</string>" "<string>ln.g</string>
        <string>fc.weight</string>" value \
  "the trainable param 'ln.g' is listed twice"
refused rows-indices "<string>tokens</string>
        </dict>" "<string>targets2</string>
        </dict>" dict \
  "the row gradient 'rows.wte' (rows of 'wte' by 'targets2') is indexed by no int32 input of the forward function"

# The same contract given as text, not a file, keeps its old form: no line (test_train_contract.c).
finish
