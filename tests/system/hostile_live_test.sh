#!/bin/bash
# A live job keeps its staged data (issue 29, defect 3). With
# PrologFlags=Alloc,DeferBatch (the harness's default) there is no extern
# step, so an salloc job between its steps has no slurmstepd on any of its
# nodes. Every epilog, health check and `preflight cache gc` released the
# views and cache holds of such a job once they were stage_timeout + 10
# minutes old, and `preflight state gc` removed its records: the job's next
# srun failed. Now nothing of a job that slurmctld lists as running on the
# node is released; a job slurmctld does not know is; and when slurmctld
# cannot be asked, nothing is. The test makes the job look stale by ageing
# its view, hold and records (touch -d), not by waiting. Label: hostile.
. "$(dirname "$0")/lib.sh"

PF=$B/admin/preflight
CONF=$C/etc/preflight.conf
DS=$(mktemp -d /tmp/pf-live.XXXXXX)
chmod 755 "$DS"
trap 'rm -rf "$DS"' EXIT
mkdir -p "$DS/ds1"; echo live-data >"$DS/ds1/f"; chmod -R a+rX "$DS/ds1"
mkdir -m 777 "$OUT/u"
U=$OUT/u
no_stepd() { ! pgrep -f "^slurmstepd: \[$1[.]" >/dev/null; }
# age PATH...: a day old, past stage_timeout + 10 minutes and 4 x state_keep.
age() { touch -h -d '1 day ago' "$@"; }

# ---- an salloc job on n1,n2 with --stage; the script waits between steps
as_user salloc -J pf-live -N2 -w n1,n2 --stage="$DS/ds1" bash -c "
  srun -N2 -l bash -c 'cat \$PREFLIGHT_STAGE_DS1/f' >$U/step1.out 2>&1
  touch $U/step1.done
  for i in \$(seq 1 1800); do [ -e $U/go ] && break; sleep 0.1; done
  srun -N2 -l bash -c 'cat \$PREFLIGHT_STAGE_DS1/f' >$U/step2.out 2>&1; echo rc=\$? >>$U/step2.out" \
  >"$OUT/salloc.out" 2>&1 &
salloc_pid=$!
poll 120 "the salloc job's first step done" test -e "$U/step1.done" || true
if [ ! -e "$U/step1.done" ]; then
  cat "$OUT/salloc.out"; fail "the salloc job's first step never ran"
  kill "$salloc_pid" 2>/dev/null || true; finish
fi
cat "$U/step1.out" || true
J=$(squeue -h -n pf-live -o %i | head -1)
note "job $J"
check "the first step read the data on n2" contains "$U/step1.out" "^1: live-data$"
poll 30 "job $J between steps" no_stepd "$J" || true
check "between steps the job has no slurmstepd" no_stepd "$J"
V2=$C/nodes/n2/stage/jobs/$J
check "n2 holds the job's view" test -d "$V2/ds1"
age "$V2" "$C"/nodes/n2/stage/cache/*/refs/"$J" "$C/state/jobs/$J" "$C/state/jobs/$J"/*
# A job slurmctld does not know, left on n2 (slurmd killed before its epilog).
GHOST=99999999
mkdir -p "$C/nodes/n2/stage/jobs/$GHOST/ds"; age "$C/nodes/n2/stage/jobs/$GHOST"

# ---- slurmctld cannot be asked: nothing is released, and it says so
set +e
"$PF" --config "$CONF" --set slurm_query=/bin/false cache gc node=n2 >"$OUT/gc-down.out" 2>&1; rc=$?
set -e
cat "$OUT/gc-down.out"
check "cache gc, slurmctld not asked: exit 1" test $rc = 1
check "cache gc, slurmctld not asked: says so" contains "$OUT/gc-down.out" "slurmctld could not be asked; no stale job's view or hold released"
check "cache gc, slurmctld not asked: the unknown job's view kept" test -d "$C/nodes/n2/stage/jobs/$GHOST"
check "cache gc, slurmctld not asked: the live job's view kept" test -d "$V2/ds1"

# ---- another job's epilog on n2 (n2 has a second core)
jo=$(as_user sbatch --parsable -w n2 -o /dev/null --wrap true)
wait_job "$jo" 60
check "another job's epilog: the live job's view is still mounted" grep -q " $V2/ds1 " /proc/mounts
check "another job's epilog: the unknown job's view released" test ! -e "$C/nodes/n2/stage/jobs/$GHOST"

# ---- preflight cache gc and state gc on n2
"$PF" --config "$CONF" cache gc node=n2 >"$OUT/gc.out" 2>&1
cat "$OUT/gc.out"
check "cache gc: the live job kept, saying why" contains "$OUT/gc.out" "^job $J: .*kept: slurmctld lists it as running on this node"
check "cache gc: released nothing of the live job" bash -c "! grep -q '^job $J: .*released' '$OUT/gc.out'"
"$PF" --config "$CONF" --set state_keep=1s state gc node=n2 >"$OUT/state-gc.out" 2>&1
cat "$OUT/state-gc.out"
check "state gc: the live job's records kept, saying why" contains "$OUT/state-gc.out" "^kept $J .*but kept: slurmctld lists it as running on this node"
check "state gc: the live job's folder is there" test -e "$C/state/jobs/$J/n2.stage.json"
check "the live job's view is still mounted" grep -q " $V2/ds1 " /proc/mounts
check "the live job's cache hold is still there" bash -c "ls $C/nodes/n2/stage/cache/*/refs/$J >/dev/null"

# ---- the job's next step still reads its data on both nodes
touch "$U/go"
wait "$salloc_pid" || true
cat "$U/step2.out" "$OUT/salloc.out" || true
check "the next step read the data on n2" contains "$U/step2.out" "^1: live-data$"
check "the next step read the data on n1" contains "$U/step2.out" "^0: live-data$"
check "the next step succeeded" contains "$U/step2.out" "^rc=0$"

# ---- nothing left behind once the job ended
wait_job "$J" 60
wait_idle n1 n2
check "no view of the job left" test ! -e "$V2" -a ! -e "$C/nodes/n1/stage/jobs/$J"
check "no mount of the job left" bash -c "! grep -q '/stage/jobs/$J/' /proc/mounts"
check "no node drained" test "$(sinfo -h -n n1,n2 -o %T | sort -u)" = idle
finish
