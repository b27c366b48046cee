#!/bin/bash
# Topology environment benchmark, side by side in one run:
#  1. `srun -O -n16 true` step launch inside one allocation with 4 GRES GPUs,
#     with preflight's environment on vs --preflight-env=off (same plugin
#     stack; off skips the topology work), alternating, on a private real
#     Slurm (tests/harness/cluster.sh; node topology = the AC922 fixture);
#  2. the figures slurmstepd recorded in the job's env record: the cache
#     read once per step (load_seconds, inherited by the forked tasks) and
#     the per-task work (env_seconds: the task's and the job's GPUs on the
#     node, env, setenv; the pairing is done once per step);
#  3. topo_env_bench: cache+env per task vs an hwloc load per task.
#   bench/topo_env.sh BUILD_DIR [ROUNDS]     (root; starts and stops its own cluster)
set -euo pipefail
build=$(realpath "${1:?usage: topo_env.sh BUILD_DIR [ROUNDS]}")
rounds=${2:-20}
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/preflight-bench-topo-XXXXXX)
trap '"$src/tests/harness/cluster.sh" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"$src/tests/harness/cluster.sh" start "$dir" "$build" >/dev/null
export SLURM_CONF=$dir/etc/slurm.conf

# One allocation, so only step launch is timed; rounds alternate on/off.
salloc -Q -N1 -w n1 --gres=gpu:4 bash -c '
  srun -O -n16 true; srun -O -n16 --preflight-env=off true   # warm-up
  for i in $(seq '"$rounds"'); do
    order="on off"; [ $((i % 2)) = 0 ] && order="off on"   # no order bias
    for mode in $order; do
      arg=; [ $mode = off ] && arg=--preflight-env=off
      t0=$(date +%s%N); srun -O -n16 $arg true; t1=$(date +%s%N)
      echo "$mode $(( (t1 - t0) / 1000 ))"
    done
  done
  echo "job $SLURM_JOB_ID"' >"$dir/times"
job=$(awk '/^job/ {print $2}' "$dir/times")
rec=$dir/state/jobs/$job/n1.env.jsonl

python3 - "$dir/times" "$rec" "$rounds" <<'PY'
import json, statistics, sys
times, rec, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = {"on": [], "off": []}
for line in open(times):
    f = line.split()
    if f[0] in t: t[f[0]].append(int(f[1]) / 1000.0)
on, off = statistics.median(t["on"]), statistics.median(t["off"])
q = lambda v: statistics.quantiles(v, n=4)
print(f"quartiles (ms): on {q(t['on'])[0]:.1f}..{q(t['on'])[2]:.1f} | off {q(t['off'])[0]:.1f}..{q(t['off'])[2]:.1f}")
print(f"srun -O -n16 true, {rounds} rounds each (ms): env on median {on:.1f} mean {statistics.mean(t['on']):.1f}"
      f" | env off median {off:.1f} mean {statistics.mean(t['off']):.1f} | on/off {on / off:.3f} ({(on / off - 1) * 100:+.1f}%)")
load, env = [], []
for line in open(rec):
    r = json.loads(line)
    if r["gpus"]:
        load.append(r["load_seconds"] * 1e6); env.append(r["env_seconds"] * 1e6)
print(f"in slurmstepd: cache read once per step median {statistics.median(load):.1f} us (max {max(load):.1f});"
      f" per task ({len(env)} tasks) GPU sets+env+setenv median {statistics.median(env):.1f} us (max {max(env):.1f})")
PY
# The hwloc fixtures; the load-error ones (3.0 XML, no I/O) say why they are skipped.
for f in "$src"/tests/fixtures/topology/hwloc-*.xml; do
  "$build/bench/topo_env_bench" "$f" 2000 || echo "  $(basename "$f"): not a loadable topology, skipped"
done
