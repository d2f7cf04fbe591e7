#!/usr/bin/env bash
# The man pages say what --help says: the same options in the same order with
# the same text, the same synopsis and exit status (scripts/gen_man.py makes
# them from --help at build time; this reads both independently). With groff
# installed, each page must also format without a warning.
#
#   man.sh ORIONC ORION_RUN ORION_INSPECT ORION_LINT orionc.1 orion-run.1 orion-run-patch.1 orion-run-plot.1 \
#     orion-run-train.1 orion-inspect.1 orion-lint.1 orion-run-generate.1 orion-convert.1 orion-tokenize.1 ... orion-run-probe.1
# (the tools first: ORIONC ORION_RUN ORION_INSPECT ORION_LINT ORION_CONVERT ORION_TOKENIZE, then the pages)
set -u
orionc=$(realpath "$1") run=$(realpath "$2") inspect=$(realpath "$3") lint=$(realpath "$4")
convert=$(realpath "$5") tokenize=$(realpath "$6")
pages=()
for page in "${@:7}"; do pages+=("$(realpath "$page")"); done
source "$(dirname "$0")/lib.sh"

agree() { # agree NAME PAGE TOOL [SUBCOMMAND]
  local name=$1 page=$2
  shift 2
  "$@" --help >help.txt
  if /usr/bin/python3 - help.txt "$page" >py.out 2>&1 <<'PY'; then pass; else fail "$name: man page and --help differ"; cat py.out; fi
import re, sys
help_text = open(sys.argv[1]).read()
page = open(sys.argv[2]).read()
norm = lambda s: " ".join(s.split())

# --help: the option entries (two-space indent) and their text.
lines = help_text.split("\n")
start = lines.index("options:") + 1
end = lines.index("", start)
options = []
for line in lines[start:end]:
    m = re.match(r"^  (-\S+(?: \S+)?(?:, -\S+(?:[ =]\S+)?)?)(?:\s{2,}(.*))?$", line)
    if m and not line.startswith("   "):
        options.append([m.group(1), m.group(2) or ""])
    else:
        options[-1][1] += " " + line.strip()
usage = [re.sub(r"^(usage:)?\s+", "", l) for l in lines[:lines.index("")]]
exit_line = [l for l in lines if l.startswith("exit status:")]

# The page: requests dropped, escapes undone.
def text(s):
    s = re.sub(r"\\f[BRI]", "", s).replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")
    return s
sections, cur = {}, None
for l in page.split("\n"):
    if l.startswith(".SH "):
        cur = l[4:].strip('"')
        sections[cur] = []
    elif cur:
        sections[cur].append(l)
items, entry = [], None
for l in sections["OPTIONS"]:
    if l == ".TP":
        entry = []
        items.append(entry)
    elif l.startswith(".") and l != ".br":
        raise SystemExit("unexpected request in OPTIONS: " + l)
    elif l != ".br":
        entry.append(text(l))
page_options = [[e[0], norm(" ".join(e[1:]))] for e in items]
help_options = [[o[0], norm(o[1])] for o in options]
if page_options != help_options:
    for a, b in zip(help_options, page_options):
        if a != b:
            print("--help: ", a, "\nman:    ", b)
    raise SystemExit(f"{len(help_options)} options in --help, {len(page_options)} in the page")
synopsis = [text(l) for l in sections["SYNOPSIS"] if l != ".br"]
assert synopsis == usage, (synopsis, usage)
if exit_line:
    assert norm(text(" ".join(sections["EXIT STATUS"]))) == norm(exit_line[0][len("exit status:"):]), sections["EXIT STATUS"]
PY
  if command -v groff >/dev/null; then
    if groff -man -Tutf8 -ww -z "$page" >groff.out 2>&1 && [ ! -s groff.out ]; then pass; else fail "$name: groff warns"; cat groff.out; fi
  fi
}

agree orionc "${pages[0]}" "$orionc"
agree orion-run "${pages[1]}" "$run"
agree orion-run-patch "${pages[2]}" "$run" patch
agree orion-run-plot "${pages[3]}" "$run" plot
agree orion-run-train "${pages[4]}" "$run" train
agree orion-inspect "${pages[5]}" "$inspect"
agree orion-lint "${pages[6]}" "$lint"
agree orion-run-generate "${pages[7]}" "$run" generate
agree orion-convert "${pages[8]}" "$convert"
agree orion-tokenize "${pages[9]}" "$tokenize"
agree orion-tokenize-train "${pages[10]}" "$tokenize" train
agree orion-run-probe "${pages[11]}" "$run" probe
# Every option of --help, the hidden spellings aside, is in the page of its tool.
check orionc-werror 0 grep -c -- '\\-Werror' "${pages[0]}"
finish
