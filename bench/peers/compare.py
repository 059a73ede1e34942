#!/usr/bin/env python3
"""The proof that a peer ran hsr's job: its first N losses against hsr's.

  compare.py HSR_LOG PEER_LOG [--n 10] [--rtol 1e-4] [--grad-steps 1] [--json]

Both files are one JSON object per line with "step", "loss" and
"grad_norm" (hsr train --log, the peers' --log). Prints step, both losses
and gradient norms (before clipping) and their relative differences; exit 0
when each of the first N losses and each of the first GRAD_STEPS gradient
norms is within RTOL, 1 when not, 2 when a file is missing or short.
The gradient norm is what shows a reduction that sums instead of averaging
(AdamW divides the scale out of the update, so the losses alone would not):
a factor of the data-parallel size, at every step. It is judged where both
sides hold the same weights, the first step: later, AdamW gives a gradient
element whose sign is rounding noise a full-size update, so the two sides'
weights part by about the learning rate in those elements, and at a step
where the norm rises the norms then differ by up to 1e-2 while the losses
agree to 4e-5 (docs/peers.md). The later norms' largest difference is
printed, not judged. json only: runs with any Python 3."""
import argparse
import json
import sys


def losses(path, key="loss"):
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                out[int(d["step"])] = float(d[key])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("hsr_log")
    p.add_argument("peer_log")
    p.add_argument("--n", type=int, default=10, help="first N steps (default 10)")
    p.add_argument("--rtol", type=float, default=1e-4, help="largest relative difference of a loss (default 1e-4)")
    p.add_argument("--grad-steps", type=int, default=1,
                   help="the first K gradient norms judged against RTOL (default 1)")
    p.add_argument("--json", action="store_true", help="one JSON line instead of the table")
    a = p.parse_args()
    try:
        h, q = losses(a.hsr_log), losses(a.peer_log)
        hg, qg = losses(a.hsr_log, "grad_norm"), losses(a.peer_log, "grad_norm")
    except (OSError, ValueError, KeyError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    steps = list(range(1, a.n + 1))
    if any(s not in h or s not in q for s in steps):
        print(f"compare: fewer than {a.n} steps in {a.hsr_log} ({len(h)}) or {a.peer_log} ({len(q)})", file=sys.stderr)
        return 2
    rel = [abs(h[s] - q[s]) / abs(h[s]) for s in steps]
    grel = [abs(hg[s] - qg[s]) / abs(hg[s]) for s in steps]
    k = max(1, min(a.grad_steps, a.n))
    ok = max(rel) <= a.rtol and max(grel[:k]) <= a.rtol
    if a.json:
        print(json.dumps({"steps": a.n, "max_rel": max(rel), "max_rel_grad_norm": max(grel), "rtol": a.rtol,
                          "grad_steps": k, "max_rel_grad_norm_judged": max(grel[:k]), "agree": ok, "hsr": [h[s] for s in steps], "peer": [q[s] for s in steps]}))
    else:
        print(f"{'step':>4} {'hsr loss':>12} {'peer loss':>12} {'rel':>9} {'hsr |g|':>10} {'peer |g|':>10} {'rel':>9}")
        for s, r, gr in zip(steps, rel, grel):
            print(f"{s:>4} {h[s]:12.7f} {q[s]:12.7f} {r:9.2e} {hg[s]:10.5f} {qg[s]:10.5f} {gr:9.2e}")
        print(f"max relative difference over {a.n} steps: loss {max(rel):.2e}, gradient norm {max(grel):.2e}: "
              f"{'agree' if ok else 'DIFFER'} (rtol {a.rtol:g}: every loss, the first {k} gradient norm(s): {max(grel[:k]):.2e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
