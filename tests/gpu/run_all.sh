#!/bin/bash
# Every GPU path in one call on a bare GPU machine (tests/gpu/README.md),
# from the bundle alone (tests/gpu/bundle.sh, carried with the working
# tree): nothing is compiled or installed here.
#
#   bash tests/gpu/run_all.sh [BUNDLE]   (default: gpu-bundle)
#   env: OUT (where the result files go, at most 8; default a temp dir),
#        BUDGET_S (wall-clock budget for all steps, default 450)
#
# Steps, each bounded by `timeout` and by what is left of the budget:
#   bundle     every bundled binary loads here (no missing library, glibc new enough)
#   libraries  NVML from the driver, the CUDA 13 (else 12) runtime, libnccl.so.2
#              from the nvidia-nccl-cu13 wheel (python3), into a site config
#              (nvml_library, cuda_runtime, cublas_library, nccl_library)
#   machine    nvidia-smi -L; none: "no GPU here", exit 77 (nothing after runs)
#   nvml       run_gpu_checks.sh: NVML checks vs nvidia-smi, the bandwidth
#              tier, a 10 s GEMM soak (gpu.gemm), gpu.dcgm if dcgmi is
#              installed, a hung NVML call bounded
#   nccl       run_nccl_check.sh: preflight-nccl's NCCL backend vs the plain
#              NCCL loop on all GPUs, quick and full
#   nccl-2     preflight-nccl --intra-node with 2 ranks on GPU 0..: where the
#              machine has one GPU, what NCCL and preflight say (information)
#   nccl-ops   preflight-nccl --intra-node --ops all on all GPUs: all_reduce,
#              all_gather, reduce_scatter and all_to_all through NCCL, every
#              element verified, busbw by the nccl-tests formulas (nccl.txt)
#   topo       `preflight topo` from the live hwloc probe; its GPUs vs nvidia-smi
# Exit: 0 every GPU step passed, 1 some failed, 2 the bundle does not load
# here, 77 no GPU here.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
bundle=$(realpath -m "${1:-$src/gpu-bundle}")
budget=${BUDGET_S:-450}
work=$(mktemp -d)
out=${OUT:-$work/out}
mkdir -p "$out"
exec > >(tee "$out/run_all.log") 2>&1
: >"$out/summary.txt"
rc=0
lib=$bundle/lib
step() { echo; echo "=== $* (at $SECONDS s of $budget)"; }
summary() { printf '%-5s %-10s %s\n' "$1" "$2" "$3" | tee -a "$out/summary.txt"; }
# Seconds a step may take: its own bound, or what the budget leaves (less 10).
bound() { local l=$((budget - SECONDS - 10)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
# Under 15 s left: the step is not started (SKIP, and the run fails).
late() { [ "$(bound 15)" -lt 15 ] && { summary SKIP "$1" "not started: the ${budget} s budget is spent"; rc=1; }; }
finish() {
  echo; echo "run_all: exit $1 after $SECONDS s; results in $out:"; ls "$out"
  exit "$1"
}

step "bundle $bundle"
[ -f "$bundle/MANIFEST" ] || { echo "no bundle at $bundle (run tests/gpu/bundle.sh where the project builds, carry the folder)"; summary FAIL bundle "missing"; finish 2; }
head -5 "$bundle/MANIFEST"
chmod u+x "$bundle"/bin/* 2>/dev/null  # in case the copy lost the modes
need=$(awk '/^needs / {print $2}' "$bundle/MANIFEST"); need=${need#GLIBC_}
have=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
echo "glibc here $have, the bundle needs $need"
loads=0
for x in preflight-nccl preflight gpu-check nccl-ref-allreduce; do
  o=$(timeout -k 2 20 env LD_LIBRARY_PATH=$lib HWLOC_PLUGINS_PATH=$lib "$bundle/bin/$x" --version 2>&1); r=$?
  if [ $r = 127 ] || grep -qE 'error while loading shared libraries|cannot open shared object|version .GLIBC' <<<"$o"; then
    echo "FAIL $x does not load here: $o"; loads=1
  else
    echo "ok   $x loads ($(head -1 <<<"$o"))"
  fi
done
if [ $loads != 0 ]; then summary FAIL bundle "a binary does not load (above)"; finish 2; fi
summary ok bundle "4 binaries load; glibc $have (needs $need)"

step "libraries"
conf=$work/preflight.conf
: >"$conf"
nvml=$( (ldconfig -p 2>/dev/null | awk '$1 == "libnvidia-ml.so.1" && /x86-64/ {print $NF; exit}'; \
         ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 /usr/lib64/libnvidia-ml.so.1 /usr/local/nvidia/lib64/libnvidia-ml.so.1 2>/dev/null) | head -1)
echo "NVML: ${nvml:-not found (no libnvidia-ml.so.1 of a driver)}"
[ -n "$nvml" ] && echo "nvml_library = $nvml" >>"$conf"
# python3 knows where the CUDA/NCCL wheels live (nvidia.* namespace packages).
pyfind() {
  timeout -k 2 30 python3 - <<'PY'
import glob, importlib, os
for mod, pat in (("nvidia.nccl", "lib/libnccl.so.2"), ("nvidia.cuda_runtime", "lib/libcudart.so.1[23]"),
                 ("nvidia.cu13", "lib/libcudart.so.13"), ("nvidia", "*/lib/libcudart.so.13"),
                 ("nvidia.cublas", "lib/libcublas.so.1[23]"), ("nvidia.cu13", "lib/libcublas.so.13"),
                 ("nvidia", "*/lib/libcublas.so.13")):
    try:
        m = importlib.import_module(mod)
    except Exception:
        continue
    for p in list(getattr(m, "__path__", [])):
        for f in sorted(glob.glob(os.path.join(p, pat)), reverse=True):
            print(mod, f)
PY
}
pywheels=$(pyfind 2>/dev/null)
nccl=$(awk '$1 == "nvidia.nccl" {print $2; exit}' <<<"$pywheels")
# No wheel: a system NCCL (ldconfig), as on a cluster node.
[ -n "$nccl" ] || nccl=$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" && /x86-64/ {print $NF; exit}')
echo "NCCL: ${nccl:-not found (python3: no nvidia.nccl with lib/libnccl.so.2; ldconfig: none)}"
[ -n "$nccl" ] && echo "nccl_library = $nccl" >>"$conf"
cudart=""
for c in ${CUDA_HOME:+$CUDA_HOME/lib64/libcudart.so.13} /usr/local/cuda/lib64/libcudart.so.13 /usr/local/cuda-13*/lib64/libcudart.so.13 \
         /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13 $(awk '$2 ~ /libcudart.so.13$/ {print $2}' <<<"$pywheels") \
         $(ldconfig -p 2>/dev/null | awk '$1 == "libcudart.so.13" {print $NF}') \
         /usr/local/cuda/lib64/libcudart.so.12 $(awk '$2 ~ /libcudart.so.12$/ {print $2}' <<<"$pywheels"); do
  [ -f "$c" ] && { cudart=$c; break; }
done
echo "CUDA runtime: ${cudart:-not found (libcudart.so.13 or .12)}"
[ -n "$cudart" ] && echo "cuda_runtime = $cudart" >>"$conf"
# cuBLAS for the GEMM soak (gpu.gemm): the runtime's major version, next
# to it first (a toolkit), then a wheel, then ldconfig.
cublas=""
if [ -n "$cudart" ]; then
  major=${cudart##*libcudart.so.}
  for c in "${cudart%/*}/libcublas.so.$major" $(awk -v m="$major" '$2 ~ ("libcublas.so." m "$") {print $2}' <<<"$pywheels") \
           $(ldconfig -p 2>/dev/null | awk -v m="$major" '$1 == "libcublas.so." m {print $NF}'); do
    [ -f "$c" ] && { cublas=$c; break; }
  done
fi
echo "cuBLAS: ${cublas:-not found (libcublas.so of the same CUDA major version; the GEMM soak is skipped)}"
[ -n "$cublas" ] && echo "cublas_library = $cublas" >>"$conf"
cat "$conf"
if o=$(timeout -k 2 20 env LD_LIBRARY_PATH=$lib "$bundle/bin/preflight" config check --config "$conf" 2>&1); then
  summary ok libraries "NVML ${nvml:-none}, CUDA ${cudart:-none}, cuBLAS ${cublas:-none}, NCCL ${nccl:-none}"
else
  echo "$o"; summary FAIL libraries "preflight config check refused $conf"; rc=1
fi

step "machine"
if ! timeout -k 2 30 nvidia-smi -L >"$work/smi-L.txt" 2>&1 || ! grep -q '^GPU ' "$work/smi-L.txt"; then
  cat "$work/smi-L.txt"
  echo "no GPU here"
  summary SKIP machine "no GPU here (nvidia-smi -L)"
  finish 77
fi
n=$(grep -c '^GPU ' "$work/smi-L.txt")
{ cat "$work/smi-L.txt"; timeout -k 2 30 nvidia-smi topo -m; timeout -k 2 60 nvidia-smi -q; } >"$out/nvidia-smi.txt" 2>&1
cat "$work/smi-L.txt"; timeout -k 2 30 nvidia-smi topo -m
summary ok machine "$n GPU(s)"

step "nvml: NVML checks vs nvidia-smi, bandwidth tier, GEMM soak, DCGM, a hung NVML call"
if ! late nvml; then
  t=$(bound 240)
  NVML=${nvml:-libnvidia-ml.so.1} CUDART=$cudart CUBLAS=$cublas OUT=$work/nvml timeout -k 5 "$t" bash "$src/tests/gpu/run_gpu_checks.sh" "$bundle" 2>&1 |
    tee "$work/nvml.log"; r=${PIPESTATUS[0]}
  cat "$work"/nvml/{results,bandwidth,gemm,dcgm,hang}.tsv >"$out/gpu-checks.tsv" 2>/dev/null
  [ $r = 0 ] && summary ok nvml "$(grep -c '^ok: ' "$work/nvml.log") checks ok" ||
    { summary FAIL nvml "exit $r$([ $r = 124 ] && echo ", ran past $t s")"; rc=1; }
fi

step "nccl: preflight-nccl vs the plain NCCL loop on $n GPU(s)"
if ! late nccl; then
  t=$(bound 200)
  PF_CONFIG=$conf REF_NCCL=$nccl REF_CUDART=$cudart STEP_TIMEOUT=$(( (t - 10) / 4 )) \
    timeout -k 5 "$t" bash "$src/tests/gpu/run_nccl_check.sh" "$bundle" 2>&1 | tee "$out/nccl.txt"; r=${PIPESTATUS[0]}
  [ $r = 0 ] && summary ok nccl "$(grep -c '^# OK' "$out/nccl.txt") levels at >= 0.97x the reference" ||
    { summary FAIL nccl "exit $r: $(grep -m1 -E '^# FAILED|failed|"message"' "$out/nccl.txt" | cut -c1-200)"; rc=1; }
fi

step "nccl-2: 2 ranks on this machine's GPUs (information where it has one GPU)"
if ! late nccl-2; then
  t=$(bound 45)
  o=$(CUDA_VISIBLE_DEVICES=0,1 timeout -k 5 "$t" env LD_LIBRARY_PATH=$lib "$bundle/bin/preflight-nccl" --config "$conf" --intra-node \
        --backend nccl --ranks 2 --level quick 2>&1); r=$?
  echo "$o" | tee -a "$out/nccl.txt" | tail -5
  if [ $r = 0 ]; then summary ok nccl-2 "2 ranks passed"
  elif [ "$n" -lt 2 ]; then summary info nccl-2 "1 GPU: $(grep -m1 -E 'FAILED|wants GPU|Duplicate' <<<"$o" | cut -c1-150)"
  else summary FAIL nccl-2 "exit $r"; rc=1; fi
fi

step "nccl-ops: every collective operation through NCCL on $n GPU(s)"
if ! late nccl-ops; then
  t=$(bound 90)
  # A threshold of 1 B/s (0 would fall back to the node profile): this step
  # is about each operation's data and figures; bandwidth is judged against
  # the reference loop in 'nccl'.
  o=$(CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) timeout -k 5 "$t" env LD_LIBRARY_PATH=$lib "$bundle/bin/preflight-nccl" \
        --config "$conf" --intra-node --backend nccl --ranks "$n" --level quick --ops all --min-busbw 1 2>&1); r=$?
  echo "$o" | tee -a "$out/nccl.txt"
  if [ $r = 0 ]; then summary ok nccl-ops "$(grep -m1 '^# OK: every operation' <<<"$o" | cut -c3-150)"
  else summary FAIL nccl-ops "exit $r$([ $r = 124 ] && echo ", ran past $t s"): $(grep -m1 -E '^# FAILED' <<<"$o" | cut -c1-150)"; rc=1; fi
fi

step "topo: the topology environment from the live hwloc probe"
if ! late topo; then
  t=$(bound 30)
  timeout -k 2 "$t" env LD_LIBRARY_PATH=$lib HWLOC_PLUGINS_PATH=$lib "$bundle/bin/preflight" --config "$conf" topo >"$out/topo.txt" 2>&1; r1=$?
  cat "$out/topo.txt"
  timeout -k 2 "$t" env LD_LIBRARY_PATH=$lib HWLOC_PLUGINS_PATH=$lib "$bundle/bin/preflight" --config "$conf" topo --json >"$out/topo.json" 2>&1; r2=$?
  smi_bus=$(timeout -k 2 30 nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | tr 'A-F' 'a-f' | sed 's/^0000\(....:\)/\1/' | sort | tr '\n' ' ')
  topo_bus=$(python3 -c 'import json,sys; print(" ".join(sorted(g["busid"].lower() for g in json.load(open(sys.argv[1]))["gpus"] if g["vendor"] == "nvidia")))' "$out/topo.json" 2>/dev/null)
  echo "nvidia-smi bus ids: $smi_bus"; echo "hwloc probe GPUs:   $topo_bus"
  if [ $r1 = 0 ] && [ $r2 = 0 ] && [ "$(echo $smi_bus)" = "$(echo $topo_bus)" ]; then
    summary ok topo "hwloc sees the $n GPU(s) nvidia-smi lists; env in topo.txt"
  else
    summary FAIL topo "exit $r1/$r2; GPUs hwloc '$topo_bus' vs nvidia-smi '$smi_bus'"; rc=1
  fi
fi
cp "$conf" "$out/preflight.conf"

echo; cat "$out/summary.txt"
[ $rc = 0 ] && echo "RUN_ALL: OK" || echo "RUN_ALL: FAILED"
finish $rc
