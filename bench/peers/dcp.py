#!/usr/bin/env python3
"""DCP (torch.distributed.checkpoint) beside `hsr ckpt bench`: the same
sharded state, the same ranks, the same disk.

  dcp.py [--size 256M] [--units 8] [--dir /tmp] [--repeat 3] [--mesh S | RxS] [--json FILE]

A model of --units units, one f32 parameter each, fully_shard per unit and
on the root (FSDP2 on gloo), AdamW state made by one step: --size bytes of
checkpoint data, 12 per parameter (the parameter, exp_avg, exp_avg_sq), as
hsr ckpt bench's --size. Per round: dcp.save (synchronous, timed to the last
rank), dcp.async_save (the time the call blocks, then the background write to
its end), and dcp.load from a cold page cache (posix_fadvise DONTNEED on
every file first, as hsr ckpt bench) into the same mesh, then into another
(1-D <-> 2-D, with 4 ranks or more). Prints medians as JSON (GB/s = --size /
time). Run with the ranks of hsr ckpt bench: hsr-run -n 4 -- .venv/bin/python dcp.py."""
import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

import common as C
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def size_of(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * m[s[-1].upper()]) if s[-1].upper() in m else int(s)


class Unit(nn.Module):
    def __init__(self, rows, cols):
        super().__init__()
        self.w = nn.Parameter(torch.randn(rows, cols) * 0.02)


class Model(nn.Module):
    def __init__(self, units, rows, cols):
        super().__init__()
        self.units = nn.ModuleList(Unit(rows, cols) for _ in range(units))


def build(a, mesh):
    rows = max(1, a.size // 12 // a.units // 256)
    m = Model(a.units, rows, 256)
    for u in m.units:
        fully_shard(u, mesh=mesh)
    fully_shard(m, mesh=mesh)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    sum(u.w.sum() for u in m.units).backward()
    opt.step()
    return m, opt


def mesh_of(spec, world):
    d = [int(x) for x in spec.lower().split("x")]
    if len(d) == 1:
        return init_device_mesh("cpu", (d[0],))
    return init_device_mesh("cpu", tuple(d), mesh_dim_names=("replicate", "shard"))


def cold(path, rank, world):
    """Drops the checkpoint's files from the page cache (every rank its part)."""
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs)
    for i, f in enumerate(files):
        if i % world == rank:
            fd = os.open(f, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
    dist.barrier()


def timed(fn):
    dist.barrier()
    t0 = time.perf_counter()
    r = fn()
    t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t), r


def worker(rank, world, a):
    C.init_dist(rank, world, a)
    spec = a.mesh or str(world)
    other = f"2x{world // 2}" if "x" not in spec and world >= 4 and world % 2 == 0 else (str(world) if "x" in spec else None)
    m, opt = build(a, mesh_of(spec, world))
    msd, osd = get_state_dict(m, opt)
    state = {"model": msd, "optim": osd}
    base = a.dir if rank == 0 else None
    lst = [tempfile.mkdtemp(prefix="hsr-peers-dcp-", dir=a.dir) if rank == 0 else None]
    dist.broadcast_object_list(lst)
    root = lst[0]
    r = {"save_s": [], "async_blocked_s": [], "async_total_s": [], "load_s": [], "load_other_mesh_s": []}
    for i in range(a.repeat):
        d = os.path.join(root, f"sync-{i}")
        t, _ = timed(lambda: dcp.save(state, checkpoint_id=d))
        r["save_s"].append(t)
        da = os.path.join(root, f"async-{i}")
        dist.barrier()
        t0 = time.perf_counter()
        fut = dcp.async_save(state, checkpoint_id=da)
        blocked = time.perf_counter() - t0
        fut.result()
        total = time.perf_counter() - t0
        bt = torch.tensor([blocked, total], dtype=torch.float64)
        dist.all_reduce(bt, op=dist.ReduceOp.MAX)
        r["async_blocked_s"].append(float(bt[0]))
        r["async_total_s"].append(float(bt[1]))
        cold(d, rank, world)

        def load():
            msd2, osd2 = get_state_dict(m, opt)
            st = {"model": msd2, "optim": osd2}
            dcp.load(st, checkpoint_id=d)
            set_state_dict(m, opt, model_state_dict=st["model"], optim_state_dict=st["optim"])

        t, _ = timed(load)
        r["load_s"].append(t)
        if other:
            m2, opt2 = build(a, mesh_of(other, world))
            cold(d, rank, world)

            def load2():
                msd2, osd2 = get_state_dict(m2, opt2)
                st = {"model": msd2, "optim": osd2}
                dcp.load(st, checkpoint_id=d)
                set_state_dict(m2, opt2, model_state_dict=st["model"], optim_state_dict=st["optim"])

            t, _ = timed(load2)
            r["load_other_mesh_s"].append(t)
            del m2, opt2
        if rank == 0:
            shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(da, ignore_errors=True)
        dist.barrier()
    if rank == 0:
        shutil.rmtree(root, ignore_errors=True)
        med = {k: statistics.median(v) for k, v in r.items() if v}
        out = {"peer": "dcp", "torch": torch.__version__, "ranks": world, "mesh": spec, "other_mesh": other,
               "size": a.size, "units": a.units, "repeat": a.repeat, "dir": base, **med,
               "save_gbs": a.size / med["save_s"] / 1e9, "load_gbs": a.size / med["load_s"] / 1e9}
        print(json.dumps(out))
        if a.json:
            open(a.json, "w").write(json.dumps(out) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="256M", help="checkpoint data bytes, 12 per parameter (default 256M)")
    p.add_argument("--units", type=int, default=8)
    p.add_argument("--dir", default="/tmp", help="where to write (default /tmp); removed afterwards")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--mesh", help="S or RxS (default: all ranks in one shard group)")
    p.add_argument("--ranks", type=int, default=2, help="ranks to spawn when not under hsr-run / mpirun")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--port", type=int, default=29541)
    p.add_argument("--json")
    a = p.parse_args()
    a.size = size_of(a.size)
    C.run(worker, a)


if __name__ == "__main__":
    C.main_guard(main)
