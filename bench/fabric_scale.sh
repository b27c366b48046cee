#!/bin/bash
# Scale figures on the emulated fabric (issue 20; preflight(7) SCALE): for
# N = 3, 8 and 16 emulated nodes (tests/harness/cluster.sh, PREFLIGHT_NODES),
# side by side in one run:
#   - the wall time --nccl-check=quick adds to an N-node job (submit to
#     leaving the queue, with vs without; medians of BENCH_REPS), beside
#     its floor measured in the same run: one `srun -N N true` inside a
#     job, plus the check's own bytes at the rates it measured (issue 33:
#     the goal is "check adds" at most 1.5x its floor);
#   - the prolog's wall time (the slowest node's prolog record, seconds);
#   - slurmctld RPCs per job by type (sdiag -r before, sdiag after), with
#     and without the check, and the difference preflight causes;
#   - the stage fan-out (stage_peers = yes) against every node reading the
#     source alone (stage_peers = no), with every node's fabric link shaped
#     to the same rate (BENCH_RATE, default 400mbit): source bytes read and
#     the job's wall time.
# Needs root (slurmd, tc). Not a test: no assertions, figures only.
#
#   bench/fabric_scale.sh BUILD_DIR [N...]
set -euo pipefail
build=$(realpath "${1:?usage: fabric_scale.sh BUILD_DIR [N...]}")
shift
if [ $# -gt 0 ]; then sizes=("$@"); else sizes=(3 8 16); fi
src=$(cd "$(dirname "$0")/.." && pwd)
CL=$src/tests/harness/cluster.sh
reps=${BENCH_REPS:-3}
rate=${BENCH_RATE:-400mbit}
ds_mb=${BENCH_DATASET_MB:-32}

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# job N ARGS...: submit an N-node job, wait until it left the queue; prints
# the job id, then the seconds it took.
job() {
  local n=$1 j t0
  shift
  t0=$(now)
  j=$(sbatch --parsable -N"$n" -o /dev/null "$@")
  while [ -n "$(squeue -h -j "$j" 2>/dev/null)" ]; do sleep 0.05; done
  echo "$j $(echo "$(now) - $t0" | awk '{print $1 - $3}')"
}
# quiet_job N ARGS...: like job, but waits by watching the nodes' epilog
# records in state_dir (files, no RPC), so sdiag counts only what the job
# and preflight cause, not this script's polling.
quiet_job() {
  local n=$1 j k
  shift
  j=$(sbatch --parsable -N"$n" -o /dev/null "$@")
  for _ in $(seq 1 1200); do
    k=$(ls "$dir/state/jobs/$j/" 2>/dev/null | grep -c 'epilog.json$' || true)
    [ "$k" -ge "$n" ] && break
    sleep 0.1
  done
  sleep 2  # the epilogs' completion messages reach slurmctld
}
# srun_secs N: the seconds one `srun -N N true` takes inside an N-node job.
srun_secs() {
  local j
  j=$(sbatch --parsable -N"$1" -o "$dir/srun-%j.out" --wrap "s=\$(date +%s.%N); srun -N$1 true; echo \$s \$(date +%s.%N)")
  while [ -n "$(squeue -h -j "$j" 2>/dev/null)" ]; do sleep 0.05; done
  awk '/^[0-9.]+ [0-9.]+$/ {print $2 - $1}' "$dir/srun-$j.out"  # the job's output also holds the prolog's line
}
# data_secs N JOB: the check's own bytes at the rates it measured (its
# nccl.json): quick with nccl_max_bytes = 1M sweeps 256 KiB and 1 MiB, 2
# warm-up + 5 timed operations each; the all-reduce moves 2(N-1)/N of
# that per rank at its busbw, each ring-pair round 1x at the pairs' median
# busbw, in 2 rounds for even N and 3 for odd.
data_secs() {
  local f=$dir/state/jobs/$2/nccl.json
  [ -s "$f" ] || { echo 0; return; }
  python3 - "$f" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
b = 7 * (256 * 1024 + 1024 * 1024)
t = b * 2 * (n - 1) / n / r["busbw_Bps"] if r.get("busbw_Bps") else 0
pairs = sorted(p["busbw_Bps"] for p in r.get("pairs", []) if p.get("busbw_Bps"))
if pairs: t += (2 if n % 2 == 0 else 3) * b / pairs[len(pairs) // 2]
print(t)
PY
}
# rpcs: "TYPE COUNT" per RPC type since the last sdiag -r.
rpcs() {
  sdiag 2>/dev/null | awk '/Remote Procedure Call statistics by message type/ {on = 1; next}
    /Remote Procedure Call statistics by user/ {on = 0}
    on && /count:/ {t = $1; c = $0; sub(/.*count:/, "", c); sub(/ .*/, "", c); print t, c}'
}

printf '%-4s %-26s %s\n' N figure value
for n in "${sizes[@]}"; do
  dir=$(mktemp -d /tmp/pf-fabric-bench.XXXXXX)
  PREFLIGHT_NODES=$n "$CL" start "$dir" "$build" >/dev/null
  trap '"$CL" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
  export SLURM_CONF=$dir/etc/slurm.conf
  conf=$dir/etc/preflight.conf
  sed -i 's/^nccl_timeout = .*/nccl_timeout = 120s/' "$conf"

  # 1. wall time the check adds, and the prolog's
  plain=() checked=() prolog=() floor=()
  for ((i = 0; i < reps; i++)); do
    read -r _ t < <(job "$n" --wrap true); plain+=("$t")
    read -r j t < <(job "$n" --nccl-check=quick --wrap true); checked+=("$t")
    floor+=("$(echo "$(srun_secs "$n") $(data_secs "$n" "$j")" | awk '{print $1 + $2}')")
    prolog+=("$(cat "$dir"/state/jobs/"$j"/n*.prolog.json 2>/dev/null | grep -o '"seconds": *[0-9.e-]*' |
      awk '{print $2}' | sort -g | tail -1)")
  done
  p=$(printf '%s\n' "${plain[@]}" | median)
  c=$(printf '%s\n' "${checked[@]}" | median)
  pr=$(printf '%s\n' "${prolog[@]}" | median)
  printf '%-4s %-26s %.2f s\n' "$n" "job, plain" "$p"
  printf '%-4s %-26s %.2f s\n' "$n" "job, --nccl-check=quick" "$c"
  f=$(printf '%s\n' "${floor[@]}" | median)
  printf '%-4s %-26s %.2f s\n' "$n" "check adds" "$(echo "$c - $p" | awk '{print $1 - $3}')"
  printf '%-4s %-26s %.2f s (srun -N%s true + the check'"'"'s bytes at its rates)\n' "$n" "its floor" "$f" "$n"
  printf '%-4s %-26s %.2fx (goal <= 1.5x)\n' "$n" "check adds / floor" "$(echo "$c $p $f" | awk '{print ($1 - $2) / $3}')"
  printf '%-4s %-26s %.3f s (slowest node; MessageTimeout 10 s)\n' "$n" "prolog wall" "$pr"

  # 2. slurmctld RPCs per job, by type
  sdiag -r >/dev/null
  quiet_job "$n" --wrap true
  rpcs | sort >"$dir/rpc.plain"
  sdiag -r >/dev/null
  quiet_job "$n" --nccl-check=quick --wrap true
  rpcs | sort >"$dir/rpc.check"
  join -a1 -a2 -e0 -o 0,1.2,2.2 "$dir/rpc.plain" "$dir/rpc.check" |
    awk -v n="$n" '{d = $3 - $2; if (d != 0) printf "%-4s rpc %-38s %3d -> %3d (+%d)\n", n, $1, $2, $3, d; tp += $2; tc += $3}
      END {printf "%-4s rpc %-38s %3d -> %3d (+%d)\n", n, "TOTAL", tp, tc, tc - tp}'

  # 3. stage fan-out vs every node alone, every fabric link shaped alike
  ds=$dir/ds/data
  mkdir -p "$ds"
  head -c $((ds_mb << 20)) /dev/urandom >"$ds/big"
  for i in $(seq 1 64); do head -c 65536 /dev/urandom >"$ds/f$i"; done
  chmod -R a+rX "$dir/ds"
  for k in $(seq 1 "$n"); do "$CL" shape "$dir" "n$k" "$rate" >/dev/null; done
  for mode in yes no; do
    sed -i "s/^stage_peers = .*/stage_peers = $mode/" "$conf"
    read -r j t < <(job "$n" --stage="$ds" --wrap true)
    read_b=$(cat "$dir"/state/jobs/"$j"/n*.stage.json 2>/dev/null | grep -o '"source_bytes": [0-9]*' | awk '{s += $2} END {print s + 0}')
    label=$([ $mode = yes ] && echo "stage fan-out" || echo "stage, each node alone")
    printf '%-4s %-26s %.2f s, source read %d MiB (%.1fx the dataset)\n' "$n" "$label" "$t" $((read_b >> 20)) \
      "$(echo "$read_b $ds_mb" | awk '{print $1 / ($2 * 1048576 + 64 * 65536)}')"
    for k in $(seq 1 "$n"); do for c in $(ls "$dir/nodes/n$k/stage/cache" 2>/dev/null); do
      "$build/admin/preflight" --config "$conf" cache rm "$c" node="n$k" >/dev/null 2>&1 || true; done; done
  done
  "$CL" unshape "$dir"
  "$CL" stop "$dir" >/dev/null
  rm -rf "$dir"
  trap - EXIT
done
echo "# shaped rate per node for the stage rows: $rate; the source is this host's disk (not shaped): the"
echo "# fan-out's figure that matters for a shared file system is the source bytes, 1x vs Nx."
