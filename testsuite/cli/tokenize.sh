#!/usr/bin/env bash
# orion-tokenize's command line with the tiny committed BPE (testsuite/text/tiny):
# encode/decode (TEXT, -, --file, --json, --special), info, the exact bytes of
# decode and of encode's token files (--output X.bin, X.npy), and its usage and
# input errors with their exit statuses.
#   tokenize.sh ORION_TOKENIZE SOURCE_ROOT
set -u
tok=$(realpath "$1") tiny=$(realpath "$2")/testsuite/text/tiny py=/usr/bin/python3
source "$(dirname "$0")/lib.sh"

check encode 0 "$tok" --tokenizer "$tiny" encode " the thing"
contains encode "258 256 104 262"
check encode-eq 0 "$tok" --tokenizer="$tiny" encode "it's"
contains encode-eq "105 116 264"
check encode-json 0 "$tok" -t "$tiny" --json encode "aaaa"
contains encode-json '{"ids":[259,259],"count":2}'
printf 'a\xffb' >bytes.txt
check encode-file 0 "$tok" --tokenizer "$tiny" encode --file bytes.txt
contains encode-file "97 255 98"
check encode-stdin 0 sh -c "printf ' the' | '$tok' --tokenizer '$tiny' encode -"
contains encode-stdin "258"
check encode-special 0 "$tok" --tokenizer "$tiny" --special encode "a<|endoftext|>"
contains encode-special "97 269"
check encode-empty 0 "$tok" --tokenizer "$tiny" --json encode ""
contains encode-empty '{"ids":[],"count":0}'
# decode prints the exact bytes, nothing added
"$tok" --tokenizer "$tiny" decode 97 255 98 >decoded.txt
same_bytes decode-bytes decoded.txt bytes.txt
echo "258 195 169" >ids.txt
check decode-file 0 "$tok" --tokenizer "$tiny" decode --file ids.txt
if [ "$(cat out)" = " the$(printf '\xc3\xa9')" ]; then pass; else fail "decode-file: got '$(cat out)'"; fi
check info 0 "$tok" --tokenizer "$tiny/vocab.json" info
contains info "kind bpe"
contains info "vocab size 270"
contains info "bos 269"
check info-json 0 "$tok" --tokenizer "$tiny" --json info
contains info-json '{"kind":"bpe","vocab_size":270,"bos":269,"eos":269,"adds_bos":false}'

# token files: raw little-endian uint16 (.bin), a 1-D int32 .npy as numpy writes it
check output-bin 0 "$tok" --tokenizer "$tiny" encode " the thing" --output ids.bin
printf '\x02\x01\x00\x01\x68\x00\x06\x01' >want.bin
same_bytes output-bin-bytes ids.bin want.bin
if [ ! -s out ]; then pass; else fail "output-bin: printed '$(cat out)'"; fi
check output-npy 0 "$tok" --tokenizer "$tiny" encode --file bytes.txt -o ids.npy
dict="{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }"
{ printf '\x93NUMPY\x01\x00\x76\x00%s' "$dict"; printf "%$((128 - 10 - ${#dict} - 1))s\n" ''; printf '\x61\0\0\0\xff\0\0\0\x62\0\0\0'; } >want.npy
same_bytes output-npy-bytes ids.npy want.npy
check output-empty 0 "$tok" --tokenizer "$tiny" encode "" --output empty.bin
if [ -f empty.bin ] && [ ! -s empty.bin ]; then pass; else fail "output-empty: empty.bin is not an empty file"; fi
# an id above 65535 has no .bin spelling: named, and no file written (a vocabulary of 70,001 ids, "aa" = 70000)
mkdir wide
"$py" - wide <<'PY'
import json, sys
printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
chars = {b: chr(b) for b in printable}
chars.update({b: chr(256 + i) for i, b in enumerate(b for b in range(256) if b not in chars)})
vocab = {chars[b]: b for b in range(256)}
vocab.update({f"<filler{i}>": i for i in range(256, 70000)})
vocab["aa"] = 70000
json.dump(vocab, open(f"{sys.argv[1]}/vocab.json", "w"))
open(f"{sys.argv[1]}/merges.txt", "w").write("#version: 0.2\na a\n")
PY
check output-wide 1 "$tok" --tokenizer wide encode "baab" --output wide.bin
contains output-wide "orion-tokenize: error: wide.bin: id 70000 (token 1) does not fit a .bin token file's uint16; write .npy"
if [ ! -e wide.bin ]; then pass; else fail "output-wide: wide.bin was written"; fi
check output-wide-npy 0 "$tok" --tokenizer wide encode "baab" --output wide.npy
if [ "$(tail -c 12 wide.npy | od -An -tu4 | tr -s ' ')" = " 98 70000 98" ]; then pass; else fail "output-wide-npy: $(tail -c 12 wide.npy | od -An -tu4)"; fi
check output-unwritable 1 "$tok" --tokenizer "$tiny" encode x --output nodir/ids.bin
contains output-unwritable "orion-tokenize: error: cannot write nodir/ids.bin:"

# input errors: exit 1
check decode-range 1 "$tok" --tokenizer "$tiny" decode 1 270
contains decode-range "orion-tokenize: error: id 270 is out of range (the vocabulary has ids 0..269)"
check decode-negative 1 "$tok" --tokenizer "$tiny" decode -- -1
contains decode-negative "orion-tokenize: error: id -1 is out of range"
echo "1 x2" >bad_ids.txt
check decode-file-bad 1 "$tok" --tokenizer "$tiny" decode --file bad_ids.txt
contains decode-file-bad "orion-tokenize: error: bad_ids.txt: 'x2' is not an id"
check no-tokenizer-dir 1 "$tok" --tokenizer "$tmp/none" info
contains no-tokenizer-dir "orion-tokenize: error: cannot open tokenizer $tmp/none: No such file or directory"
mkdir half && cp "$tiny/vocab.json" half/
check half 1 "$tok" --tokenizer half info
contains half "orion-tokenize: error: half: vocab.json has no merges.txt beside it"
mkdir bad && cp "$tiny/vocab.json" bad/ && printf '#version: 0.2\nh e\nq z z\n' >bad/merges.txt
check bad-merges 1 "$tok" --tokenizer bad info
contains bad-merges "bad/merges.txt:3:5: error: a merge is two tokens separated by a space"
check missing-file 1 "$tok" --tokenizer "$tiny" encode --file nothere.txt
contains missing-file "orion-tokenize: error: cannot read nothere.txt:"

# usage errors: exit 2
check help 0 "$tok" --help
contains help "usage: orion-tokenize --tokenizer PATH encode TEXT|-"
check version 0 "$tok" --version
contains version "orion-tokenize 0.1.0"
check no-command 2 "$tok" --tokenizer "$tiny"
contains no-command "orion-tokenize: error: no command (encode, decode, info or train)"
check unknown-command 2 "$tok" --tokenizer "$tiny" split x
contains unknown-command "orion-tokenize: error: unknown command 'split' (encode, decode, info or train)"
check needs-tokenizer 2 "$tok" encode x
contains needs-tokenizer "orion-tokenize: error: encode needs --tokenizer PATH"
check tokenizer-value 2 "$tok" encode x --tokenizer
contains tokenizer-value "orion-tokenize: error: --tokenizer needs a tokenizer path"
check two-texts 2 "$tok" --tokenizer "$tiny" encode a b
contains two-texts "orion-tokenize: error: encode takes one text ('b' is a second)"
check text-and-file 2 "$tok" --tokenizer "$tiny" encode a --file bytes.txt
contains text-and-file "orion-tokenize: error: encode takes a text or --file, not both"
check no-text 2 "$tok" --tokenizer "$tiny" encode
contains no-text "orion-tokenize: error: encode needs a text, '-' or --file FILE"
check not-an-id 2 "$tok" --tokenizer "$tiny" decode 12 x3
contains not-an-id "orion-tokenize: error: 'x3' is not an id (a decimal integer)"
check id-overflow 2 "$tok" --tokenizer "$tiny" decode 4294967296
contains id-overflow "'4294967296' is not an id"
check no-ids 2 "$tok" --tokenizer "$tiny" decode
contains no-ids "orion-tokenize: error: decode needs ids or --file FILE"
check info-operand 2 "$tok" --tokenizer "$tiny" info x
contains info-operand "orion-tokenize: error: info takes no operands ('x')"
check typo 2 "$tok" --tokeniser "$tiny" info
contains typo "note: did you mean '--tokenizer'?"
check train-later 2 "$tok" --tokenizer "$tiny" train
contains train-later "orion-tokenize: error: train comes first: orion-tokenize train ..."
check output-suffix 2 "$tok" --tokenizer "$tiny" encode x --output ids.txt
contains output-suffix "orion-tokenize: error: --output 'ids.txt': the name ends in .bin (uint16 tokens) or .npy (int32)"
check output-decode 2 "$tok" --tokenizer "$tiny" decode 97 --output ids.bin
contains output-decode "orion-tokenize: error: --output is for encode (not decode)"
check output-json 2 "$tok" --tokenizer "$tiny" --json encode x --output ids.bin
contains output-json "orion-tokenize: error: --output writes the ids to a file; --json prints them: not both"
# A BPE learned by train encodes and decodes a text of its corpus back exactly.
printf 'the cat sat on the mat; the cat sat on the hat.\nthe mat, the hat, the cat.\n' >learn.txt
check train 0 "$tok" train --vocab-size 280 learn.txt -o learned
check train-encode 0 "$tok" --tokenizer learned encode --file learn.txt
check train-roundtrip 0 bash -c "\"$tok\" --tokenizer learned decode \$(\"$tok\" --tokenizer learned encode --file learn.txt) | cmp - learn.txt"
check train-merged 0 bash -c "[ \$(\"$tok\" --tokenizer learned encode --file learn.txt | wc -w) -lt \$(wc -c <learn.txt) ]"
finish
