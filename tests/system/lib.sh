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
# soon_contains FILE PATTERN [SECONDS]: FILE comes to contain PATTERN within
# SECONDS (default 30). For a running job's output: Slurm counts a requeue
# (Restarts) the moment preflight-run's scontrol asks for it, before
# preflight-run has written the line that says so.
soon_contains() {
  local i limit=${3:-30}
  for ((i = 0; i < limit * 10; i++)); do contains "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# poll SECONDS DESCRIPTION CMD...: until CMD succeeds, at most SECONDS;
# false, saying DESCRIPTION, when the bound passes.
poll() {
  local limit=$1 what=$2 i
  shift 2
  for ((i = 0; i < limit * 10; i++)); do "$@" && return 0; sleep 0.1; done
  note "not within ${limit}s: $what"
  return 1
}

# job_gone JOBID: squeue answered and no longer lists the job (an squeue
# that failed, e.g. a slurmctld busy past MessageTimeout, says nothing).
job_gone() {
  local out rc=0
  out=$(squeue -h -j "$1" -o %i 2>&1) || rc=$?
  if [ $rc = 0 ]; then [ -z "$out" ]; else grep -q 'Invalid job id' <<<"$out"; fi
}
# wait_job JOBID [SECONDS]: until the job has left the queue.
wait_job() {
  local j=$1 limit=${2:-60} i
  for ((i = 0; i < limit * 10; i++)); do
    job_gone "$j" && return 0
    sleep 0.1
  done
  echo "job $j still queued after ${limit}s: $(squeue -h -j "$j" -o '%T %r')" >&2
  return 1
}
# release_and_wait JOBID [SECONDS]: wait (default 60 s) for a requeued job, releasing Slurm's
# requeue hold (Reason=BeginTime; cred_expire + 1 = 21 s here, tests/harness/cluster.sh) each time it appears: under load the job
# can go back to BeginTime after a single release. The first release waits
# 1.1 s: the requeue revoked the old credential with a one-second timestamp
# (see release_requeued).
release_and_wait() {
  local j=$1 limit=${2:-60} i first=1
  for ((i = 0; i < limit * 10; i++)); do
    job_gone "$j" && return 0
    if [ "$(squeue -h -j "$j" -o %r 2>/dev/null)" = BeginTime ]; then
      [ $first = 1 ] && { sleep 1.1; first=0; }
      scontrol update jobid="$j" StartTime=now >/dev/null 2>&1
    fi
    sleep 0.1
  done
  echo "job $j still queued after ${limit}s: $(squeue -h -j "$j" -o '%T %r')" >&2
  return 1
}
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
release_requeued() {
  local j=$1 limit=${2:-30}
  for _ in $(seq 1 $((limit * 10))); do
    if [ "$(job_field "$j" JobState)" = PENDING ] && ! squeue -h -j "$j" -t CG -o %i | grep -q .; then
      sleep 1.1
      scontrol update jobid="$j" StartTime=now && return 0
    fi
    sleep 0.1
  done
  echo "job $j never became pending again within ${limit}s: $(squeue -h -j "$j" -o '%T %r')" >&2
  return 1
}
# wait_restarted JOBID [TENTHS]: until Slurm has requeued the job once
# (bounded, default 60 s: a prolog, its failure and the requeue).
wait_restarted() {
  local j=$1 n=${2:-600} i
  for ((i = 0; i < n; i++)); do [ "$(job_field "$j" Restarts)" -ge 1 ] && return 0; sleep 0.1; done
  return 1
}
# wait_preflight_reason NODE [SECONDS]: until the node's reason is
# preflight's (the detached --finish-drain sets it after Slurm's own "Prolog
# error"; bounded, default 60 s, --finish-drain's own bound). Called right
# after sbatch, it covers the scheduling and the prolog too.
wait_preflight_reason() {
  local i
  for ((i = 0; i < ${2:-60} * 10; i++)); do node_reason "$1" | grep -q '^preflight\[' && return 0; sleep 0.1; done
  return 1
}
# wait_excluded JOBID NODES [SECONDS]: until the job's ExcNodeList is NODES
# (bounded, default 60 s). preflight-run and the --nccl-check step set it
# after the requeue, once the job is pending again (its epilogs done).
wait_excluded() {
  local i
  for ((i = 0; i < ${3:-60} * 10; i++)); do [ "$(job_field "$1" ExcNodeList)" = "$2" ] && return 0; sleep 0.1; done
  note "job $1 excludes '$(job_field "$1" ExcNodeList)', not '$2' after ${3:-60}s"; return 1
}
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

# wait_idle NODE...: until each node has finished its epilog (bounded).
wait_idle() {
  local n
  for n in "$@"; do
    for _ in $(seq 1 100); do [ "$(node_state "$n")" = idle ] && break; sleep 0.1; done
  done
}

# wait_all_idle [SECONDS]: until every node of the cluster is idle (the
# previous jobs' epilogs done), bounded (default 60 s). Before a job whose
# node count or choice of nodes leaves Slurm a pick (-N2-3, -N5 of 6), or it
# may start on the nodes that happen to be free.
wait_all_idle() {
  local i
  for ((i = 0; i < ${1:-60} * 10; i++)); do
    [ "$(sinfo -h -o %T 2>/dev/null | sort -u)" = idle ] && return 0
    sleep 0.1
  done
  note "not every node idle after ${1:-60}s: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')"
}

# Put every node back to idle (tests leave the cluster as they found it).
resume_all() {
  local n
  for n in $(sinfo -h -N -o %N | sort -u); do
    case "$(node_state $n)" in *drain*|*down*) scontrol update nodename=$n state=resume >/dev/null 2>&1 || true ;; esac
  done
  wait_all_idle 10
}

# durable_on_tier TIER: the checkpoints (step-N) durable on a shared tier, oldest first.
durable_on_tier() {
  local n
  for n in $(ls "$1"); do case $n in step-*) [ -f "$1/$n/.preflight-durable" ] && echo "$n" ;; esac; done | sort -t- -k2 -n
}
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
