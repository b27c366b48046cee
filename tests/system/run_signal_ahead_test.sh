#!/bin/bash
# The documented setup end to end: `sbatch --signal=B:USR2@50 --time=1`
# makes slurmctld itself send SIGUSR2 to the batch shell (preflight-run,
# exec'ed) 50 s before the limit (it checks limits about every 30 s, so
# 10-40 s after the start); the job checkpoints, requeues while still
# RUNNING, resumes and finishes inside its next minute.
. "$(dirname "$0")/lib.sh"

ck=$OUT/ckpt
cat >"$OUT/job.sh" <<JOB
#!/bin/bash
#SBATCH --signal=B:USR2@50
# The first run is slow enough to still be running at the signal; the
# restart runs fast so it ends before its own signal.
pause=\$([ "\${SLURM_RESTART_COUNT:-0}" = 0 ] && echo 0.1 || echo 0)
exec $B/wrapper/preflight-run --config $C/etc/preflight.conf --checkpoint-dir $ck --grace 20s \\
  -- $S/conf/examples/train.sh 1000 "\$pause"
JOB
jid=$(sbatch --parsable -N1 --time=1 --open-mode=append -o "$OUT/job-%j.out" "$OUT/job.sh")
out=$OUT/job-$jid.out
wait_restarted "$jid" 700 || true
check "Slurm's own signal led to a requeue" test "$(job_field "$jid" Restarts)" = 1
check "preflight-run got SIGUSR2 and requeued" soon_contains "$out" "^preflight: run: requeued job $jid: preempted \(SIGUSR2\)"
release_requeued "$jid"
release_and_wait "$jid"
grep -v '^step ' "$out"
check "resumed from the checkpoint" contains "$out" "^resumed from $ck/step-[0-9]+ at step [0-9]+$"
check "right result and restart count" contains "$out" '^result sum=500500 steps=1000 restart=1$'
check "job completed" test "$(job_field "$jid" JobState)" = COMPLETED
finish
