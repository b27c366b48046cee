#!/bin/bash
# PrologFlags=RunInJob (Slurm 24.05+): the prolog runs inside the job's
# extern step, so a detached helper would be killed with the job and leave
# "Prolog error"; the prolog drains its node itself with preflight's reason.
# Restarts the cluster with RunInJob and back. Skipped (77) before 24.05.
. "$(dirname "$0")/lib.sh"

rel=$(slurm_release)
if [ "$rel" -lt 2405 ]; then
  echo "[$T] skip: PrologFlags=RunInJob needs Slurm 24.05 or later (this is $(slurmctld -V))"
  exit 77
fi
restart() { PREFLIGHT_PROLOG_FLAGS=$1 "$S/tests/harness/cluster.sh" start "$C" "$B" >"$OUT/start-$1.log" 2>&1; }
scratch=$C/nodes/n1/scratch
back() { mv "$scratch.away" "$scratch" 2>/dev/null || true; restart Alloc,DeferBatch; }
trap back EXIT
check "cluster restarted with PrologFlags=Alloc,DeferBatch,RunInJob" restart Alloc,DeferBatch,RunInJob
"$B/admin/preflight" --config "$C/etc/preflight.conf" config check >"$OUT/config-check.out" 2>&1 || true
cat "$OUT/config-check.out"
check "config check says what RunInJob changes" contains "$OUT/config-check.out" 'RunInJob runs the prolog inside the job.s extern step'

mv "$scratch" "$scratch.away"
jid=$(sbatch --parsable -N1 --nccl-check=quick -o "$OUT/job-%j.out" --wrap 'echo ran on $SLURMD_NODENAME')
wait_preflight_reason n1 || true
check_drained n1 "the reason is preflight's, not Slurm's 'Prolog error'" "^preflight\[node\] scratch .*: not usable: No such file or directory"
check "the reason names the path" reason_names_path n1 scratch "$scratch"
release_and_wait "$jid"
cat "$OUT/job-$jid.out"
check "the job ran elsewhere and completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "... not on n1" contains "$OUT/job-$jid.out" '^ran on n[23]$'
check "the job was requeued after the prolog failure" test "$(job_field "$jid" Restarts)" -ge 1
mv "$scratch.away" "$scratch"
finish
