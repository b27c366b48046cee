#!/usr/bin/env python3
"""A training loop that honours preflight-run's signal contract.

Run it inside a batch script (man preflight-run(1)):

    exec preflight-run --checkpoint-dir "$PWD/ckpt" -- python3 -u train.py --steps 1000

The contract:
  * resume from $PREFLIGHT_RESUME_FROM when it is set (a complete checkpoint);
  * on $PREFLIGHT_CHECKPOINT_SIGNAL (default USR2; never USR1, NCCL uses it),
    or when the file $PREFLIGHT_CHECKPOINT_REQUEST exists, finish the current
    step, write a checkpoint and exit within preflight-run's grace period;
  * write each checkpoint as one directory under $PREFLIGHT_CHECKPOINT_DIR
    and create the marker file $PREFLIGHT_CHECKPOINT_MARKER in it last;
  * treat repeated checkpoint signals as one request (the signal handler
    only sets a flag: checkpointing inside a handler is unsafe);
  * touch $PREFLIGHT_HEARTBEAT_FILE as it makes progress; print with -u or
    flush, so preflight-run's output stall watch sees lines as they happen.

The "model" is the running sum 1+2+...+step, so a resumed run is checkable:
it ends printing "result sum=S steps=N restart=R" with S = N*(N+1)/2. A real
job saves model, optimizer, LR scheduler, RNG and data-loader state together.
"""
import argparse
import json
import os
import signal
import sys
import time

want_checkpoint = False


def request_checkpoint(signum, frame):
    global want_checkpoint
    want_checkpoint = True


def save(step, total):
    root = os.environ["PREFLIGHT_CHECKPOINT_DIR"]
    marker = os.environ.get("PREFLIGHT_CHECKPOINT_MARKER", "COMPLETE")
    path = os.path.join(root, "step-%d" % step)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "state.json"), "w") as f:
        json.dump({"step": step, "sum": total}, f)
        f.flush()
        os.fsync(f.fileno())
    open(os.path.join(path, marker), "w").close()  # last: complete now
    print("checkpointed at step %d to %s" % (step, path), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--step-seconds", type=float, default=0.1)
    ap.add_argument("--checkpoint-every", type=int, default=0)
    args = ap.parse_args()

    sig = os.environ.get("PREFLIGHT_CHECKPOINT_SIGNAL", "USR2")
    if sig != "none":
        signal.signal(getattr(signal, "SIG" + sig), request_checkpoint)
    request = os.environ.get("PREFLIGHT_CHECKPOINT_REQUEST", "")
    heartbeat = os.environ.get("PREFLIGHT_HEARTBEAT_FILE", "")

    step, total = 0, 0
    resume = os.environ.get("PREFLIGHT_RESUME_FROM", "")
    if resume:
        with open(os.path.join(resume, "state.json")) as f:
            st = json.load(f)
        step, total = st["step"], st["sum"]
        print("resumed from %s at step %d" % (resume, step), flush=True)

    while step < args.steps:
        if want_checkpoint or (request and os.path.exists(request)):
            save(step, total)
            return 0
        step += 1
        total += step
        print("step %d loss %.4f" % (step, 1.0 / step), flush=True)
        if heartbeat:
            with open(heartbeat, "a"):
                os.utime(heartbeat)
        if args.checkpoint_every and step % args.checkpoint_every == 0:
            save(step, total)
        time.sleep(args.step_seconds)
    print("result sum=%d steps=%d restart=%s" % (total, step, os.environ.get("PREFLIGHT_RESTART_COUNT", "0")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
