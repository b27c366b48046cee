# Shared helpers for system tests; sourced. The cluster (tests/harness/
# cluster.sh) is already up; SLURM_CONF and PREFLIGHT_* come from ctest.
set -euo pipefail
: "${PREFLIGHT_CLUSTER_DIR:?run through ctest}"
C=$PREFLIGHT_CLUSTER_DIR
B=$PREFLIGHT_BUILD_DIR
S=$PREFLIGHT_SOURCE_DIR
T=$(basename "$0" .sh)
OUT=$C/out/$T
rm -rf "$OUT"; mkdir -p "$OUT"
failures=0

note() { echo "[$T] $*"; }
fail() { echo "[$T] FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "[$T] ok: $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
contains() { grep -qE -- "$2" "$1"; }
# poll SECONDS DESCRIPTION CMD... (tests/harness/poll.sh): the one wait
# of the system tests; every bound is in seconds. Where a check of the
# same condition follows, a test writes `poll ... || true` (the check
# counts the failure); else `check DESCRIPTION poll ...`.
POLL_WHO=$T
# shellcheck source=../harness/poll.sh
. "$S/tests/harness/poll.sh"
# all_idle, job_gone JOBID
# shellcheck source=../harness/slurm_state.sh
. "$S/tests/harness/slurm_state.sh"
# soon_contains FILE PATTERN [SECONDS]: FILE comes to contain PATTERN within
# SECONDS (default 30). For a running job's output: Slurm counts a requeue
# (Restarts) the moment preflight-run's scontrol asks for it, before
# preflight-run has written the line that says so.
soon_contains() { poll "${3:-30}" "$1 contains $2" grep -qsE -- "$2" "$1"; }
# job_is JOBID STATE: squeue's compact state of the job is STATE (PD, R, CG).
job_is() { [ "$(squeue -h -j "$1" -o %t 2>/dev/null)" = "$2" ]; }
# ready_or_nolocal FILE: a 3-rank task.sh job's output says every rank is
# ready, or that the node has no local checkpoint folder (NOLOCAL).
ready_or_nolocal() { [ "$(grep -c '^ready ' "$1" 2>/dev/null)" = 3 ] || grep -qs '^NOLOCAL' "$1"; }

# wait_job JOBID [SECONDS]: until the job has left the queue.
wait_job() {
  poll "${2:-60}" "job $1 leaves the queue" job_gone "$1" && return 0
  echo "job $1 still queued: $(squeue -h -j "$1" -o '%T %r')" >&2
  return 1
}
# release_and_wait JOBID [SECONDS]: wait (default 60 s) for a requeued job, releasing Slurm's
# requeue hold (Reason=BeginTime; cred_expire + 1 = 21 s here, tests/harness/cluster.sh) each time it appears: under load the job
# can go back to BeginTime after a single release. The first release waits
# 1.1 s: the requeue revoked the old credential with a one-second timestamp
# (see release_requeued).
release_and_wait() {
  _released_once=0
  poll "${2:-60}" "requeued job $1 runs and leaves the queue" _gone_or_release "$1" && return 0
  echo "job $1 still queued: $(squeue -h -j "$1" -o '%T %r')" >&2
  return 1
}
_gone_or_release() {  # one try of release_and_wait
  job_gone "$1" && return 0
  if [ "$(squeue -h -j "$1" -o %r 2>/dev/null)" = BeginTime ] && steps_gone "$1"; then
    [ "$_released_once" = 1 ] || { sleep 1.1; _released_once=1; }
    scontrol update jobid="$1" StartTime=now >/dev/null 2>&1
  fi
  return 1
}
# steps_gone JOBID: no slurmstepd of the job's last run is left on any
# emulated node (they are processes of this machine). Releasing the
# requeue hold before that let the next run's step fail to bind its PMIx
# socket (stepd.slurm.pmix.JOBID, one name per job) while the old stepd
# still held it (system.fabric, CI on Slurm 22.05); Slurm's own hold
# (BeginTime, 21 s here) covers it when the shortcut waits.
steps_gone() { ! pgrep -f "slurmstepd: \[$1\." >/dev/null; }
# as_user CMD...: run a Slurm client command as the test account, through
# munge as that user (the harness created the account and opened munge).
TEST_USER=${PREFLIGHT_TEST_USER:-pfuser}
as_user() { runuser -u "$TEST_USER" -- env SLURM_CONF="$SLURM_CONF" "$@"; }
# job_field JOBID FIELD: from preflight's own job record (libslurm, JSON),
# not scontrol's text, where a job's name or work dir can forge any field
# (nccl_check_test part 3 does).
job_field() {
  local key
  case $2 in
    JobState) key=state ;; Restarts) key=restarts ;; ExcNodeList) key=exc_node_list ;; NodeList) key=node_list ;;
    BatchHost) key=batch_host ;; ExitCode) key=exit_code ;; AdminComment) key=admin_comment ;;
    *) echo "job_field: no field $2 in the job record" >&2; return 2 ;;
  esac
  "$B/admin/preflight" slurm job "$1" 2>/dev/null | sed -n "s/.*\"$key\":\(\"\([^\"]*\)\"\|\([0-9]*\)\).*/\2\3/p"
}
# release_requeued JOBID [SECONDS]: Slurm holds a requeued batch job 21 s
# here (EligibleTime, cred_expire + 1). Once it is pending again (not still completing), move its
# start to now; bounded (default 30 s). The requeue revoked the first run's credential with
# a one-second timestamp: a restart on the same node within that second is
# killed ("Job credential revoked", the job then fails or is held again),
# so wait for the next second first; follow with release_and_wait.
# If the hold has passed first (the epilogs took longer), the job has
# started again on its own: nothing to release.
release_requeued() {
  poll "${2:-30}" "requeued job $1 pending again and released" _release_if_pending "$1" && return 0
  echo "job $1: $(squeue -h -j "$1" -o '%T %r')" >&2
  return 1
}
_release_if_pending() {  # one try of release_requeued
  requeue_done "$1" || return 1
  [ "$(job_field "$1" JobState)" = PENDING ] || return 0
  steps_gone "$1" || return 1
  sleep 1.1
  scontrol update jobid="$1" StartTime=now
}
# requeue_done JOBID: Slurm has requeued the job and every epilog of the
# run before has ended (it left COMPLETING): pending again or, its hold
# past, started again or ended.
requeue_done() {
  local cg
  restarted "$1" || return 1
  cg=$(squeue -h -j "$1" -t CG -o %i 2>/dev/null) || return 1
  [ -z "$cg" ] && [ -n "$(job_field "$1" JobState)" ]
}
# wait_restarted JOBID [SECONDS]: until Slurm has requeued the job once
# (bounded, default 60 s: a prolog, its failure and the requeue).
wait_restarted() { poll "${2:-60}" "job $1 requeued" restarted "$1"; }
restarted() { [ "$(job_field "$1" Restarts)" -ge 1 ] 2>/dev/null; }
# wait_preflight_reason NODE [SECONDS]: until the node's reason is
# preflight's (the detached --finish-drain sets it after Slurm's own "Prolog
# error"; bounded, default 60 s, --finish-drain's own bound). Called right
# after sbatch, it covers the scheduling and the prolog too.
wait_preflight_reason() { poll "${2:-60}" "$1's reason is preflight's" has_preflight_reason "$1"; }
has_preflight_reason() { node_reason "$1" | grep -q "^preflight\[${2:-}"; }
# wait_excluded JOBID NODES [SECONDS]: until the job's ExcNodeList is NODES
# (bounded, default 60 s). preflight-run and the --nccl-check step set it
# after the requeue, once the job is pending again (its epilogs done).
wait_excluded() {
  poll "${3:-60}" "job $1 excludes $2" _excludes "$1" "$2" && return 0
  note "job $1 excludes '$(job_field "$1" ExcNodeList)', not '$2'"; return 1
}
_excludes() { [ "$(job_field "$1" ExcNodeList)" = "$2" ]; }
node_state() { sinfo -h -n "$1" -N -o '%T' | head -1; }
# NODE is drained and its reason matches PATTERN (grep's basic regex, or
# extended with FLAGS -qE): the reason is printed, then two checks, "NODE
# drained" and WHAT.
check_drained() {
  local node=$1 what=$2 pattern=$3 flags=${4:--q} reason
  reason=$(node_reason "$node")
  note "$node reason: $reason"
  check "$node drained" grep -q drain <<<"$(node_state "$node")"
  check "$what" grep "$flags" -- "$pattern" <<<"$reason"
}
# reason_names_path NODE CHECK PATH: NODE's reason names CHECK on PATH, the
# path whole or (a deep checkout: over 60 characters) without its middle,
# its end kept ("/check/work/main/.../tests/cluster/nodes/n1/scratch",
# drain_reason.h).
reason_names_path() {
  local d
  d=$(sed -n "s/^preflight\[[a-z]*\] $2 \(.*\): .*/\1/p" <<<"$(node_reason "$1")" | sed 's/: .*//')
  note "$1 reason device: $d"
  [ "$d" = "$3" ] && return 0
  [[ $d == *...* ]] && [ ${#d} -le 60 ] && [[ $3 == "${d%%...*}"* && $3 == *"${d#*...}" ]] && [ "${3##*/}" = "${d##*/}" ]
}
# From preflight's own node record (JSON), like job_field.
node_reason() { "$B/admin/preflight" slurm nodes "$1" 2>/dev/null | sed -n 's/.*"reason":"\(.*\)"}\]}$/\1/p'; }
# slurm_release: MAJOR*100+MINOR of the Slurm the cluster runs (2211 for 22.05... ).
slurm_release() { local v; v=$(slurmctld -V | grep -oE '[0-9]+\.[0-9]+' | head -1); echo $((10#${v%.*} * 100 + 10#${v#*.})); }

# wait_idle NODE...: until each node is idle (its epilog done), 10 s each;
# past that the test goes on, saying so: callers check what they need
# themselves. Not a failure: on 22.05, after a job failed by its
# --nccl-check (nccl_on_failure=fail), sinfo said "mixed" for its three
# nodes for over 30 s with no job left and every epilog complete
# (nccl_check_test part 5, CI); the next job got the nodes at once.
wait_idle() {
  local n
  for n in "$@"; do poll 10 "$n idle" node_is "$n" idle || note "$n is $(node_state "$n"), not idle; going on"; done
}
node_is() { [ "$(node_state "$1")" = "$2" ]; }
# finishers_gone [NODE]: no detached `--finish-drain` helper (a failed
# prolog's or epilog's, drain_finisher.h) is left for NODE (any node without one).
finishers_gone() { ! pgrep -f -- "--finish-drain ${1:-[^ ]+}( |\$)" >/dev/null; }

# wait_all_idle [SECONDS]: until every node of the cluster is idle (the
# previous jobs' epilogs done), bounded (default 60 s). Before a job whose
# node count or choice of nodes leaves Slurm a pick (-N2-3, -N5 of 6), or it
# may start on the nodes that happen to be free.
# A node not idle by then is a failed check (the test goes on).
wait_all_idle() {
  poll "${1:-60}" "every node idle" all_idle && return 0
  fail "not every node idle: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')"
}

# Put every node back to idle (tests leave the cluster as they found it).
resume_all() {
  local n
  # A drain finisher still waiting would drain a resumed node once its bound
  # passes (drain_finisher.h): resume only after every one has ended.
  poll 75 "no drain finisher left" finishers_gone || true
  for n in $(sinfo -h -N -o %N | sort -u); do
    case "$(node_state $n)" in *drain*|*down*) scontrol update nodename=$n state=resume >/dev/null 2>&1 || true ;; esac
  done
  wait_all_idle 30
}

# durable_on_tier TIER: the checkpoints (step-N) durable on a shared tier, oldest first.
durable_on_tier() {
  local n
  for n in $(ls "$1"); do case $n in step-*) [ -f "$1/$n/.preflight-durable" ] && echo "$n" ;; esac; done | sort -t- -k2 -n
}
# newest_step TIER: the number of the newest durable checkpoint on TIER.
newest_step() { local n; n=$(durable_on_tier "$1" | tail -1); echo "${n#step-}"; }
# wait_partial TIER JOBID: a copy of the job's first run is under way on
# TIER (a hidden partial folder), within 120 s.
wait_partial() { poll 120 "a partial folder of job $2 on $1" has_partial "$1" "$2"; }
has_partial() { ls -A "$1" 2>/dev/null | grep -q "^\.partial-$2\.0-step-"; }
# check_resumed OUT TIER NAME STEPS: the restart of a 3-rank train.sh job
# (output OUT) resumed every rank from TIER/NAME and finished STEPS steps.
check_resumed() {
  local out=$1 tier=$2 name=$3 steps=$4 at=${3#step-}
  check "the restart resumed from $name on the shared tier" contains "$out" "^preflight: resume from $name on the shared tier \($tier/$name\)$"
  check "every rank resumed at that step" test "$(grep -c "^resumed from $tier/$name at step $at$" "$out")" = 3
  check "every rank has the right result" test "$(grep -c "^result sum=$((steps * (steps + 1) / 2)) steps=$steps restart=1$" "$out")" = 3
}

# tier_whole TIER PAD: every checkpoint visible on TIER is durable, holds
# the three ranks' state and PAD-byte weights of a 3-node train.sh job, and
# only files of the test user (each fault named).
tier_whole() {
  local tier=$1 pad=$2 c k bad=0
  for c in $(ls "$tier"); do
    [ -f "$tier/$c/.preflight-durable" ] || { note "$c: visible, not durable"; bad=1; continue; }
    for k in 0 1 2; do
      [ -f "$tier/$c/rank-$k.state" ] || { note "$c: no rank-$k.state"; bad=1; }
      [ "$(stat -c %s "$tier/$c/weights-rank-$k.state.bin" 2>/dev/null)" = "$pad" ] || { note "$c: rank $k's weights not whole"; bad=1; }
    done
    [ -z "$(find "$tier/$c" ! -user "$TEST_USER" | head -1)" ] || { note "$c: holds files not the user's"; bad=1; }
  done
  return $bad
}

finish() {
  resume_all
  if [ "$failures" -gt 0 ]; then echo "[$T] $failures check(s) failed"; exit 1; fi
  echo "[$T] all checks passed"
}

# Every test starts on an idle cluster: the previous test's last jobs may
# still be completing (their epilogs), and a job that leaves Slurm a pick
# of nodes (-N1 meant for n1, -N2-3) would start on the ones that are free.
wait_all_idle
