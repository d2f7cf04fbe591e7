#!/usr/bin/env bash
# orion-run generate on testsuite/generate/tiny_gen.oir: ids in and out
# (--ids, --print-ids), greedy and seeded runs reproducible, --json's exact
# structure, the end of the KV cache, a prompt longer than the largest
# bucket, --eos, usage errors; and text through the real tokenizer library
# with the tiny BPE of testsuite/text/tiny (270 ids: the 256 bytes, its
# merges, <|endoftext|>) on tiny_gen.oir widened to 270 ids: the prompt's
# ids, the text equal to orion-tokenize's decode of the generated ids, the
# streamed text equal to the JSON's, stop strings spanning tokens, a
# tokenizer larger than the model's vocabulary.
#
#   generate.sh ORIONC ORION_RUN ORION_TOKENIZE SOURCE_ROOT
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
tokenize=$(realpath "$3")
root=$(realpath "$4")
source "$(dirname "$0")/lib.sh"
jcheck() { # jcheck NAME STATUS CMD...: stdout alone in out, stderr in err
  local name=$1 want=$2
  shift 2
  "$@" >out 2>err
  local got=$?
  if [ "$got" = "$want" ]; then pass; else fail "$name: exit $got, expected $want"; cat out err; fi
}
py() { # py NAME SCRIPT: the script reads the JSON in out (as j) and asserts; b(s): a text's bytes
  if /usr/bin/python3 -c "import json,sys
j = json.loads(open('out', 'rb').read().decode('utf-8', 'surrogateescape'))
b = lambda s: s.encode('utf-8', 'surrogateescape')
$2" 2>py.err; then pass; else fail "$1: $(cat py.err)"; cat out; fi
}
same_text() { # same_text NAME WANT: stdout (out) is exactly WANT
  if [ "$(cat out)" = "$2" ]; then pass; else fail "$1: got '$(cat out)', expected '$2'"; fi
}

check compile 0 "$orionc" -w -o tiny.anepkg "$root/testsuite/generate/tiny_gen.oir"
gen() { "$run" generate tiny.anepkg "$@"; }

check help 0 "$run" generate --help
contains help "--temperature T"
contains help "(default: 0.8)"
contains help "(default: 128)"
check top-help 0 "$run" --help
contains top-help "orion-run generate PACKAGE --tokenizer PATH --prompt TEXT"

# Greedy: the same ids every time, in ane and fp32 numerics.
jcheck greedy 0 gen --ids 3,17,42,5,9 --temperature 0 --max-tokens 6
cp out greedy.out
[ "$(wc -w <out)" = 6 ] && pass || fail "greedy: not 6 ids: $(cat out)"
jcheck greedy-again 0 gen --ids "3 17 42 5 9" --temperature 0 --max-tokens=6
same_bytes greedy-again out greedy.out
grep -q "orion-run generate: prompt 5 tokens, prefill .* ms (.* tokens/s, bucket 16)" err && pass || fail "stats: $(cat err)"
grep -q "orion-run generate: decode 5 runs, .* ms (.* tokens/s); 6 tokens generated, stop: length" err && pass ||
  fail "stats: $(cat err)"
jcheck greedy-fp32 0 gen --ids 3,17,42,5,9 --temperature 0 --max-tokens 6 --numerics fp32
same_bytes greedy-fp32 out greedy.out

# Seeds: reproducible, and another seed draws differently.
jcheck seed 0 gen --ids 1,2,3 --seed 7 --temperature 1.5 --top-k 0 --top-p 1 --min-p 0
cp out seed7.out
jcheck seed-again 0 gen --ids 1,2,3 --seed 7 --temperature 1.5 --top-k 0 --top-p 1 --min-p 0
same_bytes seed-again out seed7.out
jcheck seed-other 0 gen --ids 1,2,3 --seed 8 --temperature 1.5 --top-k 0 --top-p 1 --min-p 0
cmp -s out seed7.out && fail "seeds 7 and 8 drew the same ids" || pass

# --json: one object, these keys in this order.
jcheck json 0 gen --ids 3,17,42,5,9 --temperature 0 --max-tokens 6 --json
py json '
assert list(j) == ["package", "backend", "numerics", "prompt_ids", "generated_ids", "text", "stop_reason",
                   "stop_string", "timings", "sampling"], list(j)
assert j["package"] == "tiny.anepkg" and j["backend"] == "cpu" and j["numerics"] == "ane", j
assert j["prompt_ids"] == [3, 17, 42, 5, 9]
assert " ".join(map(str, j["generated_ids"])) == open("greedy.out").read().strip()
assert j["text"] is None and j["stop_reason"] == "length" and j["stop_string"] is None
t = j["timings"]
assert list(t) == ["prompt_tokens", "prefill_bucket", "prefill_ms", "prefill_tokens_per_s", "decode_runs",
                   "decode_ms", "decode_tokens_per_s"], list(t)
assert t["prompt_tokens"] == 5 and t["prefill_bucket"] == 16 and t["decode_runs"] == 5
assert all(t[k] >= 0 for k in t)
assert j["sampling"] == {"temperature": 0, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1,
                         "repeat_last_n": 64, "seed": 0}, j["sampling"]'

# The bucket of 4 for a short prompt; the end of the cache (16 slots).
jcheck bucket4 0 gen --ids 1,2 --temperature 0 --max-tokens 3 --json
py bucket4 'assert j["timings"]["prefill_bucket"] == 4 and len(j["generated_ids"]) == 3'
jcheck context 0 gen --ids 1,2,3,4,5,6,7,8,9,10 --temperature 0 --json
py context '
assert j["stop_reason"] == "context", j["stop_reason"]
assert len(j["generated_ids"]) == 7 and j["timings"]["decode_runs"] == 6, j'
jcheck full-prompt 0 gen --ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 --temperature 0 --json
py full-prompt 'assert j["stop_reason"] == "context" and len(j["generated_ids"]) == 1 and j["timings"]["decode_runs"] == 0'
check long-prompt 1 gen --ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17
same_text long-prompt "orion-run generate: error: the prompt has 17 tokens, more than the largest prefill bucket (prefill_16)"
check bad-id 1 gen --ids 1,61
same_text bad-id "orion-run generate: error: prompt token 1 is id 61, outside the vocabulary (0 to 60)"

# --eos: the first greedy id as the end of text ends at once; --ignore-eos goes on.
first=$(cut -d' ' -f1 greedy.out)
jcheck eos 0 gen --ids 3,17,42,5,9 --temperature 0 --eos "$first" --json
py eos 'assert j["stop_reason"] == "eos" and j["generated_ids"] == [], j'
jcheck ignore-eos 0 gen --ids 3,17,42,5,9 --temperature 0 --eos "$first" --ignore-eos --max-tokens 6
same_bytes ignore-eos out greedy.out

# Usage and setup errors.
check no-prompt 2 gen
contains no-prompt "no prompt (--prompt TEXT, --prompt-file FILE or --ids LIST)"
check two-prompts 2 gen --ids 1 --prompt hi --tokenizer "$root/testsuite/text/tiny"
contains two-prompts "give one of --prompt, --prompt-file and --ids"
check prompt-needs-tokenizer 2 gen --prompt hi
contains prompt-needs-tokenizer "--prompt needs --tokenizer"
check stop-needs-tokenizer 2 gen --ids 1 --stop x
contains stop-needs-tokenizer "--stop needs --tokenizer (stop strings match text)"
check top-p-range 2 gen --ids 1 --top-p 2
contains top-p-range "--top-p is between 0 and 1 (not '2')"
check bad-ids 1 gen --ids 1,x
contains bad-ids "--ids: '1,x' is not a list of token ids (whole numbers, e.g. 1,2,3)"
check missing-tokenizer 1 gen --ids 1 --tokenizer no-such-tokenizer
contains missing-tokenizer "orion-run generate: error: cannot open tokenizer no-such-tokenizer: No such file or directory"
printf 'func main(x: fp32[1,4]) {\n  y = relu(x);\n  return y;\n}\n' >plain.oir
check plain-compile 0 "$orionc" -w -o plain.anepkg plain.oir
check not-contract 1 "$run" generate plain.anepkg --ids 1
contains not-contract "the package has no 'decode' entry (the generation contract, docs/generation.md)"

# Text, through the tiny BPE on a copy of tiny_gen.oir with its 270 ids.
tok="$root/testsuite/text/tiny"
sed 's/61/270/g' "$root/testsuite/generate/tiny_gen.oir" >text.oir
check text-compile 0 "$orionc" -w -o text.anepkg text.oir
tgen() { "$run" generate text.anepkg --tokenizer "$tok" "$@"; }
# "the cat" is pre-tokenized as "the" and " cat": in "the" the merge "h e" (rank 1) makes "he" (id 257), and
# "Ġt he" cannot apply without the space; no merge has a pair of " cat", which stays the bytes 32 99 97 116.
jcheck text 0 tgen --prompt "the cat" --temperature 0 --max-tokens 10 --json
py text '
assert j["prompt_ids"] == [116, 257, 32, 99, 97, 116], j["prompt_ids"]
assert isinstance(j["text"], str) and j["stop_reason"] in ("length", "eos"), j'
cp out text.json
/usr/bin/python3 -c "import json; print(*json.loads(open('text.json', 'rb').read().decode('utf-8', 'surrogateescape'))['generated_ids'])" >ids.txt
# The text is the tokenizer's decode of the generated ids, byte for byte (decode adds nothing).
read -ra ids <ids.txt
"$tokenize" --tokenizer "$tok" decode "${ids[@]}" >text.want
py text-decode 'assert b(j["text"]) == open("text.want", "rb").read(), (b(j["text"]), open("text.want", "rb").read())'
jcheck text-stream 0 tgen --prompt "the cat" --temperature 0 --max-tokens 10
cp text.want stream.want
printf '\n' >>stream.want
same_bytes text-stream out stream.want
# A stop string across tokens: the text of generated tokens 3, 4 and 5; the text ends just before its first
# occurrence. (A command-line argument holds no NUL and keeps no final newline: the check says if the ids give one.)
"$tokenize" --tokenizer "$tok" decode "${ids[@]:3:3}" >stop.bin
if /usr/bin/python3 -c "import sys; s = open('stop.bin', 'rb').read(); sys.exit(not s or b'\0' in s or s.endswith(b'\n'))"
then pass; else fail "stop: tokens 3 to 5 decode to '$(od -c stop.bin)', not usable as an argument"; fi
stop=$(cat stop.bin)
/usr/bin/python3 -c "t = open('text.want', 'rb').read(); open('stop.want', 'wb').write(t[:t.index(open('stop.bin', 'rb').read())])"
jcheck stop 0 tgen --prompt "the cat" --temperature 0 --max-tokens 10 --stop "$stop" --json
py stop "
assert j['stop_reason'] == 'stop' and b(j['stop_string']) == open('stop.bin', 'rb').read(), j
assert b(j['text']) == open('stop.want', 'rb').read(), (j['text'], open('stop.want', 'rb').read())"
jcheck stop-stream 0 tgen --prompt "the cat" --temperature 0 --max-tokens 10 --stop "$stop"
[ -s stop.want ] && printf '\n' >>stop.want
same_bytes stop-stream out stop.want
# A prompt file, the same ids as --prompt.
printf 'the cat' >prompt.txt
jcheck prompt-file 0 tgen --prompt-file prompt.txt --temperature 0 --max-tokens 10 --json
py prompt-file 'assert j["prompt_ids"] == [116, 257, 32, 99, 97, 116], j["prompt_ids"]'
# A prompt the tokenizer turns into no ids (every byte is a token here, so no text fails to encode).
check empty-prompt 1 tgen --prompt ""
same_text empty-prompt "orion-run generate: error: the prompt encodes to no tokens"
# A model with fewer ids than the tokenizer: tiny_gen.oir's 61.
check small-vocab 1 "$run" generate tiny.anepkg --tokenizer "$tok" --prompt "the cat"
same_text small-vocab "orion-run generate: error: the tokenizer has 270 ids, more than the model's vocabulary of 61"
finish
