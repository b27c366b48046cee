#!/bin/bash
# Quick-level node checks on an 8-GPU / 8-HCA fixture node (healthy-8, made by
# tests/fixtures/sysfs/make_fixtures.sh into BUILD_DIR/fixtures/sysfs; the fake NVML emulating 1, 2, 4 and 8 GPUs), side by side
# with what a site would otherwise run: an NHC-style shell check reading the
# same sysfs files (one `cat` per file, as LBNL NHC's check_hw_ib does) and,
# where present, `nvidia-smi -q` (absent on CPU hosts: printed as n/a).
#
#   bench/health_quick.sh [BUILD_DIR] [RUNS]     (default: build, 20)
#
# Prints the median wall time per configuration, the ratio to the shell
# check, and whether the time stays flat in GPU count (target: < 50 ms with
# the v2 checks: ib.counters, Xid classes, severity switches).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$src/build}")
runs=${2:-20}
fix=$build/fixtures/sysfs/healthy-8
prolog=$build/prolog/preflight-prolog
lib=$build/tests/fakes/libnvidia-ml.so.1
[ -x "$prolog" ] && [ -f "$lib" ] || { echo "build first: $prolog, $lib" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

shell_check() {  # what an NHC-style script does for the same HCAs, counters and Xids
  local p c
  for p in "$fix"/sys/class/infiniband/*/ports/*; do
    [ "$(cat "$p/state")" = "4: ACTIVE" ] || return 1
    [ "$(cat "$p/phys_state")" = "5: LinkUp" ] || return 1
    cat "$p/rate" "$p/link_layer" "$p/counters/link_downed" >/dev/null
    for c in symbol_error link_error_recovery port_rcv_errors port_rcv_remote_physical_errors \
      port_rcv_switch_relay_errors port_xmit_discards port_xmit_constraint_errors port_rcv_constraint_errors \
      local_link_integrity_errors excessive_buffer_overrun_errors VL15_dropped; do
      [ "$(cat "$p/counters/$c")" -le 10 ] || return 1  # absolute, as NHC-style scripts hold them
    done
  done
  ! grep -q 'NVRM: Xid' "$fix/dev/kmsg"
}

time_ms() {  # runs CMD..., prints median ms
  local i t0 t1
  for ((i = 0; i < runs; i++)); do
    t0=$(now); "$@" >/dev/null 2>&1 || true; t1=$(now)
    echo $(((t1 - t0) / 1000))
  done | median | awk '{printf "%.2f", $1 / 1000}'
}

shell_ms=$(time_ms shell_check)
smi_ms=n/a
command -v nvidia-smi >/dev/null && smi_ms=$(time_ms nvidia-smi -q)
echo "preflight quick level vs NHC-style shell check ($runs runs each, median wall ms)"
echo "host: $(nproc) CPUs; fixture: $fix; nvidia-smi -q: $smi_ms ms"
printf '%-6s %12s %14s %12s %10s %8s\n' GPUs preflight_ms internal_ms shell_ms ratio checks
worst=0
for g in 1 2 4 8; do
  echo "gpus $g" >"$tmp/faults.$g"
  args=(--node bench --level quick --set fsroot="$fix" --set state_dir="$tmp/state" --set nvml_library="$lib"
        --set nvml_fault_file="$tmp/faults.$g" --set gpu_count=$g --set ib_rate=400 --set set_drain_reason=no)
  "$prolog" "${args[@]}" >"$tmp/out.$g" || { cat "$tmp/out.$g"; echo "bench: prolog failed for $g GPUs" >&2; exit 1; }
  ms=$(time_ms "$prolog" "${args[@]}")
  internal=$(sed -n 's/.*(\([0-9.]*\) s)$/\1/p' "$tmp/out.$g" | awk '{printf "%.2f", $1 * 1000}')
  checks=$(sed -n 's/.*level quick, \([0-9]*\) passed.*/\1/p' "$tmp/out.$g")
  ratio=$(awk -v a="$ms" -v b="$shell_ms" 'BEGIN {printf "%.2f", a / b}')
  printf '%-6s %12s %14s %12s %10s %8s\n' "$g" "$ms" "$internal" "$shell_ms" "$ratio" "$checks"
  worst=$(awk -v a="$ms" -v w="$worst" 'BEGIN {print (a > w) ? a : w}')
done
awk -v w="$worst" 'BEGIN {printf "slowest quick run: %.2f ms (target < 50 ms): %s\n", w, (w < 50) ? "OK" : "OVER"}'
