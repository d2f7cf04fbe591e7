#!/usr/bin/env python3
"""examples/train/fortunes/prepare.py: the demonstration's token files.

Reads Debian's fortunes (the files of /usr/share/games/fortunes without a
.dat or .u8 suffix, in sorted order), splits each into its fortunes (entries
separated by lines "%"), and writes byte tokens, one uint16 id per byte of the
UTF-8 text (vocabulary 256), as raw little-endian uint16 (the .bin that
orion-run train reads):

  OUT/train.bin   every fortune but every 20th (fortunes 19, 39, 59, ... of
                  the whole sequence, 0-based), each followed by "\n%\n"
  OUT/eval.bin    every 20th fortune, the same way: held back for evaluation

With --text, the same split is written as the UTF-8 text itself, for a
tokenizer to learn from and encode (`orion-tokenize train`, then
`orion-tokenize encode --file ... --output X.bin`):

  OUT/train.txt   the training fortunes, each followed by "\n%\n"
  OUT/eval.txt    the held-back fortunes, the same way

The split depends only on the files' contents and names, so the same
fortunes package gives the same bytes (the script prints counts and the
files' SHA-256). Standard library only.

  prepare.py [--source DIR] [--holdout N] [--eval-bytes B] [--text] OUT

--eval-bytes B keeps only the first B bytes of the held-back text in
eval.bin (0: all of it; evaluation runs the forward over every window of the
file, so a shorter file makes evaluating cheaper); the rest stays unused.
With --text it keeps the whole held-back fortunes that fit in B bytes.
"""
import argparse
import hashlib
import os
import struct
import sys

SEPARATOR = b"\n%\n"


def fortunes(source):
    """Every fortune of every file, in a fixed order, as bytes without its separator."""
    names = sorted(n for n in os.listdir(source)
                   if not n.endswith((".dat", ".u8")) and os.path.isfile(os.path.join(source, n)))
    out = []
    for name in names:
        with open(os.path.join(source, name), "rb") as f:
            text = f.read()
        entry = []
        for line in text.split(b"\n"):
            if line == b"%":
                if entry:
                    out.append(b"\n".join(entry).strip(b"\n"))
                entry = []
            else:
                entry.append(line)
        rest = b"\n".join(entry).strip(b"\n")
        if rest:
            out.append(rest)
    return names, [f for f in out if f]


def write_tokens(path, data):
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{len(data)}H", *data))
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_text(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--source", default="/usr/share/games/fortunes")
    p.add_argument("--holdout", type=int, default=20, help="every Nth fortune goes to eval.bin (default 20)")
    p.add_argument("--eval-bytes", type=int, default=0, help="keep the first B bytes of the held-back text (0: all)")
    p.add_argument("--text", action="store_true", help="write train.txt and eval.txt (the text) instead of byte tokens")
    a = p.parse_args()
    if a.holdout < 2:
        sys.exit("prepare.py: --holdout must be at least 2")
    if not os.path.isdir(a.source):
        sys.exit(f"prepare.py: no fortunes in '{a.source}' (Debian's package 'fortunes'; scripts/setup.sh installs it)")
    names, all_fortunes = fortunes(a.source)
    if not all_fortunes:
        sys.exit(f"prepare.py: '{a.source}' holds no fortunes")
    train, held = bytearray(), bytearray()
    ntrain = nheld = 0
    for i, f in enumerate(all_fortunes):
        if i % a.holdout == a.holdout - 1:
            held += f + SEPARATOR
            nheld += 1
        else:
            train += f + SEPARATOR
            ntrain += 1
    held_all = len(held)
    if a.eval_bytes and a.text:  # whole fortunes only: a cut one would be text no tokenizer sees in training
        cut = held.rfind(SEPARATOR, 0, a.eval_bytes - len(SEPARATOR) + 1)
        held = held[:cut + len(SEPARATOR)] if cut >= 0 else held[:0]
    elif a.eval_bytes:
        held = held[:a.eval_bytes]
    os.makedirs(a.out, exist_ok=True)
    if a.text:
        sha_train = write_text(os.path.join(a.out, "train.txt"), train)
        sha_eval = write_text(os.path.join(a.out, "eval.txt"), held)
        print(f"fortunes: {len(names)} files, {len(all_fortunes)} fortunes")
        print(f"train.txt: {ntrain} fortunes, {len(train)} bytes, sha256 {sha_train}")
        print(f"eval.txt: {nheld} fortunes held back, {held_all} bytes, {len(held)} bytes kept, sha256 {sha_eval}")
        return
    sha_train = write_tokens(os.path.join(a.out, "train.bin"), train)
    sha_eval = write_tokens(os.path.join(a.out, "eval.bin"), held)
    print(f"fortunes: {len(names)} files, {len(all_fortunes)} fortunes")
    print(f"train.bin: {ntrain} fortunes, {len(train)} tokens, sha256 {sha_train}")
    print(f"eval.bin: {nheld} fortunes held back, {held_all} bytes, {len(held)} tokens kept, sha256 {sha_eval}")


if __name__ == "__main__":
    main()
