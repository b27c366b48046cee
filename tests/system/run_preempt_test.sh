#!/bin/bash
# preflight-run on the real Slurm: a job sent the preemption signal
# checkpoints, requeues itself, resumes from the checkpoint after the
# restart and finishes with the right result and restart count. The
# application is the shell example from conf/examples (it follows the
# signal contract of preflight-run(1)).
. "$(dirname "$0")/lib.sh"

ck=$OUT/ckpt
cat >"$OUT/job.sh" <<JOB
#!/bin/bash
# exec: preflight-run becomes the batch shell, so "scancel --batch" and
# "sbatch --signal=B:..." reach it directly.
exec $B/wrapper/preflight-run --config $C/etc/preflight.conf --checkpoint-dir $ck --grace 60s \\
  -- $S/conf/examples/train.sh 200 0.05
JOB
# Slurm truncates the output file when the requeued job starts again unless
# it is opened for appending.
jid=$(sbatch --parsable -N1 --open-mode=append -o "$OUT/job-%j.out" "$OUT/job.sh")
out=$OUT/job-$jid.out
poll 60 "step 20 in the output" grep -qs '^step 20 ' "$out" || true
check "job is running and making progress" contains "$out" '^step 20 '
first_node=$(job_field "$jid" BatchHost)

# What Slurm does ahead of a preemption or time limit with --signal=B:USR2@T.
scancel --signal=USR2 --batch "$jid"
wait_restarted "$jid" 30 || true
check "job was requeued" test "$(job_field "$jid" Restarts)" = 1
check "the application checkpointed" contains "$out" "^checkpointed at step [0-9]+ to $ck/step-[0-9]+$"
check "preflight-run said it requeued the job" soon_contains "$out" "^preflight: run: requeued job $jid: preempted \(SIGUSR2\).*requeue 1 of 3"
at=$(sed -n 's/^checkpointed at step \([0-9]*\) .*/\1/p' "$out" | head -1)
check "the checkpoint is complete" test -f "$ck/step-$at/COMPLETE"
check "preemption excluded no node" test -z "$(job_field "$jid" ExcNodeList)"

release_requeued "$jid"
release_and_wait "$jid"
cat "$out"
check "restart resumed from the checkpoint" contains "$out" "^preflight: run: job $jid on n[123], restart 1: resuming from $ck/step-$at$"
check "application resumed at the checkpointed step" contains "$out" "^resumed from $ck/step-$at at step $at$"
check "right result and restart count" contains "$out" '^result sum=20100 steps=200 restart=1$'
check "job completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "exit code 0" test "$(job_field "$jid" ExitCode)" = 0:0
node=$(job_field "$jid" BatchHost)
f=$C/state/jobs/$jid/$node.run.json
check "result JSON records the finished run" contains "$f" '"kind": "done"'
check "result JSON records restart 1" contains "$f" '"restart_count": "1"'
check "requeue counter kept in the checkpoint dir" contains "$ck/.preflight-run.state" '^preempt_requeues=1$'
note "first run on $first_node, second on $node"
finish
