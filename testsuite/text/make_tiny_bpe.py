#!/usr/bin/env python3
"""Writes the tiny byte-level BPE the tokenizer tests use (testsuite/text/tiny/):
vocab.json and merges.txt in Hugging Face's format, made here (not copied from
GPT-2): the 256 byte tokens with id = the byte, a few hand-picked merges whose
effect the tests check by hand, and <|endoftext|> last.

    make_tiny_bpe.py OUT_DIR
"""
import json
import os
import sys


def bytes_to_unicode():
    """GPT-2's printable stand-in for each byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def main():
    out = sys.argv[1]
    stand_in = bytes_to_unicode()
    tok = lambda bs: "".join(stand_in[b] for b in bs)
    vocab = {tok([b]): b for b in range(256)}
    # Each merge as two byte strings, by rank. "bb b" comes before "b b" on
    # purpose: the reference merges every "b b" of a word before the
    # lower-ranked pair that merging makes ("bbbb" -> "bb bb", not "bbb b").
    merges = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"a", b"a"), (b"aa", b"a"), (b"i", b"n"), (b"in", b"g"),
              ("é".encode()[:1], "é".encode()[1:]), (b"'", b"s"), (b"bb", b"b"),
              (b"b", b"b"), (b"\xe2\x82", b"\xac")]
    lines = ["#version: 0.2"]
    for left, right in merges:
        for part in (left, right, left + right):
            vocab.setdefault(tok(part), len(vocab))
        lines.append(tok(left) + " " + tok(right))
    vocab["<|endoftext|>"] = len(vocab)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=0)
        f.write("\n")
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
