#!/usr/bin/env python3
"""An independent check of an `hsr train --model llama --export DIR
--max-shard-size N` directory, with json and struct only (no numpy, no
torch, no transformers):

  llama_st_check.py DIR DATA VAL_START WINDOWS SEQ LOSS

reads DIR as transformers' from_pretrained would: config.json, then
model.safetensors or model.safetensors.index.json and its shards (each file
parsed as the safetensors specification describes it, by gpt_st_check.py's
reader); checks LlamaForCausalLM's names and shapes against the config; then
runs the Llama forward pass in plain Python from config.json's values alone
(hidden_size, heads, key/value heads, intermediate_size, rms_norm_eps,
rope_theta; transformers' rotate-half rotary embedding, SiLU-gated MLP,
untied lm_head) over validation windows i = 0..WINDOWS-1 (bytes
[VAL_START + i SEQ, + SEQ + 1) of DATA) and requires the mean cross-entropy
to equal LOSS, what hsr train printed for the same windows."""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_st_check import read_safetensors  # noqa: E402


def read_dir(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        wm = json.load(open(idx))["weight_map"]
        files = sorted(set(wm.values()))
    else:
        wm, files = None, ["model.safetensors"]
    meta, tensors = {}, {}
    for f in files:
        m, t, _ = read_safetensors(os.path.join(d, f))
        meta.update(m)
        for k in t:
            assert k not in tensors, f"{k} in two shards"
            assert wm is None or wm[k] == f, f"{k}: the index says {wm[k]}, found in {f}"
        tensors.update(t)
    assert wm is None or sorted(wm) == sorted(tensors), "the index and the shards name different tensors"
    return meta, tensors


def rmsnorm(x, w, eps):
    r = 1.0 / math.sqrt(sum(a * a for a in x) / len(x) + eps)
    return [a * r * wi for a, wi in zip(x, w)]


def linear(x, w, n_in, n_out):  # w stored [out, in], torch.nn.Linear's
    return [sum(w[o * n_in + i] * x[i] for i in range(n_in)) for o in range(n_out)]


def rope(v, pos, D, theta):  # transformers' rotate_half: pairs (i, i + D/2)
    h = D // 2
    out = list(v)
    for i in range(h):
        a = pos / theta ** (2 * i / D)
        c, s = math.cos(a), math.sin(a)
        out[i] = v[i] * c - v[i + h] * s
        out[i + h] = v[i + h] * c + v[i] * s
    return out


def forward_loss(t, cfg, tokens, targets):
    C, L, H, G = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    F, V, eps, theta = cfg["intermediate_size"], cfg["vocab_size"], cfg["rms_norm_eps"], cfg["rope_theta"]
    D, T = C // H, len(tokens)
    emb = t["model.embed_tokens.weight"][1]
    x = [emb[tok * C:(tok + 1) * C] for tok in tokens]
    for l in range(L):
        g = lambda k: t[f"model.layers.{l}.{k}.weight"][1]
        a = [rmsnorm(r, g("input_layernorm"), eps) for r in x]
        q = [linear(r, g("self_attn.q_proj"), C, H * D) for r in a]
        k = [linear(r, g("self_attn.k_proj"), C, G * D) for r in a]
        v = [linear(r, g("self_attn.v_proj"), C, G * D) for r in a]
        q = [sum((rope(r[h * D:(h + 1) * D], p, D, theta) for h in range(H)), []) for p, r in enumerate(q)]
        k = [sum((rope(r[h * D:(h + 1) * D], p, D, theta) for h in range(G)), []) for p, r in enumerate(k)]
        y = [[0.0] * (H * D) for _ in range(T)]
        for h in range(H):
            kh = h // (H // G)
            for i in range(T):
                qi = q[i][h * D:(h + 1) * D]
                s = [sum(a_ * b_ for a_, b_ in zip(qi, k[j][kh * D:(kh + 1) * D])) / math.sqrt(D) for j in range(i + 1)]
                mx = max(s)
                e = [math.exp(z - mx) for z in s]
                z = sum(e)
                for d in range(D):
                    y[i][h * D + d] = sum(e[j] / z * v[j][kh * D + d] for j in range(i + 1))
        x = [[xi + oi for xi, oi in zip(r, linear(yr, g("self_attn.o_proj"), H * D, C))] for r, yr in zip(x, y)]
        a = [rmsnorm(r, g("post_attention_layernorm"), eps) for r in x]
        m = []
        for r in a:
            gt, up = linear(r, g("mlp.gate_proj"), C, F), linear(r, g("mlp.up_proj"), C, F)
            m.append(linear([gi / (1.0 + math.exp(-gi)) * ui for gi, ui in zip(gt, up)], g("mlp.down_proj"), F, C))
        x = [[xi + mi for xi, mi in zip(r, mr)] for r, mr in zip(x, m)]
    head, loss = t["lm_head.weight"][1], 0.0
    for r, tgt in zip(x, targets):
        a = rmsnorm(r, t["model.norm.weight"][1], eps)
        z = linear(a, head, C, V)
        mx = max(z)
        loss += math.log(sum(math.exp(v_ - mx) for v_ in z)) - (z[tgt] - mx)
    return loss / T


def main():
    d, data, val_start, windows, seq, want = sys.argv[1:7]
    val_start, windows, seq, want = int(val_start), int(windows), int(seq), float(want)
    cfg = json.load(open(os.path.join(d, "config.json")))
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["model_type"] == "llama", cfg
    assert cfg["tie_word_embeddings"] is False and cfg["attention_bias"] is False and cfg["mlp_bias"] is False, cfg
    assert cfg["hidden_act"] == "silu" and cfg["head_dim"] * cfg["num_attention_heads"] == cfg["hidden_size"], cfg
    assert cfg["rope_parameters"] == {"rope_type": "default", "rope_theta": cfg["rope_theta"]}, cfg
    meta, t = read_dir(d)
    assert meta.get("hsr.model") == "llama", meta
    C, L, H, G = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    F, V, D = cfg["intermediate_size"], cfg["vocab_size"], C // H
    assert [int(meta[k]) for k in ("n_layer", "n_head", "n_kv_head", "n_embd", "n_ff", "vocab_size")] == [L, H, G, C, F, V]
    shapes = {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C], "lm_head.weight": [V, C]}
    blk = {"input_layernorm": [C], "self_attn.q_proj": [H * D, C], "self_attn.k_proj": [G * D, C],
           "self_attn.v_proj": [G * D, C], "self_attn.o_proj": [C, H * D], "post_attention_layernorm": [C],
           "mlp.gate_proj": [F, C], "mlp.up_proj": [F, C], "mlp.down_proj": [C, F]}
    for l in range(L):
        for k, s in blk.items():
            shapes[f"model.layers.{l}.{k}.weight"] = s
    assert sorted(t) == sorted(shapes), f"names: {sorted(set(t) ^ set(shapes))}"
    for k, s in shapes.items():
        assert t[k][0] == s, f"{k}: shape {t[k][0]}, LlamaForCausalLM's {s}"
    text = open(data, "rb").read()
    total = 0.0
    for i in range(windows):
        w = text[val_start + i * seq: val_start + i * seq + seq + 1]
        total += forward_loss(t, cfg, list(w[:-1]), list(w[1:]))
    got = total / windows
    assert abs(got - want) <= 1e-4 * max(1.0, abs(want)), f"loss {got:.7f} from the files, hsr train printed {want:.7f}"
    print(f"llama_st_check: {len(t)} tensors, LlamaForCausalLM names and shapes, config.json; "
          f"plain-Python forward loss {got:.6f} = hsr's {want:.6f}")


if __name__ == "__main__":
    main()
