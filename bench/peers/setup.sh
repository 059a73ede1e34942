#!/usr/bin/env bash
# bench/peers/setup.sh [--venv DIR] [--python PY] [--with LIST] [--check] [--force]
#   Makes the peers' virtual environment: PyPI's torch 2.15.0 on the CPU, with
#   pinned versions, and nothing the build, the tests or CI use.
#   PyPI's torch wheel is the CUDA build: libtorch.so needs libtorch_cuda.so,
#   which needs cuBLAS, cuDNN, NCCL, cuFile, cuSPARSELt, NVSHMEM and the CUDA
#   runtime (about 3 GB of nvidia-* wheels) before `import torch` succeeds. Here
#   torch is installed with --no-deps, plus the two pure-Python packages a CPU
#   run imports (typing-extensions; sympy with mpmath, for torch.distributed's
#   DTensor), and cuda_stubs.py compiles stand-ins for the CUDA libraries (a few
#   kB each, every function answers "no device") into torch/lib, where torch's
#   RPATH finds them. torch.cuda.is_available() is then False; gloo, FSDP2, DDP
#   and DCP run on the CPU. About 1.3 GB installed (the torch wheel, 539 MB).
# Options:
#   --venv DIR     where (default $HSR_PEERS_VENV, else bench/peers/.venv; git-ignored)
#   --python PY    the interpreter to make it with (default python3; torch 2.15 needs >= 3.11)
#   --with LIST    more peers, comma-separated: torchft, deepspeed, transformers
#                  (pinned below, installed with --no-deps, then their own
#                  dependencies but torch, unpinned)
#   --check        only check an existing environment (exit 1 if it does not run)
#   --force        remake it from scratch
# Idempotent: a second run checks what is there and installs only what is missing.
# Exit: 0 ready, 1 an install or the check failed, 2 bad usage.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TORCH=2.15.0
PINS_BASE=(typing-extensions==4.16.0 mpmath==1.3.0 sympy==1.14.0)
# the peer, pinned, with --no-deps | its own dependencies but torch (a
# resolver that saw torch would add torch's nvidia-* wheels back)
declare -A PINS_WITH=(
  [torchft]="torchft==0.2.0|opentelemetry-api>=1.39.0 opentelemetry-sdk>=1.39.0 opentelemetry-exporter-otlp-proto-http>=1.39.0"
  [deepspeed]="deepspeed==0.19.8|setuptools>=77.0.3 wheel filelock networkx jinja2 einops hjson msgpack ninja numpy packaging>=20.0 psutil py-cpuinfo pydantic>=2.0.0 tqdm"
  [transformers]="transformers==5.23.0 safetensors==0.8.0|huggingface-hub numpy packaging pyyaml regex tokenizers tqdm"
)
venv=${HSR_PEERS_VENV:-$HERE/.venv}
py=python3 with="" check=0 force=0
die() { echo "peers setup: $*" >&2; exit 2; }
fail() { echo "peers setup: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    --venv) [ -n "${2:-}" ] || die "--venv needs a directory"; venv=$2; shift 2;;
    --python) [ -n "${2:-}" ] || die "--python needs an interpreter"; py=$2; shift 2;;
    --with) [ -n "${2:-}" ] || die "--with needs a list (torchft,deepspeed,transformers)"; with=$2; shift 2;;
    --check) check=1; shift;;
    --force) force=1; shift;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
    *) die "unknown option '$1' (see --help)";;
  esac
done
for w in ${with//,/ }; do [ -n "${PINS_WITH[$w]:-}" ] || die "--with '$w' (valid: ${!PINS_WITH[*]})"; done

V=$venv/bin/python
smoke() { # imports torch, runs a 2-rank gloo all-reduce and FSDP2's fully_shard on the CPU
  local t rc=0
  t=$(mktemp /tmp/hsr-peers-smoke-XXXXXX.py) # spawned ranks re-read the script: a file, not stdin
  cat >"$t" <<'PY'
import os, torch, torch.distributed as dist, torch.multiprocessing as mp
assert not torch.cuda.is_available()
def w(r, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=r, world_size=2)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    m = torch.nn.Linear(4, 4)
    fully_shard(m, mesh=init_device_mesh("cpu", (2,)))
    m(torch.ones(2, 4)).sum().backward()
    t = torch.ones(1); dist.all_reduce(t); assert t.item() == 2
    dist.destroy_process_group()
if __name__ == "__main__":
    import random
    mp.spawn(w, args=(29000 + random.randrange(900),), nprocs=2)
    print(f"torch {torch.__version__}: gloo and fully_shard run on the CPU")
PY
  OMP_NUM_THREADS=1 "$V" -W ignore "$t" || rc=$?
  rm -f "$t"
  return "$rc"
}
if [ "$check" = 1 ]; then
  [ -x "$V" ] || fail "no environment at $venv (run bench/peers/setup.sh)"
  smoke || fail "the environment at $venv does not run (bench/peers/setup.sh --force remakes it)"
  exit 0
fi

command -v "$py" >/dev/null || fail "no '$py' (give --python)"
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || fail "$py is $("$py" -V 2>&1); torch $TORCH needs Python >= 3.11"
command -v cc >/dev/null || command -v gcc >/dev/null || fail "no C compiler (cc or gcc): the CUDA stand-ins are compiled here"
command -v objdump >/dev/null || fail "no objdump (apt-get install binutils)"
[ "$force" = 1 ] && rm -rf "$venv"
if [ ! -x "$V" ]; then
  echo "peers setup: making $venv with $("$py" -V 2>&1)"
  "$py" -m venv "$venv" || fail "python -m venv failed (apt-get install python3-venv?)"
fi
pip() { "$V" -m pip --disable-pip-version-check -q "$@"; }
have() { local v; v=$("$V" -m pip --disable-pip-version-check show "$1" 2>/dev/null || true); [[ $'\n'$v$'\n' == *$'\nVersion: '$2$'\n'* ]]; }
if ! have torch "$TORCH"; then
  echo "peers setup: torch $TORCH (--no-deps: the CUDA build without its nvidia-* wheels)"
  pip install --no-deps "torch==$TORCH" || fail "pip install torch==$TORCH failed"
fi
pip install --no-deps "${PINS_BASE[@]}" || fail "pip install ${PINS_BASE[*]} failed"
lib=$("$V" -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("torch").origin), "lib"))')
if [ ! -e "$lib/libcudart.so.13" ] || [ "$HERE/cuda_stubs.py" -nt "$lib/libcudart.so.13" ]; then
  echo "peers setup: CUDA stand-ins into $lib"
  "$V" "$HERE/cuda_stubs.py" "$lib" "$lib" >/dev/null || fail "cuda_stubs.py failed"
fi
for w in ${with//,/ }; do
  top=${PINS_WITH[$w]%%|*} deps=${PINS_WITH[$w]#*|}
  echo "peers setup: $top (and $deps)"
  # shellcheck disable=SC2086
  pip install $deps || fail "pip install $deps failed"
  # shellcheck disable=SC2086 # deepspeed is an sdist whose setup.py imports torch: no build isolation
  pip install --no-deps --no-build-isolation $top || fail "pip install --no-deps $top failed"
done
smoke || fail "torch does not run in $venv (bench/peers/setup.sh --force remakes it)"
echo "peers setup: ready: $venv ($(du -sh "$venv" | cut -f1)); run bench/peers/run.sh"
