#!/bin/bash
# Checks run_gpu_checks.sh itself on a machine without a GPU, from the GPU
# bundle (tests/gpu/bundle.sh): the bundle's fake NVML stands in as the
# NVML library and a stub nvidia-smi reports the same two GPUs; the script
# must pass, and must fail when nvidia-smi disagrees.
#
#   tests/gpu/selftest.sh BUNDLE
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
bundle=$(realpath "${1:?usage: selftest.sh BUNDLE}")
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/bin"
stub() {
  cat >"$d/bin/nvidia-smi" <<STUB
#!/bin/bash
case "\$1" in
  -L) echo "GPU 0: NVIDIA H100 (UUID: GPU-0)"; echo "GPU 1: NVIDIA H100 (UUID: GPU-1)" ;;
  --query-gpu=*) echo "0, 00000000:18:00.0, 40, Enabled, Default, 16, 0, 0"; echo "1, $1, 36, Enabled, Default, 16, [N/A], [N/A]" ;;
  *) echo "stub nvidia-smi" ;;
esac
STUB
  chmod +x "$d/bin/nvidia-smi"
}
run() { PATH=$d/bin:$PATH NVML=$bundle/lib/fake/libnvidia-ml.so.1 CUDART=$d/no-such-libcudart.so.13 \
  PREFLIGHT_FAKE_NVML="gpus 2;ecc_unsupported 1" OUT=$d/out$1 bash "$src/tests/gpu/run_gpu_checks.sh" "$bundle" >"$d/log$1" 2>&1; }
stub "00000000:2A:00.0"
run 1 || { cat "$d/log1"; echo "selftest: script failed on agreeing figures"; exit 1; }
grep -q '^GPU CHECKS: OK$' "$d/log1"
grep -q '^bandwidth tier: skipped here: skipped: no CUDA runtime' "$d/log1" || { cat "$d/log1"; echo "selftest: no bandwidth skip line"; exit 1; }
grep -q '^gemm soak: skipped here: skipped: no CUDA runtime' "$d/log1" || { cat "$d/log1"; echo "selftest: no gemm skip line"; exit 1; }
# The GEMM soak through the bundle's fake CUDA runtime + cuBLAS
# (tests/fakes/fake_cuda_gemm.c, dlopen'ed as the real ones are; N = 64,
# 1 s): the script reads the check's real output, and a GPU computing a
# wrong result fails it.
gemm_run() { PATH=$d/bin:$PATH NVML=$bundle/lib/fake/libnvidia-ml.so.1 CUDART=$d/no-such-libcudart.so.13 \
  GEMM_CUDART=$bundle/lib/fake/libfake_cuda_gemm.so CUBLAS=$bundle/lib/fake/libfake_cuda_gemm.so GEMM_SIZE=64 GEMM_SECONDS=1 \
  PREFLIGHT_FAKE_NVML="gpus 2;ecc_unsupported 1" PREFLIGHT_FAKE_GEMM="gpus=2$1" OUT=$d/gemm$2 \
  bash "$src/tests/gpu/run_gpu_checks.sh" "$bundle" >"$d/loggemm$2" 2>&1; }
gemm_run "" 1 || { cat "$d/loggemm1"; echo "selftest: script failed on a healthy fake GEMM soak"; exit 1; }
grep -q '^ok: gemm soak measured all 2 GPU(s)$' "$d/loggemm1" || { cat "$d/loggemm1"; echo "selftest: no gemm figures"; exit 1; }
grep -q '^ok: no GEMM failed, hung or computed wrong$' "$d/loggemm1" || { cat "$d/loggemm1"; echo "selftest: gemm not ok"; exit 1; }
if gemm_run ";corrupt=1" 2; then cat "$d/loggemm2"; echo "selftest: script passed a GPU computing a wrong GEMM"; exit 1; fi
grep -q '^FAIL: a GEMM failed, hung or computed a wrong result$' "$d/loggemm2" || { cat "$d/loggemm2"; echo "selftest: no GEMM FAIL line"; exit 1; }
stub "00000000:2B:00.0"
if run 2; then cat "$d/log2"; echo "selftest: script passed although bus ids disagree"; exit 1; fi
grep -q '^FAIL: GPU1 0000:2b:00.0: no gpu.present pass' "$d/log2"
echo "selftest: ok"
