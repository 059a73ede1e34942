#!/usr/bin/env python3
"""DDP (torch's DistributedDataParallel) on the job of `hsr train --model gpt`.

  ddp.py --init INIT.safetensors [--steps N] [--batch B] [--ranks N] [--bucket-mb M]
         [--log FILE] [--json FILE] ...

The same model from the same weights (INIT: `hsr train --export-init`), the
same data windows in the same order, AdamW, clip and schedule as hsr train
(common.py); gloo on the CPU, one thread per rank. Every rank holds every
parameter and all-reduces the gradients in buckets during the backward
(hsr's --strategy ddp). f32 only: DDP has no mixed-precision policy of its
own (--param-dtype bf16 is refused).
"""
import common as C
import torch.nn as nn


def parse():
    p = C.parser(__doc__)
    p.add_argument("--bucket-mb", type=float, default=25, help="DDP's bucket_cap_mb (its default 25)")
    a = p.parse_args()
    C.finish_args(a)
    if a.param_dtype != "f32" or a.reduce_dtype != "f32":
        p.error("DDP runs in f32 here (--param-dtype / --reduce-dtype bf16: use fsdp2.py)")
    return a


def worker(rank, world, a):
    C.init_dist(rank, world, a)
    model = C.load_model(a)
    params = list(model.parameters())
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    C.train(a, rank, world, model, params, "ddp", {"bucket_mb": a.bucket_mb})


if __name__ == "__main__":
    C.main_guard(lambda: C.run(worker, parse()))
