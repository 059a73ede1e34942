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
    (compare.py then sees the gradient norm scaled by the ranks if it sums).
"""
import common as C
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
    a = p.parse_args()
    C.finish_args(a)
    return a


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
             "reduce_op": "avg (FSDP2 default)" if a.avg_reduce else "sum, then divide"})


if __name__ == "__main__":
    C.main_guard(lambda: C.run(worker, parse()))
