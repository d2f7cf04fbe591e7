#!/usr/bin/env bash
# orion-run plot: the committed log gives the golden SVG byte for byte (file
# and standard output), a bad log is an error at its line with nothing
# written, an empty log says so, a line cut short is dropped with a warning.
#
#   plot.sh ORION_RUN SOURCE_ROOT
set -u
run=$(realpath "$1") root=$(realpath "$2")
source "$(dirname "$0")/lib.sh"
log=$root/testsuite/train/small.jsonl

check golden 0 "$run" plot "$log" -o loss.svg --title 'small <test> & log'
same_bytes golden loss.svg "$root/testsuite/train/small.svg"
check golden-log 0 "$run" plot "$log" --log-scale --width 640 --height 400 -o log.svg
same_bytes golden-log log.svg "$root/testsuite/train/small-log.svg"
# Well-formed XML with the title unescaped back, two series and four eval markers (python3's parser, not ours).
check xml 0 /usr/bin/python3 -c '
import sys, xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
r = E.parse(sys.argv[1]).getroot()
assert r.tag == ns + "svg", r.tag
texts = [t.text for t in r.iter(ns + "text")]
assert texts[0] == "small <test> & log", texts[0]
assert "step" in texts and "loss" in texts and "train loss" in texts and "eval loss" in texts
lines = list(r.iter(ns + "polyline"))
assert len(lines) == 3, len(lines)  # train loss in two runs (step 17 is inf), eval loss
assert len(list(r.iter(ns + "circle"))) == 5  # four evaluations and the legend
' loss.svg
"$run" plot "$log" --title 'small <test> & log' >stdout.svg 2>err.txt
same_bytes stdout stdout.svg "$root/testsuite/train/small.svg"
if [ ! -s err.txt ]; then pass; else fail "stdout: messages"; cat err.txt; fi

head -3 "$log" >bad.jsonl
echo '{"step":4,"loss":2.5,"lr":0.001,"tokens_per_s":100,"skipped":"no","loss_scale":1}' >>bad.jsonl
check bad-log 1 "$run" plot bad.jsonl -o bad.svg
contains bad-log "bad.jsonl:4:1: error: 'skipped' is not true or false"
if [ ! -e bad.svg ]; then pass; else fail "bad-log: wrote bad.svg"; fi

: >empty.jsonl
check empty-log 1 "$run" plot empty.jsonl -o empty.svg
contains empty-log "orion-run: error: 'empty.jsonl' has no training steps to plot"
if [ ! -e empty.svg ]; then pass; else fail "empty-log: wrote empty.svg"; fi

{ head -5 "$log"; printf '{"step":6,"loss":'; } >cut.jsonl
check cut-log 0 "$run" plot cut.jsonl -o cut.svg
contains cut-log "cut.jsonl:6:1: warning: the last line is cut short (a run killed while writing it?); it is ignored"
if [ -s cut.svg ]; then pass; else fail "cut-log: no cut.svg"; fi

check missing 1 "$run" plot nothere.jsonl
contains missing "nothere.jsonl"
check usage 2 "$run" plot
contains usage "orion-run plot: error: no training log"
check width 2 "$run" plot "$log" --width 10
contains width "orion-run plot: error: --width needs a number of pixels from 200 to 10000 (not '10')"
check typo 2 "$run" plot "$log" --titel=x
contains typo "orion-run plot: error: unknown option '--titel'"
contains typo "note: did you mean '--title'?"
check switch-value 2 "$run" plot "$log" --log-scale=yes
contains switch-value "orion-run plot: error: --log-scale takes no value"
check help 0 "$run" plot --help
contains help "usage: orion-run plot [options] LOG.jsonl -o FILE.svg"
check main-help 0 "$run" --help
contains main-help "orion-run plot LOG.jsonl -o FILE.svg  (see orion-run plot --help)"
finish
