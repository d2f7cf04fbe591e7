#!/usr/bin/python3
"""Writes testsuite/text/corpus/sp_edges.txt: short seeded random runs of the
characters where pre-tokenizers and normalizers disagree most (every kind of
Unicode space, NEL and U+180E, format and combining characters, contractions in
both cases, digits of other scripts, astral letters, private use, unassigned,
control bytes) with bytes that are not UTF-8 put in between. The SentencePiece
fixture and the BPE trainer's reference fixture read it with the other
corpus files. The same seed gives the same bytes.
"""
import os
import random

POOL = list('aZéßДжΩ日本한ا') + ['\u0301', '\u0300', '\u200d', '\ufe0f', '\u0e31', '\u1c00'] + list('0123456789') + \
    ['\u0663', '\u00be', '\u2167', '\u00b2'] + \
    [' ', ' ', ' ', '\t', '\n', '\r', '\x0b', '\x0c', '\x1c', '\x1f', '\u0085', '\u00a0', '\u1680', '\u2003',
     '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\u180e', '\ufeff', '\u200b', '\u2060'] + \
    ["'", "'s", "'S", "'t", "'re", "'ve", "'m", "'ll", "'d", "'x", '"', '.', ',', '!', '-', '_', '(', ')',
     '\U0001f600', '\U0001f44d\U0001f3fd', '\u20ac', '\x00', '\x7f', '\x1b', '\U0001d400', '\U000e0001', '\ue000',
     '\U0010fffd', '\u0378']
INVALID = [0x80, 0xbf, 0xc0, 0xc1, 0xe2, 0xed, 0xf4, 0xf5, 0xff]


def main():
    rng = random.Random(20261202)
    out = bytearray()
    for _ in range(600):
        out += ''.join(rng.choice(POOL) for _ in range(rng.randint(1, 8))).encode('utf-8')
        if rng.random() < 0.1:
            out.append(rng.choice(INVALID))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'sp_edges.txt')
    with open(path, 'wb') as f:
        f.write(bytes(out))
    print('wrote', path, len(out), 'bytes')


if __name__ == '__main__':
    main()
