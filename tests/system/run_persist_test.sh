#!/bin/bash
# preflight-run's two tiers on the real Slurm (issue 30): a three-node job
# whose ranks (conf/examples/train.sh, one task per node) each write their
# part of every periodic checkpoint to their node's local dir; the agent
# step (srun --overlap, one task per node) makes each checkpoint durable on
# the shared tier with all three parts while the job runs, and the job
# output says so. Then the job is preempted (scancel --signal=USR2 --batch),
# requeues itself, and the restart resumes from the tier's newest durable
# checkpoint (a multi-node job never resumes from one node's local view).
# The node-local dirs are given explicitly (--checkpoint-dir .../%n), so the
# test does not depend on the site's ckpt_dir or the prolog.
. "$(dirname "$0")/lib.sh"

tier=$OUT/tier
local=$OUT/local
cat >"$OUT/job.sh" <<JOB
#!/bin/bash
export CHECKPOINT_EVERY=20
exec $B/wrapper/preflight-run --config $C/etc/preflight.conf --set ckpt_interval=1s --grace 60s \\
  --checkpoint-dir '$local/%n' --persist-to $tier \\
  -- srun --ntasks-per-node=1 bash -c 'export PREFLIGHT_CKPT_LOCAL=$local/\$SLURMD_NODENAME; exec $S/conf/examples/train.sh 400 0.05'
JOB
jid=$(sbatch --parsable -N3 --open-mode=append -o "$OUT/job-%j.out" "$OUT/job.sh")
out=$OUT/job-$jid.out

# A checkpoint durable on the tier with every node's part, while the job runs.
# whole_durable: the name of a durable checkpoint with every rank's part.
whole_durable() {
  local d n
  for d in "$tier"/step-*/.preflight-durable; do
    [ -f "$d" ] || continue
    n=$(dirname "$d")
    if [ -f "$n/rank-0.state" ] && [ -f "$n/rank-1.state" ] && [ -f "$n/rank-2.state" ]; then basename "$n"; return 0; fi
  done
  return 1
}
poll 120 "a whole checkpoint durable on the tier" whole_durable >/dev/null || true
durable=$(whole_durable || true)
check "a checkpoint became durable on the tier with all three parts" test -n "$durable"
check "the job was still running then" test "$(job_field "$jid" JobState)" = RUNNING
check "the job output names it durable" soon_contains "$out" "^preflight: checkpoint $durable on n[123]: durable on $tier \([0-9]+ bytes in "
check "the durable copy holds the marker" test -f "$tier/$durable/COMPLETE"
check "the agent wrote the plan on each node" test -f "$local/n1/.preflight-persist.json" -a -f "$local/n2/.preflight-persist.json" -a -f "$local/n3/.preflight-persist.json"
check "the plan names the three nodes" test "$(grep -cE '"n[123]"' "$local/n2/.preflight-persist.json")" = 3

scancel --signal=USR2 --batch "$jid"
wait_restarted "$jid" 60 || true
check "job was requeued" test "$(job_field "$jid" Restarts)" = 1
check "preflight-run said it requeued the job" soon_contains "$out" "^preflight: run: requeued job $jid: preempted \(SIGUSR2\)"

release_requeued "$jid"
# The newest durable checkpoint once the first run is over (the agent may
# have made newer ones durable after the one seen above): the restart's
# choice, made before its own agent starts, must name it.
newest=$(ls "$tier" | grep '^step-' | sort -t- -k2 -n -r | while read -r n; do
  [ -f "$tier/$n/.preflight-durable" ] && echo "$n" && break; done)
note "newest durable checkpoint on the tier: $newest"
release_and_wait "$jid" 180
cat "$out"
at=${newest#step-}
check "the restart chose the tier's newest durable one" contains "$out" "^preflight: resume from $newest on the shared tier \($tier/$newest\)$"
check "restart resumed from the tier" contains "$out" "^preflight: run: job $jid on n[123], restart 1: resuming from $tier/$newest$"
check "every rank resumed at the checkpointed step" test "$(grep -c "^resumed from $tier/$newest at step $at$" "$out")" = 3
check "every rank has the right result" test "$(grep -c '^result sum=80200 steps=400 restart=1$' "$out")" = 3
check "job completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "exit code 0" test "$(job_field "$jid" ExitCode)" = 0:0
finish
