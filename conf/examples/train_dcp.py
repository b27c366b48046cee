#!/usr/bin/env python3
"""A worked PyTorch example of preflight-run's checkpoint contract with
PyTorch Distributed Checkpoint (DCP) and two tiers (man preflight-run(1),
ckpt/include/preflight/ckpt_convention.h).

It is an example to read and adapt: it needs torch (2.2 or later) and GPUs,
and is not run by preflight's tests (the build machine has no torch); the
shell example conf/examples/train.sh is what the system tests run.

Batch script, one task per GPU:

    exec preflight-run --persist-to /shared/ckpt/%u --checkpoint-convention dcp \\
      --keep-checkpoints 5 -- srun --ntasks-per-node=8 python train_dcp.py

What it does:
  - every rank saves its shards to ITS NODE'S local disk:
    $PREFLIGHT_CKPT_LOCAL (the folder the site's prolog made for the job),
    else $PREFLIGHT_CHECKPOINT_DIR, in one folder per checkpoint, step-N;
  - dcp.save() is collective: it returns on every rank only after the
    coordinator wrote .metadata; then LOCAL_RANK 0 of each node creates the
    empty file .preflight-part in the folder, which tells preflight-run's
    agent that this node's part is complete (the `dcp` convention). The agent
    copies each node's part to the shared tier, and the checkpoint is durable
    there once every node's part arrived;
  - on restart it loads from $PREFLIGHT_RESUME_FROM (on the shared tier for
    a multi-node job, where every node's part is together);
  - on a checkpoint request (the signal, or the request file) all ranks
    agree, by an all-reduce, on the step at which to save, save, and exit 0.
"""
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

want = False


def on_signal(signum, frame):
    global want
    want = True


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    every = int(os.environ.get("CHECKPOINT_EVERY", "100"))
    # srun's task variables as torch.distributed wants them (MASTER_ADDR and
    # MASTER_PORT: the first node of the job, set by the batch script).
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("SLURM_NTASKS", "1")))
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "29500")
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)

    sig = os.environ.get("PREFLIGHT_CHECKPOINT_SIGNAL", "USR2")
    if sig != "none":
        signal.signal(getattr(signal, "SIG" + sig), on_signal)
    request = os.environ.get("PREFLIGHT_CHECKPOINT_REQUEST", "")
    ckdir = os.environ.get("PREFLIGHT_CKPT_LOCAL") or os.environ["PREFLIGHT_CHECKPOINT_DIR"]

    model = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = 0

    resume = os.environ.get("PREFLIGHT_RESUME_FROM", "")
    if resume:
        # get_state_dict gives the optimizer's state its shapes to load into.
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd, "step": step}
        dcp.load(state, checkpoint_id=resume)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        step = int(state["step"])
        if rank == 0:
            print(f"resumed from {resume} at step {step}", flush=True)

    def checkpoint():
        path = os.path.join(ckdir, f"step-{step}")
        msd, osd = get_state_dict(model, opt)
        dcp.save({"model": msd, "optim": osd, "step": step}, checkpoint_id=path)
        # save() returned on every rank: the whole checkpoint is written.
        # One file per node says so for this node's part.
        if local_rank == 0:
            open(os.path.join(path, ".preflight-part"), "w").close()
        if rank == 0:
            print(f"checkpointed at step {step} to {path}", flush=True)

    while step < steps:
        # Ranks see the signal or the request file at different moments:
        # agree on it, so that every rank saves the same step.
        flag = torch.tensor([1 if (want or (request and os.path.exists(request))) else 0], device="cuda")
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item():
            checkpoint()
            dist.destroy_process_group()
            return 0
        x = torch.randn(64, 1024, device="cuda")
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if every and step % every == 0:
            checkpoint()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
