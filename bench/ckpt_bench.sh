#!/bin/bash
# Checkpoint persistence (issue 30) against what a trainer does without it,
# side by side in one run on one throttled shared tier:
#   1. blocked: the time a save blocks the training process, written to
#      node-local disk (then persisted in the background) against written
#      straight to the shared tier. Goal <= 0.1x.
#   2. persist throughput: one persist round (ckpt_bench persist, exactly
#      PersistRound as the agent and the epilog run it) against the tier's
#      own write rate measured by dd (conv=fsync) in the same run. Goal >= 0.9x.
#   3. a CPU-bound training step's slowdown while a persist runs (ckpt_io_class
#      low: best-effort I/O 7, nice 10), against the same step alone. Goal
#      <= 5%. Then the same at ckpt_io_class=normal, for comparison.
# The shared tier is an ext4 loop device throttled with the kernel's blkio
# write limit (as tests/system/accept_test.sh's slow storage); local disk is
# a tmpfs (an NVMe's stand-in: faster than the tier by far, as on a node).
# Run as root. Timings are printed, never asserted.
#
#   bench/ckpt_bench.sh BUILD_DIR [BYTES] [RATE_BYTES_PER_S] [FILES]
# Defaults: 1 GiB checkpoint, 64 MiB/s tier, 8 files.
set -euo pipefail
build=$(realpath "${1:?usage: ckpt_bench.sh BUILD_DIR [BYTES] [RATE] [FILES]}")
bytes=${2:-$((1 << 30))}
rate=${3:-$((64 << 20))}
files=${4:-8}
bin=$build/bench/ckpt_bench
[ "$(id -u)" = 0 ] || { echo "ckpt_bench.sh: run as root (loop device, blkio, tmpfs)"; exit 77; }
blkio=/sys/fs/cgroup/blkio
[ -w $blkio/blkio.throttle.write_bps_device ] || blkio=/sys/fs/cgroup/unified
[ -w $blkio/blkio.throttle.write_bps_device ] || { echo "ckpt_bench.sh: no blkio throttle here"; exit 77; }

dir=$(mktemp -d /tmp/pf-ckpt-bench.XXXXXX)
loopdev="" mm=""
cleanup() {
  [ -n "$mm" ] && echo "$mm 0" >$blkio/blkio.throttle.write_bps_device 2>/dev/null
  umount "$dir/tier" 2>/dev/null || true
  [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
  umount "$dir/local" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/local" "$dir/tier"
img_mb=$((bytes * 3 / (1 << 20) + 256))
mount -t tmpfs -o size=$((bytes * 2 / (1 << 20) + 64))m pf-ckpt-local "$dir/local"
truncate -s ${img_mb}M "$dir/tier.img"
loopdev=$(losetup -f --show "$dir/tier.img")
mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$loopdev"
mount "$loopdev" "$dir/tier"
mm=$(printf '%d:%d' "0x$(stat -c %t "$loopdev")" "0x$(stat -c %T "$loopdev")")
echo "$mm $rate" >$blkio/blkio.throttle.write_bps_device
field() { sed -n "s/^$1 //p" <<<"$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }

echo "checkpoint: $bytes bytes in $files files; tier: ext4 on $loopdev, write throttled to $rate B/s; local: tmpfs"

# 1. The save: local, then straight to the tier.
out=$("$bin" write "$dir/local" step_1 "$bytes" "$files")
t_local=$(field blocked_seconds "$out")
out=$("$bin" write "$dir/tier" direct_1 "$bytes" "$files")
t_direct=$(field blocked_seconds "$out")
rm -rf "$dir/tier/direct_1"; sync -f "$dir/tier/."
echo "save blocked the trainer: local ${t_local}s, direct to the tier ${t_direct}s: ratio $(ratio "$t_local" "$t_direct") (goal <= 0.1)"

# 2. The tier's own rate (dd, fsynced), then one persist round.
t0=$(date +%s.%N)
dd if=/dev/zero of="$dir/tier/dd.bin" bs=4M count=$((bytes / (4 << 20))) conv=fsync status=none
t1=$(date +%s.%N)
dd_rate=$(awk -v b="$bytes" -v a="$t0" -v c="$t1" 'BEGIN { printf "%.0f", b / (c - a) }')
rm -f "$dir/tier/dd.bin"; sync -f "$dir/tier/."
out=$("$bin" persist "$dir/local" "$dir/tier" low)
p_rate=$(field persist_bytes_per_second "$out")
echo "persist: $(field persist_bytes "$out") bytes in $(field persist_seconds "$out")s = $p_rate B/s; dd on the tier $dd_rate B/s: ratio $(ratio "$p_rate" "$dd_rate") (goal >= 0.9)"

# 3. A CPU-bound step alone, then while a persist runs (a fresh tier copy).
rm -rf "$dir/tier/step_1"; sync -f "$dir/tier/."
spin_s=$(awk -v b="$bytes" -v r="$rate" 'BEGIN { s = b / r / 2; printf "%.1f", (s < 3 ? 3 : s) }')
alone=$(field spin_iterations_per_second "$("$bin" spin "$spin_s")")
"$bin" persist "$dir/local" "$dir/tier" low >"$dir/persist3.out" &
ppid=$!
busy=$(field spin_iterations_per_second "$("$bin" spin "$spin_s")")
wait $ppid
slow=$(awk -v a="$alone" -v b="$busy" 'BEGIN { printf "%.1f", (a > 0 ? (1 - b / a) * 100 : 0) }')
echo "CPU-bound step: ${alone} it/s alone, ${busy} it/s during a persist: ${slow}% slower (goal <= 5%; $(nproc) CPUs)"
# The same at ckpt_io_class=normal (no nice, normal I/O class): what low buys.
rm -rf "$dir/tier/step_1"; sync -f "$dir/tier/."
"$bin" persist "$dir/local" "$dir/tier" normal >"$dir/persist4.out" &
ppid=$!
busy_n=$(field spin_iterations_per_second "$("$bin" spin "$spin_s")")
wait $ppid
slow_n=$(awk -v a="$alone" -v b="$busy_n" 'BEGIN { printf "%.1f", (a > 0 ? (1 - b / a) * 100 : 0) }')
echo "CPU-bound step during a persist at ckpt_io_class=normal: ${busy_n} it/s: ${slow_n}% slower (for comparison)"
