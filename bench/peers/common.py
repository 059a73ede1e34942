"""What every PyTorch peer of `hsr train` shares: the flags, the model read
from the safetensors file hsr wrote (`hsr train --export-init`), the data
windows in hsr's order, AdamW with hsr's hyper-parameters, the schedule, the
clipping, the launch (self-spawned ranks, or one rank per process under
hsr-run / mpirun), the timing and the output.

Imported by fsdp2.py and ddp.py; not a program of its own."""
import argparse
import json
import math
import os
import struct
import sys
import time

# One thread per rank, as hsr (one BLAS thread per rank): set before torch
# loads, so its OpenMP pool is one thread from the start.
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


# ---- flags ------------------------------------------------------------------------
def parser(doc):
    p = argparse.ArgumentParser(description=doc.split("\n")[0], epilog="\n".join(doc.split("\n")[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("the job (hsr train's flags and defaults)")
    g.add_argument("--init", required=True,
                   help="the initial weights: the file `hsr train --model gpt --export-init FILE` wrote "
                        "(the configuration comes from its __metadata__)")
    g.add_argument("--data", default=os.path.join(SRC, "build", "hsr-corpus.txt"),
                   help="training text (default: build/hsr-corpus.txt, hsr train's default)")
    g.add_argument("--steps", type=int, default=200)
    g.add_argument("--batch", type=int, default=16, help="GLOBAL batch in windows, split over the ranks")
    g.add_argument("--seq", type=int, default=None, help="tokens per window (default: the file's n_ctx, at most 128)")
    g.add_argument("--seed", type=int, default=1, help="data seed (hsr train --seed)")
    g.add_argument("--lr", type=float, default=3e-3)
    g.add_argument("--lr-min", type=float, default=None, help="default --lr / 10")
    g.add_argument("--warmup", type=int, default=None, help="default steps / 20 (0 under 20 steps)")
    g.add_argument("--wd", type=float, default=0.01, help="weight decay of the 2-D weights")
    g.add_argument("--clip", type=float, default=1.0, help="global gradient-norm clip, 0 = off")
    g.add_argument("--param-dtype", choices=sorted(DTYPES), default="f32", help="compute / gather dtype")
    g.add_argument("--reduce-dtype", choices=sorted(DTYPES), default="f32", help="gradient reduction dtype")
    r = p.add_argument_group("ranks and output")
    r.add_argument("--ranks", type=int, default=1,
                   help="ranks to spawn (ignored under hsr-run / mpirun: the launcher's ranks)")
    r.add_argument("--threads", type=int, default=1, help="torch threads per rank (hsr: one)")
    r.add_argument("--port", type=int, default=29531, help="rendezvous port on 127.0.0.1")
    r.add_argument("--log", help="one JSON line per step (step, loss, lr, step_ms) from rank 0, like hsr's --log")
    r.add_argument("--json", help="the run's summary as JSON (also printed on stdout)")
    return p


def finish_args(a):
    if a.lr_min is None:
        a.lr_min = a.lr / 10
    if a.warmup is None:
        a.warmup = a.steps // 20 if a.steps >= 20 else 0
    a.meta = read_safetensors(a.init, header_only=True)[1]
    if a.seq is None:
        n_ctx = int(a.meta.get("n_ctx", 128))
        a.seq = n_ctx if n_ctx < 128 else 128


# ---- safetensors (the format's own rules; json + struct + torch) ----------------------
ST_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path, header_only=False):
    """({name: tensor}, __metadata__) of a safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        meta = header.pop("__metadata__", {})
        if header_only:
            return None, meta
        buf = bytearray(f.read())
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(buf, dtype=ST_DTYPES[e["dtype"]], count=(end - b) // ST_DTYPES[e["dtype"]].itemsize,
                             offset=b) if end > b else torch.empty(0, dtype=ST_DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone().float()
    return out, meta


# ---- the GPT of hsr train --model gpt (GPT-2's names and layouts) -------------------------
class Conv1D(nn.Module):
    """GPT-2's linear layer: weight [in, out], y = x W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


class Attention(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.c_attn, self.c_proj = Conv1D(C, 3 * C), Conv1D(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(head size)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc, self.c_proj = Conv1D(C, 4 * C), Conv1D(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(C, eps=1e-5), Attention(C, H)
        self.ln_2, self.mlp = nn.LayerNorm(C, eps=1e-5), MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Token and position embeddings, pre-LayerNorm blocks, final LayerNorm,
    the head tied to wte; the loss is the mean cross-entropy of the batch."""

    def __init__(self, n_layer, n_head, n_embd, n_ctx, vocab_size):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(n_ctx, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)

    def blocks(self):
        return list(self.h)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


def build_gpt(meta):
    return GPT(*(int(meta[k]) for k in ("n_layer", "n_head", "n_embd", "n_ctx", "vocab_size")))


class RMSNorm(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, C, H, G):
        super().__init__()
        self.H, self.G, self.D = H, G, C // H
        self.q_proj, self.o_proj = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)
        self.k_proj, self.v_proj = nn.Linear(C, G * self.D, bias=False), nn.Linear(C, G * self.D, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.H, self.D).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.G, self.D).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.G, self.D).transpose(1, 2)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        rep = self.H // self.G  # query head j reads key/value head j / (H / G)
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, C))


class LlamaMLP(nn.Module):
    def __init__(self, C, Fw):
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(C, Fw, bias=False), nn.Linear(C, Fw, bias=False)
        self.down_proj = nn.Linear(Fw, C, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, C, H, G, Fw):
        super().__init__()
        self.input_layernorm, self.self_attn = RMSNorm(C), LlamaAttention(C, H, G)
        self.post_attention_layernorm, self.mlp = RMSNorm(C), LlamaMLP(C, Fw)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaBody(nn.Module):
    def __init__(self, L, C, H, G, Fw, V):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList(LlamaBlock(C, H, G, Fw) for _ in range(L))
        self.norm = RMSNorm(C)


class Llama(nn.Module):
    """The Llama-style model of `hsr train --model llama` (docs/llama.md):
    RMSNorm (eps 1e-5), rotary embeddings in transformers' rotate-half form
    (theta 10000), grouped-query attention, SwiGLU MLP, untied lm_head;
    LlamaForCausalLM's names and [out, in] layouts."""

    def __init__(self, n_layer, n_head, n_embd, n_ctx, vocab_size, n_kv_head, n_ff):
        super().__init__()
        self.model = LlamaBody(n_layer, n_embd, n_head, n_kv_head, n_ff, vocab_size)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        D = n_embd // n_head
        inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        ang = torch.outer(torch.arange(n_ctx, dtype=torch.float64), inv)
        emb = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", emb.cos().float(), persistent=False)
        self.register_buffer("sin", emb.sin().float(), persistent=False)

    def blocks(self):
        return list(self.model.layers)

    def forward(self, idx, targets):
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.model.embed_tokens(idx)
        for b in self.model.layers:
            x = b(x, cos, sin)
        logits = self.lm_head(self.model.norm(x))
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


def build_llama(meta):
    keys = ("n_layer", "n_head", "n_embd", "n_ctx", "vocab_size", "n_kv_head", "n_ff")
    return Llama(*(int(meta[k]) for k in keys))


MODELS = {"gpt": build_gpt, "llama": build_llama}


def load_model(a):
    kind = a.meta.get("hsr.model", "gpt")
    if kind not in MODELS:
        raise SystemExit(f"peers: {a.init}: hsr.model '{kind}' (known: {', '.join(MODELS)})")
    model = MODELS[kind](a.meta)
    weights, _ = read_safetensors(a.init)
    mine = dict(model.named_parameters())
    missing, extra = set(mine) - set(weights), set(weights) - set(mine)
    if missing or extra:
        raise SystemExit(f"peers: {a.init}: missing {sorted(missing)[:5]}, unknown {sorted(extra)[:5]}")
    with torch.no_grad():
        for n, p in mine.items():
            if tuple(weights[n].shape) != tuple(p.shape):
                raise SystemExit(f"peers: {a.init}: {n} has shape {list(weights[n].shape)}, the model {list(p.shape)}")
            p.copy_(weights[n])
    return model


# ---- data: hsr's windows (examples/gpt_data.c) ---------------------------------------
M64 = (1 << 64) - 1


def _mix(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _hash3(a, b, c):
    return _mix(_mix(_mix(a) ^ b) ^ c)


class Data:
    """Window g (the global sample index) starts at hash(seed, g) mod (split - T),
    split = the file less its held-out last tenth: gpt_data_window."""

    def __init__(self, path, T, seed):
        self.bytes = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.uint8).long()
        n = len(self.bytes)
        tail = n // 10
        if tail < T + 1 and n >= 3 * (T + 1):
            tail = T + 1
        self.split, self.T, self.key = n - tail, T, seed ^ 0x6770747E

    def batch(self, g0, count):
        span = self.split - self.T
        pos = [_hash3(self.key, g, 0) % span for g in range(g0, g0 + count)]
        w = torch.stack([self.bytes[p : p + self.T + 1] for p in pos])
        return w[:, :-1], w[:, 1:]


def lr_at(a, step):
    """rt_lr_at(schedule, step + 1): warm-up, then cosine to --lr-min."""
    total = a.steps if (a.lr_min < a.lr or a.warmup) else 0
    if a.warmup > 0 and step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    if total <= 0:
        return a.lr
    if step >= total:
        return a.lr_min
    ratio = (step - a.warmup) / (total - a.warmup)
    return a.lr_min + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (a.lr - a.lr_min)


def adamw(a, params):
    """hsr's AdamW: (0.9, 0.999), eps 1e-8, decoupled decay on the 2-D weights only."""
    params = list(params)
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": rest, "weight_decay": 0.0}],
                             lr=a.lr, betas=(0.9, 0.999), eps=1e-8, foreach=True)


def clip(a, params):
    """Global gradient-norm clip (coefficient clip / (norm + 1e-6) when the norm
    exceeds it, as hsr); DTensor gradients (FSDP2) give their full norm."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads, 2.0, foreach=True)
    if hasattr(norm, "full_tensor"):
        norm = norm.full_tensor()
    if a.clip > 0:
        torch.nn.utils.clip_grads_with_norm_(params, a.clip, norm, foreach=True)
    return float(norm)


# ---- launch --------------------------------------------------------------------------
def launched():
    """(rank, world) from hsr-run / mpirun or torchrun, else None."""
    for r, w in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMIX_RANK", "HSR_PEER_WORLD"),
                 ("RANK", "WORLD_SIZE")):
        if r in os.environ and w in os.environ:
            return int(os.environ[r]), int(os.environ[w])
    return None


def run(worker, a):
    """Runs worker(rank, world, a) on every rank: under a launcher in this
    process, else on --ranks spawned processes."""
    got = launched()
    if got:
        worker(got[0], got[1], a)
    elif a.ranks == 1:
        worker(0, 1, a)
    else:
        import torch.multiprocessing as mp

        mp.spawn(worker, args=(a.ranks, a), nprocs=a.ranks, join=True)


def init_dist(rank, world, a):
    torch.set_num_threads(a.threads)
    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(a.port)
        dist.init_process_group("gloo", rank=rank, world_size=world)


def global_mean(x, world):
    t = torch.tensor([float(x)], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(t)
    return float(t[0]) / world


# ---- the loop -------------------------------------------------------------------------
def train(a, rank, world, model, params, peer, extra, ckpt=None):
    """The step loop both peers share: windows of the global batch, forward,
    backward, clip, AdamW at the step's learning rate; step 0 is not timed
    (hsr's tokens/s is the mean over the steps after the first). ckpt: an
    object whose after_step(done, model, opt) runs after each step, outside
    its time (as hsr train's checkpoints), finish() after the last, and
    stats() goes into the summary."""
    if a.batch % world:
        raise SystemExit(f"peers: --batch {a.batch} is not a multiple of the {world} ranks")
    per = a.batch // world
    data = Data(a.data, a.seq, a.seed)
    opt = adamw(a, params)
    logf = open(a.log, "w") if a.log and rank == 0 else None
    times, losses = [], []
    for step in range(a.steps):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(a, step)
        x, y = data.batch(step * a.batch + rank * per, per)
        loss = model(x, y)
        loss.backward()
        gn = clip(a, params)
        opt.step()
        opt.zero_grad(set_to_none=True)
        mean = global_mean(loss.detach(), world)
        times.append(time.perf_counter() - t0)
        losses.append(mean)
        if logf:
            logf.write(json.dumps({"step": step + 1, "loss": mean, "grad_norm": gn, "lr": lr_at(a, step),
                                   "step_ms": times[-1] * 1e3}) + "\n")
            logf.flush()
        if ckpt:
            ckpt.after_step(step + 1, model, opt)
    if ckpt:
        ckpt.finish()
    if logf:
        logf.close()
    timed = times[1:] if len(times) > 1 else times
    step_s = sum(timed) / len(timed)
    out = {"peer": peer, "torch": torch.__version__, "model": a.meta.get("hsr.model", "gpt"), "ranks": world,
           "threads_per_rank": a.threads, "batch": a.batch, "seq": a.seq, "steps": a.steps,
           "param_dtype": a.param_dtype, "reduce_dtype": a.reduce_dtype, "step_ms": step_s * 1e3,
           "tokens_per_s": a.batch * a.seq / step_s, "loss_first": losses[0], "loss_last": losses[-1],
           "losses": losses[:10]}
    out.update(extra)
    if ckpt:
        out.update(ckpt.stats())
    if rank == 0:
        s = json.dumps(out)
        print(s)
        if a.json:
            with open(a.json, "w") as f:
                f.write(s + "\n")
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return out


def main_guard(fn):
    try:
        fn()
    except KeyboardInterrupt:
        sys.exit(130)
