#!/usr/bin/env python3
"""examples/generate/fortunes/hf_dir.py: a trained llama as a Hugging Face directory.

Turns what `orion-run train --export` wrote for a model of
bench/make_train_models.py llama --names hf (fp32 masters by param name, which
are already Hugging Face llama's keys) into a directory that orion-convert,
and transformers' LlamaForCausalLM, read:

  OUT/config.json        model_type llama with the sizes, rms_norm_eps and
                         rope_theta the training model used (1e-5, 10000: its
                         rotate-half RoPE is Hugging Face's layout), the head
                         tied to the embedding, max_position_embeddings
  OUT/model.safetensors  the export, copied after its keys and shapes are
                         checked against the config
  OUT/vocab.json, OUT/merges.txt   the tokenizer, when --tokenizer DIR is given

  hf_dir.py OUT --export FILE.safetensors --dim D --layers L --heads H
            --hidden F --vocab V --positions P [--tokenizer DIR]

Standard library only.
"""
import argparse
import json
import os
import shutil
import struct
import sys

RMS_NORM_EPS = 1e-5   # bench/make_train_models.py's EPS
ROPE_THETA = 10000.0  # its rope_tables


def expected_shapes(a):
    D, F, V = a.dim, a.hidden, a.vocab
    shapes = {"model.embed_tokens.weight": [V, D], "model.norm.weight": [D]}
    for layer in range(a.layers):
        p = f"model.layers.{layer}."
        shapes[p + "input_layernorm.weight"] = [D]
        shapes[p + "post_attention_layernorm.weight"] = [D]
        for n in ("q", "k", "v", "o"):
            shapes[p + f"self_attn.{n}_proj.weight"] = [D, D]
        shapes[p + "mlp.gate_proj.weight"] = [F, D]
        shapes[p + "mlp.up_proj.weight"] = [F, D]
        shapes[p + "mlp.down_proj.weight"] = [D, F]
    return shapes


def safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--export", required=True, help="orion-run train --export's safetensors")
    for name in ("dim", "layers", "heads", "hidden", "vocab", "positions"):
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--tokenizer", help="a directory with vocab.json and merges.txt to copy beside the model")
    a = p.parse_args()
    header = safetensors_header(a.export)
    want = expected_shapes(a)
    got = {k: v["shape"] for k, v in header.items()}
    if got != want:
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        wrong = sorted(k for k in set(want) & set(got) if want[k] != got[k])
        sys.exit(f"hf_dir.py: {a.export} is not this llama's export: missing {missing[:3]}, "
                 f"unexpected {extra[:3]}, other shapes {wrong[:3]}")
    endoftext = a.vocab - 1  # orion-tokenize train puts <|endoftext|> last
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": a.vocab,
        "hidden_size": a.dim,
        "intermediate_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.heads,
        "max_position_embeddings": a.positions,
        "rms_norm_eps": RMS_NORM_EPS,
        "rope_theta": ROPE_THETA,
        "hidden_act": "silu",
        "tie_word_embeddings": True,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": endoftext,
        "eos_token_id": endoftext,
        "torch_dtype": "float32",
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    shutil.copyfile(a.export, os.path.join(a.out, "model.safetensors"))
    if a.tokenizer:
        for name in ("vocab.json", "merges.txt"):
            shutil.copyfile(os.path.join(a.tokenizer, name), os.path.join(a.out, name))
    print(f"wrote {a.out}: config.json (llama, {a.layers} layers of {a.dim}, vocabulary {a.vocab}), "
          f"model.safetensors ({len(header)} tensors)" + (", vocab.json, merges.txt" if a.tokenizer else ""))


if __name__ == "__main__":
    main()
