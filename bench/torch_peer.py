#!/usr/bin/python3
"""The PyTorch peer of `hsr train`: the same model, optimizer and global batch
with Debian's python3-torch on the CPU (gloo DDP for several ranks, the same
threads per rank), printing one JSON line with its tokens per second.

  torch_peer.py --model gpt|mlp [--ranks N] [--threads T] [--steps S] [--batch B]
                [--layers L] [--dim D] [--heads H] [--seq T] [--classes C] [--data FILE]

gpt: GPT-2 (pre-LayerNorm blocks, fused qkv, causal softmax attention written
out as PyTorch 1.13 has no fused kernel, GELU tanh, head tied to wte) on
random windows of --data; mlp: the residual MLP of examples/mlp.h on
Gaussian inputs labelled by a fixed random teacher (generated with torch).
AdamW (0.9, 0.999, 1e-8, weight decay 0.01 on the 2-D weights), global
gradient-norm clipping at 1.0, like hsr train's defaults. Not a test: CI
never needs PyTorch; bench/train_vs_torch.sh runs it beside hsr."""
import argparse
import json
import math
import os
import sys
import time


def _threads_from_argv():
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


# torch.set_num_threads does not reach OpenBLAS's own pool (Debian's torch
# calls libblas.so.3 = OpenBLAS, which starts a thread per core): pin it before
# torch loads, so "one thread per rank" holds for the GEMMs too, as in hsr.
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = _threads_from_argv()

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
        att = F.softmax(att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, H, C, T, V=256):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if n.endswith("c_proj.weight") or n.endswith("mlp_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif "bias" in n:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # the head tied to the token embedding
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


class MLP(nn.Module):
    def __init__(self, L, D, classes):
        super().__init__()
        self.embed = nn.Linear(D, D)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(approximate="tanh"),
                                                   nn.Linear(4 * D, D)) for _ in range(L)])
        self.head = nn.Linear(D, classes)

    def forward(self, x, y):
        h = self.embed(x)
        for b in self.blocks:
            h = h + b(h)
        return F.cross_entropy(self.head(h), y)


def worker(rank, a, q):
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    if a.ranks > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank, world_size=a.ranks)
    per = a.batch // a.ranks
    if a.model == "gpt":
        model = GPT(a.layers, a.heads, a.dim, a.seq)
        data = torch.frombuffer(bytearray(open(a.data, "rb").read()), dtype=torch.uint8).long()
        split = len(data) - len(data) // 10
        tokens_per_step = a.batch * a.seq
    else:
        model = MLP(a.layers, a.dim, a.classes)
        teacher = torch.randn(a.dim, a.classes)
        tokens_per_step = a.batch
    if a.ranks > 1:
        model = nn.parallel.DistributedDataParallel(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(100 + rank)
    times, losses = [], []
    for step in range(a.steps):
        t0 = time.perf_counter()
        if a.model == "gpt":
            pos = torch.randint(0, split - a.seq - 1, (per,), generator=g)
            win = torch.stack([data[p : p + a.seq + 1] for p in pos.tolist()])
            loss = model(win[:, :-1], win[:, 1:])
        else:
            x = torch.randn(per, a.dim, generator=g)
            loss = model(x, (torch.tanh(x) @ teacher).argmax(1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if a.ranks > 1:
            l = loss.detach().clone()
            dist.all_reduce(l)
            loss = l / a.ranks
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    if rank == 0:
        timed = times[a.warmup :] if len(times) > a.warmup else times
        step_s = sum(timed) / len(timed)
        q.put({"peer": "torch", "torch": torch.__version__, "model": a.model, "ranks": a.ranks, "threads": a.threads,
               "batch": a.batch, "steps": a.steps, "step_ms": step_s * 1e3, "tokens_per_s": tokens_per_step / step_s,
               "loss_first": losses[0], "loss_last": losses[-1],
               "parameters": sum(p.numel() for p in model.parameters())})
    if a.ranks > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["gpt", "mlp"], default="gpt")
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (hsr: one BLAS thread per rank)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="first steps not timed")
    p.add_argument("--batch", type=int, default=None, help="global batch (gpt: windows, default 16; mlp: 64)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=None, help="gpt default 128, mlp 64")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--data", default=None, help="gpt: text file (default build/hsr-corpus.txt)")
    p.add_argument("--port", type=int, default=29517)
    a = p.parse_args()
    a.batch = a.batch or (16 if a.model == "gpt" else 64)
    a.dim = a.dim or (128 if a.model == "gpt" else 64)
    if a.model == "gpt" and not a.data:
        a.data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "hsr-corpus.txt")
    if a.batch % a.ranks:
        sys.exit(f"torch_peer: --batch {a.batch} is not a multiple of --ranks {a.ranks}")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    if a.ranks == 1:
        worker(0, a, q)
    else:
        mp.spawn(worker, args=(a, q), nprocs=a.ranks, join=True)
    print(json.dumps(q.get()))


if __name__ == "__main__":
    main()
