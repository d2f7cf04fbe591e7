#!/usr/bin/env bash
# Out-of-tree passes: the example plugin loads, its pass runs by name, the
# pass list shows it, a broken pass is caught by --verify-each with its name,
# a group that never settles stops at the round limit with a warning,
# and bad plugins are refused with clear errors.
set -u
orionc=$1
plugin=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ORION_CACHE_DIR="$tmp/cache" # a compile cache of its own: no history, no neighbours
passed=0
failed=0
expect() { # expect NAME WANT_STATUS WANT_OUTPUT CMD...
  local name=$1 want=$2 text=$3
  shift 3
  "$@" >"$tmp/out" 2>&1
  local got=$?
  if [ "$got" = "$want" ] && diff -u <(printf '%s' "$text") "$tmp/out" >"$tmp/diff"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAIL: $name (exit $got, wanted $want)"; cat "$tmp/diff"
  fi
}
printf 'func main(x: fp16[4]) {\n  a = relu(x);\n  b = exp(a);\n  return b;\n}\n' >"$tmp/m.oir"

expect run 0 'func main(x: fp16[4]) {
  const zero: fp16[] = 0.0;
  relu_max: fp16[4] = maximum(x, zero);
  b: fp16[4] = exp(relu_max);
  return b;
}
' "$orionc" --load-pass="$plugin" --passes=relu-to-max --emit=oir --legalize "$tmp/m.oir"

"$orionc" --load-pass="$plugin" --list-passes >"$tmp/list" 2>&1
if grep -q '^relu-to-max *relu(x) -> maximum(x, 0) (an example plugin)$' "$tmp/list"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: list"; cat "$tmp/list"; fi

expect verify-each 1 "$tmp/m.oir:3:7: error: verifier: operand 'a' of 'exp' is used before it is defined
    3 |   b = exp(a);
      |       ^~~
orionc: note: the IR became invalid in pass 'break-order'
" "$orionc" --load-pass="$plugin" --passes=break-order --verify-each --emit=oir --legalize "$tmp/m.oir"

expect fixed-point-limit 0 "orionc: warning: passes 'relu-to-max'...'never-settles' still change the IR after 16 rounds; stopping
" "$orionc" --load-pass="$plugin" "--passes=(relu-to-max,never-settles)" --emit=none "$tmp/m.oir"

expect missing 2 "orionc: error: cannot load pass plugin '$tmp/none.so': $tmp/none.so: cannot open shared object file: No such file or directory
" "$orionc" --load-pass="$tmp/none.so" "$tmp/m.oir"

cp "$plugin" "$tmp/twice.so"
expect twice 2 "orionc: error: cannot register pass 'relu-to-max': a pass of that name exists
" "$orionc" --load-pass="$plugin" --load-pass="$tmp/twice.so" "$tmp/m.oir"

printf 'int nothing_here;\n' >"$tmp/not.c"
if cc -shared -fPIC -o "$tmp/not.so" "$tmp/not.c" 2>/dev/null; then
  expect not-a-plugin 2 "orionc: error: '$tmp/not.so' is not an orion pass plugin: it lacks orion_pass_plugin_api_version
" "$orionc" --load-pass="$tmp/not.so" "$tmp/m.oir"
  printf 'const unsigned orion_pass_plugin_api_version = 99;\nint orion_pass_plugin_init(const void *h) { (void)h; return 1; }\n' >"$tmp/old.c"
  cc -shared -fPIC -o "$tmp/old.so" "$tmp/old.c"
  expect version 2 "orionc: error: pass plugin '$tmp/old.so' was built for plugin API version 99; this orionc has version 1
" "$orionc" --load-pass="$tmp/old.so" "$tmp/m.oir"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
