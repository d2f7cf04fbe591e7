#!/usr/bin/env python3
"""orion-tokenize on the committed SentencePiece models (orion_tokenizer_open
on a .model, through sentencepiece_glue.c) gives exactly the ids and the
decoded bytes that python3-sentencepiece gave (fixtures/sp_expected.json,
made by make_sp_fixture.py). Standard library only.

  sp_cli_agree.py ORION_TOKENIZE FIXTURES_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

tok, fixtures = sys.argv[1], sys.argv[2]
expected = json.load(open(os.path.join(fixtures, "sp_expected.json")))
failed = checked = 0
with tempfile.TemporaryDirectory() as tmp:
    for model in expected["models"]:
        path = os.path.join(fixtures, model["model"])
        info = subprocess.run([tok, "--tokenizer", path, "info", "--json"], capture_output=True, text=True)
        if info.returncode != 0:
            print(f"FAIL: info {model['name']}: {info.stderr.strip()}")
            failed += 1
            continue
        got = json.loads(info.stdout)
        for key in ("vocab_size", "bos", "eos"):
            if got.get(key) != model[key]:
                print(f"FAIL: {model['name']}: info {key} {got.get(key)} != {model[key]}")
                failed += 1
        for case in model["cases"]:
            text = bytes.fromhex(case["text_hex"])
            src = os.path.join(tmp, "text")
            with open(src, "wb") as f:
                f.write(text)
            enc = subprocess.run([tok, "--tokenizer", path, "encode", "--file", src], capture_output=True, stdin=subprocess.DEVNULL)
            ids = [int(x) for x in enc.stdout.split()]
            ids_file = os.path.join(tmp, "ids")
            with open(ids_file, "w") as f:
                f.write(" ".join(str(i) for i in case["ids"]))
            dec = subprocess.run([tok, "--tokenizer", path, "decode", "--file", ids_file], capture_output=True,
                                 stdin=subprocess.DEVNULL)
            checked += 1
            if enc.returncode != 0 or ids != case["ids"]:
                print(f"FAIL: {model['name']} {case['label']}: encode differs ({enc.stderr.decode().strip()})")
                failed += 1
            elif dec.returncode != 0 or dec.stdout != bytes.fromhex(case["decoded_hex"]):
                print(f"FAIL: {model['name']} {case['label']}: decode differs")
                failed += 1
print(f"{checked - failed} passed, {failed} failed ({checked} texts)")
sys.exit(1 if failed or checked == 0 else 0)
