#!/bin/bash
# The example applications in conf/examples honour the signal contract of
# preflight-run(1): preempted through preflight-run they checkpoint and exit,
# and a second run resumes from that checkpoint and ends with the right sum.
# Outside Slurm nothing is requeued (the requeue path is in tests/system).
#   examples_test.sh PREFLIGHT_RUN SOURCE_DIR
set -euo pipefail
run=$1 src=$2
work=$(mktemp -d /tmp/pf_examples.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
unset SLURM_JOB_ID SLURM_JOBID SLURM_RESTART_COUNT

one() {  # one NAME COMMAND...: preempt after step 5, then resume
  local name=$1; shift
  local ck=$work/$name/ckpt out=$work/$name/out1
  mkdir -p "$work/$name"
  "$run" --config /dev/null --checkpoint-dir "$ck" --grace 60s -- "$@" >"$out" 2>&1 &
  local pid=$!
  for _ in $(seq 1 600); do grep -q '^step 5 ' "$out" && break; sleep 0.05; done
  kill -USR2 "$pid"
  local rc=0
  wait "$pid" || rc=$?
  cat "$out"
  grep -q '^checkpointed at step [0-9]* to ' "$out" || fail "$name: no checkpoint after USR2"
  grep -q 'not in a Slurm job' "$out" || fail "$name: preflight-run did not say why it did not requeue"
  [ "$rc" = 0 ] || fail "$name: first run exit $rc"
  local at
  at=$(sed -n 's/^checkpointed at step \([0-9]*\) .*/\1/p' "$out")
  [ -f "$ck/step-$at/COMPLETE" ] || fail "$name: marker missing in $ck/step-$at"
  "$run" --config /dev/null --checkpoint-dir "$ck" -- "$@" >"$work/$name/out2" 2>&1 || fail "$name: second run failed"
  cat "$work/$name/out2"
  grep -q "^resumed from $ck/step-$at at step $at$" "$work/$name/out2" || fail "$name: did not resume from step $at"
  grep -q "^result sum=210 steps=20 restart=0$" "$work/$name/out2" || fail "$name: wrong result"
}

one shell "$src/conf/examples/train.sh" 20 0.05
if command -v python3 >/dev/null; then
  one python python3 -u "$src/conf/examples/train.py" --steps 20 --step-seconds 0.05
else
  echo "python3 not found: Python example not run"
fi
[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "examples honour the contract"
