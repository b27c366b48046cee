#!/bin/bash
# Every GPU path in one short call, for a lent GPU machine (see
# /work/.library/device in the workplace): the real NVML health checks
# against nvidia-smi, preflight-nccl's NCCL backend against a plain NCCL
# all-reduce loop, and the topology environment on the machine's real hwloc
# topology. Prints everything; writes logs to $OUT when set.
#
#   tests/gpu/run_all.sh [BUILD_DIR]
#
# The NCCL and topology parts need a full build (scripts/build, which needs
# the Debian packages of scripts/deps); the NVML part builds on its own.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath -m "${1:-$src/build}")
out=${OUT:-$(mktemp -d)}
rc=0
step() { echo; echo "=== $*"; }

step "machine"
nvidia-smi -L || { echo "no GPU here"; exit 77; }
nvidia-smi topo -m 2>&1 | tee "$out/nvidia-smi-topo.txt"

step "build"
if [ ! -x "$build/collective/preflight-nccl" ]; then
  PREFLIGHT_BUILD_DIR=$build "$src/scripts/build" >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; echo "full build failed (deps?)"; }
fi

step "NVML health checks vs nvidia-smi"
OUT=$out "$src/tests/gpu/run_gpu_checks.sh" || rc=1

step "NCCL all-reduce: preflight-nccl vs plain NCCL loop"
if [ -x "$build/collective/preflight-nccl" ]; then
  "$src/tests/gpu/run_nccl_check.sh" "$build" 2>&1 | tee "$out/nccl.txt" || rc=1
else
  echo "skipped: preflight-nccl not built"; rc=1
fi

step "topology environment on this machine (hwloc probe)"
if [ -x "$build/admin/preflight" ]; then
  "$build/admin/preflight" topo 2>&1 | tee "$out/topo.txt" || rc=1
  "$build/admin/preflight" topo --json >"$out/topo.json" 2>&1 || rc=1
else
  echo "skipped: preflight not built"; rc=1
fi
echo; echo "run_all: exit $rc (logs in $out)"
exit $rc
