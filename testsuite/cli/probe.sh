#!/usr/bin/env bash
# orion-run probe: --help, usage errors, the ane backend refused off macOS
# with the way out named, --backend=cpu running the chosen probes (nothing
# rejected) into JSON with the table's chip fields, -o written atomically:
# a failed run leaves an existing file as it was, a signal while the probes
# run or while the file is written leaves neither the file nor the private
# directory (ORION_TEST_PAUSE_AT, docs/testing.md).
#
#   probe.sh ORION_RUN ORION_LINT SOURCE_ROOT
set -u
set -m # background jobs keep SIGINT
run=$(realpath "$1") lint=$(realpath "$2") root=$(realpath "$3")
source "$(dirname "$0")/lib.sh"
export TMPDIR="$tmp/t"
mkdir "$TMPDIR"

check help 0 "$run" probe --help
contains help "usage: orion-run probe [options] [--backend ane] [--chip NAME] [-o FILE]"
contains help "--max-compiles N"
check help-short 0 "$run" probe -h
check listed 0 "$run" --help
contains listed "orion-run probe [--backend ane]"

check only-unknown 2 "$run" probe --backend=cpu --only concat,cliff
contains only-unknown "orion-run probe: error: unknown probe 'cliff' (expected dialect, channels, surface, concat, gelu, sram, dispatch or compiles)"
check only-empty 2 "$run" probe --backend=cpu --only ,
contains only-empty "--only needs at least one probe"
check max-compiles-0 2 "$run" probe --backend=cpu --max-compiles 0
contains max-compiles-0 "--max-compiles needs a count from 1 to 2048 (not '0')"
check max-compiles-big 2 "$run" probe --backend=cpu --max-compiles=5000
contains max-compiles-big "--max-compiles needs a count from 1 to 2048 (not '5000')"
check chip-name 2 "$run" probe --backend=cpu --chip M3
contains chip-name "chip name 'M3' must be lowercase letters and digits (at most 16, e.g. m3)"
check target 2 "$run" probe --backend=cpu --target ios15
contains target "unknown target 'ios15' (expected ios16, ios17 or ios18)"
check operand 2 "$run" probe --backend=cpu m.anepkg
contains operand "unexpected operand 'm.anepkg' (orion-run probe takes options only)"
check pace 2 "$run" probe --backend=cpu --pace soon
contains pace "--pace needs a number of milliseconds from 0 to 600000 (not 'soon')"
check runs 2 "$run" probe --backend=cpu --runs 0
contains runs "--runs needs a count from 1 to 100000 (not '0')"

# Off macOS the default backend is not there: the error says so and names --backend=cpu.
echo old >kept.json
check no-ane 1 "$run" probe -o kept.json
contains no-ane "the ane backend is only available on macOS"
contains no-ane "note: 'orion-run probe --backend=cpu' tries the probes on the CPU reference backend, which rejects nothing"
if [ "$(cat kept.json)" = old ]; then pass; else fail "no-ane: kept.json changed"; fi

# Both spellings of each option; the CPU backend accepts every program.
check cpu 0 "$run" probe --backend cpu --chip=m3 --only=concat,gelu,channels,dialect --output=p.json
contains cpu "orion-run probe: backend cpu, chip m3, programs in MIL 1.0 <ios16>"
contains cpu "concat:         accepted"
contains cpu "channels:       every count up to the cap, 262144, accepted"
contains cpu "orion-run probe: wrote p.json"
check cpu-json 0 /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
e = j["chips"]["m3"]
assert sorted(e) == ["description", "max_tensor_dim", "min_surface_bytes", "sram_budget_bytes", "target"], sorted(e)
for k in ["min_surface_bytes", "sram_budget_bytes", "max_tensor_dim"]:
    assert {"value", "inherited", "source", "disputed"} <= set(e[k]), e[k]
p = j["probe"]
assert p["backend"] == "cpu" and p["chip"] == "m3", p
assert p["concat"] == {"rule": "ANE001", "accepted": True, "error": None}, p["concat"]
assert p["gelu"]["accepted"] is True
assert p["channels"]["all_accepted"] is True and p["channels"]["largest_accepted"] == 262144
assert [p["dialects"][t]["accepted"] for t in ["ios16", "ios17", "ios18"]] == [True] * 3, p["dialects"]
assert e["target"]["value"] == "ios18" and "orion-run probe" in e["target"]["source"], e["target"]
assert "surface" not in p and "sram" not in p and "compiles" not in p, sorted(p)
' p.json
# Merged into the shipped table as docs/ane-backend.md says, the table still loads (orion-lint's loader).
check merge 0 /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1])); p = json.load(open(sys.argv[2]))
t["chips"].update(p["chips"]); json.dump(t, open("merged.json", "w"), indent=2, ensure_ascii=False)' \
  "$root/constraints/ane_constraints.json" p.json
check merged-loads 0 "$lint" --table=merged.json --list
check merged-target 0 /usr/bin/python3 -c '
import json
assert json.load(open("merged.json"))["chips"]["m3"]["target"]["value"] == "ios18"'
# Standard output by default; with -o and --json both.
"$run" probe --backend=cpu --only gelu --chip m1 --target ios16 >stdout.json 2>err.txt
check stdout-json 0 /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["probe"]["target"] == "ios16" and j["probe"]["gelu"]["accepted"] is True
' stdout.json
"$run" probe --backend=cpu --only gelu --pace=0 -o - >dash.json 2>err.txt
check dash-json 0 /usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' dash.json
if [ ! -e ./- ]; then pass; else fail "-o -: wrote a file named -"; fi
check both 0 "$run" probe --backend=cpu --only dispatch --runs 3 -o both.json --json
contains both '"runs":	3'
if [ -s both.json ]; then pass; else fail "both: no both.json"; fi
check compiles 0 "$run" probe --backend=cpu --only compiles --max-compiles 7 -o c.json
contains compiles "compile budget: no failure in 7 programs"

# Cannot write: an error, nothing made.
check unwritable 1 "$run" probe --backend=cpu --only gelu -o missing/p.json
contains unwritable "cannot write missing/p.json"

# Signals: at a probe program (the private directory exists) and while the JSON is written.
mkfifo pause
export ORION_TEST_PAUSE_FIFO="$tmp/pause"
interrupt() { # interrupt NAME POINT SIGNAL STATUS
  local name=$1 point=$2 sig=$3 want=$4 pid got at
  rm -f s.json
  ORION_TEST_PAUSE_AT=$point "$run" probe --backend=cpu --only gelu -o s.json >out 2>&1 &
  pid=$!
  read -r at <pause
  [ "$at" = "$point" ] || fail "$name: paused at '$at', expected '$point'"
  kill -s "$sig" $pid
  { wait $pid; } 2>/dev/null
  got=$?
  if [ "$got" = "$want" ]; then pass; else fail "$name: exit $got, expected $want"; cat out; fi
  if [ -e s.json ] || compgen -G 's.json.tmp.*' >/dev/null; then fail "$name: output left:" s.json*; else pass; fi
  if [ -z "$(ls -A "$TMPDIR")" ]; then pass; else fail "$name: left in TMPDIR:" "$TMPDIR"/*; fi
}
interrupt sigterm-program probe-program TERM 143
interrupt sigint-write atomic-file INT 130
finish
