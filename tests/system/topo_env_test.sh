#!/bin/bash
# Topology-aware NCCL/RDMA environment through the real Slurm: every node is
# the IBM AC922 fixture (tests/harness/cluster.sh sets topology_xml and lays
# its HCA ports ACTIVE in the node's fixture sysfs), where GPU i is nearest
# mlx5_i (NODE: same NUMA node, balanced one HCA per GPU) and IPoIB hsi<i>.
# The rule under test: every task of a job on a node gets the same NCCL_*
# values, from the union of the job's GPUs there; only UCX_NET_DEVICES
# follows the task's own GPUs.
. "$(dirname "$0")/lib.sh"

show='echo "task=$SLURM_PROCID gpus=${SLURM_STEP_GPUS:-$SLURM_JOB_GPUS} cvd=$CUDA_VISIBLE_DEVICES hca=${NCCL_IB_HCA:-unset} ucx=${UCX_NET_DEVICES:-unset} if=${NCCL_SOCKET_IFNAME:-unset}"'
# The NCCL_* variables alone, one line, for comparing tasks.
nccl='echo "nccl hca=${NCCL_IB_HCA:-unset} if=${NCCL_SOCKET_IFNAME:-unset} gdr=${NCCL_NET_GDR_LEVEL:-unset} gid=${NCCL_IB_GID_INDEX:-unset} topo=${NCCL_TOPO_FILE:-unset}"'
# same_nccl FILE...: every file has one "nccl" line and all are identical.
same_nccl() { [ "$(grep -h '^nccl ' "$@" | sort -u | wc -l)" = 1 ] && [ "$(grep -h '^nccl ' "$@" | wc -l)" = $# ]; }

# 1. Two tasks with one GRES GPU each (--gpus-per-task=1, so each task's
#    CUDA_VISIBLE_DEVICES and SLURM_STEP_GPUS differ): the same NCCL_* for
#    both, the HCAs of both GPUs; UCX_NET_DEVICES per task.
srun -N1 -w n1 -n2 --gpus-per-task=1 -o "$OUT/per-task-%t.out" bash -c "$show; $nccl; echo job=\$SLURM_JOB_ID"
cat "$OUT"/per-task-*.out
check "task 0 (GPU 0): the job's two HCAs, its own UCX device" contains "$OUT/per-task-0.out" 'cvd=0 hca==mlx5_0:1,mlx5_1:1 ucx=mlx5_0:1 if==hsi0,hsi1$'
check "task 1 (GPU 1): the same HCAs, its own UCX device" contains "$OUT/per-task-1.out" 'cvd=1 hca==mlx5_0:1,mlx5_1:1 ucx=mlx5_1:1 if==hsi0,hsi1$'
check "both tasks' NCCL_* are identical" same_nccl "$OUT"/per-task-0.out "$OUT"/per-task-1.out
check "the node's topology cache exists" test "$(head -1 "$C/state/nodes/n1.topo")" = "preflight-topo-cache 3"
jid=$(sed -n 's/^job=//p' "$OUT/per-task-0.out")
check "the prolog recorded the job's GPUs" contains "$C/state/jobs/$jid/n1.gpus" '^SLURM_JOB_GPUS=0,1$'
check "record: each task's GPU, the job's GPUs from the prolog" contains "$C/state/jobs/$jid/n1.env.jsonl" '"gpus":\[1\],"node_gpus":\[0,1\],"node_gpus_from":"prolog"'

# 1b. --gpu-bind=single:1 and map_gpu on two nodes: per node, one NCCL set.
srun -N2 -w n1,n2 -n4 --gres=gpu:3 --gpu-bind=single:1 -o "$OUT/bind-%t.out" bash -c "$show; $nccl"
cat "$OUT"/bind-*.out
check "--gpu-bind=single:1: four tasks, one GPU each" test "$(cat "$OUT"/bind-*.out | grep -c 'cvd=[0-9] ')" = 4
check "--gpu-bind=single:1: identical NCCL_* on every task" same_nccl "$OUT"/bind-*.out
check "--gpu-bind=single:1: the step's three HCAs" contains "$OUT/bind-0.out" 'hca==mlx5_0:1,mlx5_1:1,mlx5_2:1 '

# 2. A batch job with 4 GPUs: the batch step gets all four HCAs; a 1-GPU
#    step inherits the batch step's values but recomputes them (our own
#    earlier value is not "user-set"): the job still holds four GPUs here,
#    so NCCL_IB_HCA stays the four, UCX_NET_DEVICES is the step's GPU's;
#    after the script exports NCCL_IB_HCA, a step keeps the user's value.
#    Without the prolog's record, a step's tasks fall back to the step's
#    GPUs on the node (SLURM_STEP_GPUS before per-task narrowing): still one
#    NCCL set for both tasks.
cat >"$OUT/batch.sh" <<SCRIPT
#!/bin/bash
$show
srun -n1 --gres=gpu:1 bash -c '$show'
export NCCL_IB_HCA==mlx5_3:1
srun -n1 --gres=gpu:1 bash -c 'echo step-user hca=\$NCCL_IB_HCA ucx=\$UCX_NET_DEVICES'
unset NCCL_IB_HCA
rm "$C/state/jobs/\$SLURM_JOB_ID/n2.gpus"
srun -n2 --gpus-per-task=1 -o "$OUT/fallback-%t.out" bash -c '$show; $nccl'
SCRIPT
jid=$(sbatch --parsable -w n2 -n2 --gres=gpu:4 -o "$OUT/batch-%j.out" "$OUT/batch.sh")
wait_job "$jid"
out=$OUT/batch-$jid.out
cat "$out" "$OUT"/fallback-*.out
check "batch job completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "batch step gets the four HCAs" contains "$out" '^task=0 gpus=0,1,2,3 .*hca==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1 '
check "a 1-GPU step gets the job's four HCAs, its own UCX device" contains "$out" '^task=0 gpus=0 cvd=0 hca==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1 ucx=mlx5_0:1 '
check "a variable the script exported survives" contains "$out" '^step-user hca==mlx5_3:1 ucx=mlx5_0:1$'
check "no prolog record: both tasks still get one NCCL set" same_nccl "$OUT"/fallback-0.out "$OUT"/fallback-1.out
check "no prolog record: the step's two HCAs" contains "$OUT/fallback-1.out" 'hca==mlx5_0:1,mlx5_1:1 ucx=mlx5_1:1 '
check "record: the fallback is named" contains "$C/state/jobs/$jid/n2.env.jsonl" '"node_gpus":\[0,1\],"node_gpus_from":"SLURM_STEP_GPUS"'
rec=$C/state/jobs/$jid/n2.env.jsonl
check "the job's env record exists" test -s "$rec"
check "record: what was set" contains "$rec" '"step":"batch".*"set":\{"NCCL_IB_HCA":"=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"'
check "record: what was left alone" contains "$rec" '"left_alone":\{"NCCL_IB_HCA":"=mlx5_3:1"\}'
check "record is root's" test "$(stat -c %U "$rec")" = root

# 3. A user-set NCCL_IB_HCA (srun's environment) survives untouched.
NCCL_IB_HCA=mlx5_9:1 srun -N1 -w n3 --gres=gpu:1 -o "$OUT/user.out" bash -c "$show"
cat "$OUT/user.out"
check "user's NCCL_IB_HCA survives" contains "$OUT/user.out" 'hca=mlx5_9:1 '
check "the other variables are still set" contains "$OUT/user.out" 'ucx=mlx5_0:1 if==hsi0$'

# 4. --preflight-env=off: nothing; =show: a summary on the task's stderr.
srun -N1 -w n3 --gres=gpu:1 --preflight-env=off -o "$OUT/off.out" bash -c "$show"
check "--preflight-env=off sets nothing" contains "$OUT/off.out" 'hca=unset ucx=unset if=unset$'
srun -N1 -w n3 --gres=gpu:2 --preflight-env=show -o "$OUT/show.out" -e "$OUT/show.err" bash -c "$show"
cat "$OUT/show.err"
check "show prints the pairing" contains "$OUT/show.err" '^preflight-env: n3 task 0 \(GPU 0,1; the job.s GPUs here 0,1, from prolog\): GPU0->mlx5_0 NODE, GPU1->mlx5_1 NODE$'
check "show prints what was set" contains "$OUT/show.err" '^preflight-env:   set  NCCL_IB_HCA==mlx5_0:1,mlx5_1:1$'
check "show says why a variable was not set" contains "$OUT/show.err" 'not set NCCL_IB_GID_INDEX: InfiniBand link layer needs no GID index'
check "show does not change the values" contains "$OUT/show.out" 'hca==mlx5_0:1,mlx5_1:1 '

# 5. No GPU: no NCCL variables.
srun -N1 -w n1 -o "$OUT/nogpu.out" bash -c "$show"
check "a task without GPUs gets none" contains "$OUT/nogpu.out" 'hca=unset ucx=unset if=unset$'
check "never NCCL debug variables" bash -c "! srun -N1 -w n1 --gres=gpu:4 env | grep -q '^NCCL_DEBUG'"
finish
