#!/usr/bin/env bash
# orion-tokenize train: learns the same files as the library call (the
# reference trainer's committed output), from files or standard input,
# with --opt=value and --opt value; --help; usage errors exit 2 with their
# message, unreadable input and unwritable output exit 1.
#
#   tokenize_train.sh TOKENIZE_TRAIN_MAIN SOURCE_ROOT
set -u
tool=$(realpath "$1") root=$(realpath "$2")
source "$(dirname "$0")/lib.sh"
corpus=$root/testsuite/text/corpus
want=$root/testsuite/text/fixtures/sp_bpe_train
files=("$corpus/sp_code.txt" "$corpus/sp_edges.txt" "$corpus/sp_invalid.txt" "$corpus/sp_mixed.txt" "$corpus/sp_prose.txt")

check files 0 "$tool" train --vocab-size 500 "${files[@]}" -o tok
same_bytes files-vocab tok/vocab.json "$want/vocab.json"
same_bytes files-merges tok/merges.txt "$want/merges.txt"
if [ ! -s out ]; then pass; else fail "files: printed something"; cat out; fi

# Standard input as one of the texts, '=' spellings, the default min frequency spelt out.
check stdin 0 "$tool" train --vocab-size=500 --min-frequency=2 "${files[0]}" "${files[1]}" - "${files[3]}" \
  "${files[4]}" --output=tok2 <"${files[2]}"
same_bytes stdin-merges tok2/merges.txt "$want/merges.txt"

check progress 0 "$tool" train --vocab-size 300 --progress "${files[@]}" -o tok3
check help 0 "$tool" train --help
contains help "usage: orion-tokenize train --vocab-size N [options] TEXT_FILE... -o DIR"
contains help "--min-frequency F"

check no-vocab 2 "$tool" train "${files[0]}" -o x
contains no-vocab "orion-tokenize train: error: no --vocab-size"
check small-vocab 2 "$tool" train --vocab-size 256 "${files[0]}" -o x
contains small-vocab "orion-tokenize train: error: --vocab-size needs a number of at least 257 (256 bytes and <|endoftext|>), not '256'"
check bad-vocab 2 "$tool" train --vocab-size=12k "${files[0]}" -o x
contains bad-vocab "needs a number of at least 257 (256 bytes and <|endoftext|>), not '12k'"
check bad-min 2 "$tool" train --vocab-size 300 --min-frequency 0 "${files[0]}" -o x
contains bad-min "orion-tokenize train: error: --min-frequency needs a number of at least 1, not '0'"
check no-output 2 "$tool" train --vocab-size 300 "${files[0]}"
contains no-output "orion-tokenize train: error: no output directory (-o DIR)"
check no-files 2 "$tool" train --vocab-size 300 -o x
contains no-files "orion-tokenize train: error: no text files to learn from"
check two-stdin 2 "$tool" train --vocab-size 300 - - -o x
contains two-stdin "orion-tokenize train: error: standard input (-) named more than once"
check unknown 2 "$tool" train --vocab 300 "${files[0]}" -o x
contains unknown "unknown option '--vocab'"
if [ ! -e x ]; then pass; else fail "usage errors: made x"; fi

check missing-file 1 "$tool" train --vocab-size 300 no-such.txt -o y
contains missing-file "orion-tokenize: error: cannot read 'no-such.txt': "
if [ ! -e y ]; then pass; else fail "missing-file: made y"; fi
: >file
check output-is-a-file 1 "$tool" train --vocab-size 300 "${files[0]}" -o file/sub
contains output-is-a-file "orion-tokenize: error: cannot create directory 'file/sub': Not a directory"
finish
