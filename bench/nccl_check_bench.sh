#!/bin/bash
# Time to verdict of the collective check on the 3 emulated nodes (host
# backend), side by side with what a job pays without it:
#   1. sbatch -N3 job end to end, with --nccl-check=quick vs without;
#   2. srun --mpi=pmix preflight-nccl (quick, full) vs the bare launch
#      (srun --mpi=pmix ... true) at 2, 3 and 6 ranks (2 nodes x 1, 3 x 1,
#      3 x 2: the emulated nodes have 2 CPUs each).
# Sizes are capped (BENCH_MAX_BYTES, default 16M) so the host backend stays
# small on this machine. Prints medians of BENCH_REPS runs and ratios.
#
#   bench/nccl_check_bench.sh BUILD_DIR
set -euo pipefail
build=$(realpath "${1:?usage: nccl_check_bench.sh BUILD_DIR}")
src=$(cd "$(dirname "$0")/.." && pwd)
reps=${BENCH_REPS:-3}
cap=${BENCH_MAX_BYTES:-16M}
dir=$(mktemp -d /tmp/pf-nccl-bench.XXXXXX)
"$src/tests/harness/cluster.sh" start "$dir" "$build" >/dev/null
trap '"$src/tests/harness/cluster.sh" stop "$dir"; rm -rf "$dir"' EXIT
export SLURM_CONF=$dir/etc/slurm.conf
# The harness config already points nccl_binary at this build; widen its cap.
sed -i "s/^nccl_max_bytes = .*/nccl_max_bytes = $cap/; s/^nccl_timeout = .*/nccl_timeout = 120s/" "$dir/etc/preflight.conf"
nccl=$build/collective/preflight-nccl

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
timeit() {  # timeit CMD...: seconds, median of $reps
  local i t0
  for ((i = 0; i < reps; i++)); do
    t0=$(now)
    "$@" >/dev/null 2>&1 || echo "bench: failed: $*" >&2
    echo "$(now) - $t0" | awk '{print $1 - $3}'
  done | median
}
job() {  # job SBATCH-ARGS...: submit, wait until it left the queue
  local j
  j=$(sbatch --parsable -N3 -o /dev/null "$@" --wrap true)
  while [ -n "$(squeue -h -j "$j" 2>/dev/null)" ]; do sleep 0.05; done
}

echo "# preflight --nccl-check bench: 3 emulated nodes, host backend, sizes capped at $cap, median of $reps"
plain=$(timeit job)
quick=$(timeit job --nccl-check=quick)
printf '%-44s %8.2f s\n' "sbatch -N3 job, no check" "$plain"
printf '%-44s %8.2f s  (x%.2f, +%.2f s)\n' "sbatch -N3 job, --nccl-check=quick" "$quick" \
  "$(awk -v a="$quick" -v b="$plain" 'BEGIN{print a/b}')" "$(awk -v a="$quick" -v b="$plain" 'BEGIN{print a-b}')"
echo
printf '%-8s %12s %14s %14s %10s %10s\n' ranks "launch (s)" "quick (s)" "full (s)" "quick/x" "full/x"
for shape in 2x1 3x1 3x2; do
  nodes=${shape%x*} per=${shape#*x}
  n=$((nodes * per))
  base=$(timeit srun --mpi=pmix -N$nodes -n$n --ntasks-per-node=$per true)
  q=$(timeit srun --mpi=pmix -N$nodes -n$n --ntasks-per-node=$per "$nccl" --config "$dir/etc/preflight.conf" --level quick)
  f=$(timeit srun --mpi=pmix -N$nodes -n$n --ntasks-per-node=$per "$nccl" --config "$dir/etc/preflight.conf" --level full)
  printf '%-8s %12.2f %14.2f %14.2f %10.2f %10.2f\n' "$n" "$base" "$q" "$f" \
    "$(awk -v a="$q" -v b="$base" 'BEGIN{print a/b}')" "$(awk -v a="$f" -v b="$base" 'BEGIN{print a/b}')"
done
echo
echo "# one quick result at 6 ranks:"
srun --mpi=pmix -N3 -n6 --ntasks-per-node=2 "$nccl" --config "$dir/etc/preflight.conf" --level quick | sed 's/^/  /'
