#!/bin/bash
# preflight accept on the emulated cluster, as the test user inside an
# sbatch allocation of every node:
#   1. shaped: one node slow (the last of the allocation, so the curve holds
#      up to the step that takes it in) and one slow storage path: report.json
#      and report.html name both (the node as a straggler and the step of the
#      curve that broke, the path below the threshold), report.json is valid
#      against accept/accept-report.schema.json;
#   2. clean: no shaping, one fast path: the verdict is pass; then on two
#      nodes a DCP-shaped command's round trip by --train-convention dcp;
#   3. bad input: an unwritable path, a path that fills up, --out holding
#      other files, a training command that exits at once and one that
#      hangs: a clear line
#      each, the other stages still run, nothing left on the paths.
# The training run: in 1 the slow node also steps ten times slower and its
# step rate fails, and the command writes no checkpoint (a warning); in 2
# the example train.sh passes on every node, its checkpoint round trip too,
# through a shared tier (--train-tier).
# The slow node: the harness's `cluster.sh shape` (tc on lo) when this
# cluster has it, else the host backend's send-rate seam
# (nccl_host_rate_file). The slow path: an ext4 image on a loop device whose
# reads and writes the kernel's blkio throttle (cgroup v1 root group, this
# device only) holds to 8 MB/s; the fast path a directory on tmpfs; the full
# path a 1 MiB tmpfs. All undone on exit.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "needs root (loop device, mounts)"; exit 77; }
# Eight emulated nodes: the suite's fixture cluster has fewer, so this test
# starts its own beside it (PREFLIGHT_NODES=8; own ports; the fixture's
# resource lock keeps other tests, and their shaping of lo, away meanwhile).
want=${ACCEPT_TEST_NODES:-8}
own_cluster=""
if [ "$(sinfo -h -N -o %N | sort -u | wc -l)" -lt "$want" ]; then
  own_cluster=$OUT/cluster
  PREFLIGHT_NODES=$want "$S/tests/harness/cluster.sh" start "$own_cluster" "$B" >"$OUT/cluster.log" 2>&1 ||
    { cat "$OUT/cluster.log"; fail "cannot start a $want-node cluster"; exit 1; }
  trap '"$S/tests/harness/cluster.sh" stop "$own_cluster" >/dev/null 2>&1' EXIT
  C=$own_cluster
  export SLURM_CONF=$C/etc/slurm.conf
fi
blkio=/sys/fs/cgroup/blkio
[ -w $blkio/blkio.throttle.write_bps_device ] || blkio=/sys/fs/cgroup/unified
conf=$C/etc/preflight.conf
cp "$conf" "$OUT/preflight.conf.orig"
nodes=$(sinfo -h -N -o %N | sort -u | sort -V)
count=$(wc -l <<<"$nodes")
slow_node=$(tail -1 <<<"$nodes")
shaped=none
loopdev=""
# The node checks run as the job's user: the harness's scratch dirs are
# root's (the prolog's view); a user needs to write scratch (1777 as on a
# real node) for scratch.writable to pass.
for d in "$C"/nodes/*/scratch; do stat -c '%a %n' "$d"; done >"$OUT/scratch.modes"
chmod 1777 "$C"/nodes/*/scratch
cleanup() {
  while read -r mode d; do chmod "$mode" "$d"; done <"$OUT/scratch.modes"
  cp "$OUT/preflight.conf.orig" "$conf"
  [ -f "$OUT/nvml.faults.orig" ] && cp "$OUT/nvml.faults.orig" "$C/nodes/$(head -1 <<<"$nodes")/nvml.faults"
  rm -f "$C"/nodes/*/nccl_rate
  [ "$shaped" = tc ] && "$S/tests/harness/cluster.sh" unshape "$C" >/dev/null 2>&1
  if [ -n "$loopdev" ]; then
    mm=$(printf '%d:%d' "0x$(stat -c %t "$loopdev")" "0x$(stat -c %T "$loopdev")")
    echo "$mm 0" >$blkio/blkio.throttle.write_bps_device 2>/dev/null || true
    echo "$mm 0" >$blkio/blkio.throttle.read_bps_device 2>/dev/null || true
    umount "$OUT/slow" 2>/dev/null || true
    losetup -d "$loopdev" 2>/dev/null || true
  fi
  umount "$OUT/full" 2>/dev/null || true
  umount "$OUT/fast" 2>/dev/null || true
  [ -n "$own_cluster" ] && "$S/tests/harness/cluster.sh" stop "$own_cluster" >/dev/null 2>&1
  true
}
trap cleanup EXIT

# --- the storage paths
mkdir -p "$OUT/fast" "$OUT/slow" "$OUT/full" "$OUT/locked"
mount -t tmpfs -o size=640m,mode=1777 accept-fast "$OUT/fast"
mount -t tmpfs -o size=1m,mode=1777 accept-full "$OUT/full"
chmod 0755 "$OUT/locked"  # root's: the test user cannot write it
truncate -s 96M "$OUT/slow.img"
loopdev=$(losetup -f --show "$OUT/slow.img") || { echo "no loop device"; exit 77; }
mkfs.ext4 -q "$loopdev"
mount "$loopdev" "$OUT/slow"
chmod 1777 "$OUT/slow"
mm=$(printf '%d:%d' "0x$(stat -c %t "$loopdev")" "0x$(stat -c %T "$loopdev")")
echo "$mm 8388608" >$blkio/blkio.throttle.write_bps_device
echo "$mm 8388608" >$blkio/blkio.throttle.read_bps_device
chmod 0755 "$OUT"
mkdir -p "$OUT/shaped" "$OUT/clean" "$OUT/dcp" "$OUT/bad" "$OUT/logs"
chown "$TEST_USER" "$OUT/shaped" "$OUT/clean" "$OUT/dcp" "$OUT/bad" "$OUT/logs"
echo "mine" >"$OUT/bad/notes.txt"

# --- the slow node
# Every node's link at one rate (the fabric: without it the emulated
# all-reduce is CPU-bound and busbw falls with the node count on 2 cores
# whatever the links do), the slow node's at a tenth of it.
fabric_rate=160mbit
# The slow node first: a packet between two shaped nodes takes the class of
# the first u32 filter it matches, in the order the nodes were shaped.
shape_all() {  # SLOW_RATE: every node at the fabric rate, the slow node at SLOW_RATE ("" none)
  local n
  [ -n "$1" ] && "$S/tests/harness/cluster.sh" shape "$C" "$slow_node" "$1" >/dev/null
  for n in $nodes; do
    [ "$n" = "$slow_node" ] && [ -n "$1" ] && continue
    "$S/tests/harness/cluster.sh" shape "$C" "$n" $fabric_rate >/dev/null
  done
}
if grep -q '^  shape)' "$S/tests/harness/cluster.sh" 2>/dev/null; then
  shape_all 16mbit && shaped=tc
fi
if [ "$shaped" = none ]; then
  echo "nccl_host_rate_file = $C/nodes/%n/nccl_rate" >>"$conf"
  echo 8M >"$C/nodes/$slow_node/nccl_rate"
  shaped=rate-seam
fi
note "$count nodes (links at $fabric_rate), $slow_node slowed by $shaped (16mbit), slow path $OUT/slow ($loopdev, 8 MB/s)"

# Small sizes: the suite's time matters; budgets far above what this takes.
# The emulated fabric is CPU-bound on a shared 2-core machine: 1 MiB
# all-reduces at N nodes against 2, and one ring pair against another, vary
# by 2-4x without any fault, and so do one node's tmpfs IOPS against
# another's, so the straggler and storage fractions are 0.2 here (the slow
# node and path are 50-100x below the others) and the clean run loosens the
# scaling bounds (the verdict logic itself is unit-tested in accept_test).
# seq_write 10M: the throttled path can never reach it (8 MiB/s for all
# nodes together), tmpfs always does.
common="--config $C/etc/preflight.conf --max-bytes 256K --storage-runtime 3 --threshold seq_write=10M"
common+=" --threshold straggler_fraction=0.2"
# The training run: the example train.sh on every node, the slow node
# stepping ten times slower in the shaped run (it sleeps 0.5 s a step, the
# others 0.05 s); a node at half the median fails, and only a sample below
# 5% of its node's median counts as a dip (the shared cores are noisy).
common+=" --threshold train_fraction=0.5 --threshold train_dip=0.05"
cat >"$OUT/train_slow.sh" <<EOF
#!/bin/sh
p=0.05
[ "\$SLURMD_NODENAME" = "$slow_node" ] && p=0.5
exec "$S/conf/examples/train.sh" 100000 \$p
EOF
# Bad: on the first node the command exits at once; on the other it steps
# three times and hangs.
cat >"$OUT/train_bad.sh" <<'EOF'
#!/bin/sh
case "$SLURM_PROCID" in
  0) echo "no such model: gpt-7" >&2; exit 3 ;;
  *) for i in 1 2 3; do echo "step $i loss 1.0"; done; exec sleep 600 ;;
esac
EOF
chmod 755 "$OUT/train_slow.sh" "$OUT/train_bad.sh"
accept_job() {  # OUTFILE ARGS...: run preflight accept as the test user in an allocation of every node
  local o=$1; shift
  local jid
  jid=$(as_user sbatch --parsable -N"${ALLOC:-$count}" -D "$OUT/logs" -o "$o" --wrap "$B/admin/preflight accept $*")
  # A launch whose PMIx fence Slurm never completes costs nccl_timeout (60 s
  # here) and runs again (accept's Launch, up to three launches): bounded with
  # room for one more.
  wait_job "$jid" 330
}

# --- 1. shaped
# The first node's GPUs (the fake NVML of tests/fakes) idle at 12% during
# the training run: a starved node, warned. Restored after this run.
first_node=$(head -1 <<<"$nodes")
cp "$C/nodes/$first_node/nvml.faults" "$OUT/nvml.faults.orig"
echo "util * 12" >>"$C/nodes/$first_node/nvml.faults"
accept_job "$OUT/logs/shaped.out" --out "$OUT/shaped" --storage "$OUT/fast" --storage "$OUT/slow" $common \
  --storage-bytes 1M --storage-files 200 --threshold storage_fraction=0.2 --train "$OUT/train_slow.sh" --train-seconds 10
cat "$OUT/logs/shaped.out"
J=$OUT/shaped/report.json
check "shaped: report.json written" test -s "$J"
check "shaped: report.html written" test -s "$OUT/shaped/report.html"
check "shaped: report.json valid against its schema" python3 -c \
  'import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))' \
  "$S/accept/accept-report.schema.json" "$J"
jq_py() { python3 -c "import json,sys; r=json.load(open('$J')); $1"; }
ops_ok() {  # every other collective ran on all nodes, measured and verified
  jq_py "o = r['collective']['operations']; sys.exit(sorted(c['op'] for c in o) != ['all_gather', 'all_to_all', 'reduce_scatter'] or any(c['nodes'] != $count or c['error'] or not c['sizes'] or any(s['wrong'] for s in c['sizes']) for c in o))"
}
check "shaped: verdict fail" jq_py "sys.exit(r['verdict'] != 'fail')"
check "shaped: $slow_node named a straggler" jq_py "sys.exit('$slow_node' not in r['collective']['stragglers'])"
check "shaped: $slow_node's row fails" jq_py \
  "sys.exit(not any(n['node'] == '$slow_node' and n['verdict'] == 'fail' for n in r['node_rows']))"
check "shaped: no other node named" jq_py \
  "sys.exit(any(n['verdict'] == 'fail' and n['node'] != '$slow_node' for n in r['node_rows']))"
check "shaped: the slow path fails seq_write" jq_py \
  "sys.exit(not any(f['path'] == '$OUT/slow' and f['name'] == 'seq_write' and f['verdict'] == 'fail' for f in r['figures']))"
check "shaped: the fast path passes seq_write" jq_py \
  "sys.exit(any(f['path'] == '$OUT/fast' and f['name'] == 'seq_write' and f['verdict'] == 'fail' for f in r['figures']))"
check "shaped: the curve broke at the step taking in $slow_node" jq_py \
  "sys.exit('the curve broke between' not in r['collective']['scaling'] or ' and $count nodes' not in r['collective']['scaling'])"
check "shaped: all-gather, reduce-scatter and all-to-all across all $count nodes, data verified" ops_ok
check "shaped: a progress line per other collective" grep -q "preflight accept: collective: all_to_all on $count nodes:" "$OUT/logs/shaped.out"
check "shaped: the HTML shows them" grep -q "Other collectives" "$OUT/shaped/report.html"
check "shaped: the HTML names the node and the path" \
  grep -q "straggler.*$slow_node\|$slow_node.*straggler" "$OUT/shaped/report.html"
check "shaped: the HTML names the slow path" grep -q "$OUT/slow (one node" "$OUT/shaped/report.html"
check "shaped: the summary names the straggler" grep -q "straggler" "$OUT/logs/shaped.out"
check "shaped: a progress line per node count" grep -q "preflight accept: collective: $count nodes:" "$OUT/logs/shaped.out"
check "shaped: every node trained" jq_py "sys.exit(len(r['train']['nodes']) != $count or r['train']['seconds'] != 10)"
check "shaped: $slow_node's step rate fails" jq_py \
  "sys.exit(not any(f['stage'] == 'train' and f['node'] == '$slow_node' and f['verdict'] == 'fail' and 'step rate' in f['reason'] for f in r['figures']))"
check "shaped: no other node's step rate fails" jq_py \
  "sys.exit(any(f['stage'] == 'train' and f['node'] != '$slow_node' and f['verdict'] == 'fail' for f in r['figures']))"
plot_points() { sed -n 's/.*data-plot="train-rate" data-points="\([0-9]*\)".*/\1/p' "$1"; }
check "shaped: the step-rate plot has every node's samples" test "$(plot_points "$OUT/shaped/report.html")" -ge $((2 * count))
check "shaped: every node's 4 GPUs sampled (fake NVML: 500 W each)" jq_py \
  "sys.exit(any(n['gpus'] != 4 or n['gpu_power_w'] != 2000 for n in r['train']['nodes']))"
check "shaped: $first_node's idle GPUs warn, the others run at 100%" jq_py \
  "sys.exit(not any(f['stage'] == 'train' and f['node'] == '$first_node' and f['verdict'] == 'warn' and 'GPUs underused: mean utilisation 12%' in f['reason'] for f in r['figures']) or any(n['gpu_util_percent'] != 100 for n in r['train']['nodes'] if n['node'] != '$first_node'))"
cp "$OUT/nvml.faults.orig" "$C/nodes/$first_node/nvml.faults"
check "shaped: a progress line per node trained" grep -q "preflight accept: train: $slow_node: " "$OUT/logs/shaped.out"
# train_slow.sh runs train.sh without CHECKPOINT_EVERY: on several nodes it
# writes no checkpoint, which is a warning, not the run's failure.
check "shaped: a command that never checkpoints is one warning" jq_py \
  "sys.exit(not any(x.startswith('warn: training: no checkpoint round trip: the command wrote no complete checkpoint') for x in r['reasons']) or any(n['checkpoint']['resumed'] for n in r['train']['nodes']))"
check "shaped: nothing left on the paths" test -z "$(ls -A "$OUT/fast" "$OUT/slow" | grep -v -e lost+found -e '^/' -e '^$')"
python3 - "$J" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["collective"]["curves"]:
    if c["nodes"] > 1: print(f"  figure: busbw {c['nodes']} nodes {c['busbw_Bps']/1e6:.2f} MB/s")
for c in r["collective"]["operations"]: print(f"  figure: {c['op']} {c['nodes']} nodes {c['busbw_Bps']/1e6:.2f} MB/s")
for p in r["collective"]["pairs"]: print(f"  figure: pair {p['a']}-{p['b']} {p['busbw_Bps']/1e6:.2f} MB/s")
for s in r["storage"]:
    if s["scope"] == "one node": print(f"  figure: {s['path']} one node seq_write {s['seq_write_Bps']/1e6:.2f} MB/s seq_read {s['seq_read_Bps']/1e6:.2f} MB/s")
print("  scaling:", r["collective"]["scaling"])
PY

# --- 2. clean: the slow node restored, one fast path
cp "$OUT/preflight.conf.orig" "$conf"
rm -f "$C"/nodes/*/nccl_rate
if [ "$shaped" = tc ]; then "$S/tests/harness/cluster.sh" unshape "$C"; shape_all ""; fi
# Larger files here (tmpfs: fast): at 1 MiB a node's figures are a few
# milliseconds of work and one scheduling hiccup on the shared cores makes a
# node look 10x slower than the others. Even at 16 MiB, eight fio writers at
# once on two cores put one node at 0.1 of the median (seen: 699 MB/s
# against 6.99 GB/s), so the clean run's fraction is 0.02: the shaped run
# above tests the comparison with a path that is really slow.
# The shared tier of the round trip: a folder of the test user's, beside
# the fast path (both are local here: every emulated node sees them).
mkdir -p "$OUT/tier" && chown "$TEST_USER" "$OUT/tier"
accept_job "$OUT/logs/clean.out" --out "$OUT/clean" --storage "$OUT/fast" $common \
  --storage-bytes 16M --storage-files 1000 --threshold storage_fraction=0.02 \
  --threshold scaling_warn=0.5 --threshold scaling_fail=0.3 --train-seconds 5 --train-tier "$OUT/tier"
cat "$OUT/logs/clean.out"
J=$OUT/clean/report.json
check "clean: verdict pass" jq_py "sys.exit(r['verdict'] != 'pass')"
check "clean: nobody named" jq_py "sys.exit(bool(r['collective']['stragglers']))"
check "clean: the other collectives pass" ops_ok
check "clean: the example trained on every node and passed" jq_py \
  "t=[f for f in r['figures'] if f['stage'] == 'train']; sys.exit(len([f for f in t if f['name'] == 'step rate']) != $count or any(f['verdict'] != 'pass' for f in t) or 'train.sh' not in r['train']['command'])"
# The checkpoint round trip through the shared tier: one preflight-run
# --persist-to around the whole run, stopped at the bound like a
# preemption; its agent made the newest periodic checkpoint (step-N, every
# 20 steps, every node's part) durable on the tier; the resume run, on the
# same nodes, resumed every rank from the tier, going on at step N+1.
check "clean: the round trip went through the shared tier" jq_py \
  "sys.exit(not r['train']['tier'].startswith('$OUT/tier/.preflight-accept-'))"
check "clean: every node's checkpoint durable, resumed from the tier, went on from it" jq_py \
  "c=[n['checkpoint'] for n in r['train']['nodes']]; sys.exit(len(c) != $count or len(set(x['saved'] for x in c)) != 1 or any(not x['tried'] or x['saved_step'] < 20 or x['saved_step'] % 20 or x['from'] != x['saved'] or not x['from_tier'] or x['resume_step'] != x['saved_step'] + 1 for x in c))"
check "clean: a passing checkpoint resume figure per node" jq_py \
  "sys.exit(len([f for f in r['figures'] if f['name'] == 'checkpoint resume' and f['verdict'] == 'pass']) != $count)"
check "clean: nothing of the round trip left on the path" test -z "$(ls -A "$OUT/fast" | grep -v lost+found)"
check "clean: nothing of the round trip left on the tier" test -z "$(ls -A "$OUT/tier")"

# --- 2b. a framework's convention through the tier: a DCP-shaped command
# (every rank writes its shard of step-N every 20 steps, then rank 0
# .metadata and the others .preflight-part, as dcp.save() and the
# convention's per-node marker do; no COMPLETE marker anywhere), on two
# nodes with --train-convention dcp: preflight-run knows its checkpoints
# complete by that convention, makes one durable on the tier with both
# parts, and both ranks resume from the tier at the step after it.
cat >"$OUT/train_dcp.sh" <<'EOF'
#!/bin/sh
r=${SLURM_PROCID:-0} d=${PREFLIGHT_CKPT_LOCAL:?} n=0
trap 'exit 0' USR2
if [ -n "${PREFLIGHT_RESUME_FROM:-}" ]; then
  n=$(cat "$PREFLIGHT_RESUME_FROM/__${r}_0.distcp") && echo "resumed from $PREFLIGHT_RESUME_FROM at step $n"
fi
while :; do
  n=$((n + 1))
  echo "step $n loss 0.5"
  if [ $((n % 20)) = 0 ]; then
    mkdir -p "$d/step-$n" && echo "$n" >"$d/step-$n/__${r}_0.distcp"
    if [ "$r" = 0 ]; then : >"$d/step-$n/.metadata"; else : >"$d/step-$n/.preflight-part"; fi
  fi
  sleep 0.05
done
EOF
chmod 755 "$OUT/train_dcp.sh"
ALLOC=2 accept_job "$OUT/logs/dcp.out" --out "$OUT/dcp" --storage "$OUT/fast" $common --storage-bytes 1M \
  --storage-files 50 --train "$OUT/train_dcp.sh" --train-seconds 5 --train-tier "$OUT/tier" --train-convention dcp
cat "$OUT/logs/dcp.out"
J=$OUT/dcp/report.json
check "dcp: the round trip went through the tier by the dcp convention" jq_py \
  "sys.exit(r['train']['convention'] != 'dcp' or not r['train']['tier'])"
check "dcp: both ranks' checkpoint durable, resumed from the tier, went on from it" jq_py \
  "c=[n['checkpoint'] for n in r['train']['nodes']]; sys.exit(len(c) != 2 or any(x['saved_step'] < 20 or x['saved_step'] % 20 or x['from'] != x['saved'] or not x['from_tier'] or x['resume_step'] != x['saved_step'] + 1 for x in c))"
check "dcp: nothing of the round trip left on the path or the tier" test -z "$(ls -A "$OUT/fast" "$OUT/tier" | grep -v -e lost+found -e '^/' -e '^$')"

# --- 3. bad input
ALLOC=2 accept_job "$OUT/logs/bad.out" --config "$C/etc/preflight.conf" --out "$OUT/bad" --storage "$OUT/locked" --storage "$OUT/full" \
  --max-bytes 64K --storage-bytes 4M --storage-files 50 --storage-runtime 3 --train "$OUT/train_bad.sh" --train-seconds 6
cat "$OUT/logs/bad.out"
check "bad: --out with other files left alone" grep -qx mine "$OUT/bad/notes.txt"
check "bad: the report went to a subdirectory, said so" grep -q "holds other files" "$OUT/logs/bad.out"
J=$(ls "$OUT"/bad/preflight-accept-*/report.json 2>/dev/null | head -1)
check "bad: report written" test -s "$J"
check "bad: unwritable path named" grep -q "cannot write $OUT/locked: Permission denied" "$OUT/logs/bad.out"
check "bad: full path named" grep -q "$OUT/full: .*no space left on device" "$OUT/logs/bad.out"
check "bad: the collective still ran" grep -q "preflight accept: collective: 2 nodes:" "$OUT/logs/bad.out"
check "bad: nothing left on the full path" test -z "$(ls -A "$OUT/full")"
train_reason() {  # NODE PATTERN: the node's training figure's reason holds PATTERN
  jq_py "sys.exit(not any(f['stage'] == 'train' and f['node'] == '$1' and '$2' in f['reason'] for f in r['figures']))"
}
check "bad: a training command that exits at once is named with its last line" \
  train_reason n1 "ended with exit 3 after 1 lines (last line: no such model: gpt-7)"
check "bad: a training command that hangs is named stalled" train_reason n2 "stalled: no progress line in the last"
check "bad: nothing of the training run left running" bash -c '! pgrep -fx "sleep 600"'

[ $failures = 0 ] || exit 1
echo "[$T] all ok"
