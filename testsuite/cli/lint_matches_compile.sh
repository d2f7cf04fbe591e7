#!/usr/bin/env bash
# orion-lint on a .oir file and orionc's constraint check after its passes
# report the same findings: the same rules at the same severities, places
# and words, each once. orion-lint lints after orionc's default pipeline
# (before, it linted after legalization only, so what lower-linear fixes was
# a warning there and nothing in orionc), a finding the pipeline fixes is a
# note marked will_be_fixed, and ANE016 comes from one estimate, reported
# once per op (sram-annotate used to warn as well, and the linter flagged
# an op on constants that the pass rightly left out). The one deliberate
# difference: orionc reports ANE004 on a graph as a note, its package
# writer padding the surfaces.
set -u
lint=$(realpath "$1")
orionc=$(realpath "$2")
root=$(realpath "$3")
source "$(dirname "$0")/lib.sh"

# agree NAME FILE [OPTIONS...]: the findings left after the pipeline are orionc's.
agree() {
  local name=$1 file=$2
  shift 2
  "$lint" --format=json "$@" "$file" >lint.json 2>/dev/null
  "$orionc" -v --emit=none --no-cache "$@" "$file" >orionc.out 2>&1
  if /usr/bin/python3 - lint.json orionc.out >diff.out 2>&1 <<'PY'; then pass; else fail "$name: orion-lint and orionc disagree"; cat diff.out; fi
import json, re, sys
findings = json.load(open(sys.argv[1]))["findings"]
lint = sorted((f["file"], f["line"], f["column"], f["severity"], f["message"], f["rule"])
              for f in findings if not f["will_be_fixed"] and f["rule"] != "ANE004")
lines = open(sys.argv[2]).read().split("\n")
diag = re.compile(r"^(.*):(\d+):(\d+): (error|warning|note): (.*) \[(ANE\d{3})\]$")
compiled = []
for i, line in enumerate(lines):
    m = diag.match(line)
    # A finding of the check is followed by its explain note (after the source line and caret).
    if not m or not any("'orion-lint --explain %s'" % m.group(6) in l for l in lines[i + 1:i + 4]):
        continue
    if m.group(6) == "ANE004":
        continue
    compiled.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5), m.group(6)))
compiled.sort()
if lint != compiled:
    print("orion-lint:", *lint, sep="\n  ")
    print("orionc:", *compiled, sep="\n  ")
    sys.exit(1)
PY
}

for e in "$root"/examples/*.oir; do agree "example $(basename "$e")" "$e"; done
printf 'func main(a: fp16[1,64,384], b: fp16[1,64,384]) {\n  y = concat(a, b, axis=-1);\n  n = layer_norm(y);\n  return n;\n}\n' >concat.oir
agree concat concat.oir
printf 'func main(x: fp16[1024, 1024]) {\n  y = relu(x);\n  return y;\n}\n' >sram.oir
agree sram-m1 sram.oir --chip=m1
printf 'func main(x: fp16[1,32,768]) {\n  param w: fp16[768,768] = normal(seed=1, std=0.02);\n  y = linear(x, w);\n  z = gelu(y);\n  return z;\n}\n' >fixed.oir
agree fixed fixed.oir
# A matmul by a constant that lower-linear leaves: a warning in both.
printf 'func main(x: fp16[1,32,768]) {\n  const w: fp16[768,768] = 0.5;\n  y = matmul(x, w);\n  return y;\n}\n' >matmul.oir
agree matmul matmul.oir

# What the pipeline fixes is a note marked will_be_fixed (text: "which runs next"), and orionc says nothing.
check fixed-text 0 "$lint" fixed.oir
contains fixed-text "fixed.oir:3:7: note[ANE015]: linear producing 'y' multiplies by the constant 'w'"
contains fixed-text "fixed.oir:3:7: note: fixed by pass 'lower-linear', which runs next"
contains fixed-text "note: fixed by pass 'gelu-tanh', which runs next"
"$lint" --format=json fixed.oir >fixed.json
field() {
  local got
  got=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(repr(eval(sys.argv[2])))' "$2" "$3" 2>&1)
  if [ "$got" = "$4" ]; then pass; else fail "$1: $3 is $got, expected $4"; fi
}
field fixed-json fixed.json "sorted((f['rule'], f['severity'], f['unfixed_severity'], f['will_be_fixed']) for f in d['findings'] if f['rule'] != 'ANE004')" \
  "[('ANE010', 'note', 'error', True), ('ANE015', 'note', 'warning', True)]"
field fixed-summary fixed.json "d['summary']['will_be_fixed']" 2
check fixed-orionc 0 "$orionc" -Werror --emit=none fixed.oir
if grep -q "ANE01[05]" out; then fail "fixed-orionc: reports what its passes fixed"; cat out; else pass; fi

# ANE016 once per op, from one estimate: the 4 MiB relu on m1 in both tools, and for a
# vocabulary projection the projection only (not lower-linear's reshape of its constant weight).
check sram-once-orionc 0 "$orionc" --emit=none --chip=m1 sram.oir
if [ "$(grep -c '\[ANE016\]' out)" = 1 ]; then pass; else fail "sram-once-orionc: ANE016 not once"; cat out; fi
contains sram-once-orionc "sram.oir:2:7: warning: relu producing 'y' has a working set of about 4 MiB, over the 1.9 MiB SRAM budget of m1 [ANE016]"
check sram-once-lint 0 "$lint" --chip=m1 sram.oir
if [ "$(grep -c 'ANE016\]: ' out)" = 1 ]; then pass; else fail "sram-once-lint: ANE016 not once"; cat out; fi
printf 'func main(x: fp16[1,64,768]) {\n  param w: fp16[32000,768] = normal(seed=1, std=0.02);\n  y = linear(x, w);\n  return y;\n}\n' >vocab.oir
check vocab-sram 0 "$orionc" --emit=none vocab.oir
if [ "$(grep -c '\[ANE016\]' out)" = 1 ] && ! grep -q "_w_1x1" out; then pass; else fail "vocab-sram: ANE016 not once"; cat out; fi
contains vocab-sram "vocab.oir:3:7: warning: conv producing 'y_conv' has a working set of about 50.9 MiB, over the 32 MiB SRAM budget of ios18 [ANE016]"
agree vocab vocab.oir

# The known difference, so that it stays the only one.
printf 'func main(x: fp16[1,16]) {\n  y = relu(x);\n  return y;\n}\n' >small.oir
check small-lint 0 "$lint" small.oir
contains small-lint "small.oir:1:11: warning[ANE004]:"
check small-orionc 0 "$orionc" -v --emit=none small.oir
contains small-orionc "small.oir:1:11: note: input 'x' of 'main' has 32 bytes"

finish
