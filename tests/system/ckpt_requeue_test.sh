#!/bin/bash
# Issue 30, end to end on the real cluster: a three-node job writes its
# checkpoints to the node-local folder the prolog made ($PREFLIGHT_CKPT_LOCAL,
# ckpt_dir), preflight-run's agent persists them to the shared tier in the
# background, slowly (ckpt_rate_cap), and the job is preempted hard
# (scontrol requeue: every step killed) while the agent is mid-persist. The
# epilogs then persist, as the job's user, the newest checkpoint complete on
# every node, within ckpt_epilog_budget, and free the local folders; the
# requeued job finds no local copy and resumes from that checkpoint on the
# shared tier, and its output says which one and why not the newer ones.
. "$(dirname "$0")/lib.sh"

tier=$OUT/tier
mkdir -p "$tier"
chown "$TEST_USER" "$tier" "$OUT"
cat >"$OUT/job.sh" <<JOB
#!/bin/bash
export CHECKPOINT_EVERY=20 CHECKPOINT_PAD_BYTES=$((2 << 20))
exec $B/wrapper/preflight-run --config $C/etc/preflight.conf --set ckpt_interval=1s --set ckpt_rate_cap=256K \\
  --grace 60s --persist-to $tier -- srun --ntasks-per-node=1 $S/conf/examples/train.sh 600 0.05
JOB
chmod 755 "$OUT/job.sh"
jid=$(as_user sbatch --parsable -N3 --requeue --open-mode=append -o "$OUT/job-%j.out" "$OUT/job.sh")
out=$OUT/job-$jid.out
# A failed check leaves no job behind for the next test.
trap 'scancel "$jid" 2>/dev/null || true' EXIT

# Mid-persist: the agent's first copy (2 MiB per node at 256 KiB/s) is
# under way in a hidden partial folder, and newer checkpoints are complete
# on local disk behind it.
persisting_behind() { has_partial "$tier" "$jid" && [ "$(ls -d "$C"/nodes/n1/ckpt/"$jid"/step-* 2>/dev/null | wc -l)" -ge 3 ]; }
poll 120 "a partial folder on the tier, 3 checkpoints on n1" persisting_behind || true
check "the agent is persisting (a partial folder on the tier)" has_partial "$tier" "$jid"
check "the job runs with its local folder from the prolog" contains "$out" "checkpointed at step [0-9]+ to $C/nodes/n[123]/ckpt/$jid/step-"
durable_before=$(durable_on_tier "$tier" | tail -1)
note "durable before the preemption: ${durable_before:-none}"

scontrol requeue "$jid"
wait_restarted "$jid" 60 || true
check "job was requeued" test "$(job_field "$jid" Restarts)" = 1
# Slurm holds the requeued job while its epilogs run (COMPLETING): out of
# it means every epilog is done.
poll 180 "job $jid out of COMPLETING" requeue_done "$jid" || true
check "the epilogs finished (the job left COMPLETING)" requeue_done "$jid"
# What the epilogs made durable: the newest checkpoint with all three parts.
newest=$(durable_on_tier "$tier" | tail -1)
note "newest durable after the epilogs: $newest"
newer_than_agent() { [ -n "$newest" ] && { [ -z "$durable_before" ] || [ "${newest#step-}" -gt "${durable_before#step-}" ]; }; }
check "the epilogs made a newer checkpoint durable than the agent had" newer_than_agent
for n in n1 n2 n3; do
  check "$n's epilog recorded $newest durable" contains "$C/state/jobs/$jid/$n.ckpt.json" "\"newest_durable\": \"$newest\""
done
check "all three parts are in it" test -f "$tier/$newest/rank-0.state" -a -f "$tier/$newest/rank-1.state" -a -f "$tier/$newest/rank-2.state"
check "every part's weights arrived whole" test "$(stat -c %s "$tier/$newest"/weights-rank-*.state.bin | sort -u)" = $((2 << 20))
check "no node was drained" test -z "$(sinfo -h -t drain,draining -o %N)"

release_requeued "$jid"
release_and_wait "$jid" 300
cat "$out"
check_resumed "$out" "$tier" "$newest" 600
check "job completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "the epilogs freed every local checkpoint folder" test -z "$(compgen -G "$C/nodes/n*/ckpt/$jid")"
unmarked() { local n; for n in $(ls "$tier"); do case $n in step-*) [ -f "$tier/$n/.preflight-durable" ] || echo "$n" ;; esac; done; }
check "every checkpoint visible on the tier is durable" test -z "$(unmarked)"
finish
