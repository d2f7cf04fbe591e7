#!/usr/bin/env bash
# orion-lint and orion-run read MIL with the same reader, so on MIL that
# cannot be read both stop at the same first error: the same file:line:col
# and the same message (the linter prefixes it with why it stops). Before,
# the linter had a scanner of its own, which accepted the first two texts
# and reported the other two at another place or in other words.
set -u
lint=$(realpath "$1")
run=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
head='program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1]> x) {\n'
texts=(
  "$head"'        tensor<fp16, [1]> y = relu(x = x) extra;\n    } -> (y);\n}\n'
  "$head"'        tensor<fp16, [1]> y = relu(x = x);\n    } -> (y)\n}\n'
  "$head"'        tensor<fp16, [1]> y = relu(x = (x);\n    } -> (y);\n}\n'
  "$head"
)
for i in "${!texts[@]}"; do
  mkdir -p "$tmp/p$i"
  printf "${texts[$i]}" >"$tmp/p$i/model.mil"
  "$lint" "$tmp/p$i/model.mil" >"$tmp/lint" 2>&1
  lint_rc=$?
  "$run" "$tmp/p$i" >"$tmp/run" 2>&1
  run_rc=$?
  want=$(grep -m1 ': error: ' "$tmp/run" | sed 's/: error: /: error: cannot check this MIL text: /')
  got=$(grep -m1 ': error: ' "$tmp/lint")
  if [ "$lint_rc" = 2 ] && [ "$run_rc" = 1 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: text $i: orion-lint (exit $lint_rc) and orion-run (exit $run_rc) disagree"
    echo "  lint: $got"
    echo "  run:  $want"
  fi
done
# An op the MIL op table does not have: orion-run refuses the program at the
# op, and orion-lint reports an error there too (each such op) instead of
# calling the text clean (packages go through the same reading).
mkdir -p "$tmp/unknown"
printf "$head"'        tensor<fp16, [1]> y = frobnicate(x = x);\n        tensor<fp16, [1]> z = relu(x = y);\n        tensor<fp16, [1]> w = wibble(x = z);\n    } -> (w);\n}\n' \
  >"$tmp/unknown/model.mil"
printf '\x93NUMPY\x01\x00\x76\x00%s' "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }" >"$tmp/x.npy"
printf '%*s\n\x00\x3c' 60 '' >>"$tmp/x.npy"
"$lint" "$tmp/unknown/model.mil" >"$tmp/lint" 2>&1
lint_rc=$?
"$run" "$tmp/unknown" --input "x=$tmp/x.npy" --output-dir "$tmp" >"$tmp/run" 2>&1
run_rc=$?
run_at=$(grep -m1 ': error: ' "$tmp/run" | cut -d: -f1-3)
if [ "$lint_rc" = 2 ] && [ "$run_rc" = 1 ] && [ "$run_at" = "$tmp/unknown/model.mil:4:31" ] &&
  grep -qxF "$run_at: error: cannot check this MIL text: op 'frobnicate' is not in the MIL op table, so no backend runs it" "$tmp/lint" &&
  grep -qxF "$tmp/unknown/model.mil:6:31: error: cannot check this MIL text: op 'wibble' is not in the MIL op table, so no backend runs it" "$tmp/lint"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL: unknown op: orion-lint (exit $lint_rc) and orion-run (exit $run_rc, at $run_at) disagree"
  cat "$tmp/lint" "$tmp/run"
fi

echo "lint_agrees: $passed passed, $failed failed"
[ "$failed" = 0 ]
