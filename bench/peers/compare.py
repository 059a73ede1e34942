#!/usr/bin/env python3
"""The proof that a peer ran hsr's job: its first N losses against hsr's.

  compare.py HSR_LOG PEER_LOG [--n 10] [--rtol 1e-4] [--grad-rtol 1e-3] [--json]

Both files are one JSON object per line with "step", "loss" and
"grad_norm" (hsr train --log, the peers' --log). Prints step, both losses
and gradient norms (before clipping) and their relative differences; exit 0
when every one of the first N losses is within RTOL and every gradient norm
within GRAD_RTOL, 1 when not, 2 when a file is missing or short. The
gradient norm is what shows a reduction that sums instead of averaging
(AdamW divides the scale out of the update, so the losses alone would not):
an error of a factor of 2 or more. Its bound is looser than the losses':
at a loss spike (a step whose norm jumps several-fold) the norm sums large
terms of both signs, and two correct f32 summation orders differ there by
1.5e-4 to 2e-3 (run.sh trains on a pinned text without a spike early on). json only: runs with any Python 3."""
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
    p.add_argument("--grad-rtol", type=float, default=1e-3,
                   help="largest relative difference of a gradient norm (default 1e-3)")
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
    ok = max(rel) <= a.rtol and max(grel) <= a.grad_rtol
    if a.json:
        print(json.dumps({"steps": a.n, "max_rel": max(rel), "max_rel_grad_norm": max(grel), "rtol": a.rtol,
                          "grad_rtol": a.grad_rtol, "agree": ok, "hsr": [h[s] for s in steps], "peer": [q[s] for s in steps]}))
    else:
        print(f"{'step':>4} {'hsr loss':>12} {'peer loss':>12} {'rel':>9} {'hsr |g|':>10} {'peer |g|':>10} {'rel':>9}")
        for s, r, gr in zip(steps, rel, grel):
            print(f"{s:>4} {h[s]:12.7f} {q[s]:12.7f} {r:9.2e} {hg[s]:10.5f} {qg[s]:10.5f} {gr:9.2e}")
        print(f"max relative difference over {a.n} steps: loss {max(rel):.2e}, gradient norm {max(grel):.2e}: "
              f"{'agree' if ok else 'DIFFER'} (rtol {a.rtol:g}, gradient norm {a.grad_rtol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
