#!/usr/bin/env bash
# The compile cache: a second compile of an unchanged graph is served from the
# cache and gives the same package byte for byte; any change to the source,
# an option, a weight file's contents or the compiler's build misses; a damaged entry is never
# served; --no-cache and --cache-dir; least recently used entries are evicted
# beyond ORION_CACHE_MAX_BYTES.
set -u
orionc=$(realpath "$1")
make_st="python3 $(realpath "$2")"
. "$(dirname "$0")/lib.sh"
export ORION_CACHE_DIR="$tmp/cache"
unset ORION_CACHE_MAX_BYTES
served() { if grep -q "served from the compile cache" out; then pass; else fail "$1: not served from the cache"; cat out; fi; }
compiled() { if grep -q "served from the compile cache" out; then fail "$1: served from the cache"; else pass; fi; }
same_tree() { if diff -r "$2" "$3" >/dev/null; then pass; else fail "$1: $2 differs from $3"; fi; }
entries() { ls cache 2>/dev/null | grep -c '\.anepkg$'; }

cat >m.oir <<'EOF'
func main(x: fp16[1,4]) {
  param w: fp16[4,4] = normal(seed=1, std=0.1);
  param b: fp16[4] = safetensors("b.safetensors", "b");
  y = linear(x, w, b);
  return y;
}
EOF
$make_st b.safetensors b=F32:4:1,2,3,4
check first 0 "$orionc" --time -o a.anepkg m.oir
compiled first
if [ "$(entries)" = 1 ]; then pass; else fail "first: expected 1 cache entry, got $(entries)"; fi
check second 0 "$orionc" --time -o b.anepkg m.oir
served second
same_tree second a.anepkg b.anepkg
# Replacing an existing package from the cache works like a compile.
check replace 0 "$orionc" --time -o b.anepkg m.oir
served replace

# Misses: the source, an option, a weight file's contents.
sed 's/seed=1/seed=2/' m.oir >m2.oir
check source-changed 0 "$orionc" --time -o c.anepkg m2.oir
compiled source-changed
check option-changed 0 "$orionc" --time --no-dedup -o c.anepkg m.oir
compiled option-changed
$make_st b.safetensors b=F32:4:1,2,3,5
check weights-changed 0 "$orionc" --time -o c.anepkg m.oir
compiled weights-changed
if cmp -s a.anepkg/weights/weight.bin c.anepkg/weights/weight.bin; then fail "weights-changed: same weights"; else pass; fi
$make_st b.safetensors b=F32:4:1,2,3,4
check weights-back 0 "$orionc" --time -o d.anepkg m.oir
served weights-back
same_tree weights-back a.anepkg d.anepkg

# A damaged entry is not served; the compile replaces it.
entry=$(grep -o 'cache/[0-9a-f]*\.anepkg' out | head -n 1)
printf '\x01' | dd of="$entry/weights/weight.bin" bs=1 seek=200 conv=notrunc 2>/dev/null
check damaged 0 "$orionc" --time -o e.anepkg m.oir
compiled damaged
same_tree damaged a.anepkg e.anepkg
check repaired 0 "$orionc" --time -o e.anepkg m.oir
served repaired

# Another build of the compiler (here: the same executable with a byte
# appended, which still runs) does not share entries.
cp "$orionc" other-orionc
printf '\0' >>other-orionc
check other-build 0 ./other-orionc --time -o f.anepkg m.oir
compiled other-build
same_tree other-build a.anepkg f.anepkg
check other-build-again 0 ./other-orionc --time -o f.anepkg m.oir
served other-build-again

# --no-cache neither reads nor fills; --cache-dir names another cache.
check no-cache 0 "$orionc" --time --no-cache -o f.anepkg m.oir
compiled no-cache
check cache-dir 0 "$orionc" --time --cache-dir="$tmp/other" -o g.anepkg m.oir
compiled cache-dir
if [ -d other ] && [ "$(ls other | grep -c '\.anepkg$')" = 1 ]; then pass; else fail "cache-dir: no entry in $tmp/other"; fi

# Eviction: room for about two entries of this size; the least recently used goes.
n=$(entries)
sed 's/seed=1/seed=3/' m.oir >m3.oir
ORION_CACHE_MAX_BYTES=9000 "$orionc" -o h1.anepkg m3.oir >/dev/null 2>&1
if [ "$(entries)" -le 2 ]; then pass; else fail "eviction: $(entries) entries left of $n"; fi

finish
