#!/usr/bin/python3
"""Reference implementation of orion's byte-level BPE trainer (orion_bpe_train,
runtime/text/bpe_train.c), written to be obviously right rather than fast: the
pair counts are recomputed from every word at every merge. The C trainer's
files must be byte-identical to this script's (testsuite/text/test_bpe_train.c
compares with its committed output, and the 'bpe-train-ref' test re-runs it).

    bpe_train_ref.py --vocab-size N [--min-frequency F] -o DIR TEXT_FILE...
    bpe_train_ref.py --check DIR ...same arguments...   (exit 1 if DIR differs)

The algorithm (docs/tokenizers.md, "Learning a byte-level BPE"):
  1. Each text is split into maximal runs of valid UTF-8 and of the bytes that
     are not (a run of invalid bytes is one word). Each valid run is split into
     words by GPT-2's pre-tokenizer regex, matched here by hand with
     unicodedata's categories (\\p{L}: L*, \\p{N}: N*, \\s: Z* or \\t\\n\\v\\f\\r, U+FEFF:
     ECMAScript's \\s, as the encoder's pre-tokenizer, runtime/text/pretokenize.c,
     spells it), independently of the PCRE2 matcher the C trainer and encoder use.
  2. A word is the sequence of its bytes; words are counted.
  3. Until the vocabulary (256 bytes, then every new token, <|endoftext|> last)
     holds vocab_size ids: count adjacent symbol pairs over all words (weighted
     by the word's count), pick the most frequent, ties going to the smallest
     (left bytes, right bytes) in byte order; stop when its count is below
     min_frequency; merge it in every word, left to right without overlap. A
     merge whose bytes are already a token adds no id (merges.txt has it).
  4. vocab.json: {token: id} in id order, tokens in GPT-2's bytes_to_unicode
     mapping, as json.dumps(ensure_ascii=False) writes it; merges.txt:
     '#version: 0.2' then 'left right' per merge, mapped likewise.
"""
import json
import os
import sys
import unicodedata


def bytes_to_unicode():
    """GPT-2's byte -> printable character table, in its id order."""
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(ord('\xa1'), ord('\xac') + 1)) + \
        list(range(ord('\xae'), ord('\xff') + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, [chr(c) for c in cs]


def is_letter(c):
    return unicodedata.category(c).startswith('L')


def is_number(c):
    return unicodedata.category(c).startswith('N')


def is_space(c):
    """ECMAScript's \\s (the encoder's, which agrees with the npm package
    gpt-3-encoder): \\t \\n \\v \\f \\r, the Zs spaces, U+2028 (Zl), U+2029 (Zp) and
    U+FEFF. Not PCRE2's own Unicode \\s, which adds U+0085 and U+180E and lacks
    U+FEFF."""
    return unicodedata.category(c).startswith('Z') or c in '\t\n\x0b\x0c\r\ufeff'


def is_other(c):
    return not (is_space(c) or is_letter(c) or is_number(c))


CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]


def run(s, i, pred):
    while i < len(s) and pred(s[i]):
        i += 1
    return i


def pretokenize(s):
    """GPT-2's  's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
    as the alternation tries it: the first alternative that matches at i wins."""
    words = []
    i = 0
    while i < len(s):
        end = None
        for c in CONTRACTIONS:
            if s.startswith(c, i):
                end = i + len(c)
                break
        if end is None:
            for pred in (is_letter, is_number, is_other):
                j = i + 1 if s[i] == ' ' else i
                k = run(s, j, pred)
                if k > j:
                    end = k
                    break
        if end is None:
            k = run(s, i, is_space)  # \s+ greedy, then (?!\S) backtracks one
            if k == len(s):
                end = k
            elif k - 1 > i:
                end = k - 1
            else:
                end = k  # \s+
        words.append(s[i:end])
        i = end
    return words


def utf8_runs(data):
    """(is_valid, bytes) runs: maximal valid UTF-8 and maximal invalid bytes."""
    text = data.decode('utf-8', errors='surrogateescape')
    runs = []
    cur, cur_valid = [], None
    for ch in text:
        valid = not ('\udc80' <= ch <= '\udcff')
        if valid != cur_valid and cur:
            runs.append((cur_valid, ''.join(cur)))
            cur = []
        cur_valid = valid
        cur.append(ch)
    if cur:
        runs.append((cur_valid, ''.join(cur)))
    return [(v, s.encode('utf-8', errors='surrogateescape')) for v, s in runs]


def words_of(data):
    for valid, chunk in utf8_runs(data):
        if valid:
            for w in pretokenize(chunk.decode('utf-8')):
                yield w.encode('utf-8')
        else:
            yield chunk


def train(texts, vocab_size, min_frequency):
    counts = {}
    for data in texts:
        for w in words_of(data):
            counts[w] = counts.get(w, 0) + 1
    order, chars = bytes_to_unicode()
    tokens = [bytes([b]) for b in order]  # id -> bytes
    ids = {t: i for i, t in enumerate(tokens)}
    words = [[ids[bytes([b])] for b in w] for w in counts]
    freqs = list(counts.values())
    merges = []
    while len(tokens) < vocab_size - 1:
        pairs = {}
        for w, f in zip(words, freqs):
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + f
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], tokens[p[0]], tokens[p[1]]))
        if pairs[best] < max(min_frequency, 1):
            break
        a, b = best
        merged = tokens[a] + tokens[b]
        if merged not in ids:
            ids[merged] = len(tokens)
            tokens.append(merged)
        new = ids[merged]
        merges.append((a, b))
        for n, w in enumerate(words):
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[n] = out

    def mapped(t):
        return ''.join(chars[order.index(b)] for b in t)

    vocab = {mapped(t): i for i, t in enumerate(tokens)}
    vocab['<|endoftext|>'] = len(tokens)
    vocab_json = json.dumps(vocab, ensure_ascii=False) + '\n'
    merges_txt = '#version: 0.2\n' + ''.join('%s %s\n' % (mapped(tokens[a]), mapped(tokens[b])) for a, b in merges)
    return vocab_json.encode(), merges_txt.encode()


def main(argv):
    vocab_size, min_frequency, out, check, files = None, 2, None, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ('--vocab-size', '--min-frequency', '-o', '--check'):
            v = argv[i + 1]
            i += 2
            if a == '--vocab-size':
                vocab_size = int(v)
            elif a == '--min-frequency':
                min_frequency = int(v)
            elif a == '-o':
                out = v
            else:
                check = v
        else:
            files.append(a)
            i += 1
    texts = []
    for f in files:
        with open(f, 'rb') as fh:
            texts.append(fh.read())
    vocab_json, merges_txt = train(texts, vocab_size, min_frequency)
    if check:
        status = 0
        for name, data in (('vocab.json', vocab_json), ('merges.txt', merges_txt)):
            with open(os.path.join(check, name), 'rb') as fh:
                if fh.read() != data:
                    print('%s differs from the reference trainer' % os.path.join(check, name))
                    status = 1
        if status == 0:
            print('%s: vocab.json and merges.txt agree with the reference trainer' % check)
        return status
    os.makedirs(out, exist_ok=True)
    for name, data in (('vocab.json', vocab_json), ('merges.txt', merges_txt)):
        with open(os.path.join(out, name), 'wb') as fh:
            fh.write(data)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
