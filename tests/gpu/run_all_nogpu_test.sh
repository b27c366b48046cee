#!/bin/bash
# run_all.sh from the bundle on a machine without a GPU (this one): it must
# get through the bundle and library steps with no missing-library error,
# stop at the first GPU step with "no GPU here" and exit 77, and leave at
# most 8 result files. Run twice: as the machine is (no nvidia-smi here), and
# with an nvidia-smi that fails as it does on a node whose driver is absent.
# This wrapper passes (exit 0) when all of that holds.
#
#   tests/gpu/run_all_nogpu_test.sh BUNDLE
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
bundle=$(realpath "${1:?usage: run_all_nogpu_test.sh BUNDLE}")
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/stub"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."\nexit 9\n' >"$d/stub/nvidia-smi"
chmod +x "$d/stub/nvidia-smi"
# The stub run also has an nvidia-nccl-cu13-like wheel on PYTHONPATH (nvidia
# a namespace package, nvidia/nccl/lib/libnccl.so.2): the library step must find it.
mkdir -p "$d/py/nvidia/nccl/lib"
: >"$d/py/nvidia/nccl/__init__.py"
: >"$d/py/nvidia/nccl/lib/libnccl.so.2"
fails=0
for run in machine stub; do
  path=$PATH
  if [ $run = stub ]; then path=$d/stub:$PATH; elif command -v nvidia-smi >/dev/null; then path=$d/stub:$PATH; fi
  mkdir -p "$d/out-$run"
  py=${PYTHONPATH:-}
  [ $run = stub ] && py=$d/py${PYTHONPATH:+:$PYTHONPATH}
  PYTHONPATH=$py PATH=$path OUT=$d/out-$run BUDGET_S=120 bash "$src/tests/gpu/run_all.sh" "$bundle" >"$d/log-$run" 2>&1
  r=$?
  err() { echo "run_all_nogpu ($run): $*"; fails=$((fails + 1)); }
  [ $r = 77 ] || err "exit $r, expected 77"
  grep -q '^no GPU here$' "$d/log-$run" || err "no 'no GPU here' line"
  grep -qE 'error while loading shared libraries|cannot open shared object|not load here' "$d/log-$run" && err "a missing-library error"
  for x in preflight-nccl preflight gpu-check nccl-ref-allreduce; do
    grep -q "^ok   $x loads" "$d/log-$run" || err "$x not shown loading"
  done
  grep -q '^ok    libraries ' "$d/log-$run" || err "the library step did not pass"
  grep -q '^=== nvml' "$d/log-$run" && err "went past the machine step"
  if [ $run = stub ]; then
    grep -q "^NCCL: $d/py/nvidia/nccl/lib/libnccl.so.2\$" "$d/log-$run" || err "the wheel's libnccl.so.2 not found"
    grep -q "^nccl_library = $d/py/nvidia/nccl/lib/libnccl.so.2\$" "$d/log-$run" || err "nccl_library not passed in the config"
  fi
  n=$(find "$d/out-$run" -type f | wc -l)
  [ "$n" -le 8 ] || err "$n result files (at most 8)"
  [ $fails = 0 ] || { cat "$d/log-$run"; break; }
  echo "run_all_nogpu ($run): exit 77, 'no GPU here', no missing library, $n result files"
done
[ $fails = 0 ] && echo "run_all_nogpu: ok"
[ $fails = 0 ]
