#!/usr/bin/env python3
"""The Llama-style model against transformers itself, both ways (not a test:
CI never needs PyTorch or transformers; run it in a virtual environment that
has them, e.g. `python3 -m venv V && V/bin/pip install torch transformers`):

  llama_hf_check.py HSR DATA [--seq 32] [--windows 4]

1. trains a small llama with HSR (`hsr train --model llama`, 2 layers, 4
   heads on 2 key/value heads, width 32, 30 steps) and exports it in the
   directory layout with config.json (`--export DIR --max-shard-size 50KB`:
   four shards and the index); transformers' LlamaForCausalLM.from_pretrained
   (DIR) loads it, and its mean cross-entropy over windows i = 0..N-1 (bytes
   [i T, i T + T + 1) of DATA) must equal `hsr eval`'s of DIR;
2. builds transformers' own LlamaForCausalLM from a config (6 heads on 2
   key/value heads, width 48, MLP 100; random weights, RMSNorm weights
   drawn in [0.5, 1.5]; no download), saves it with save_pretrained, and
   `hsr eval --init DIR --heads 6` (no hsr metadata: the configuration from
   the shapes) must give transformers' loss.
Both to 1e-6 relative; prints the two pairs and exits 1 on a mismatch."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hsr")
    ap.add_argument("data")
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--windows", type=int, default=4)
    a = ap.parse_args()
    torch.set_num_threads(1)
    text = open(a.data, "rb").read()
    assert len(text) >= a.windows * a.seq + 1, f"{a.data}: shorter than {a.windows} windows of {a.seq} + 1 bytes"

    def torch_loss(model):
        tot = 0.0
        with torch.no_grad():
            for i in range(a.windows):
                w = list(text[i * a.seq: i * a.seq + a.seq + 1])
                logits = model(input_ids=torch.tensor([w[:-1]])).logits[0].double()
                tot += torch.nn.functional.cross_entropy(logits, torch.tensor(w[1:])).item()
        return tot / a.windows

    def hsr_loss(path, *extra):
        out = subprocess.check_output([a.hsr, "eval", "--init", path, "--data", a.data, "--seq", str(a.seq),
                                       "--windows", str(a.windows), "--json", *extra])
        return json.loads(out)["loss"]

    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "hsr")
        subprocess.check_call([a.hsr, "train", "--model", "llama", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                               "--dim", "32", "--seq", str(a.seq), "--batch", "8", "--steps", "30", "--lr", "1e-2",
                               "--no-progress", "--export", d, "--max-shard-size", "50KB"], stdout=subprocess.DEVNULL)
        m = LlamaForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
        t, h = torch_loss(m), hsr_loss(d)
        bad |= abs(t - h) > 1e-6 * h
        print(f"hsr's export in transformers: transformers {t:.9f}, hsr eval {h:.9f} (relative {abs(t - h) / h:.1e})")
        cfg = LlamaConfig(vocab_size=256, hidden_size=48, intermediate_size=100, num_hidden_layers=2,
                          num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
                          tie_word_embeddings=False)
        torch.manual_seed(0)
        m2 = LlamaForCausalLM(cfg).eval()
        with torch.no_grad():
            for n, p in m2.named_parameters():
                if "norm" in n:
                    p.uniform_(0.5, 1.5)
        d2 = os.path.join(tmp, "own")
        m2.save_pretrained(d2)
        t, h = torch_loss(m2), hsr_loss(d2, "--heads", "6")
        bad |= abs(t - h) > 1e-6 * h
        print(f"transformers' own in hsr:     transformers {t:.9f}, hsr eval {h:.9f} (relative {abs(t - h) / h:.1e})")
    print(f"torch {torch.__version__}, transformers {__import__('transformers').__version__}: {'MISMATCH' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
