#!/usr/bin/env python3
"""An independent check of an `hsr train --model gpt --export` file, with
json and struct only (no numpy, no torch):

  gpt_st_check.py FILE.safetensors DATA VAL_START WINDOWS SEQ LOSS

parses the file exactly as the safetensors specification describes it (the
8-byte little-endian header length, a JSON header starting with '{' padded
with spaces, entries of dtype/shape/data_offsets covering the byte buffer
back to back), checks GPT-2's names, shapes and the __metadata__ hsr train
writes, then runs GPT-2's forward pass in plain Python over validation
windows i = 0..WINDOWS-1 (bytes [VAL_START + i SEQ, + SEQ + 1) of DATA) and
requires the mean cross-entropy to equal LOSS (what hsr train printed for
the same windows): the tensors are the run's parameters, with GPT-2's
meaning ([in, out] linear weights, the head tied to wte)."""
import json
import math
import struct
import sys


def read_safetensors(path):
    b = open(path, "rb").read()
    assert len(b) >= 8, "shorter than the header length"
    (n,) = struct.unpack("<Q", b[:8])
    assert n % 8 == 0, f"header length {n} is not padded to a multiple of 8"
    hdr = b[8 : 8 + n]
    assert hdr[:1] == b"{", "the header does not start with '{'"
    text = hdr.decode("utf-8")
    body = text.rstrip(" ")
    assert body.endswith("}"), "the header is padded with something other than spaces"
    pairs = json.loads(body, object_pairs_hook=lambda kv: kv)
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "duplicate names"
    header = dict(pairs)
    meta = dict(header.pop("__metadata__", []))
    assert all(isinstance(v, str) for v in meta.values()), "metadata values must be strings"
    buf = b[8 + n :]
    spans = sorted((tuple(e["data_offsets"]), k) for k, e in ((k, dict(v)) for k, v in header.items()))
    at = 0
    for (lo, hi), k in spans:
        assert lo == at, f"{k}: a hole or an overlap at {at}"
        at = hi
    assert at == len(buf), f"the tensors cover {at} of {len(buf)} buffer bytes"
    tensors = {}
    for k, e in header.items():
        e = dict(e)
        assert set(e) == {"dtype", "shape", "data_offsets"}, f"{k}: keys {sorted(e)}"
        assert e["dtype"] == "F32", f"{k}: dtype {e['dtype']}"
        lo, hi = e["data_offsets"]
        count = 1
        for d in e["shape"]:
            count *= d
        assert hi - lo == 4 * count, f"{k}: {hi - lo} bytes for shape {e['shape']}"
        tensors[k] = (e["shape"], list(struct.unpack(f"<{count}f", buf[lo:hi])))
    return meta, tensors, keys


def layernorm(x, w, b):
    m = sum(x) / len(x)
    v = sum((a - m) ** 2 for a in x) / len(x)
    r = 1.0 / math.sqrt(v + 1e-5)
    return [(a - m) * r * wi + bi for a, wi, bi in zip(x, w, b)]


def linear(x, w, b, n_in, n_out):  # w stored [in, out], GPT-2's Conv1D
    out = list(b)
    for i in range(n_in):
        xi = x[i]
        row = w[i * n_out : (i + 1) * n_out]
        for o in range(n_out):
            out[o] += xi * row[o]
    return out


def gelu(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def forward_loss(t, L, H, C, V, tokens, targets):
    T = len(tokens)
    wte, wpe = t["wte.weight"][1], t["wpe.weight"][1]
    x = [[wte[tok * C + c] + wpe[p * C + c] for c in range(C)] for p, tok in enumerate(tokens)]
    hs = C // H
    for l in range(L):
        g = lambda k: t[f"h.{l}.{k}"][1]
        a = [layernorm(r, g("ln_1.weight"), g("ln_1.bias")) for r in x]
        qkv = [linear(r, g("attn.c_attn.weight"), g("attn.c_attn.bias"), C, 3 * C) for r in a]
        y = [[0.0] * C for _ in range(T)]
        for h in range(H):
            for i in range(T):
                q = qkv[i][h * hs : (h + 1) * hs]
                s = [sum(qe * ke for qe, ke in zip(q, qkv[j][C + h * hs : C + (h + 1) * hs])) / math.sqrt(hs)
                     for j in range(i + 1)]
                mx = max(s)
                e = [math.exp(v - mx) for v in s]
                z = sum(e)
                for d in range(hs):
                    y[i][h * hs + d] = sum(e[j] / z * qkv[j][2 * C + h * hs + d] for j in range(i + 1))
        x = [[xi + pi for xi, pi in zip(r, linear(yr, g("attn.c_proj.weight"), g("attn.c_proj.bias"), C, C))]
             for r, yr in zip(x, y)]
        a = [layernorm(r, g("ln_2.weight"), g("ln_2.bias")) for r in x]
        f = [[gelu(v) for v in linear(r, g("mlp.c_fc.weight"), g("mlp.c_fc.bias"), C, 4 * C)] for r in a]
        x = [[xi + pi for xi, pi in zip(r, linear(fr, g("mlp.c_proj.weight"), g("mlp.c_proj.bias"), 4 * C, C))]
             for r, fr in zip(x, f)]
    loss = 0.0
    for r, tgt in zip(x, targets):
        a = layernorm(r, t["ln_f.weight"][1], t["ln_f.bias"][1])
        z = [sum(a[c] * wte[v * C + c] for c in range(C)) for v in range(V)]  # the head is tied to wte
        mx = max(z)
        loss += math.log(sum(math.exp(v - mx) for v in z)) - (z[tgt] - mx)
    return loss / T


def main():
    path, data, val_start, windows, seq, want = sys.argv[1:7]
    val_start, windows, seq, want = int(val_start), int(windows), int(seq), float(want)
    meta, t, order = read_safetensors(path)
    assert meta.get("hsr.model") == "gpt", meta
    L, H, C, ctx, V = (int(meta[k]) for k in ("n_layer", "n_head", "n_embd", "n_ctx", "vocab_size"))
    names = ["wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"]
    shapes = {"wte.weight": [V, C], "wpe.weight": [ctx, C], "ln_f.weight": [C], "ln_f.bias": [C]}
    blk = [("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [C, 3 * C]), ("attn.c_attn.bias", [3 * C]),
           ("attn.c_proj.weight", [C, C]), ("attn.c_proj.bias", [C]), ("ln_2.weight", [C]), ("ln_2.bias", [C]),
           ("mlp.c_fc.weight", [C, 4 * C]), ("mlp.c_fc.bias", [4 * C]), ("mlp.c_proj.weight", [4 * C, C]),
           ("mlp.c_proj.bias", [C])]
    for l in range(L):
        for k, s in blk:
            names.append(f"h.{l}.{k}")
            shapes[f"h.{l}.{k}"] = s
    assert sorted(t) == sorted(names), f"names: {sorted(set(t) ^ set(names))}"
    for k in names:
        assert t[k][0] == shapes[k], f"{k}: shape {t[k][0]}, GPT-2's {shapes[k]}"
    text = open(data, "rb").read()
    total = 0.0
    for i in range(windows):
        w = text[val_start + i * seq : val_start + i * seq + seq + 1]
        total += forward_loss(t, L, H, C, V, list(w[:-1]), list(w[1:]))
    got = total / windows
    assert abs(got - want) <= 1e-4 * max(1.0, abs(want)), f"loss {got:.7f} from the file, hsr train printed {want:.7f}"
    print(f"gpt_st_check: {len(t)} tensors, GPT-2 names and shapes; plain-Python forward loss {got:.6f} = hsr's {want:.6f}")


if __name__ == "__main__":
    main()
