#!/usr/bin/env bash
# orion-run generate on the converted PyTorch fixtures (testsuite/generate/
# models, made by make_hf_fixtures.py): for each model, converted in fp32,
# greedy generation of 32 tokens from prompt.npy through the driver (prefill,
# then 31 decode steps, fp32 numerics) gives exactly greedy.npy, PyTorch's
# own continuation with its KV cache; and a seeded sampled run is
# reproducible.
#
#   generate_fixtures.sh ORION_CONVERT ORIONC ORION_RUN SOURCE_ROOT
set -u
convert=$(realpath "$1") orionc=$(realpath "$2") run=$(realpath "$3") root=$(realpath "$4")
source "$(dirname "$0")/lib.sh"

ids() { # ids FILE.npy: the int32 array as "a,b,c"
  python3 - "$1" <<'PY'
import ast, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<H", b[8:10])[0]
h = ast.literal_eval(b[10:10 + n].decode())
assert h["descr"] == "<i4" and len(h["shape"]) == 1, h
print(",".join(str(x) for x in struct.unpack(f"<{h['shape'][0]}i", b[10 + n:])))
PY
}
json_ids() { # json_ids FILE.json: generated_ids as "a,b,c"
  python3 -c 'import json, sys; print(",".join(map(str, json.load(open(sys.argv[1]))["generated_ids"])))' "$1"
}

for m in gpt2 llama_tied llama_sharded; do
  dir=$root/testsuite/generate/models/$m
  check "$m-convert" 0 "$convert" "$dir" -o "$m.oir" --seq 8 --ctx 64 --dtype fp32
  check "$m-compile" 0 "$orionc" -w -o "$m.anepkg" "$m.oir"
  prompt=$(ids "$dir/prompt.npy") want=$(ids "$dir/greedy.npy")
  check "$m-greedy" 0 sh -c '"$0" generate "$1" --ids "$2" --temperature 0 --max-tokens 32 --numerics fp32 \
    --ignore-eos --json >"$3"' "$run" "$m.anepkg" "$prompt" "$m-greedy.json"
  check "$m-greedy-ids" 0 test "$(json_ids "$m-greedy.json")" = "$want"
  for k in 1 2; do
    check "$m-sampled-$k" 0 sh -c '"$0" generate "$1" --ids "$2" --temperature 1 --top-k 20 --seed 7 \
      --max-tokens 16 --numerics fp32 --ignore-eos --json >"$3"' "$run" "$m.anepkg" "$prompt" "$m-sampled-$k.json"
    json_ids "$m-sampled-$k.json" >"$m-sampled-$k.ids"
  done
  check "$m-sampled-reproducible" 0 cmp "$m-sampled-1.ids" "$m-sampled-2.ids"
done
finish
