#!/bin/bash
# On a GPU machine: preflight-nccl's NCCL backend against a plain NCCL
# all-reduce loop (tests/gpu/nccl_ref_allreduce.cc, not nccl-tests), at the
# same sizes, iterations and GPU count; prints both and their ratio.
#
#   tests/gpu/run_nccl_check.sh [BUILD_DIR]      (default: build)
#   env: NGPUS (default: all GPUs nvidia-smi lists), LEVELS (default
#   "quick full"), MAX_BYTES (cap on sizes, default 8G), CUDA_ROOT.
#
# Pass criteria (issue 5): at the largest size preflight's busbw (algbw with
# one GPU, where busbw is 0 by definition) is >= 0.97x the reference's, and
# the quick verdict takes under 10 s. Exit 0 when both hold.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "${1:-$here/../../build}")
cuda=${CUDA_ROOT:-/usr/local/cuda}
export LD_LIBRARY_PATH=$cuda/lib64:$cuda/lib:${LD_LIBRARY_PATH:-}
ngpus=${NGPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
[ "${ngpus:-0}" -ge 1 ] || { echo "run_nccl_check: no GPU found (nvidia-smi -L)"; exit 77; }
nccl=$build/collective/preflight-nccl
[ -x "$nccl" ] || { echo "run_nccl_check: $nccl not built"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ref=$work/nccl_ref_allreduce
g++ -std=c++17 -O2 -I"$cuda/include" "$here/nccl_ref_allreduce.cc" -L"$cuda/lib64" -lnccl -lcudart -o "$ref"

nvidia-smi -L | head -n "$ngpus"
echo "NCCL: $(ls "$cuda"/lib64/libnccl.so.* 2>/dev/null | head -1)"
status=0
for level in ${LEVELS:-quick full}; do
  case $level in quick) warmup=2; iters=5 ;; full) warmup=5; iters=20 ;; *) echo "bad level $level"; exit 2 ;; esac
  t0=$(date +%s.%N)
  rc=0
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((ngpus - 1))) "$nccl" --config /dev/null --intra-node --backend nccl \
    --ranks "$ngpus" --level "$level" --max-bytes "${MAX_BYTES:-8G}" --json >"$work/pf.json" || rc=$?
  t1=$(date +%s.%N)
  secs=$(python3 -c "print($t1 - $t0)")
  sizes=$(python3 -c 'import json,sys; print(" ".join(str(s["bytes"]) for s in json.load(open(sys.argv[1]))["sizes"]))' "$work/pf.json")
  [ -n "$sizes" ] || { echo "preflight-nccl produced no sizes (exit $rc):"; cat "$work/pf.json"; exit 1; }
  # shellcheck disable=SC2086
  "$ref" "$ngpus" "$warmup" "$iters" $sizes >"$work/ref.txt"
  python3 - "$work/pf.json" "$work/ref.txt" "$level" "$ngpus" "$secs" "$rc" <<'PY' || status=1
import json, sys
pf = json.load(open(sys.argv[1]))
ref = {int(b): (float(a), float(u)) for b, a, u in (l.split() for l in open(sys.argv[2]) if l.strip())}
level, n, secs, rc = sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
key = "busbw_Bps" if n > 1 else "algbw_Bps"
print(f"\n{level}: {n} GPU(s), backend {pf['backend']}, verdict {pf['verdict']} (exit {rc}) in {secs:.2f} s; "
      f"comparing {'busbw' if n > 1 else 'algbw (1 GPU: busbw is 0)'}")
print(f"{'bytes':>12} {'preflight GB/s':>15} {'reference GB/s':>15} {'ratio':>7} {'#wrong':>7}")
ratio = 0.0
for s in pf["sizes"]:
    r = ref[s["bytes"]][1 if n > 1 else 0]
    ratio = s[key] / r if r > 0 else 0.0
    print(f"{s['bytes']:>12} {s[key]/1e9:>15.2f} {r/1e9:>15.2f} {ratio:>7.3f} {s['wrong']:>7}")
ok = ratio >= 0.97 and all(s["wrong"] == 0 for s in pf["sizes"]) and (level != "quick" or secs < 10)
print(f"# {'OK' if ok else 'FAILED'}: ratio at the largest size {ratio:.3f} (>= 0.97)"
      + (f", quick verdict in {secs:.2f} s (< 10 s)" if level == "quick" else ""))
sys.exit(0 if ok else 1)
PY
done
exit $status
