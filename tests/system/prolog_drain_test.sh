#!/bin/bash
# A failed prolog check drains exactly that node with a reason naming the
# check, device and figure; the batch job is requeued and runs elsewhere.
. "$(dirname "$0")/lib.sh"

# n1 is the node Slurm picks first for a 1-node job on an idle cluster.
scratch=$C/nodes/n1/scratch
mv "$scratch" "$scratch.away"
trap 'mv "$scratch.away" "$scratch" 2>/dev/null || true' EXIT

jid=$(sbatch --parsable -N1 --nccl-check=quick -o "$OUT/job-%j.out" --wrap 'echo ran on $SLURMD_NODENAME')
wait_restarted "$jid" || true
check "job was requeued after the prolog failure" test "$(job_field "$jid" Restarts)" -ge 1
# Slurm holds a requeued batch job back cred_expire + 1 s (EligibleTime:
# 121 s by default, 21 s in the harness); an admin would wait or release it. The test releases it.
release_and_wait "$jid"
cat "$OUT/job-$jid.out"
check "requeued job ran on a healthy node" contains "$OUT/job-$jid.out" '^ran on n[23]$'
check "requeued job completed" test "$(job_field "$jid" JobState)" = COMPLETED

# The reason names the check and the path; the detached helper sets it
# within a few seconds of Slurm's own "Prolog error".
wait_preflight_reason n1 || true
check_drained n1 "reason names preflight, the check and the fault" "^preflight\[node\] scratch .*: not usable: No such file or directory"
check "reason names the path" reason_names_path n1 scratch "$scratch"
wait_idle n2 n3
check "n2 is not drained" test "$(node_state n2)" = idle
check "n3 is not drained" test "$(node_state n3)" = idle
f=$C/state/jobs/$jid/n1.prolog.json
check "n1's result file records the failure" contains "$f" '"verdict": "fail"'
check "metrics textfile written for n1" contains "$C/metrics/preflight_n1_prolog.prom" 'preflight_check_ok\{.*check="scratch".*\} 0'

# The health check returns the node once the fault is gone, and only a node
# preflight drained: an admin's drain stays.
"$C/bin/healthcheck" --node n1 >"$OUT/hc1.out" 2>&1 || true
check "health check keeps n1 drained while the fault remains" grep -q drain <<<"$(node_state n1)"
mv "$scratch.away" "$scratch"
"$C/bin/healthcheck" --node n1 >"$OUT/hc2.out" 2>&1
cat "$OUT/hc2.out"
wait_idle n1
check "health check resumed n1 after the fix" test "$(node_state n1)" = idle
scontrol update nodename=n3 state=drain reason="admin: memory test"
"$C/bin/healthcheck" --node n3 >"$OUT/hc3.out" 2>&1
check "an admin's drain is left alone" grep -q drain <<<"$(node_state n3)"
check "the admin's reason is kept" test "$(node_reason n3)" = "admin: memory test"

# A drain finisher acts for its own failure only (drain_finisher.h). One
# still waiting from an earlier failure (a requeued job's epilog: Slurm
# ignores that failure and never drains) is started by hand, as the prolog
# starts it.
stale="preflight[node] stale.test: an earlier failure"
start_finisher() {
  setsid "$B/prolog/preflight-prolog" --config "$C/etc/preflight.conf" --finish-drain "$1" --reason "$stale" \
    </dev/null >>"$OUT/finisher.$1.log" 2>&1 &
}
finisher_waits() { ! finishers_gone "$1"; }
# 1. On a node an admin drained it leaves the admin's reason.
start_finisher n3
poll 30 "the finisher for n3 ended" finishers_gone n3 || true
check "a waiting finisher keeps an admin's reason" test "$(node_reason n3)" = "admin: memory test"
scontrol update nodename=n3 state=resume
# 2. A newer failure supersedes the finisher waiting on n1: n1 gets the
# newer failure's reason, and once both finishers ended a resume holds.
start_finisher n1
poll 10 "a finisher waits on n1" finisher_waits n1 || true
mv "$scratch" "$scratch.away"
jid=$(sbatch --parsable -N1 -w n1 --nccl-check=quick -o /dev/null --wrap true)
wait_preflight_reason n1 || true
wait_restarted "$jid" || true
poll 60 "job $jid requeued, its epilog done" requeue_done "$jid" || true
scancel "$jid"
wait_job "$jid" || true
poll 30 "n1's finishers ended" finishers_gone n1 || true
check_drained n1 "the newer failure's reason, not the stale finisher's" "^preflight\[node\] scratch .*: not usable"
mv "$scratch.away" "$scratch"
scontrol update nodename=n1 state=resume
poll 30 "n1 idle after the resume" node_is n1 idle || true
check "n1 stays resumed: no finisher left to drain it" finishers_gone n1
check "n1 is idle" test "$(node_state n1)" = idle
finish
