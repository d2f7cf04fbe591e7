#!/usr/bin/python3
"""SentencePiece fixtures for the tokenizer tests (testsuite/text/test_sentencepiece.c).

Trains two small SentencePiece models ourselves with Debian's python3-sentencepiece
(model_type bpe with a llama-style normalizer: identity, whitespace kept, digits
split; and unigram with the library's default NFKC normalizer; both with
byte_fallback and a vocabulary of 600) on Debian's fortunes plus our corpus
(testsuite/text/corpus/sp_*.txt), and writes what python3-sentencepiece makes of
the corpus: ids of each file and each line, their decodes, and every id's bytes
for streaming (sp_model_piece's rule, below). The models are ours (made here),
so they are committed with the expectations:

    testsuite/text/fixtures/sp_bpe.model, sp_unigram.model, sp_expected.json

Run from anywhere:   /usr/bin/python3 testsuite/text/make_sp_fixture.py
With --check it trains nothing: it recomputes the expectations from the
committed models with the installed python3-sentencepiece and exits 1 when
they differ from sp_expected.json (the live drift test), 77 when the module is
missing (meson's "skipped").
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, 'corpus')
FIXTURES = os.path.join(HERE, 'fixtures')
FORTUNES = ['/usr/share/games/fortunes/fortunes', '/usr/share/games/fortunes/computers']
VOCAB_SIZE = 600

MODELS = {
    'sp_bpe': dict(model_type='bpe', normalization_rule_name='identity', remove_extra_whitespaces=False,
                   add_dummy_prefix=True, split_digits=True),
    'sp_unigram': dict(model_type='unigram'),
}

# Short texts the corpus files do not have: edges of the leading-space and
# whitespace handling, and text that looks like special pieces.
EXTRA_CASES = [b'', b' ', b'  two leading', b'trailing  ', b'\n', b'a\tb', b'<s> </s> <unk> \xe2\x81\x87',
               b'\xe2\x96\x81 the marker itself']


def corpus_files():
    return sorted(f for f in os.listdir(CORPUS) if f.startswith('sp_') and f.endswith('.txt'))


def train(workdir):
    text = os.path.join(workdir, 'train.txt')
    with open(text, 'wb') as out:
        for path in FORTUNES + [os.path.join(CORPUS, f) for f in corpus_files()]:
            with open(path, 'rb') as f:
                out.write(f.read())
    import sentencepiece as spm
    for name, options in MODELS.items():
        prefix = os.path.join(workdir, name)
        spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=VOCAB_SIZE, byte_fallback=True,
                                       num_threads=1, minloglevel=2, **options)
        shutil.copyfile(prefix + '.model', os.path.join(FIXTURES, name + '.model'))


def streaming_bytes(sp, i):
    """sp_model_piece's rule (runtime/text/sentencepiece.cc)."""
    if sp.is_control(i):
        return b''
    if sp.is_unknown(i):
        return ' \u2047 '.encode()  # the models' unk_surface (the trainer's default)
    piece = sp.id_to_piece(i)
    if sp.is_byte(i):
        return bytes([int(piece[3:5], 16)])
    return piece.replace('\u2581', ' ').encode()


def cases():
    out = []
    for f in corpus_files():
        with open(os.path.join(CORPUS, f), 'rb') as fh:
            data = fh.read()
        out.append((f, data))
        for n, line in enumerate(data.split(b'\n')):
            out.append(('%s:%d' % (f, n + 1), line))
    for n, text in enumerate(EXTRA_CASES):
        out.append(('extra:%d' % n, text))
    return out


def expectations():
    import sentencepiece as spm
    models = []
    for name in MODELS:
        sp = spm.SentencePieceProcessor(model_file=os.path.join(FIXTURES, name + '.model'))
        entry = {
            'name': name,
            'model': name + '.model',
            'vocab_size': sp.get_piece_size(),
            'bos': sp.bos_id(),
            'eos': sp.eos_id(),
            'unk': sp.unk_id(),
            'pieces_hex': [streaming_bytes(sp, i).hex() for i in range(sp.get_piece_size())],
            'cases': [],
        }
        for label, text in cases():
            ids = sp.encode(text)
            entry['cases'].append({'label': label, 'text_hex': text.hex(), 'ids': ids,
                                   'decoded_hex': sp.decode(ids).encode().hex()})
        models.append(entry)
    return {'generator': 'testsuite/text/make_sp_fixture.py', 'sentencepiece_version': spm.__version__,
            'models': models}


def main():
    path = os.path.join(FIXTURES, 'sp_expected.json')
    try:
        import sentencepiece  # noqa: F401
    except ImportError:
        print('python3-sentencepiece is not installed: skipped')
        return 77
    if '--check' in sys.argv[1:]:
        with open(path) as f:
            committed = json.load(f)
        now = expectations()
        status = 0
        for want, got in zip(committed['models'], now['models']):
            for key in ('vocab_size', 'bos', 'eos', 'unk', 'pieces_hex'):
                if want[key] != got[key]:
                    print('%s: %s differs from the fixture' % (want['name'], key))
                    status = 1
            for cw, cg in zip(want['cases'], got['cases']):
                if cw != cg:
                    print('%s %s: python3-sentencepiece %s gives ids %s, the fixture (%s) has %s' %
                          (want['name'], cw['label'], now['sentencepiece_version'], cg['ids'],
                           committed['sentencepiece_version'], cw['ids']))
                    status = 1
        if status == 0:
            print('python3-sentencepiece %s agrees with the fixture (%d models, %d cases each)' %
                  (now['sentencepiece_version'], len(now['models']), len(now['models'][0]['cases'])))
        return status
    os.makedirs(FIXTURES, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir:
        train(workdir)
    with open(path, 'w') as f:
        json.dump(expectations(), f, indent=1, ensure_ascii=True)
        f.write('\n')
    print('wrote', path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
