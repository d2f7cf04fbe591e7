#!/usr/bin/env bash
# Machine-readable reports: orion-inspect --json, orionc --summary --json and
# orion-run --json (with --repeat and --profile), each one JSON object that
# python's json module parses, with the exact fields and values checked.
#
#   json.sh ORIONC ORION_RUN ORION_INSPECT
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
inspect=$(realpath "$3")
source "$(dirname "$0")/lib.sh"
jcheck() { # jcheck NAME STATUS CMD...: stdout alone in out (the JSON), stderr in err
  local name=$1 want=$2
  shift 2
  "$@" >out 2>err
  local got=$?
  if [ "$got" = "$want" ]; then pass; else fail "$name: exit $got, expected $want"; cat err; fi
}
py() { # py NAME SCRIPT: the script reads the JSON in out (as j) and asserts
  if /usr/bin/python3 -c "import json,sys
j = json.load(open('out'))
$2" 2>py.err; then pass; else fail "$1: $(cat py.err)"; cat out; fi
}

printf 'func main(x: fp16[1,4]) {\n  param w: fp16[2,4] = ones;\n  const two: fp16[] = 2;\n  m = mul(x, two);\n  y = linear(m, w);\n  return y, m;\n}\n' >f.oir
check compile 0 "$orionc" --no-lint --no-cache --chip=m4 -o f.anepkg f.oir

jcheck summary 0 "$orionc" --summary --json --emit=none f.oir
py summary '
assert list(j) == ["source", "functions"], list(j)
assert j["source"] == "f.oir"
[f] = j["functions"]
assert f["name"] == "main"
assert f["inputs"] == [{"name": "x", "dtype": "fp16", "shape": [1, 4]}], f["inputs"]
assert [o["name"] for o in f["outputs"]] == ["y", "m"]
assert f["outputs"][0] == {"name": "y", "dtype": "fp16", "shape": [1, 2]}, f["outputs"]
assert f["params"] == 1 and f["weight_elements"] == 8 and f["weight_bytes"] == 16 and f["consts"] == 1, f
assert f["ops"] == {"mul": 1, "linear": 1}, f["ops"]
assert f["op_count"] == 2'
check summary-needs-summary 2 "$orionc" --json --emit=none f.oir
contains summary-needs-summary "orionc: error: --json goes with --summary"

jcheck inspect 0 "$inspect" --json f.anepkg
py inspect '
assert j["package"] == "f.anepkg" and j["format"] == 2 and j["target"] == "ios18" and j["chip"] == "m4", j
assert j["source"] == "f.oir" and j["compiler"].startswith("orionc ")
assert j["pending_update"] is False and j["checksums"] == "verified"
assert j["weights_file"]["path"] == "weights/weight.bin" and j["weights_file"]["generation"] == 0
assert j["lint"] == {"checked": False, "errors": 0, "warnings": 0}, j["lint"]
[f] = j["functions"]
assert f["name"] == "main" and f["mil_file"] == "model.mil"
[x] = f["inputs"]
assert x["name"] == "x" and x["binding"] == 0 and x["shape"] == [1, 4] and x["bytes"] == 8, x
assert [o["name"] for o in f["outputs"]] == ["y", "m"] or [o["name"] for o in f["outputs"]] == ["m", "y"]
assert f["weight_count"] == 1 and f["weight_bytes"] == 16
[w] = f["weights"]
assert w["name"] == "w" and w["dtype"] == "fp16" and w["shape"] == [2, 4] and w["bytes"] == 16, w
assert len(w["xxh3"]) == 16 and "xxh64" not in w'
jcheck inspect-no-weights 0 "$inspect" --json --no-weights f.anepkg
py inspect-no-weights '
assert "weights" not in j["functions"][0] and j["functions"][0]["weight_count"] == 1'
# A damaged package: the object says so, and the exit status too.
cp -r f.anepkg bad.anepkg
printf 'y' >>bad.anepkg/model.mil
"$inspect" --json bad.anepkg >out 2>err
if [ $? = 1 ]; then pass; else fail "inspect-damaged: exit status"; fi
py inspect-damaged '
assert j["checksums"] == "failed"'

dict="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }"
{ printf '\x93NUMPY\x01\x00\x76\x00%s' "$dict"; printf "%$((128 - 10 - ${#dict} - 1))s\n" ''
  printf '\x00\x00\x80\xbf\x00\x00\x00\x3f\x00\x00\x00\x40\x00\x00\x40\xc0'; } >x.npy
mkdir o
"$run" --json --repeat 3 --profile --numerics fp32 --output-dir o f.anepkg --input x=x.npy >out 2>err
if [ $? = 0 ] && [ ! -s err ]; then pass; else fail "run: exit status or stderr"; cat err; fi
py run '
assert j["program"] == "f.anepkg" and j["function"] == "main" and j["backend"] == "cpu" and j["numerics"] == "fp32"
assert j["runs"] == 3
t = j["ms_per_run"]
assert set(t) == {"mean", "best"} and 0 <= t["best"] <= t["mean"] * 3 + 1e-9, t
outs = {o["name"]: o for o in j["outputs"]}
assert outs["y"] == {"name": "y", "file": "o/y.npy", "dtype": "fp16", "shape": [1, 2]}, outs
assert outs["m"]["file"] == "o/m.npy"
p = j["profile"]
assert p["runs"] == 3
ops = {o["op"]: o["count"] for o in p["ops"]}
assert ops.get("mul") == 1 and sum(ops.values()) == len(p["statements"]), ops
assert all(s["runs"] in (0, 3) and s["file"] == "f.anepkg/model.mil" and s["line"] > 0 for s in p["statements"]), p
assert [(s["name"], s["runs"]) for s in p["statements"] if s["op"] == "mul"] == [("m", 3)]'
"$run" --json --output-dir o f.anepkg --input x=x.npy >out 2>err
py run-plain '
assert j["runs"] == 1 and j["profile"] is None'

finish
