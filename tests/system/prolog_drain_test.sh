#!/bin/bash
# A failed prolog check drains exactly that node with a reason naming the
# check, device and figure; the batch job is requeued and runs elsewhere.
. "$(dirname "$0")/lib.sh"

scratch=$C/nodes/n2/scratch
mv "$scratch" "$scratch.away"
trap 'mv "$scratch.away" "$scratch" 2>/dev/null || true' EXIT

jid=$(sbatch --parsable -N1 --nccl-check=quick -w n2 -o "$OUT/job-%j.out" --wrap 'echo ran on $SLURMD_NODENAME')
# The job asked for n2 only; once requeued, let it go elsewhere.
for _ in $(seq 1 100); do [ "$(job_field "$jid" Restarts)" -ge 1 ] && break; sleep 0.1; done
check "job was requeued after the prolog failure" test "$(job_field "$jid" Restarts)" -ge 1
scontrol update jobid="$jid" ReqNodeList= ExcNodeList=n2
wait_job "$jid"
cat "$OUT/job-$jid.out"
check "requeued job ran on a healthy node" contains "$OUT/job-$jid.out" '^ran on n[13]$'
check "requeued job completed" test "$(job_field "$jid" JobState)" = COMPLETED

# The reason names the check and the path; the detached helper sets it
# within a few seconds of Slurm's own "Prolog error".
for _ in $(seq 1 100); do node_reason n2 | grep -q '^preflight:' && break; sleep 0.1; done
reason=$(node_reason n2)
note "n2 reason: $reason"
check "n2 is drained" grep -q drain <<<"$(node_state n2)"
check "reason names preflight, the check and the path" grep -q "^preflight: scratch $scratch: not usable: No such file or directory" <<<"$reason"
check "n1 is not drained" test "$(node_state n1)" = idle
check "n3 is not drained" test "$(node_state n3)" = idle
f=$C/state/jobs/$jid/n2.prolog.json
check "n2's result file records the failure" contains "$f" '"verdict": "fail"'
check "metrics textfile written for n2" contains "$C/metrics/preflight_n2_prolog.prom" 'preflight_check_ok\{.*check="scratch".*\} 0'

# The health check returns the node once the fault is gone, and only a node
# preflight drained: an admin's drain stays.
"$C/bin/healthcheck" --node n2 >"$OUT/hc1.out" 2>&1 || true
check "health check keeps n2 drained while the fault remains" grep -q drain <<<"$(node_state n2)"
mv "$scratch.away" "$scratch"
"$C/bin/healthcheck" --node n2 >"$OUT/hc2.out" 2>&1
cat "$OUT/hc2.out"
check "health check resumed n2 after the fix" test "$(node_state n2)" = idle
scontrol update nodename=n3 state=drain reason="admin: memory test"
"$C/bin/healthcheck" --node n3 >"$OUT/hc3.out" 2>&1
check "an admin's drain is left alone" grep -q drain <<<"$(node_state n3)"
check "the admin's reason is kept" test "$(node_reason n3)" = "admin: memory test"
finish
