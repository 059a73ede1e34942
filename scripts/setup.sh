#!/usr/bin/env bash
# Installs hsr's dependencies (Debian packages; only what is missing) and builds
# hsr into ./build. Idempotent; runs as root or with sudo.
# Environment: HSR_BUILD_DIR (default build), HSR_BUILD_TYPE (default RelWithDebInfo),
# HSR_WITH_CUDA (AUTO|ON|OFF), HSR_WERROR (ON|OFF, default OFF: warnings are
# errors; .ci/run and development set ON), HSR_JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
prog=setup.sh
. scripts/argcheck.sh
case "${1:-}" in
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) ac_die "takes no arguments (got '$1'); the settings are environment variables" ;;
esac
ac_env newdir HSR_BUILD_DIR
ac_env choice HSR_BUILD_TYPE 'Debug|Release|RelWithDebInfo|MinSizeRel'
ac_env choice HSR_WITH_CUDA 'AUTO|ON|OFF'
ac_env choice HSR_WERROR 'ON|OFF'
ac_env int HSR_JOBS 1 4096

pkgs=(build-essential cmake pkg-config git libhwloc-dev hwloc libxml2-dev libpmix-dev openmpi-bin libopenmpi-dev
      libucx-dev ucx-utils libcmocka-dev libcjson-dev libopenblas-dev zlib1g-dev libisal-dev
      slurmctld slurmd slurm-client python3 jq gnuplot-nox iproute2
      etcd-server etcd-client libcurl4-openssl-dev libssl-dev libxxhash-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${HSR_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="${HSR_BUILD_TYPE:-RelWithDebInfo}" \
      -DHSR_WITH_CUDA="${HSR_WITH_CUDA:-AUTO}" -DHSR_WERROR="${HSR_WERROR:-OFF}" >/dev/null
cmake --build "$build" -j "${HSR_JOBS:-$(nproc)}"
echo "setup: built into $build/ (hsr, hsr-run, libhsr)"
