#!/bin/bash
# Issue 30's fault suite, the copier, on the real cluster (3 nodes): a job
# under preflight-run writes checkpoints to the prolog's local folders and
# the agent step (srun --overlap, one task per node) persists them slowly
# (ckpt_rate_cap). Faults while it runs:
#   1. kill -9 of one node's agent mid-copy (a hidden partial folder on the tier);
#   2. kill -9 of another node's agent after the restart, mid-copy again;
#   3. kill -9 of the third node's right after a commit;
#      each time the whole agent step is restarted (its line in the output),
#      and after the third restart it still makes newer checkpoints durable;
#   4. one node's agent stopped (SIGSTOP) so the others' parts wait for it,
#      then the job preempted hard (scontrol requeue): the epilogs persist
#      the newest checkpoint complete on every node, the stopped node's part
#      included, and the restart resumes from it.
# After all of it: every checkpoint visible on the tier is durable with all
# three parts whole, the user's; no node drained; the result is right.
. "$(dirname "$0")/lib.sh"

tier=$OUT/tier
PAD=$((1 << 20))
mkdir -p "$tier"
chown "$TEST_USER" "$tier" "$OUT"
cat >"$OUT/job.sh" <<JOB
#!/bin/bash
export CHECKPOINT_EVERY=20 CHECKPOINT_PAD_BYTES=$PAD
exec $B/wrapper/preflight-run --config $C/etc/preflight.conf --set ckpt_interval=1s --set ckpt_rate_cap=256K \\
  --grace 60s --persist-to $tier -- srun --ntasks-per-node=1 $S/conf/examples/train.sh 1500 0.05
JOB
chmod 755 "$OUT/job.sh"
jid=$(as_user sbatch --parsable -N3 --requeue --open-mode=append -o "$OUT/job-%j.out" "$OUT/job.sh")
out=$OUT/job-$jid.out
trap 'kill -CONT $(pgrep -f -- "--persist-agent") 2>/dev/null || true; scancel "$jid" 2>/dev/null || true' EXIT

# agent NODE: the pid of NODE's agent task (a child of that node's slurmstepd).
agent() {
  local p pp
  for p in $(pgrep -f -- "preflight-run --persist-agent"); do
    pp=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')
    [ -n "$pp" ] && [ "$(ps -o comm= -p "$pp" 2>/dev/null)" = slurmstepd ] || continue
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURMD_NODENAME=$1" && { echo "$p"; return 0; }
  done
  return 1
}
# wait_agent NODE [SECONDS]: its pid once the agent step runs there.
wait_agent() {
  poll "${2:-120}" "an agent task on $1" agent "$1" >/dev/null && agent "$1"
}
# wait_durable_after STEP: a checkpoint newer than STEP becomes durable.
wait_durable_after() { poll 180 "a checkpoint newer than step-${1:-0} durable" durable_after "${1:-0}"; }
durable_after() { local s; s=$(newest_step "$tier"); [ -n "$s" ] && [ "$s" -gt "$1" ]; }
# kill_agent NODE K: kill -9 NODE's agent, then wait for the K-th restart line.
kill_agent() {
  local p
  p=$(wait_agent "$1") || { fail "no agent task on $1"; return; }
  note "kill -9 $1's agent ($p); tier: $(ls -A "$tier" | tr '\n' ' ')"
  kill -9 "$p"
  check "$1's agent killed: the step restarted ($2 of 3)" \
    soon_contains "$out" "^preflight: run: node agent ended \(.*\); restarted \($2 of 3\)$" 90
}

check "a copy starts (a partial folder on the tier)" wait_partial "$tier" "$jid"
kill_agent n2 1
check "after the restart a copy is under way again" wait_partial "$tier" "$jid"
kill_agent n1 2
before=$(newest_step "$tier")
check "after the second restart a checkpoint becomes durable" wait_durable_after "${before:-0}"
kill_agent n3 3
before=$(newest_step "$tier")
check "after the third restart a newer checkpoint becomes durable (step-$before before)" wait_durable_after "$before"
check "no fourth restart was needed" test -z "$(grep 'not restarted again' "$out")"

# 4. n3's agent stopped: the others' parts of the next checkpoint wait for it.
p3=$(wait_agent n3) || fail "no agent task on n3"
kill -STOP "$p3"
stopped_at=$(newest_step "$tier")
note "n3's agent stopped at step-$stopped_at durable"
check "a newer checkpoint waits for n3's part" \
  soon_contains "$out" "^preflight: checkpoint step-[0-9]+ on n[12]: waiting for parts of (n[12],)?n3" 120
check "nothing newer became durable without n3" test "$(newest_step "$tier")" = "$stopped_at"
scontrol requeue "$jid"
wait_restarted "$jid" 60 || true
check "the job was requeued" test "$(job_field "$jid" Restarts)" = 1
poll 180 "job $jid out of COMPLETING (its epilogs done)" requeue_done "$jid" || true
newest=$(durable_on_tier "$tier" | tail -1)
note "newest durable after the epilogs: $newest (step-$stopped_at when n3 stopped)"
check "the epilogs made a newer checkpoint durable, n3's part included" test "${newest#step-}" -gt "$stopped_at"
check "no node was drained" test -z "$(sinfo -h -t drain,draining,down -o %N)"

release_requeued "$jid"
release_and_wait "$jid" 400
cat "$out"
check_resumed "$out" "$tier" "$newest" 1500
check "job completed" test "$(job_field "$jid" JobState)" = COMPLETED

# Every checkpoint visible on the tier: durable, three parts, whole, the user's.
check "every checkpoint on the tier is durable, whole and the user's ($(ls "$tier" | wc -l) of them)" tier_whole "$tier" $PAD
note "hidden entries left on the tier: $(ls -A "$tier" | grep '^\.' | tr '\n' ' ')"
# The killed copies and the preemption left partial folders of run $jid.0;
# the restart removed them (committing any that was complete) before resuming.
check "the restart said it removed the first run's unfinished copies" \
  contains "$out" "^preflight: run: removed [0-9]+ unfinished cop(y|ies) of ended runs from $tier \(\.partial-$jid\.0-"
check "no partial folder of the first run is left on the tier" test -z "$(ls -A "$tier" | grep "^\.partial-$jid\.0-")"
check "the epilogs freed every local checkpoint folder" test -z "$(compgen -G "$C/nodes/n*/ckpt/$jid")"

# 5. What a job's last run leaves (no run of its own follows): a later job
# of the chain cleans it once slurmctld, asked as the user, says the job
# ended; a running job's partial folder stays.
live=$(as_user sbatch --parsable -N1 -o /dev/null --wrap "sleep 600")
trap 'scancel "$live" 2>/dev/null || true' EXIT
poll 60 "job $live running" job_is "$live" R || true
check "a second job of the user runs" test "$(squeue -h -j "$live" -o %t)" = R
as_user mkdir -p "$tier/.partial-$jid.1-step-9999/n1" "$tier/.partial-$live.0-step-9999/n1"
clean=$(as_user sbatch --parsable -N1 -o "$OUT/clean-%j.out" --wrap \
  "$B/wrapper/preflight-run --config $C/etc/preflight.conf --persist-to $tier -- true")
wait_job "$clean" 120
cat "$OUT/clean-$clean.out"
check "the next job removed the ended job's unfinished copy, asking slurmctld as the user" \
  contains "$OUT/clean-$clean.out" "^preflight: run: removed [0-9]+ unfinished cop(y|ies) of ended runs from $tier \(.*\.partial-$jid\.1-step-9999"
check "no partial folder of the ended job is left" test -z "$(ls -A "$tier" | grep "^\.partial-$jid\.")"
check "the running job's partial folder is kept" test -d "$tier/.partial-$live.0-step-9999"
scancel "$live"
finish
