#!/usr/bin/env python3
"""docs_check.py SRC HSR: the docs as reference, checked.

- no history: no tracked Markdown file cites an issue by number ("issue 12");
- every relative link of every tracked Markdown file resolves to a file of
  the repository (and a #fragment to a heading of it);
- every page of docs/ is in the README's table of documents;
- every command `hsr --help` lists has an entry in docs/commands.md, and
  every `hsr <command>` that page names is a command;
- every module folder with a README.md is a row of docs/design.md's module
  table, and every row names a folder that exists;
- every HSR_* name a doc uses is a variable of the registry (`hsr env
  --json`) or a name the code or the build uses (an enum, a CMake option, a
  script's variable): a misspelt variable in a doc is caught;
- every path of this repository that a source file, a script or a page names
  (`docs/tuning.md`, `common/coll_model.c`: in printed strings and comments
  alike) exists, so a message never sends a user to a page that moved.
"""
import json
import os
import re
import subprocess
import sys

src, hsr = sys.argv[1], sys.argv[2]
fails = []


def fail(msg):
    fails.append(msg)


md = subprocess.run(["git", "-C", src, "ls-files", "*.md"], capture_output=True, text=True, check=True).stdout.split()


def anchors(path):
    """GitHub's heading anchors of a Markdown file."""
    out = set()
    for ln in open(os.path.join(src, path), encoding="utf-8"):
        m = re.match(r"#+\s+(.*)", ln)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out


issue_re = re.compile(r"\bissues? #?\d+", re.I)
link_re = re.compile(r"\]\(([^)\s]+)\)")
var_re = re.compile(r"\bHSR_[A-Z0-9_]+\b")
env = json.loads(subprocess.run([hsr, "env", "--json"], capture_output=True, text=True, check=True).stdout)
known = {v["name"] for v in (env["variables"] if isinstance(env, dict) else env)}
tracked = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
in_code = set()
for f in tracked:
    if f.endswith(".md") or not os.path.isfile(os.path.join(src, f)):
        continue
    try:
        in_code |= set(var_re.findall(open(os.path.join(src, f), encoding="utf-8").read()))
    except UnicodeDecodeError:
        pass
for f in md:
    text = open(os.path.join(src, f), encoding="utf-8").read()
    for n, ln in enumerate(text.splitlines(), 1):
        if issue_re.search(ln):
            fail(f"{f}:{n}: cites an issue by number (docs are reference; the git log has the history): {ln.strip()}")
    for target in link_re.findall(text):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, frag = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(os.path.join(src, full)):
            fail(f"{f}: link to '{target}': {full} does not exist")
        elif frag and full.endswith(".md") and frag not in anchors(full):
            fail(f"{f}: link to '{target}': {full} has no heading '#{frag}'")
    if f.startswith("docs/") or f == "README.md":
        for v in set(var_re.findall(text)):
            # families written as a prefix (HSR_ALGO_*, HSR_FT_...) and names of tests' own hooks pass
            if v not in known and v not in in_code and not any(k.startswith(v) for k in known | in_code):
                fail(f"{f}: names {v}, which neither the registry (hsr env --json) nor the code has")

readme = open(os.path.join(src, "README.md"), encoding="utf-8").read()
for f in md:
    if f.startswith("docs/") and f.count("/") == 1 and f"]({f})" not in readme:
        fail(f"README.md: the table of documents lacks {f}")

helptext = subprocess.run([hsr, "--help"], capture_output=True, text=True).stdout
commands = re.findall(r"^  ([a-z]+) ", helptext, re.M)
if len(commands) < 10:
    fail(f"hsr --help lists {len(commands)} commands: {commands}")
cmds_md = open(os.path.join(src, "docs/commands.md"), encoding="utf-8").read()
for c in commands:
    if not re.search(rf"^\s+hsr {c}\b", cmds_md, re.M):
        fail(f"docs/commands.md has no entry for 'hsr {c}'")
for c in set(re.findall(r"^\s+hsr ([a-z]+)\b", cmds_md, re.M)):
    if c not in commands:
        fail(f"docs/commands.md names 'hsr {c}', which hsr --help does not list")

design = open(os.path.join(src, "docs/design.md"), encoding="utf-8").read()
rows = re.findall(r"^\| \d \| (.*?) \|", design, re.M)
named = set(re.findall(r"`([a-z_]+)/`", " ".join(rows)))
for d in sorted(os.listdir(src)):
    if os.path.isfile(os.path.join(src, d, "README.md")) and d not in named and d not in ("tests", "scripts", "docs",
                                                                                            "cmake", "include"):
        fail(f"docs/design.md's module table lacks {d}/ (it has a README.md)")
for d in named:
    if not os.path.isdir(os.path.join(src, d)):
        fail(f"docs/design.md's module table names {d}/, which does not exist")

# paths other projects' files have, named as theirs (not this repository's)
foreign = {"tools/analyze_perf_json.py"}  # nccl-tests' (docs/tiers.md)
top = sorted({f.split("/")[0] for f in tracked if "/" in f})
path_re = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w\.(?:c|h|md|sh|py|cmake|cu|txt|json))(?!\w|\.\w)" % "|".join(top))
nrefs = 0
for f in tracked:
    if not f.endswith((".c", ".h", ".cu", ".sh", ".py", ".cmake", ".txt", ".md")) and not f.startswith("tools/hsr-"):
        continue
    if f.startswith(("tests/golden/", "tests/data/")) or not os.path.isfile(os.path.join(src, f)):
        continue
    try:
        text = open(os.path.join(src, f), encoding="utf-8").read()
    except UnicodeDecodeError:
        continue
    for m in path_re.finditer(text):
        nrefs += 1
        p = m.group(1)
        if p not in foreign and not os.path.exists(os.path.join(src, p)):
            line = text.count("\n", 0, m.start()) + 1
            fail(f"{f}:{line}: names {p}, which is not in the repository")

for m in fails:
    print("docs_check:", m)
print(f"docs_check: {len(md)} Markdown files, {len(commands)} commands, {len(named)} modules, {nrefs} paths named: "
      f"{'ok' if not fails else f'{len(fails)} problems'}")
sys.exit(1 if fails else 0)
