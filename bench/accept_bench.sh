#!/bin/bash
# preflight accept at full length on the emulated cluster: starts a private
# cluster of N nodes (PREFLIGHT_NODES, default 8 where the harness supports
# it, else its default), runs `preflight accept --level full` in an
# allocation of every node against a tmpfs path and the build's disk, and
# prints the wall time of each stage (from report.json) and of the job.
# Not part of ctest (no timing assertions).
#
#   bench/accept_bench.sh BUILD_DIR [NODES]
# Environment: BENCH_MAX_BYTES (collective cap, default 64M on this CPU-only
# fabric), BENCH_STORAGE (extra --storage paths, space separated),
# BENCH_ARGS (more preflight accept options, e.g. --storage-bytes 256M where
# the full level's 2 GiB files per node do not fit the machine).
set -euo pipefail
build=$(realpath "${1:?usage: accept_bench.sh BUILD_DIR [NODES]}")
src=$(cd "$(dirname "$0")/.." && pwd)
export PREFLIGHT_NODES=${2:-${PREFLIGHT_NODES:-8}}
cap=${BENCH_MAX_BYTES:-64M}
dir=$(mktemp -d /tmp/pf-accept-bench.XXXXXX)
chmod 755 "$dir"
"$src/tests/harness/cluster.sh" start "$dir" "$build" >/dev/null
cleanup() {
  umount "$dir/tmpfs" 2>/dev/null || true
  "$src/tests/harness/cluster.sh" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
export SLURM_CONF=$dir/etc/slurm.conf
sed -i "s/^nccl_max_bytes = .*/nccl_max_bytes = $cap/; s/^nccl_timeout = .*/nccl_timeout = 600s/" "$dir/etc/preflight.conf"
nodes=$(sinfo -h -N -o %N | sort -u | wc -l)
mkdir -p "$dir/tmpfs" "$dir/disk" "$dir/out"
mount -t tmpfs -o size=4g,mode=1777 bench-tmpfs "$dir/tmpfs"
chmod 1777 "$dir/disk" "$dir/out"
storage="--storage $dir/tmpfs --storage $dir/disk"
for p in ${BENCH_STORAGE:-}; do storage+=" --storage $p"; done
t0=$(date +%s.%N)
jid=$(sbatch --parsable -N"$nodes" -o "$dir/accept.out" -D "$dir" \
  --wrap "$build/admin/preflight --config $dir/etc/preflight.conf accept --level full --out $dir/out --max-bytes $cap $storage ${BENCH_ARGS:-}")
while [ -n "$(squeue -h -j "$jid" 2>/dev/null)" ]; do sleep 0.5; done
t1=$(date +%s.%N)
cat "$dir/accept.out"
echo
echo "accept bench: $nodes emulated nodes, level full, collective cap $cap"
python3 - "$dir/out/report.json" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{'stage':12} {'verdict':8} {'wall s':>8} {'budget s':>9}")
for s in r["stages"]:
    print(f"{s['name']:12} {s['verdict']:8} {s['seconds']:8.1f} {s['budget_seconds']:9.0f}")
print(f"{'job':12} {r['verdict']:8} {float(sys.argv[2]):8.1f}")
for c in r["collective"]["curves"]:
    if c["nodes"] > 1:
        print(f"busbw {c['nodes']:2} nodes: {c['busbw_Bps']/1e6:9.2f} MB/s")
print("scaling:", r["collective"]["scaling"])
for s in r["storage"]:
    if s["scope"] == "one node" or s["node"] == "":
        print(f"{s['path']} ({s['scope']}): seq write {s['seq_write_Bps']/1e6:.1f} MB/s, read {s['seq_read_Bps']/1e6:.1f} MB/s,"
              f" rand 4K {s['rand_read_iops']:.0f} IOPS, ckpt {s['ckpt_write_Bps']/1e6:.1f} MB/s, create {s['create_per_s']:.0f}/s {s['error']}")
PY
