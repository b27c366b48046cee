#!/bin/bash
# Issue 30's fault suite: a node's slurmd killed mid-persist, on the real
# cluster (3 nodes). A job under preflight-run persists slowly
# (ckpt_rate_cap); while a copy is under way, n2's slurmd is killed -9.
# What Slurm then does, and this test waits through:
#   - n2's job steps (slurmstepd) live on without their slurmd, so n2's
#     training task and agent go on for a while;
#   - slurmctld hears nothing from n2 for SlurmdTimeout (30 s in the test
#     cluster), sets it DOWN and requeues the job (NODE_FAIL, --requeue);
#     n1's and n3's epilogs persist their parts, which wait for n2's;
#   - n2's slurmd is started again: it registers, slurmctld ends the job's
#     leftover steps there, and n2's epilog persists n2's part (the node
#     returns to service: ReturnToService=2).
# Asserted afterwards: every checkpoint visible on the tier is durable, with
# three whole parts, the user's; the requeued run resumes from a durable
# checkpoint no older than the newest durable one before the kill and
# finishes with the right result, and at its end removes its copies that a
# newer commit overtook; no node is left drained or down; every node's
# local checkpoint folder is freed.
. "$(dirname "$0")/lib.sh"

tier=$OUT/tier
PAD=$((1 << 20))
mkdir -p "$tier"
chown "$TEST_USER" "$tier" "$OUT"
cat >"$OUT/job.sh" <<JOB
#!/bin/bash
export CHECKPOINT_EVERY=20 CHECKPOINT_PAD_BYTES=$PAD
exec $B/wrapper/preflight-run --config $C/etc/preflight.conf --set ckpt_interval=1s --set ckpt_rate_cap=256K \\
  --grace 60s --persist-to $tier -- srun --ntasks-per-node=1 $S/conf/examples/train.sh 1200 0.05
JOB
chmod 755 "$OUT/job.sh"
slurmd_n2() { pgrep -xf "slurmd -f $SLURM_CONF -N n2"; }
start_n2() { slurmd_n2 >/dev/null || slurmd -f "$SLURM_CONF" -N n2; }
jid=$(as_user sbatch --parsable -N3 --requeue --open-mode=append -o "$OUT/job-%j.out" "$OUT/job.sh")
out=$OUT/job-$jid.out
trap 'start_n2 || true; scancel "$jid" 2>/dev/null || true' EXIT

# wait_node_state NODE REGEX SECONDS: sinfo's state of NODE matches.
wait_node_state() { poll "$3" "$1's state matches $2" state_matches "$1" "$2"; }
state_matches() { [[ "$(node_state "$1")" =~ $2 ]]; }
any_durable() { [ -n "$(newest_step "$tier")" ]; }
local_folder_freed() { [ -z "$(compgen -G "$C/nodes/n2/ckpt/$jid")" ]; }

poll 180 "a durable checkpoint" any_durable || true
check "a checkpoint becomes durable before the fault" any_durable
check "a newer copy is under way (a partial folder on the tier)" wait_partial "$tier" "$jid"
before=$(newest_step "$tier")
pid=$(slurmd_n2) || fail "no slurmd for n2"
note "kill -9 n2's slurmd ($pid) with step-$before durable; tier: $(ls -A "$tier" | tr '\n' ' ')"
kill -9 "$pid"
check "slurmctld sets n2 down (no answer for SlurmdTimeout)" wait_node_state n2 '^down' 240
wait_restarted "$jid" 30 || true
check "the job was requeued (node failure)" test "$(job_field "$jid" Restarts)" = 1
note "before n2's slurmd returns: durable $(durable_on_tier "$tier" | tr '\n' ' '); tier: $(ls -A "$tier" | tr '\n' ' ')"
start_n2
check "n2 returns to service once its slurmd registers" wait_node_state n2 '^(idle|mixed|allocated|completing)' 240
# n2's leftover steps end and its epilog runs: its local folder is freed.
poll 300 "n2's local folder of job $jid freed" local_folder_freed || true
check "n2's epilog ran after its slurmd returned (its local folder freed)" local_folder_freed
after=$(newest_step "$tier")
note "after n2's epilog: durable $(durable_on_tier "$tier" | tr '\n' ' ')"
check "nothing older than step-$before is the newest durable one (step-$after)" test "$after" -ge "$before"

# Slurm's requeue hold (21 s here) may have passed while n2 was away: then the
# job has started again on its own, and release_requeued has nothing to
# release.
release_requeued "$jid" 300
release_and_wait "$jid" 400
cat "$out"
from=$(sed -n "s|^preflight: resume from \(step-[0-9]*\) on the shared tier .*|\1|p" "$out" | tail -1)
note "the requeued run resumed from ${from:-nothing}"
check "the requeued run resumed from a checkpoint on the shared tier" test -n "$from"
check "it is durable" test -f "$tier/$from/.preflight-durable"
check "it is no older than the newest durable one before the kill (step-$before)" test "${from#step-}" -ge "$before"
[ -n "$from" ] && check_resumed "$out" "$tier" "$from" 1200
check "job completed" test "$(job_field "$jid" JobState)" = COMPLETED

check "every checkpoint on the tier is durable, whole and the user's ($(ls "$tier" | wc -l) of them)" tier_whole "$tier" $PAD
note "hidden entries left on the tier: $(ls -A "$tier" | grep '^\.' | tr '\n' ' ')"
# The last run's copies that a newer commit overtook go at its end (no run
# of the job follows to clean them); only newer ones could stay.
last=$(newest_step "$tier")
overtaken() {
  local e n bad=0
  for e in $(ls -A "$tier" | grep "^\.partial-$jid\.1-step-"); do
    n=${e##*-}
    [ "$n" -lt "$last" ] && { note "$e: overtaken by step-$last, left"; bad=1; }
  done
  return $bad
}
check "the last run removed its copies overtaken by a newer commit" \
  contains "$out" "^preflight: run: removed [0-9]+ unfinished cop(y|ies) overtaken by a newer durable checkpoint from $tier$"
check "no copy of the last run older than step-$last is left on the tier" overtaken
check "the epilogs freed every local checkpoint folder" test -z "$(compgen -G "$C/nodes/n*/ckpt/$jid")"
check "no node is drained or down" test -z "$(sinfo -h -t drain,draining,down -o %N)"
finish
