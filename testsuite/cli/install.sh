#!/usr/bin/env bash
# `meson install` into a temporary DESTDIR: the tools, the headers, the man
# pages, the runtime library and its pkg-config file; then a program built
# with `pkg-config --cflags --libs orion-runtime` against what was installed
# (examples/runtime/run_model.c) runs a package as the in-tree build does.
#
#   install.sh MESON BUILD_ROOT SOURCE_ROOT ORIONC RUN_MODEL CC [CC_ARGS...]
set -u
meson=$1
build=$(realpath "$2")
src=$(realpath "$3")
orionc=$(realpath "$4")
run_model=$(realpath "$5")
shift 5
cc=("$@")
source "$(dirname "$0")/lib.sh"

dest=$tmp/dest
check install 0 "$meson" install -C "$build" --destdir "$dest" --no-rebuild --quiet
prefix=$(sed -n 's/^prefix=//p' "$build"/meson-private/orion-runtime.pc)
root=$dest$prefix
for f in bin/orionc bin/orion-run bin/orion-inspect bin/orion-lint bin/orion-tokenize \
  share/man/man1/orionc.1 share/man/man1/orion-run.1 share/man/man1/orion-run-patch.1 share/man/man1/orion-run-plot.1 \
  share/man/man1/orion-inspect.1 share/man/man1/orion-lint.1 share/man/man1/orion-run-generate.1 share/man/man1/orion-tokenize.1 \
  share/man/man1/orion-run-probe.1 include/orion/probe.h \
  include/orion/tokenizer.h include/orion/runtime.h include/orion/backend.h include/orion/cpu.h include/orion/npy.h include/orion/compile.h \
  include/orion/generate.h include/orion/sample.h; do
  if [ -s "$root/$f" ]; then pass; else fail "not installed: $f"; fi
done
for t in orionc orion-run orion-inspect orion-lint orion-tokenize; do
  check "installed-$t" 0 "$root/bin/$t" --version
  contains "installed-$t" "$t 0.1.0"
done
pc=$(find "$dest" -name orion-runtime.pc)
if [ -n "$pc" ] && [ -s "$(dirname "$pc")/../liborion-runtime.a" ]; then pass; else fail "no pkgconfig/orion-runtime.pc in the directory of liborion-runtime.a"; fi

# The .pc names the installed prefix; read from the DESTDIR it is relocated
# there (a copy with prefix= changed: the other packages it requires stay as they are).
mkdir pc
sed "s|^prefix=.*|prefix=$root|" "$pc" >pc/orion-runtime.pc
check pkg-config 0 env PKG_CONFIG_PATH="$tmp/pc" pkg-config --cflags --libs orion-runtime
contains pkg-config "-I$root/include"
contains pkg-config "-lorion-runtime"
flags=$(PKG_CONFIG_PATH="$tmp/pc" pkg-config --cflags --libs orion-runtime)
# shellcheck disable=SC2086
check build-against-install 0 "${cc[@]}" -std=c11 -D_POSIX_C_SOURCE=200809L -o app "$src/examples/runtime/run_model.c" $flags

printf 'func main(x: fp16[4]) {\n  y = relu(x);\n  return y;\n}\n' >m.oir
check compile 0 "$orionc" --no-cache -o m.anepkg m.oir
check run-in-tree 0 "$run_model" m.anepkg
cp out want
check run-installed 0 ./app m.anepkg
same_bytes run-installed out want
finish
