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
echo "lint_agrees: $passed passed, $failed failed"
[ "$failed" = 0 ]
