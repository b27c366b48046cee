#!/bin/bash
# The real NVML path on a GPU machine, in one short call, from the GPU
# bundle (tests/gpu/bundle.sh: gpu-check and the fake NVML, built by CMake;
# nothing is compiled here): runs preflight's GPU checks against the real
# libnvidia-ml.so.1, and checks every figure against nvidia-smi; then the
# bandwidth tier, the GEMM soak and, where dcgmi is installed, gpu.dcgm. Also proves on
# this machine that a hung NVML call fails its check within the budget.
#
#   tests/gpu/run_gpu_checks.sh [BUNDLE]     (default: gpu-bundle; writes to $OUT or a temp dir)
#   env: NVML (library for gpu-check; default libnvidia-ml.so.1), CUDART
#   (CUDA runtime for the bandwidth tier and the GEMM soak; default: the
#   cuda_runtime default), CUBLAS (cuBLAS for the GEMM soak; default: the
#   cublas_library default); for the selftest: GEMM_CUDART (the CUDA runtime
#   of the GEMM soak alone, e.g. the bundle's fake), GEMM_SECONDS (default
#   10), GEMM_SIZE (the matrices' side; default gemm_size's 8192)
#
# Exit 0: NVML loaded through dlopen, our declared ABI agrees with the
# driver (bus ids, temperatures, modes, link widths and ECC counts match
# nvidia-smi), nothing hung or crashed. Health findings on the machine
# (a throttled or hot GPU) are printed, not failures of this script.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
bundle=$(realpath -m "${1:-$src/gpu-bundle}")
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

command -v nvidia-smi >/dev/null || { echo "FAIL: no nvidia-smi on this machine"; exit 1; }
[ -x "$bundle/bin/gpu-check" ] || { echo "FAIL: no $bundle/bin/gpu-check (run tests/gpu/bundle.sh)"; exit 1; }
nvml=${NVML:-libnvidia-ml.so.1}
gpu_check() { LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} HWLOC_PLUGINS_PATH=$bundle/lib "$bundle/bin/gpu-check" "$@"; }
nvidia-smi -L >"$out/smi-L.txt" 2>&1
n=$(grep -c '^GPU ' "$out/smi-L.txt")
nvidia-smi --query-gpu=index,pci.bus_id,temperature.gpu,persistence_mode,compute_mode,pcie.link.width.current,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total \
  --format=csv,noheader,nounits >"$out/smi.csv" 2>&1
nvidia-smi -q >"$out/smi-q.txt" 2>&1 || true
echo "nvidia-smi sees $n GPU(s)"; cat "$out/smi.csv"

# Twice: the first run records the kernel log baseline; the second is the steady-state cost.
gpu_check "$nvml" "$n" "$out/state" 10000 >"$out/first.tsv" 2>&1
gpu_check "$nvml" "$n" "$out/state" 10000 >"$out/results.tsv" 2>&1
cat "$out/results.tsv"
r=$out/results.tsv
field() { awk -F'\t' -v c="$1" -v d="$2" -v f="$3" '$1 == c && index($2, d) == 1 {print $f; exit}' "$r"; }

grep -q $'^gpu.nvml\t' "$r" && bad "NVML not usable: $(grep $'^gpu.nvml\t' "$r" | cut -f6)" || ok "$nvml loaded and initialised through dlopen"
grep -qE 'probe hung|probe crashed|probe ended' "$r" && bad "a probe hung or crashed on real hardware" || ok "no probe hung or crashed"
[ "$(field gpu.count node 3)" = "$n" ] && ok "gpu.count = $n as nvidia-smi" || bad "gpu.count $(field gpu.count node 3) != nvidia-smi's $n"

while IFS=, read -r idx bus temp pers cmode width eccv ecca; do
  idx=$(echo $idx); bus=$(echo $bus | tr 'A-F' 'a-f'); temp=$(echo $temp); pers=$(echo $pers)
  cmode=$(echo $cmode | tr 'A-Z' 'a-z'); width=$(echo $width); eccv=$(echo $eccv); ecca=$(echo $ecca)
  [ ${#bus} = 16 ] && bus=${bus:4}  # 00000000:18:00.0 -> 0000:18:00.0
  dev="GPU$idx $bus"
  [ "$(field gpu.present "$dev" 5)" = pass ] && ok "$dev present with nvidia-smi's bus id (nvmlPciInfo_t layout agrees)" || bad "$dev: no gpu.present pass (bus id mismatch?)"
  t=$(field gpu.temperature "$dev" 3); t=${t%C}
  [ -n "$t" ] && [ $((t - temp)) -le 10 ] && [ $((temp - t)) -le 10 ] && ok "$dev temperature ${t}C ~ nvidia-smi ${temp}C" || bad "$dev temperature '$t' vs nvidia-smi $temp"
  p=$(field gpu.persistence "$dev" 3); want=$([ "$pers" = Enabled ] && echo on || echo off)
  [ "$p" = "$want" ] && ok "$dev persistence $p" || bad "$dev persistence '$p' vs nvidia-smi $pers"
  m=$(field gpu.compute_mode "$dev" 3)
  [ "$m" = "$cmode" ] && ok "$dev compute mode $m" || bad "$dev compute mode '$m' vs nvidia-smi $cmode"
  pc=$(field gpu.pcie "$dev" 3)
  [[ "$pc" == *" x$width "* ]] && ok "$dev PCIe $pc" || bad "$dev PCIe '$pc' vs nvidia-smi width x$width"
  e=$(field gpu.ecc "$dev" 3)
  if [[ "$eccv" =~ ^[0-9]+$ ]]; then
    [ "$e" = "volatile $eccv, aggregate $ecca" ] && ok "$dev ECC $e" || bad "$dev ECC '$e' vs nvidia-smi volatile $eccv aggregate $ecca"
  else
    [ "$(field gpu.ecc "$dev" 5)" = skipped ] && ok "$dev ECC skipped as nvidia-smi shows $eccv" || bad "$dev ECC '$e' but nvidia-smi shows $eccv"
  fi
done <"$out/smi.csv"

echo "health findings on this machine (information, not script failures):"
awk -F'\t' '$5 == "fail" || $5 == "skipped" {print "  " $5 " " $1 " " $2 ": " $6}' "$r"
total=$(awk -F'\t' '$1 == "total" {print $2}' "$r")
echo "GPU + Xid checks on $n real GPU(s): $total s (target for the whole quick level: < 0.3 s on 8 GPUs)"

# The bandwidth tier (gpu.bandwidth, full level): H2D/D2H per GPU, P2P per
# pair, against the GPU's profile. Needs the CUDA runtime ($CUDART, else
# libcudart.so.13 or .12 on the loader path); a machine without it (this
# script's CPU selftest) shows the skip, not a failure.
gpu_check "$nvml" "$n" "$out/state" 90000 bandwidth ${CUDART:+"$CUDART"} >"$out/bandwidth.tsv" 2>&1
cat "$out/bandwidth.tsv"
if grep -qE $'^gpu.bandwidth\tnode\t.*\tskipped\tskipped: no CUDA (runtime|device)' "$out/bandwidth.tsv"; then
  echo "bandwidth tier: skipped here: $(grep $'^gpu.bandwidth' "$out/bandwidth.tsv" | cut -f6)"
else
  nb=$(grep -cE $'^gpu.bandwidth\tGPU[0-9]+ (h2d|d2h)\t' "$out/bandwidth.tsv" || true)
  [ "$nb" = $((2 * n)) ] && ok "bandwidth tier measured H2D and D2H on all $n GPU(s)" || bad "bandwidth tier: $nb H2D/D2H results for $n GPU(s)"
  grep -qE 'probe hung|probe crashed|copy failed' "$out/bandwidth.tsv" && bad "a bandwidth copy failed or hung" || ok "no bandwidth copy failed or hung"
  echo "bandwidth figures (fail = below bw_min_fraction of the profile; information, not script failures):"
  awk -F'\t' '$1 == "gpu.bandwidth" {print "  " $5 " " $2 ": " $6}' "$out/bandwidth.tsv"
fi

# The GEMM soak (gpu.gemm, full level), 10 s here ($GEMM_SECONDS): FP16 cublasGemmEx on
# every GPU at once, TFLOPS against the profile and the node's median,
# output hashes compared, clocks sampled. Needs the CUDA runtime and cuBLAS
# ($CUDART / $CUBLAS, else the .so.13 / .so.12 sonames); without them (the
# CPU selftest) the skip is shown, not a failure.
# cuBLAS loads libcublasLt from its own directory: put that on the path.
gemm_dir=""; [[ ${CUBLAS:-} == */* ]] && gemm_dir=${CUBLAS%/*}
CUDART=${GEMM_CUDART:-${CUDART:-}} LD_LIBRARY_PATH=$gemm_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  gpu_check "$nvml" "$n" "$out/state" 180000 gemm "${GEMM_SECONDS:-10}" >"$out/gemm.tsv" 2>&1
cat "$out/gemm.tsv"
if grep -qE $'^gpu.gemm\tnode\t.*\tskipped\tskipped: no (CUDA runtime|CUDA device|cuBLAS)' "$out/gemm.tsv"; then
  echo "gemm soak: skipped here: $(grep $'^gpu.gemm' "$out/gemm.tsv" | cut -f6)"
else
  ng=$(grep -cE $'^gpu.gemm\tGPU[0-9]+\t[0-9.]+ TFLOPS\t' "$out/gemm.tsv" || true)
  [ "$ng" = "$n" ] && ok "gemm soak measured all $n GPU(s)" || bad "gemm soak: $ng TFLOPS results for $n GPU(s)"
  grep -qE 'probe hung|probe crashed|GEMM soak failed|GEMM result' "$out/gemm.tsv" && bad "a GEMM failed, hung or computed a wrong result" || ok "no GEMM failed, hung or computed wrong"
  echo "gemm figures (fail = below gemm_min_fraction or the node median; information, not script failures):"
  awk -F'\t' '$1 == "gpu.gemm" {print "  " $5 " " $2 ": " $6}' "$out/gemm.tsv"
fi

# A hung NVML call fails its check within the budget, on this machine too.
PREFLIGHT_FAKE_NVML="gpus 2;hang nvmlDeviceGetTemperature 1" gpu_check "$bundle/lib/fake/libnvidia-ml.so.1" 2 "$out/fake-state" 500 >"$out/hang.tsv" 2>&1
grep -q $'^gpu.temperature\tGPU1 0000:2a:00.0\tno answer\t< 500 ms\tfail\tprobe hung in nvmlDeviceGetTemperature' "$out/hang.tsv" &&
  ok "fake NVML hang fails gpu.temperature GPU1 after 500 ms ($(awk -F'\t' '$1 == "total" {print $2}' "$out/hang.tsv") s)" || { cat "$out/hang.tsv"; bad "hang not reported"; }

# DCGM's diagnostic (gpu.dcgm, dcgmi diag -r 1) where the image has DCGM;
# its findings are information, a hang or crash of the probe a failure.
if command -v dcgmi >/dev/null; then
  gpu_check "$nvml" "$n" "$out/state" 100000 dcgm "$(command -v dcgmi)" >"$out/dcgm.tsv" 2>&1
  cat "$out/dcgm.tsv"
  grep -q $'^gpu.dcgm\t' "$out/dcgm.tsv" && ok "gpu.dcgm ran: $(awk -F'\t' '$1 == "gpu.dcgm" {print $5 ": " $6; exit}' "$out/dcgm.tsv")" || bad "gpu.dcgm gave no result"
  grep -qE 'probe hung|probe crashed' "$out/dcgm.tsv" && bad "gpu.dcgm probe hung or crashed"
else
  echo "gpu.dcgm: skipped here (no dcgmi on this machine)" | tee "$out/dcgm.tsv"
fi

echo "outputs in $out"
[ $fails = 0 ] && echo "GPU CHECKS: OK" || echo "GPU CHECKS: FAILED ($fails)"
[ $fails = 0 ]
