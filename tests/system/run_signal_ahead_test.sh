#!/bin/bash
# The documented setup end to end: `sbatch --signal=B:USR2@70 --time=2`
# makes slurmctld itself send SIGUSR2 to the batch shell (preflight-run,
# exec'ed) 70 s before the limit; the job checkpoints, requeues while
# still RUNNING, resumes and finishes well inside its next two minutes.
# slurmctld checks limits every 30 s (PERIODIC_TIMEOUT) and signals at the
# first check that finds the limit within warning + 30 s, so between 20
# and 50 s after the start. Not earlier: a signal sent before the batch
# script starts (prolog, batch launch) is lost for good (CI saw it with
# --time=1 and @50, which allowed a signal at the start itself).
. "$(dirname "$0")/lib.sh"

ck=$OUT/ckpt
cat >"$OUT/job.sh" <<JOB
#!/bin/bash
#SBATCH --signal=B:USR2@70
# The first run is slow enough to still be running at the signal; the
# restart runs fast so it ends before its own signal.
pause=\$([ "\${SLURM_RESTART_COUNT:-0}" = 0 ] && echo 0.1 || echo 0)
exec $B/wrapper/preflight-run --config $C/etc/preflight.conf --checkpoint-dir $ck --grace 20s \\
  -- $S/conf/examples/train.sh 1000 "\$pause"
JOB
jid=$(sbatch --parsable -N1 --time=2 --open-mode=append -o "$OUT/job-%j.out" "$OUT/job.sh")
out=$OUT/job-$jid.out
wait_restarted "$jid" 120 || true
check "Slurm's own signal led to a requeue" test "$(job_field "$jid" Restarts)" = 1
check "preflight-run got SIGUSR2 and requeued" soon_contains "$out" "^preflight: run: requeued job $jid: preempted \(SIGUSR2\)"
release_requeued "$jid"
release_and_wait "$jid"
grep -v '^step ' "$out"
check "resumed from the checkpoint" contains "$out" "^resumed from $ck/step-[0-9]+ at step [0-9]+$"
check "right result and restart count" contains "$out" '^result sum=500500 steps=1000 restart=1$'
check "job completed" test "$(job_field "$jid" JobState)" = COMPLETED
finish
