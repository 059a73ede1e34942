#!/usr/bin/env python3
"""The GPT against transformers' GPT-2 itself, both ways (not a test: CI
never needs PyTorch or transformers; run it in the peers' environment,
`bench/peers/setup.sh --with transformers`, or any that has them):

  gpt_hf_check.py HSR DATA [--seq 32] [--windows 4]

1. trains a small GPT with HSR (`hsr train --model gpt`, 2 layers, 4 heads,
   width 32, 30 steps) and exports it in the directory layout with
   config.json (`--export DIR --max-shard-size 20KB`: shards and the index);
   transformers' GPT2LMHeadModel.from_pretrained(DIR) loads it, and its
   logits on windows i = 0..N-1 (bytes [i T, i T + T) of DATA) must equal
   `hsr eval --logits`'s of DIR, and its mean cross-entropy over the
   windows' next bytes `hsr eval`'s loss; `hsr ckpt export` of the run's
   checkpoint is loaded the same way and must hold the same tensors;
2. builds transformers' own GPT2LMHeadModel from a GPT2Config (6 heads,
   width 48; random weights, LayerNorm weights drawn in [0.5, 1.5]; no
   download), saves it with save_pretrained, and `hsr eval --init DIR
   --heads 6` (no hsr metadata: the configuration from the shapes) must give
   transformers' logits and loss, and `hsr train --init DIR` (the same
   shape, one step at --lr 0, then --export) must give back its tensors
   exactly.
Both logits are also compared with a float64 forward written here from the
tensors alone (GPT-2's formulas). Logits to 1e-4 absolute, losses to 1e-4
relative; prints every difference and exits 1 on a mismatch."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel


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
    windows = [list(text[i * a.seq: i * a.seq + a.seq + 1]) for i in range(a.windows)]

    def logits_of(model):
        with torch.no_grad():
            return [model(input_ids=torch.tensor([w[:-1]])).logits[0].double() for w in windows]

    def loss_of(logits):
        return sum(torch.nn.functional.cross_entropy(l, torch.tensor(w[1:])).item()
                   for l, w in zip(logits, windows)) / a.windows

    def hsr_eval(path, *extra):
        """hsr eval's loss and logits (one tensor per window, float64)."""
        lf = os.path.join(os.path.dirname(path), "logits.safetensors")
        out = subprocess.check_output([a.hsr, "eval", "--init", path, "--data", a.data, "--seq", str(a.seq),
                                       "--windows", str(a.windows), "--json", "--logits", lf, *extra])
        from safetensors.torch import load_file
        return json.loads(out)["loss"], list(load_file(lf)["logits"].double())

    def reference_logits(sd, n_head):
        """GPT-2's forward from the tensors alone, in float64 (hsr's layout: linear weights [in, out])."""
        g = {k.removeprefix("transformer."): v.double() for k, v in sd.items()}
        ln = lambda x, p: torch.nn.functional.layer_norm(x, x.shape[-1:], g[p + ".weight"], g[p + ".bias"], 1e-5)
        gelu = lambda x: 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x ** 3)))
        out = []
        for w in windows:
            t = torch.tensor(w[:-1])
            x = g["wte.weight"][t] + g["wpe.weight"][: len(t)]
            n_layer = 1 + max(int(k.split(".")[1]) for k in g if k.startswith("h."))
            T, C = x.shape
            hs = C // n_head
            for i in range(n_layer):
                p = f"h.{i}."
                q, k, v = (ln(x, p + "ln_1") @ g[p + "attn.c_attn.weight"] + g[p + "attn.c_attn.bias"]).split(C, -1)
                q, k, v = (y.view(T, n_head, hs).transpose(0, 1) for y in (q, k, v))
                att = (q @ k.transpose(-1, -2)) / hs ** 0.5
                att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
                y = (att @ v).transpose(0, 1).reshape(T, C)
                x = x + y @ g[p + "attn.c_proj.weight"] + g[p + "attn.c_proj.bias"]
                h = gelu(ln(x, p + "ln_2") @ g[p + "mlp.c_fc.weight"] + g[p + "mlp.c_fc.bias"])
                x = x + h @ g[p + "mlp.c_proj.weight"] + g[p + "mlp.c_proj.bias"]
            out.append(ln(x, "ln_f") @ g["wte.weight"].T)
        return out

    def max_diff(xs, ys):
        ab = max((x - y).abs().max().item() for x, y in zip(xs, ys))
        rel = ab / max(y.abs().max().item() for y in ys)  # against the logits' scale
        return ab, rel

    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        d, root = os.path.join(tmp, "hsr"), os.path.join(tmp, "ckpt")
        subprocess.check_call([a.hsr, "train", "--model", "gpt", "--layers", "2", "--heads", "4", "--dim", "32",
                               "--seq", str(a.seq), "--batch", "8", "--steps", "30", "--lr", "1e-2", "--no-progress",
                               "--ckpt", root, "--export", d, "--max-shard-size", "20KB"], stdout=subprocess.DEVNULL)
        cfg = json.load(open(os.path.join(d, "config.json")))
        m = GPT2LMHeadModel.from_pretrained(d, dtype=torch.float32).eval()
        lt = logits_of(m)
        h, lh = hsr_eval(d)
        ab, rel = max_diff(lt, lh)
        ab_r, rel_r = max_diff(lt, reference_logits(m.state_dict(), cfg["n_head"]))
        bad |= ab > 1e-4 or ab_r > 1e-4
        print(f"hsr's export in transformers: logits against hsr eval's: max abs {ab:.2e}, max rel {rel:.2e}; "
              f"against a float64 forward: max abs {ab_r:.2e}")
        t = loss_of(lt)
        bad |= abs(t - h) > 1e-4 * h
        print(f"hsr's export in transformers: loss transformers {t:.9f}, hsr eval {h:.9f} "
              f"(abs {abs(t - h):.1e}, relative {abs(t - h) / h:.1e})")
        e = os.path.join(tmp, "ckx")
        subprocess.check_call([a.hsr, "ckpt", "export", root, "--safetensors", e, "--max-shard-size", "20KB"],
                              stdout=subprocess.DEVNULL)
        m_e = GPT2LMHeadModel.from_pretrained(e, dtype=torch.float32).eval()
        same = all(torch.equal(x, y) for x, y in zip(m.state_dict().values(), m_e.state_dict().values()))
        bad |= not same
        print(f"hsr ckpt export in transformers: {'the same tensors' if same else 'DIFFERENT tensors'}")

        cfg2 = GPT2Config(vocab_size=256, n_positions=64, n_embd=48, n_layer=2, n_head=6, bos_token_id=0,
                          eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        torch.manual_seed(0)
        m2 = GPT2LMHeadModel(cfg2).eval()
        with torch.no_grad():
            for n, p in m2.named_parameters():
                if ".ln_" in n and n.endswith("weight"):
                    p.uniform_(0.5, 1.5)
        d2 = os.path.join(tmp, "own")
        m2.save_pretrained(d2)
        l2 = logits_of(m2)
        h, lh2 = hsr_eval(d2, "--heads", "6")
        ab2, rel2 = max_diff(l2, lh2)
        ab2_r, _ = max_diff(l2, reference_logits(m2.state_dict(), 6))
        bad |= ab2 > 1e-4 or ab2_r > 1e-4
        t = loss_of(l2)
        bad |= abs(t - h) > 1e-4 * h
        print(f"transformers' own in hsr:     logits against hsr eval's: max abs {ab2:.2e}, max rel {rel2:.2e}; "
              f"against a float64 forward: max abs {ab2_r:.2e}")
        print(f"transformers' own in hsr:     loss transformers {t:.9f}, hsr eval {h:.9f} (abs {abs(t - h):.1e}, "
              f"relative {abs(t - h) / h:.1e})")
        r = subprocess.run([a.hsr, "train", "--model", "gpt", "--layers", "2", "--heads", "6", "--dim", "48", "--seq",
                            str(a.seq), "--batch", "8", "--steps", "1", "--lr", "0", "--no-progress", "--init", d2,
                            "--export", os.path.join(tmp, "back.safetensors")], capture_output=True, text=True)
        ok = r.returncode == 0
        if ok:
            back = os.path.join(tmp, "back.safetensors")
            from safetensors.torch import load_file
            sd, own = load_file(back), m2.state_dict()
            ok = all(torch.equal(v, own["transformer." + k]) for k, v in sd.items())
        bad |= not ok
        print(f"hsr train --init of transformers' own (--lr 0, then --export): "
              f"{'the same tensors' if ok else 'FAILED: ' + r.stderr[-400:]}")
    print(f"torch {torch.__version__}, transformers {__import__('transformers').__version__}: "
          f"{'MISMATCH' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
