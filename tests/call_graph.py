#!/usr/bin/env python3
"""call_graph.py: the graph of who calls (or reads) whom among a module's
object files, through the symbols each defines and the others use (nm), with
files grouped into components; fails when the components' graph has a cycle.

usage: call_graph.py NAME [--group LABEL=REGEX]... [--by-dir] OBJECT|@LISTFILE...
       call_graph.py --self-test

Every symbol counts: a call to a public entry point (hsr_*, exported) is
an edge like any other, so a file that calls its own module's public API
from below closes a loop; such edges are marked "public" in the listing.
--self-test compiles two small files with the build's visibility (hidden,
the public function exported) whose only loop goes through a public entry
point, and checks that it is found.

A file whose name (without .c.o) matches a --group REGEX belongs to that
component (a transport: its table and its algorithms name each other by
design); --by-dir groups files by their folder (a module's rooms); every
other file is its own node. Prints each node's edges with one symbol that
makes it, then the cycles. Exit 0: no cycle; 1: a cycle; 2: bad usage;
77: nm missing."""
import collections
import os
import re
import shutil
import subprocess
import sys


PUBLIC = re.compile(r"hsr_[a-z0-9_]+$")


def self_test():
    import tempfile
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc) or not shutil.which("nm"):
        print("call_graph: no C compiler or nm: skipping the self-test")
        return 77
    api = '__attribute__((visibility("default")))'
    srcs = {
        "low.c": f"int mid_helper(void);\n{api} int hsr_low_entry(void) {{ return mid_helper() + 1; }}\n",
        "mid.c": "int hsr_low_entry(void);\nint mid_helper(void) { return 1; }\n"
        "int mid_work(void) { return hsr_low_entry(); }\n",
    }
    with tempfile.TemporaryDirectory() as d:
        objs = []
        for name, text in srcs.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            o = os.path.join(d, name + ".o")
            subprocess.run([cc, "-c", "-fvisibility=hidden", "-o", o, os.path.join(d, name)], check=True)
            objs.append(o)
        rc = main(["call_graph.py", "self-test", *objs])
        if rc != 1:
            print("call_graph: self-test: a loop closed by a public entry point (hsr_low_entry) was not found")
            return 1
        rc = main(["call_graph.py", "self-test", objs[0]])
        if rc != 0:
            print("call_graph: self-test: one file alone reported a loop")
            return 1
    print("call_graph: self-test: a loop through a public entry point is found")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) < 3:
        print(__doc__)
        return 2
    name, groups, by_dir, objs = argv[1], [], False, []
    i = 2
    while i < len(argv):
        a = argv[i]
        if a == "--group" and i + 1 < len(argv):
            label, _, rx = argv[i + 1].partition("=")
            if not label or not rx:
                print(f"call_graph: --group wants LABEL=REGEX, got '{argv[i + 1]}'")
                return 2
            groups.append((label, re.compile(rx)))
            i += 2
            continue
        if a == "--by-dir":
            by_dir = True
        elif a.startswith("--"):
            print(f"call_graph: unknown option {a}")
            return 2
        elif a.startswith("@"):  # a file listing the objects, one per line
            with open(a[1:]) as f:
                objs += [l.strip() for l in f if l.strip()]
        else:
            objs.append(a)
        i += 1
    if not shutil.which("nm"):
        print("call_graph: nm not found (binutils): skipping")
        return 77
    objs = [o for o in objs if o.endswith(".o")]
    if not objs:
        print("call_graph: no object files given")
        return 2

    def node_of(path):
        base = re.sub(r"\.(c|cu)\.o$", "", os.path.basename(path))
        if by_dir:
            return os.path.basename(os.path.dirname(path))
        for label, rx in groups:
            if rx.fullmatch(base):
                return label
        return base

    defs, uses = {}, collections.defaultdict(set)
    for o in objs:
        n = node_of(o)
        out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in "TDBRVWC":
                defs[p[2]] = n
            elif len(p) == 2 and p[0] == "U":
                uses[n].add(p[1])
    nodes = sorted({node_of(o) for o in objs})
    edges = collections.defaultdict(dict)  # node -> {callee: a symbol}
    for n, syms in uses.items():
        for s in sorted(syms):
            m = defs.get(s)
            if m and m != n and m not in edges[n]:
                edges[n][m] = s
    # an edge made only by calls to public entry points is marked so
    public = {(n, m) for n in edges for m in edges[n] if all(PUBLIC.match(s) for s in uses[n] if defs.get(s) == m)}
    npub = len(public)
    print(f"{name}: who calls or reads whom ({len(objs)} files, {len(nodes)} nodes, "
          f"{npub} edge(s) only through public entry points)")
    for n in nodes:
        callees = ", ".join(f"{m} ({s}{', public' if (n, m) in public else ''})" for m, s in sorted(edges[n].items()))
        print(f"  {n} -> {callees if callees else '(nothing)'}")

    # Tarjan's strongly connected components
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for n in nodes:
        if n not in index:
            visit(n)
    if sccs:
        for c in sccs:
            via = sorted(f"{a} -> {b} ({edges[a][b]})" for (a, b) in public if a in c and b in c)
            print(f"{name}: call loop among {', '.join(c)}"
                  + (f"; closed through public entry points: {'; '.join(via)}" if via else ""))
        return 1
    print(f"{name}: no call loop")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
