#!/usr/bin/env bash
# Installs what orion needs from Debian's packages; quiet and quick when all is there.
# Idempotent: run it as often as you like.
set -euo pipefail

pkgs=(meson ninja-build pkg-config gcc flex bison libxml2-dev libcjson-dev
      libcriterion-dev clang libclang-rt-dev python3 python3-jsonschema libopenblas-dev
      libxxhash-dev nettle-dev fortunes g++ libsentencepiece-dev python3-sentencepiece libpcre2-dev
      gobjc)
# gobjc (GNU Objective-C, with libobjc) builds the ane backend's Linux stand-in framework (testsuite/ane/).
# node and npm run the GPT-2 tokenizer's reference (testsuite/text/gpt2_agree.sh):
# Debian's, unless the machine has its own.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then pkgs+=(nodejs npm); fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
