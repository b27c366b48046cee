#!/bin/bash
# On a GPU machine: preflight-nccl's NCCL backend against a plain NCCL
# all-reduce loop (tests/gpu/nccl_ref_allreduce.cc, not nccl-tests), at the
# same sizes, iterations and GPU count; prints both and their ratio. Both
# come from the GPU bundle (tests/gpu/bundle.sh); nothing is compiled here.
#
#   tests/gpu/run_nccl_check.sh [BUNDLE]      (default: gpu-bundle)
#   env: NGPUS (default: all GPUs nvidia-smi lists), LEVELS (default
#   "quick full"), MAX_BYTES (cap on sizes, default 8G), STEP_TIMEOUT (bound
#   on each run, default 120 s), PF_CONFIG (site config for preflight-nccl,
#   e.g. with cuda_runtime and nccl_library; default /dev/null), REF_CUDART
#   and REF_NCCL (the libraries the reference loads; default the sonames).
#
# Pass criteria (issue 5): at the largest size preflight's busbw (algbw with
# one GPU, where busbw is 0 by definition) is >= 0.97x the reference's, and
# the quick verdict takes under 10 s. Exit 0 when both hold.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(realpath -m "${1:-$here/../../gpu-bundle}")
ngpus=${NGPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
[ "${ngpus:-0}" -ge 1 ] || { echo "run_nccl_check: no GPU found (nvidia-smi -L)"; exit 77; }
nccl=$bundle/bin/preflight-nccl
ref=$bundle/bin/nccl-ref-allreduce
[ -x "$nccl" ] && [ -x "$ref" ] || { echo "run_nccl_check: $nccl or $ref missing (run tests/gpu/bundle.sh)"; exit 2; }
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
limit=${STEP_TIMEOUT:-120}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

nvidia-smi -L | head -n "$ngpus"
echo "NCCL: ${REF_NCCL:-libnccl.so.2 (loader path)}; config: ${PF_CONFIG:-/dev/null}"
status=0
for level in ${LEVELS:-quick full}; do
  case $level in quick) warmup=2; iters=5 ;; full) warmup=5; iters=20 ;; *) echo "bad level $level"; exit 2 ;; esac
  t0=$(date +%s.%N)
  rc=0
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((ngpus - 1))) timeout -k 5 "$limit" "$nccl" --config "${PF_CONFIG:-/dev/null}" --intra-node --backend nccl \
    --ranks "$ngpus" --level "$level" --max-bytes "${MAX_BYTES:-8G}" --json >"$work/pf.json" || rc=$?
  t1=$(date +%s.%N)
  secs=$(python3 -c "print($t1 - $t0)")
  sizes=$(python3 -c 'import json,sys; print(" ".join(str(s["bytes"]) for s in json.load(open(sys.argv[1]))["sizes"]))' "$work/pf.json" 2>/dev/null || true)
  [ -n "$sizes" ] || { echo "preflight-nccl produced no sizes (exit $rc$([ $rc = 124 ] && echo ": ran past ${limit} s")):"; cat "$work/pf.json"; status=1; continue; }
  # shellcheck disable=SC2086
  timeout -k 5 "$limit" "$ref" "$ngpus" "$warmup" "$iters" $sizes >"$work/ref.txt" ||
    { echo "reference all-reduce failed or ran past ${limit} s (exit $?)"; status=1; continue; }
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
