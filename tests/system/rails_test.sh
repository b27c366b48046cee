#!/bin/bash
# Allocation-wide rail consistency on the 3 emulated nodes: the prolog
# records each node's rails; an --nccl-check job's collective step carries
# them to the batch step, which compares them and names a node whose rails differ (a rate
# here) in the job's output; `preflight topo --compare` does it for an
# admin; a compute rail that is down drains its node from its own prolog
# (topo.rails), with the NIC and the GPU it serves in the reason.
. "$(dirname "$0")/lib.sh"

conf=$C/etc/preflight.conf
cp "$conf" "$OUT/preflight.conf.orig"
port=$C/nodes/n3/root/sys/class/infiniband/mlx5_3/ports/1
cp "$port/rate" "$OUT/rate.orig"; cp "$port/state" "$OUT/state.orig"
restore() {
  cp "$OUT/preflight.conf.orig" "$conf"
  cp "$OUT/rate.orig" "$port/rate"; cp "$OUT/state.orig" "$port/state"
}
trap restore EXIT
# Only the rails logic decides here: the ib checks (which would catch both
# faults on their own with these HCAs pinned) look away.
sed -i -e 's/^ib_rate = .*/ib_rate = 0/' -e 's/^ib_hcas = .*/ib_hcas =/' "$conf"

# step_creates: REQUEST_JOB_STEP_CREATE RPCs slurmctld served since the
# last `sdiag -r` (0 when none).
step_creates() { sdiag | awk '/REQUEST_JOB_STEP_CREATE / {sub(/.*count:/, ""); print $1 + 0; f = 1} END {if (!f) print 0}'; }

# --- 1. same rails everywhere; a passing check is one job step (issue 33):
# the rails and versions records travel in the collective step.
sdiag -r >/dev/null
jid=$(sbatch --parsable -N3 --nccl-check -o "$OUT/job-%j.out" --wrap 'echo script ran')
wait_job "$jid"
cat "$OUT/job-$jid.out"
steps=$(step_creates)
check "same: the check was one job step (sdiag: $steps REQUEST_JOB_STEP_CREATE)" test "$steps" = 1
check "same: job completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "same: the output says the rails match" contains "$OUT/job-$jid.out" \
  '^preflight: rails: same rails on all 3 node\(s\): 4 rails \(4 x InfiniBand 100 Gb/sec \(4X EDR\)\), GPU map 0:mlx5_0,1:mlx5_1,2:mlx5_2,3:mlx5_3$'
for n in n1 n2 n3; do check "same: $n recorded its rails" test -s "$C/state/nodes/$n.rails.json"; done

# --- 2. n3's mlx5_3 at another rate: named, not drained
echo "56 Gb/sec (4X FDR)" >"$port/rate"
jid=$(sbatch --parsable -N3 --nccl-check -o "$OUT/job-%j.out" --wrap 'echo script ran')
wait_job "$jid"
cat "$OUT/job-$jid.out"
check "rate: job completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "rate: the odd node, the rail and both figures are named" contains "$OUT/job-$jid.out" \
  '^preflight: rails: n3 differs from the other 2 node\(s\): mlx5_3 rate 56 Gb/sec \(4X FDR\) \(others: 100 Gb/sec \(4X EDR\)\)$'
check "rate: n3 not drained" test -z "$(node_reason n3)"
rc=0; "$B/admin/preflight" topo --compare "$C"/state/nodes/n{1,2,3}.rails.json >"$OUT/compare.out" 2>&1 || rc=$?
cat "$OUT/compare.out"
check "topo --compare: exit 1 when the nodes differ" test $rc = 1
check "topo --compare: names n3" contains "$OUT/compare.out" '^n3 differs from the other 2 node\(s\): mlx5_3 rate 56'
cp "$OUT/rate.orig" "$port/rate"

# --- 3. n3's mlx5_3 down: n3's own prolog drains it, the job runs elsewhere
echo "1: DOWN" >"$port/state"
jid=$(sbatch --parsable -N1 -w n3 --nccl-check -o "$OUT/job-%j.out" --wrap 'echo ran on $SLURMD_NODENAME')
wait_preflight_reason n3 || true
check_drained n3 "down: the reason names the check, the rail, its port and the GPU it serves" \
  "topo.rails mlx5_3: compute rail down (port 1 DOWN), the rail of GPU3"
# The port back first, then n3 resumed only once the failed launch's epilog
# is done (drained, no longer draining): an epilog that read the port DOWN
# and ended after the resume drained n3 again, and the next test found it
# drained with this reason.
cp "$OUT/state.orig" "$port/state"
scancel "$jid" 2>/dev/null || true
wait_job "$jid" || true
poll 60 "n3's epilog done (drained, not draining)" node_is n3 drained || true
# The prolog and the epilog hand the reason to a detached --finish-drain
# (drain_finisher.h); one Slurm never drained for drains n3 itself.
poll 75 "n3's drain finishers done" finishers_gone n3 || true
scontrol update nodename=n3 state=resume
poll 30 "n3 idle after the resume" node_is n3 idle || fail "n3 is $(node_state n3) after the resume: $(node_reason n3)"
wait_idle n1 n2 n3
finish
