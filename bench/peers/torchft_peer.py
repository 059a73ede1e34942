#!/usr/bin/env python3
"""torchft's replica groups on the job of `hsr train --model gpt`: kill one
group, time the survivors' next committed step and the restarted group's heal.

  torchft_peer.py --init INIT.safetensors [--groups 3] [--steps 60] [--kill-at 10]
                  [--restart-after 25] [--out DIR] [--batch B] ...

The driver starts torchft's Lighthouse (in this process) and --groups replica
groups, one process (one rank) each, as separate programs; each trains the
GPT from INIT with torchft's Manager (gloo, min_replica_size --min-replicas),
its DistributedDataParallel (--reduce ddp; ddp-completed: with a hook that
hands the reducer a completed future where torchft's managed wait failed;
manager: Manager.allreduce per gradient, no DDP) and Optimizer wrappers, the data windows of its
replica slice of hsr's global batch, and logs one JSON line per step (time,
step, committed, participants). Group 1 is SIGKILLed when it reaches step
--kill-at and restarted once group 0 has passed step --restart-after; the
restarted group heals from a live one (torchft's checkpoint transport, HTTP)
before it commits. Prints JSON: the time from the kill to the survivors'
next committed step, and from the restart to the restarted group's first
committed step (process start, imports and torchft's heal included) and
from its Manager up to that step; each group's committed steps after the
kill, each group's final step, a hash of its final state (model and AdamW
moments) and the largest difference of that state from group 0's.
Needs `bench/peers/setup.sh --with torchft`."""
import argparse
import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def group_main(a):
    import common as C
    import torch
    from datetime import timedelta
    from torch.distributed import TCPStore
    from torchft import DistributedDataParallel, Manager, Optimizer, ProcessGroupGloo

    torch.set_num_threads(1)
    model = C.load_model(a)
    opt = C.adamw(a, model.parameters())
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)

    def state_dict():
        return {"model": model.state_dict(), "optim": opt.state_dict()}

    def load_state_dict(sd):
        model.load_state_dict(sd["model"])
        opt.load_state_dict(sd["optim"])

    manager = Manager(pg=ProcessGroupGloo(), load_state_dict=load_state_dict, state_dict=state_dict,
                      min_replica_size=a.min_replicas, replica_id=f"hsr_peer_{a.group_id}", store_addr="127.0.0.1",
                      store_port=store.port, rank=0, world_size=1, lighthouse_addr=a.lighthouse,
                      timeout=timedelta(seconds=a.manager_timeout), quorum_timeout=timedelta(seconds=30))
    if a.reduce == "ddp-completed":
        # torchft's hook asserts when its managed wait failed (_ManagedWork.wait
        # returns False before it sets the future it hands back); this one hands
        # the reducer the bucket as a completed future then: the Manager is in
        # error already, so the step is not committed
        def hook(state, bucket):
            work = state.allreduce(bucket.buffer())
            if work.wait() and getattr(work.get_future(), "_fut", None) is not None:
                return work.get_future()._fut
            done = torch.futures.Future()
            done.set_result(bucket.buffer())
            return done

        DistributedDataParallel._comm_hook = staticmethod(hook)
    ddp = model if a.reduce == "manager" else DistributedDataParallel(manager, model)
    fopt = Optimizer(manager, opt)
    data = C.Data(a.data, a.seq, a.seed)
    log = open(a.log, "a")
    log.write(json.dumps({"t": time.time(), "event": "start", "group": a.group_id}) + "\n")
    log.flush()
    while manager.current_step() < a.steps:
        fopt.zero_grad()  # starts the quorum
        n, i = manager.num_participants(), manager.participating_rank() or 0  # wait for it: a joiner has healed
        step = manager.current_step()
        for g in opt.param_groups:
            g["lr"] = C.lr_at(a, step)
        per = a.batch // max(n, 1)
        x, y = data.batch(step * a.batch + i * per, per)
        loss = ddp(x, y)
        loss.backward()
        if a.reduce == "manager":  # the gradients averaged over the live groups by the Manager itself
            for w in [manager.allreduce(p.grad) for p in model.parameters() if p.grad is not None]:
                w.wait()
        C.clip(a, list(model.parameters()))
        committed = fopt.step() is not False and manager.current_step() > step
        log.write(json.dumps({"t": time.time(), "group": a.group_id, "step": step, "committed": bool(committed),
                              "participants": n, "loss": float(loss)}) + "\n")
        log.flush()
    # the state every group ends with: the same bytes on every group when they
    # applied the same updates and a healed group installed the others' state
    h = hashlib.sha256()
    for sd in (model.state_dict(), opt.state_dict()["state"]):
        for k in sorted(sd, key=str):
            for t in (sd[k].values() if isinstance(sd[k], dict) else [sd[k]]):
                if torch.is_tensor(t):  # the bytes as they are (no NumPy in the environment)
                    c = t.detach().contiguous()
                    h.update(ctypes.string_at(c.data_ptr(), c.numel() * c.element_size()))
    if a.final:  # the driver compares the groups' final states
        torch.save({"model": model.state_dict(), "optim": opt.state_dict()["state"]}, a.final)
    log.write(json.dumps({"t": time.time(), "event": "end", "group": a.group_id, "steps": manager.current_step(),
                          "state_hash": h.hexdigest()[:16]}) + "\n")
    log.flush()
    manager.shutdown()


def state_diff(out, groups):
    """The largest |difference| of each group's final weights and AdamW moments from group 0's."""
    import torch

    def flat(f):
        try:
            sd = torch.load(f, weights_only=True)
        except (OSError, RuntimeError):
            return None
        ts = [("model." + k, v) for k, v in sd["model"].items()]
        ts += [(f"optim.{i}.{k}", v) for i, st in sd["optim"].items() for k, v in st.items() if torch.is_tensor(v)]
        return dict(ts)

    ref = flat(os.path.join(out, "group0.final.pt"))
    res = {}
    for g in range(1, groups):
        x = flat(os.path.join(out, f"group{g}.final.pt"))
        if ref is None or x is None or x.keys() != ref.keys():
            res[str(g)] = None
            continue
        res[str(g)] = max(float((x[k].double() - ref[k].double()).abs().max()) if x[k].numel() else 0.0 for k in ref)
    return res


def driver(a):
    from torchft.coordination import LighthouseServer

    out = a.out or tempfile.mkdtemp(prefix="hsr-peers-torchft-")
    os.makedirs(out, exist_ok=True)
    lh = LighthouseServer(bind="[::]:0", min_replicas=a.min_replicas, join_timeout_ms=100)
    addr = lh.address()
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def start(g):
        logf = os.path.join(out, f"group{g}.jsonl")
        cmd = [sys.executable, "-W", "ignore", __file__, "--role", "group", "--group-id", str(g), "--lighthouse", addr,
               "--reduce", a.reduce, "--manager-timeout", str(a.manager_timeout), "--min-replicas", str(a.min_replicas),
               "--log", logf, "--final", os.path.join(out, f"group{g}.final.pt"),
               "--init", a.init, "--steps", str(a.steps), "--batch", str(a.batch), "--data", a.data]
        return subprocess.Popen(cmd, env=env, stdout=open(os.path.join(out, f"group{g}.out"), "a"),
                                stderr=subprocess.STDOUT)

    def lines(g):
        try:
            return [json.loads(l) for l in open(os.path.join(out, f"group{g}.jsonl")) if l.strip()]
        except OSError:
            return []

    def last_step(g):
        s = [d["step"] for d in lines(g) if "step" in d]
        return max(s) if s else -1

    procs = {g: start(g) for g in range(a.groups)}
    deadline = time.time() + a.timeout
    t_kill = t_restart = None
    while time.time() < deadline:
        time.sleep(0.05)
        if t_kill is None and last_step(1) >= a.kill_at:
            procs[1].send_signal(signal.SIGKILL)
            t_kill = time.time()
            procs[1].wait()
        elif t_kill and t_restart is None and last_step(0) >= a.restart_after:
            t_restart = time.time()
            procs[1] = start(1)
        if all(p.poll() is not None for p in procs.values()):
            break
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    lh.shutdown()
    res = {"peer": "torchft", "groups": a.groups, "reduce": a.reduce, "out": out, "kill_at": a.kill_at,
           "restart_after": a.restart_after, "t_kill": t_kill, "t_restart": t_restart}
    ends = {g: [d for d in lines(g) if d.get("event") == "end"] for g in range(a.groups)}
    res["end_steps"] = {str(g): e[-1]["steps"] if e else None for g, e in ends.items()}
    res["end_state_hash"] = {str(g): e[-1]["state_hash"] if e else None for g, e in ends.items()}
    hs = set(res["end_state_hash"].values())
    res["state_equal"] = len(hs) == 1 and None not in hs
    res["state_max_abs_diff"] = state_diff(out, a.groups)
    if t_kill:
        nxt = [d["t"] for g in range(a.groups) if g != 1 for d in lines(g)
               if d.get("committed") and d["t"] > t_kill]
        res["kill_to_survivors_next_commit_s"] = min(nxt) - t_kill if nxt else None
        res["survivors_commits_after_kill"] = {str(g): sum(1 for d in lines(g) if d.get("committed") and d["t"] > t_kill)
                                               for g in range(a.groups) if g != 1}
    if t_restart:
        after = [d for d in lines(1) if d["t"] > t_restart]
        start_t = [d["t"] for d in after if d.get("event") == "start"]
        first = [d["t"] for d in after if d.get("committed")]
        res["restart_to_first_commit_s"] = first[0] - t_restart if first else None
        res["manager_up_to_first_commit_s"] = first[0] - start_t[0] if first and start_t else None
    print(json.dumps(res))
    return 0 if res.get("kill_to_survivors_next_commit_s") is not None else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--init", required=True, help="hsr train --export-init's file")
    p.add_argument("--data", default=os.path.join(HERE, "..", "..", "build", "hsr-corpus.txt"))
    p.add_argument("--groups", type=int, default=3)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=12, help="global batch, split over the live groups")
    p.add_argument("--kill-at", type=int, default=10)
    p.add_argument("--restart-after", type=int, default=25)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--min-replicas", type=int, default=1,
                   help="the Lighthouse's min_replicas and the Managers' min_replica_size (default 1; with 1, "
                        "groups that reach the quorum over 100 ms apart can go on as quorums of one)")
    p.add_argument("--manager-timeout", type=float, default=10,
                   help="the Manager's timeout in seconds (its collectives and heal; default 10)")
    p.add_argument("--reduce", choices=["ddp", "manager", "ddp-completed"], default="ddp",
                   help="gradients through torchft's DistributedDataParallel (default), Manager.allreduce per tensor, "
                        "or the DDP wrapper with a hook that returns a completed future where a managed wait failed")
    p.add_argument("--out")
    p.add_argument("--role", choices=["driver", "group"], default="driver", help=argparse.SUPPRESS)
    p.add_argument("--group-id", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--lighthouse", help=argparse.SUPPRESS)
    p.add_argument("--log", help=argparse.SUPPRESS)
    p.add_argument("--final", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.role == "group":
        sys.path.insert(0, HERE)
        import common as C

        a.seq, a.seed, a.lr, a.wd, a.clip = 128, 1, 3e-3, 0.01, 1.0
        a.lr_min, a.warmup = a.lr / 10, (a.steps // 20 if a.steps >= 20 else 0)
        a.meta = C.read_safetensors(a.init, header_only=True)[1]
        return group_main(a)
    return driver(a)


if __name__ == "__main__":
    sys.exit(main())
