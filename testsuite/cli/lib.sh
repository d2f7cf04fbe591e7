# Shared by the CLI test scripts (sourced): a scratch directory to work in
# (the compile cache in it too), pass/fail counters and the usual checks.
# Each script ends with `finish`.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A compile cache of its own: what a script sees does not depend on earlier
# runs or on the scripts running beside it.
export ORION_CACHE_DIR="$tmp/cache"
cd "$tmp" || exit 1
passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
check() { # check NAME STATUS CMD...   (output in $tmp/out)
  local name=$1 want=$2
  shift 2
  "$@" >out 2>&1
  local got=$?
  if [ "$got" = "$want" ]; then pass; else fail "$name: exit $got, expected $want"; cat out; fi
}
contains() { if grep -qF -- "$2" out; then pass; else fail "$1: output lacks '$2'"; cat out; fi; }
same_bytes() { if cmp -s "$2" "$3"; then pass; else fail "$1: $2 differs from $3"; fi; }
# A .npy v1 file of fp16 values: the shape as Python writes it, then the bytes as printf escapes.
npy16() { # npy16 SHAPE ESCAPES FILE
  local dict="{'descr': '<f2', 'fortran_order': False, 'shape': $1, }"
  local pad=$((128 - 10 - ${#dict} - 1))
  { printf '\x93NUMPY\x01\x00\x76\x00'; printf '%s' "$dict"; printf "%${pad}s" ''; printf '\n'; printf "$2"; } >"$3"
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}
