#!/usr/bin/env python3
"""FSDP2 (torch's fully_shard) on the job of `hsr train --model gpt`.

  fsdp2.py --init INIT.safetensors [--mesh S | RxS] [--reshard full|none|partial:K]
           [--prefetch D] [--steps N] [--batch B] [--ranks N] [--log FILE] [--json FILE] ...

The same model from the same weights (INIT: `hsr train --export-init`), the
same data windows in the same order, AdamW, clip and schedule as hsr train
(common.py); gloo on the CPU, one thread per rank.

  - units: fully_shard on every block, then on the root (wte, wpe, ln_f), as
    hsr's --wrap block; the root is not resharded after forward (FSDP2's own
    rule, and hsr's default without --root-reshard);
  - mesh: --mesh S (1-D, hsr --strategy fsdp) or RxS (2-D: HSDP, replicate x
    shard, hsr --strategy hybrid --replicate R --shard S);
  - --reshard full|none|partial:K: reshard_after_forward True, False or K
    (the backward all-gather among K ranks, as hsr's partial:K);
  - --prefetch D: each block all-gathers the next D blocks in forward and the
    previous D in backward (set_modules_to_forward/backward_prefetch), as
    hsr's --prefetch D; 0: FSDP2's implicit order only;
  - MixedPrecisionPolicy(param_dtype, reduce_dtype) from --param-dtype and
    --reduce-dtype (f32 | bf16, hsr's flags);
  - gradients reduce with SUM and are divided by the data-parallel size
    afterwards (set_force_sum_reduction_for_comms): gloo's reduce-scatter
    with ReduceOp.AVG has summed without dividing (pytorch#162338);
    --avg-reduce keeps FSDP2's default AVG to check a torch build for it
    (compare.py then sees the gradient norm scaled by the ranks if it sums);
  - --ckpt DIR --save-every K [--async-save]: DCP checkpoints of the model
    and AdamW (get_state_dict) after every K-th step and the last, as hsr
    train's --ckpt --save-every K [--async-save], outside the step's time;
    --async-save: torch.distributed.checkpoint.async_save on its own gloo
    group, and the next save first waits on the previous one's future
    (torchtitan's async mode). Per save, the time the loop is blocked (that
    wait, get_state_dict and the call) goes into the summary ("ckpt").
"""
import os
import shutil
import statistics
import time

import common as C  # first: it sets one thread per rank before torch loads
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def parse():
    p = C.parser(__doc__)
    g = p.add_argument_group("FSDP2")
    g.add_argument("--mesh", default=None, help="S (1-D) or RxS (HSDP); default: all ranks in one shard group")
    g.add_argument("--reshard", default="full", help="full | none | partial:K (reshard_after_forward)")
    g.add_argument("--prefetch", type=int, default=1, help="blocks all-gathered ahead, forward and backward")
    g.add_argument("--avg-reduce", action="store_true",
                   help="leave FSDP2's ReduceOp.AVG (wrong on gloo: pytorch#162338) instead of SUM then divide")
    k = p.add_argument_group("DCP checkpoints (hsr train's --ckpt, --save-every, --async-save)")
    k.add_argument("--ckpt", help="save DCP checkpoints under DIR/step-NNNNNNNN (after the last step, and every K)")
    k.add_argument("--save-every", type=int, default=0, help="K: also after every K-th step")
    k.add_argument("--async-save", action="store_true",
                   help="dcp.async_save; the next save waits on the previous future first")
    k.add_argument("--keep-ckpt", action="store_true", help="leave the checkpoints (default: removed at the end)")
    a = p.parse_args()
    if (a.save_every or a.async_save or a.keep_ckpt) and not a.ckpt:
        p.error("--save-every, --async-save and --keep-ckpt need --ckpt DIR")
    if a.save_every < 0:
        p.error(f"--save-every {a.save_every}: K >= 1")
    C.finish_args(a)
    return a


class Saver:
    """DCP checkpoints in the training loop; blocked = what the loop waits per
    save: the previous async save's future (if still running), get_state_dict
    and dcp.save / dcp.async_save."""

    def __init__(self, a, rank, world):
        self.a, self.rank, self.world = a, rank, world
        # torchtitan's async mode: the background save's collectives on a
        # group of their own, not interleaved with the training's
        self.pg = dist.new_group(backend="gloo") if world > 1 and a.async_save else None
        self.fut, self.saves, self.t_call = None, [], 0.0  # saves: rank 0's records
        os.makedirs(a.ckpt, exist_ok=True)

    def _wait(self):
        if self.fut is None:
            return 0.0, 0
        t0 = time.perf_counter()
        running = int(not self.fut.done())
        self.fut.result()
        self.fut = None
        return time.perf_counter() - t0, running

    def after_step(self, done, model, opt):
        a = self.a
        if not ((a.save_every and done % a.save_every == 0) or done == a.steps):
            return
        t0 = time.perf_counter()
        waited, running = self._wait()
        msd, osd = get_state_dict(model, opt)
        path = os.path.join(a.ckpt, f"step-{done:08d}")
        self.t_call = time.perf_counter()
        rec = {"step": done, "waited_s": waited, "was_running": running}
        if a.async_save:
            self.fut = dcp.async_save({"model": msd, "optim": osd}, checkpoint_id=path, process_group=self.pg)
            t_call = self.t_call
            # the background save's end, when it happens (not when the loop next looks)
            self.fut.add_done_callback(lambda _f: rec.__setitem__("commit_s", time.perf_counter() - t_call))
        else:
            dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)
        t1 = time.perf_counter()
        rec.update(blocked_s=t1 - t0, call_s=t1 - self.t_call)
        rec.setdefault("commit_s", t1 - self.t_call)
        self.saves.append(rec)

    def finish(self):
        self._wait()

    def stats(self):
        """Rank 0's saves; blocked_max_s: the slowest rank's per save."""
        b = torch.tensor([s["blocked_s"] for s in self.saves], dtype=torch.float64)
        if self.world > 1:
            dist.all_reduce(b, op=dist.ReduceOp.MAX)
        if self.rank == 0 and not self.a.keep_ckpt:
            for s in self.saves:
                shutil.rmtree(os.path.join(self.a.ckpt, f"step-{s['step']:08d}"), ignore_errors=True)
        bl = [s["blocked_s"] for s in self.saves]
        return {"ckpt": {"async": self.a.async_save, "save_every": self.a.save_every, "saves": self.saves,
                         "blocked_s_median": statistics.median(bl) if bl else None,
                         "blocked_max_s": [float(x) for x in b]}}


def mesh_of(a, world):
    spec = a.mesh or str(world)
    try:
        dims = [int(x) for x in spec.lower().split("x")]
    except ValueError:
        raise SystemExit(f"fsdp2: --mesh '{spec}': S or RxS")
    if len(dims) == 1:
        dims = [1, dims[0]]
    if len(dims) != 2 or dims[0] * dims[1] != world:
        raise SystemExit(f"fsdp2: --mesh '{spec}' does not cover the {world} ranks")
    return dims


def reshard_of(a, S):
    if a.reshard in ("full", "none"):
        return a.reshard == "full"
    if a.reshard.startswith("partial:"):
        k = int(a.reshard.split(":", 1)[1])
        if k < 1 or S % k:
            raise SystemExit(f"fsdp2: --reshard {a.reshard}: K must divide the shard size {S}")
        return k
    raise SystemExit(f"fsdp2: --reshard '{a.reshard}' (valid: full, none, partial:K)")


def worker(rank, world, a):
    C.init_dist(rank, world, a)
    R, S = mesh_of(a, world)
    model = C.load_model(a)
    if world > 1:
        mesh = (init_device_mesh("cpu", (S,), mesh_dim_names=("shard",)) if R == 1 else
                init_device_mesh("cpu", (R, S), mesh_dim_names=("replicate", "shard")))
        mp = MixedPrecisionPolicy(param_dtype=C.DTYPES[a.param_dtype], reduce_dtype=C.DTYPES[a.reduce_dtype])
        raf = reshard_of(a, S)
        blocks = model.blocks()
        for b in blocks:
            fully_shard(b, mesh=mesh, mp_policy=mp, reshard_after_forward=raf)
        fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=False)
        for m in [model] + blocks:
            m.set_force_sum_reduction_for_comms(not a.avg_reduce)
        if a.prefetch > 0:
            for i, b in enumerate(blocks):
                b.set_modules_to_forward_prefetch(blocks[i + 1 : i + 1 + a.prefetch])
                b.set_modules_to_backward_prefetch(list(reversed(blocks[max(0, i - a.prefetch) : i])))
    elif a.param_dtype != "f32":
        model = model.to(C.DTYPES[a.param_dtype])  # one rank: nothing to shard (hsr keeps an f32 master)
    params = list(model.parameters())
    C.train(a, rank, world, model, params, "fsdp2",
            {"mesh": [R, S], "reshard": a.reshard, "prefetch": a.prefetch,
             "reduce_op": "avg (FSDP2 default)" if a.avg_reduce else "sum, then divide"},
            ckpt=Saver(a, rank, world) if a.ckpt else None)


if __name__ == "__main__":
    C.main_guard(lambda: C.run(worker, parse()))
