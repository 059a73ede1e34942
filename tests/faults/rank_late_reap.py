#!/usr/bin/env python3
"""rank_late_reap.py DIR DELAY PROG [ARGS...]: one rank of a fault test, as
tests/faults/rank.sh (output in DIR/rank.R.log, pid in DIR/rank.R.pid, exit
status in DIR/rank.R.rc), except that when this rank is HSR_FAULT's victim
its exit is reaped DELAY seconds late: it stays a zombie meanwhile, as under
a parent busy elsewhere. Its node peers must still see at once that it died.
SIGTERM, SIGINT and SIGHUP from the launcher are passed on (after SIGCONT)
and end the delay."""
import os
import signal
import subprocess
import sys
import time


def main(argv):
    d, delay, cmd = argv[0], float(argv[1]), argv[2:]
    r = os.environ.get("PMIX_RANK", os.environ.get("SLURM_PROCID", "0"))
    victim = os.environ.get("HSR_FAULT", "").split(":")[0] == r
    with open(os.path.join(d, f"rank.{r}.log"), "ab") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    told = []

    def forward(sig, _frame):
        told.append(sig)  # the job is ending: no reason to keep the zombie
        for s in (signal.SIGCONT, sig):
            try:
                os.kill(p.pid, s)
            except ProcessLookupError:
                pass

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    with open(os.path.join(d, f"rank.{r}.pid"), "w") as f:
        f.write(f"{p.pid}\n")
    if victim:
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # it has exited; not reaped
        end = time.monotonic() + delay
        while time.monotonic() < end and not told:
            time.sleep(max(0.0, min(0.5, end - time.monotonic())))
    rc = p.wait()
    rc = 128 - rc if rc < 0 else rc
    with open(os.path.join(d, f"rank.{r}.rc"), "w") as f:
        f.write(f"{rc}\n")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
