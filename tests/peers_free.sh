#!/usr/bin/env bash
# peers_free.sh SRC: the build, the tests and CI need none of the peers'
# Python packages (bench/peers/: torch, torchft, deepspeed, transformers,
# safetensors, numpy, installed on demand by bench/peers/setup.sh).
#   1. every Python file of the tests (tests/**/*.py) imports only Python's
#      standard library or a file beside it: its imports read with ast by a
#      python3 started with -I -S (no site-packages, no user paths, no
#      PYTHONPATH), checked against sys.stdlib_module_names;
#   2. no build, test or CI file (CMakeLists.txt, cmake/, tests/ but this
#      file, .ci/, and the scripts/ these name) installs a Python package,
#      imports one of the peers' packages, or runs anything under
#      bench/peers/ or its venv (comment lines aside, and a line that ends
#      in "# peers: on demand, never in CI": scripts/figures.sh's command
#      of the peers' figure, which CI never runs).
# Exit 0 when both hold, 1 naming each offence.
set -u
src=$(cd "${1:?usage: peers_free.sh SRC}" && pwd)
cd "$src" || exit 1
fail=0
py=$(command -v python3) || { echo "peers_free: no python3"; exit 1; }

# 1. imports of the tests' Python files, with site-packages out of reach
mapfile -t files < <(find tests -name '*.py' -type f | sort)
if ! out=$("$py" -I -S - "${files[@]}" <<'PY' 2>&1
import ast, os, sys
bad = 0
std = set(sys.stdlib_module_names)
for path in sys.argv[1:]:
    here = {os.path.splitext(f)[0] for f in os.listdir(os.path.dirname(path) or ".")}
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for n in names:
            top = n.split(".")[0]
            if top not in std and top not in here:
                print(f"{path}:{node.lineno}: imports '{n}', which is not in Python's standard library")
                bad = 1
print(f"{len(sys.argv) - 1} Python files of the tests: standard library only" if not bad else "", end="")
sys.exit(bad)
PY
); then
  echo "$out"
  fail=1
else
  echo "peers_free: $out"
fi

# 2. the build, test and CI files: CMake's, the tests, .ci/ and the scripts
# those name (comments aside)
pattern='pip3? install|python3? -m pip|bench/peers|HSR_PEERS_VENV|(^|[^a-z_])(import|from) +(torch|torchft|deepspeed|transformers|safetensors|numpy)([^a-z_]|$)'
mapfile -t named < <(grep -rhoE 'scripts/[A-Za-z0-9_./-]+' CMakeLists.txt cmake tests .ci 2>/dev/null | sort -u |
  while read -r f; do [ -f "$f" ] && echo "$f"; done)
where=(CMakeLists.txt cmake tests .ci "${named[@]}")
hits=$(grep -rnIE "$pattern" "${where[@]}" 2>/dev/null | grep -v '^tests/peers_free.sh:' |
  grep -vE '^[^:]+:[0-9]+:[[:space:]]*#' | grep -v '# peers: on demand, never in CI$' || true)
if [ -n "$hits" ]; then
  echo "peers_free: the build, tests or CI reach for the peers' packages:"
  echo "$hits"
  fail=1
else
  echo "peers_free: ${where[*]}: no pip, no peer package, nothing under bench/peers"
fi
exit "$fail"
