#!/usr/bin/env python3
"""launcher.py ACTION WAIT_FILE LOG -- CMD...: the launcher's own faults.

Runs CMD (hsr-run ...) as the session leader of a new pseudo-terminal, with
its process group in the terminal's foreground and SIGINT at its default, as
a shell in a terminal window runs a command. Once WAIT_FILE exists (the job
is training), does ACTION, prints the moment it did it ("fault at EPOCH"),
copies the terminal's output to LOG and exits with CMD's status (128 + N
after signal N). ACTION:
  ctrlc          Ctrl-C typed on the terminal (byte 0x03: the line discipline
                 sends SIGINT to the foreground process group)
  ctrlc2         two Ctrl-C, 0.2 s apart
  int2           two SIGINTs to hsr-run, 0.2 s apart
  pgterm         SIGTERM to hsr-run's process group (systemd, batch systems)
  kill9          SIGKILL to hsr-run
  kill9launcher  SIGKILL to hsr-run's child, the launcher (mpirun or srun)
Gives up after 120 s without WAIT_FILE (exit 3).
"""
import os
import pty
import select
import signal
import sys
import time

ACTIONS = ("ctrlc", "ctrlc2", "int2", "pgterm", "kill9", "kill9launcher")


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def act(action, pid, fd):
    if action in ("ctrlc", "ctrlc2"):
        for i in range(1 if action == "ctrlc" else 2):
            if i:
                time.sleep(0.2)
            os.write(fd, b"\x03")
    elif action == "int2":
        os.kill(pid, signal.SIGINT)
        time.sleep(0.2)
        os.kill(pid, signal.SIGINT)
    elif action == "pgterm":
        os.killpg(pid, signal.SIGTERM)
    elif action == "kill9":
        os.kill(pid, signal.SIGKILL)
    elif action == "kill9launcher":
        kids = children(pid)
        if not kids:
            sys.stderr.write("launcher.py: hsr-run has no child to kill\n")
        for k in kids:
            os.kill(k, signal.SIGKILL)


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--" or sys.argv[1] not in ACTIONS:
        sys.stderr.write(__doc__)
        return 2
    action, wait_file, log, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5:]
    pid, fd = pty.fork()
    if pid == 0:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execvp(cmd[0], cmd)
    out = open(log, "wb")
    done_act, deadline, status, drain_until = False, time.monotonic() + 120, None, None
    while True:
        now = time.monotonic()
        if status is None:
            got, st = os.waitpid(pid, os.WNOHANG)
            if got:
                status, drain_until = st, now + 0.3
        if drain_until is not None and now > drain_until:
            break  # whatever else holds the terminal open is not CMD
        if not done_act and status is None and os.path.exists(wait_file):
            for k in children(pid):
                print("launcher pid %d" % k, flush=True)
            t = time.time()
            act(action, pid, fd)
            print("fault at %.6f" % t, flush=True)
            done_act = True
        if not done_act and now > deadline and status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return 3
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the terminal's last process closed it
                data = b""
            if not data:
                if status is not None:
                    break
                time.sleep(0.05)  # the terminal hung up: wait for CMD's status
                continue
            out.write(data)
            out.flush()
    if status is None:
        _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main())
