#!/bin/bash
# A training loop in shell that honours preflight-run's signal contract
# (man preflight-run(1)). Usage, inside a batch script:
#
#   exec preflight-run --checkpoint-dir "$PWD/ckpt" -- ./train.sh STEPS [SECONDS_PER_STEP]
#
# Its "model" is the running sum 1+2+...+step, so a resumed run can be
# checked: it ends printing "result sum=S steps=N restart=R", and S is
# N*(N+1)/2 however often it was preempted.
#
# The contract it follows:
#  - resume from $PREFLIGHT_RESUME_FROM when set (a complete checkpoint);
#  - on $PREFLIGHT_CHECKPOINT_SIGNAL, or when $PREFLIGHT_CHECKPOINT_REQUEST
#    exists, write a checkpoint and exit promptly (within preflight-run's grace);
#  - write each checkpoint as one directory under $PREFLIGHT_CHECKPOINT_DIR
#    and create the marker file ($PREFLIGHT_CHECKPOINT_MARKER) in it LAST;
#  - treat repeated checkpoint signals as one request;
#  - touch $PREFLIGHT_HEARTBEAT_FILE as it makes progress.
#
# Multi-node (started by srun on several nodes, one task per node):
#
#   exec preflight-run --persist-to /shared/ckpt/%u -- srun ./train.sh STEPS
#
# each task is a "rank" with the same model; it writes its own part of each
# checkpoint, rank-<SLURM_PROCID>.state, into its node's local checkpoint
# dir ($PREFLIGHT_CKPT_LOCAL, from the site's prolog; else
# $PREFLIGHT_CHECKPOINT_DIR) and then the per-node marker, and resumes by
# reading its rank's file from $PREFLIGHT_RESUME_FROM (on the shared tier,
# where preflight-run's agent put every node's part together). Checkpoints
# are periodic (CHECKPOINT_EVERY): every rank writes the same steps, so
# every part of step-N is there. On a checkpoint request it exits without
# writing, since ranks stop at different steps; the restart resumes from
# the newest checkpoint durable on the tier.
set -u
steps=${1:-100}
pause=${2:-0.1}
every=${CHECKPOINT_EVERY:-0}   # also checkpoint every N steps (0: only when asked)
marker=${PREFLIGHT_CHECKPOINT_MARKER:-COMPLETE}
want_checkpoint=0
sig=${PREFLIGHT_CHECKPOINT_SIGNAL:-USR2}
[ "$sig" != none ] && trap 'want_checkpoint=1' "$sig"

multi=0 state=state ckdir=${PREFLIGHT_CHECKPOINT_DIR:-}
if [ "${SLURM_STEP_NUM_TASKS:-1}" -gt 1 ]; then
  multi=1 state=rank-${SLURM_PROCID:-0}.state ckdir=${PREFLIGHT_CKPT_LOCAL:-$ckdir}
  if [ "${SLURM_LOCALID:-0}" != 0 ]; then
    echo "rank ${SLURM_PROCID:-?}: this example runs one task per node (srun --ntasks-per-node=1)" >&2
    exit 0
  fi
fi

step=0 sum=0
if [ -n "${PREFLIGHT_RESUME_FROM:-}" ]; then
  read -r step sum <"$PREFLIGHT_RESUME_FROM/$state"
  echo "resumed from $PREFLIGHT_RESUME_FROM at step $step"
fi

checkpoint() {
  local dir=$ckdir/step-$step
  mkdir -p "$dir"
  echo "$step $sum" >"$dir/$state"  # model, optimizer, RNG, data position...
  # Stand-in weights (CHECKPOINT_PAD_BYTES, default none): a checkpoint of a
  # size that takes time to copy.
  if [ "${CHECKPOINT_PAD_BYTES:-0}" -gt 0 ]; then
    head -c "$CHECKPOINT_PAD_BYTES" /dev/urandom >"$dir/weights-$state.bin"
  fi
  sync "$dir/$state" 2>/dev/null || true
  : >"$dir/$marker"                 # last: now this node's part is complete
  echo "checkpointed at step $step to $dir"
}

while [ "$step" -lt "$steps" ]; do
  if [ "$want_checkpoint" = 1 ] || { [ -n "${PREFLIGHT_CHECKPOINT_REQUEST:-}" ] && [ -e "$PREFLIGHT_CHECKPOINT_REQUEST" ]; }; then
    if [ "$multi" = 1 ]; then
      echo "rank ${SLURM_PROCID:-0}: checkpoint requested at step $step: exiting (the periodic checkpoints are the consistent ones)"
    else
      checkpoint
    fi
    exit 0
  fi
  step=$((step + 1))
  sum=$((sum + step))
  # No $(...) in the loop: bash 5.2 parses a command substitution each time
  # it runs it, and a trap that fires during that parse breaks it
  # ("unexpected EOF while looking for matching `)'").
  awk "BEGIN{printf \"step %d loss %.4f\n\", $step, 1/$step}"
  [ -n "${PREFLIGHT_HEARTBEAT_FILE:-}" ] && touch "$PREFLIGHT_HEARTBEAT_FILE"
  if [ "$every" -gt 0 ] && [ $((step % every)) = 0 ]; then checkpoint; fi
  sleep "$pause"
done
echo "result sum=$sum steps=$step restart=${PREFLIGHT_RESTART_COUNT:-0}"
