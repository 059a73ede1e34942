#!/usr/bin/env python3
"""DeepSpeed ZeRO-3 on the CPU (DS_ACCELERATOR=cpu, gloo) on the job of
`hsr train --model gpt --strategy fsdp`.

  deepspeed_zero3.py --init INIT.safetensors [--steps N] [--batch B] [--ranks N] [--log FILE] [--json FILE] ...

The same model from the same weights, the same data windows, the schedule
and the clip as hsr train (common.py); DeepSpeed's engine partitions
parameters, gradients and AdamW state over the ranks (stage 3) and runs its
own AdamW (torch.optim.AdamW with hsr's groups, handed to the engine) and
gradient clipping ("gradient_clipping": --clip). Needs `bench/peers/setup.sh
--with deepspeed`. Where DeepSpeed does not run here, the error it raises is
what this prints (and its exit status is 1)."""
import os

os.environ.setdefault("DS_ACCELERATOR", "cpu")
import common as C  # noqa: E402


def parse():
    p = C.parser(__doc__)
    a = p.parse_args()
    C.finish_args(a)
    if a.param_dtype != "f32" or a.reduce_dtype != "f32":
        p.error("f32 only here")
    return a


def worker(rank, world, a):
    import torch
    import deepspeed

    for k, v in (("RANK", rank), ("LOCAL_RANK", rank), ("WORLD_SIZE", world), ("LOCAL_SIZE", world)):
        os.environ[k] = str(v)  # DeepSpeed reads them; one host
    C.init_dist(rank, world, a)
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    model = C.load_model(a)
    opt = C.adamw(a, model.parameters())
    cfg = {"train_batch_size": a.batch, "train_micro_batch_size_per_gpu": a.batch // world,
           "gradient_accumulation_steps": 1, "gradient_clipping": a.clip, "zero_optimization": {"stage": 3},
           "steps_per_print": 1 << 30, "wall_clock_breakdown": False}
    engine, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    data = C.Data(a.data, a.seq, a.seed)
    per = a.batch // world
    import json
    import time

    logf = open(a.log, "w") if a.log and rank == 0 else None
    times, losses = [], []
    for step in range(a.steps):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = C.lr_at(a, step)
        x, y = data.batch(step * a.batch + rank * per, per)
        loss = engine(x, y)
        engine.backward(loss)
        engine.step()
        mean = C.global_mean(loss.detach(), world)
        times.append(time.perf_counter() - t0)
        losses.append(mean)
        if logf:
            logf.write(json.dumps({"step": step + 1, "loss": mean, "grad_norm": float(engine.get_global_grad_norm() or 0),
                                   "step_ms": times[-1] * 1e3}) + "\n")
            logf.flush()
    timed = times[1:] if len(times) > 1 else times
    if rank == 0:
        out = {"peer": "deepspeed-zero3", "torch": torch.__version__, "deepspeed": deepspeed.__version__,
               "ranks": world, "steps": a.steps, "tokens_per_s": a.batch * a.seq * len(timed) / sum(timed),
               "losses": losses[:10]}
        print(json.dumps(out))
        if a.json:
            open(a.json, "w").write(json.dumps(out) + "\n")


if __name__ == "__main__":
    C.main_guard(lambda: C.run(worker, parse()))
