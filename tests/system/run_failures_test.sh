#!/bin/bash
# preflight-run on the real Slurm: a plain user error is not retried; a
# retryable NCCL failure requeues the job excluding the node the error names;
# a hung job is detected within its budget and stopped well before its time
# limit; a cancelled job stays cancelled although scancel's SIGTERM looks
# like a preemption.
. "$(dirname "$0")/lib.sh"
run="$B/wrapper/preflight-run --config $C/etc/preflight.conf"
app=$B/tests/pf_test_app

# 1. User error: exit 3, no requeue.
jid=$(sbatch --parsable -N1 -o "$OUT/user-%j.out" --wrap \
  "exec $run -- $app --steps 5 --step-ms 10 --fail-at 2 --code 3 --message \"KeyError: 'lr'\"")
wait_job "$jid" 60
out=$OUT/user-$jid.out
cat "$out"
check "user error: job failed with the command's exit code" test "$(job_field "$jid" ExitCode)" = 3:0
check "user error: job state FAILED" test "$(job_field "$jid" JobState)" = FAILED
check "user error: not requeued" test "$(job_field "$jid" Restarts)" = 0
check "user error: preflight-run says why" contains "$out" '^preflight: run: not requeued: command exited 3; its output matches no retryable failure class: not retried$'

# 2. Retryable failure: in a 2-node job, an NCCL timeout naming the peer
# node fails the first run; preflight-run requeues excluding that node (not
# its own); the restart runs on the other two nodes and succeeds.
cat >"$OUT/nccl.sh" <<SH
#!/bin/sh
if [ "\$PREFLIGHT_RESTART_COUNT" = 0 ]; then
  peer=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | grep -vx "\$SLURMD_NODENAME" | head -1)
  echo "\$peer" > $OUT/peer
  echo "\$peer:4242:4250 [0] NCCL WARN NET/Socket : peer \$peer Connection timed out" >&2
  exit 1
fi
echo "ran on \$SLURM_JOB_NODELIST restart \$PREFLIGHT_RESTART_COUNT"
SH
chmod +x "$OUT/nccl.sh"
jid=$(sbatch --parsable -N2 --open-mode=append -o "$OUT/nccl-%j.out" --wrap "exec $run -- $OUT/nccl.sh")
wait_restarted "$jid" 30 || true
out=$OUT/nccl-$jid.out
peer=$(cat "$OUT/peer")
note "nccl: first run named peer $peer"
check "nccl: job was requeued" test "$(job_field "$jid" Restarts)" = 1
check "nccl: preflight-run names the class and the excluded node" soon_contains "$out" \
  "^preflight: run: requeued job $jid: command exited 1 with a retryable nccl failure: requeue 1 of 2; excluding $peer$"
check "nccl: the peer is excluded from the requeued job" wait_excluded "$jid" "$peer"
release_requeued "$jid"
release_and_wait "$jid"
cat "$out"
check "nccl: restart succeeded" test "$(job_field "$jid" JobState)" = COMPLETED
check "nccl: restart ran without the peer" test -z "$(scontrol show hostnames "$(job_field "$jid" NodeList)" | grep -x "$peer")"
check "nccl: restart count 1 reached the command" contains "$out" 'restart 1$'

# 3. Hung job: no output for 2 s is a stall; with --stall-restart and no
# restarts left it is stopped and the job ends long before its 5-minute limit.
jid=$(sbatch --parsable -N1 --time=5 -o "$OUT/hang-%j.out" --wrap \
  "exec $run --stall-output 2s --stall-restart yes --max-failure-restarts 0 --kill-wait 2s -- $app --steps 1000 --step-ms 10 --hang-at 5")
wait_job "$jid" 90
out=$OUT/hang-$jid.out
cat "$out"
check "hang: stall alert in the job output" contains "$out" '^preflight: run: ALERT output: no output line for [0-9.]+s \(limit 2.0s\)$'
check "hang: job ended by preflight-run, not by the time limit" test "$(job_field "$jid" JobState)" = FAILED
check "hang: exit status from SIGTERM" test "$(job_field "$jid" ExitCode)" = 143:0
check "hang: not requeued (no restarts allowed)" test "$(job_field "$jid" Restarts)" = 0
node=$(job_field "$jid" BatchHost)
check "hang: result JSON records the stall" contains "$C/state/jobs/$jid/$node.run.json" '"kind": "stall:output"'
check "hang: Prometheus textfile records the stall" contains "$C/metrics/preflight_${node}_run.prom" \
  'preflight_check_ok\{.*check="run.stall",device="output",verdict="fail".*\} 0'

# 4. scancel: SIGTERM is a preemption signal, but the job is CANCELLED, so
# preflight-run asks for the checkpoint and does not requeue.
jid=$(sbatch --parsable -N1 -o "$OUT/cancel-%j.out" --wrap \
  "exec $run --checkpoint-dir $OUT/ck-cancel --grace 2s -- $app --steps 100000 --step-ms 20")
out=$OUT/cancel-$jid.out
poll 30 "step 3 in the output" grep -qs '^step 3 ' "$out" || true
scancel "$jid"
wait_job "$jid" 60
# The job can leave the queue before preflight-run has written its last line.
check "cancel: preflight-run did not requeue" soon_contains "$out" "^preflight: run: finished: job $jid is ending \(COMPLETING, e.g. scancel\): not requeued"
cat "$out"
check "cancel: job stays cancelled" test "$(job_field "$jid" JobState)" = CANCELLED
check "cancel: restart count 0" test "$(job_field "$jid" Restarts)" = 0
finish
