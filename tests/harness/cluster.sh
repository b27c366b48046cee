#!/bin/bash
# A real, private Slurm on this host: munged, slurmctld and N slurmd that
# emulate nodes n1..nN (default 3), all under one scratch folder, on free
# ports, with a private munge socket, so nothing of the host's own Slurm or
# munge is used or disturbed. Installs nothing (scripts/deps does that).
#
#   cluster.sh start DIR BUILD_DIR   write configs, start daemons, wait until nodes are idle
#   cluster.sh stop DIR              stop everything it started, by PID, in Slurm's order;
#                                    undo its traffic shaping
#   cluster.sh env DIR               print the exports a client needs (SLURM_CONF, PATH)
#   cluster.sh shape DIR NODE RATE   limit NODE's fabric traffic (both ways) to RATE (tc units:
#                                    40mbit, 500kbit, 1gbit...)
#   cluster.sh cut DIR NODE          a dead fabric link: a rate so low nothing gets through in time
#   cluster.sh unshape DIR           remove every shaping this cluster made
#
# The emulated fabric. Node nK has two loopback addresses, as a real node
# has a management network and a fabric:
#   127.0.1.K      its NodeAddr: slurmctld, slurmd, srun and PMIx talk here;
#   127.0.1.(100+K) its fabric address (DIR/etc/node-addresses, the config's
#                  node_addresses): everything preflight sends between nodes
#                  (the host backend's ring, the stage fan-out) binds to it.
# The whole 127/8 reaches lo, so nothing is configured to use them. `shape`
# and `cut` put an htb class on lo for one node's fabric address (u32
# filters on source and destination), so a slow or dead link slows the
# data, not Slurm's control traffic, as a bad cable or a down-trained NIC
# does on a real cluster. Only lo, only 127.0.1.0/24 is ever shaped (this
# kernel has htb, tbf and u32, no netem and no tc actions).
#
# Environment: PREFLIGHT_NODES (1-16, default 3), PREFLIGHT_SLURM_PREFIX (a
# Slurm built by scripts/slurm-from-source instead of Debian's),
# PREFLIGHT_PROLOG_FLAGS (default Alloc,DeferBatch, as
# conf/slurm.conf.fragment recommends; RunInJob variants add to it).
#
# Test seams of the prolog wrapper (tests/system/deferbatch_test.sh): an
# executable DIR/hooks/prolog-before.NODE runs before the prolog on NODE, and
# DIR/run/prolog-done/JOBID.NODE is written once the prolog has ended.
#
# The preflight pieces come from BUILD_DIR: the plugin (plugstack.conf), the
# prolog and epilog (through tiny wrappers that pass --config), and the
# health check. Per-node fixture roots live in DIR/nodes/<node>/.
set -euo pipefail

NODE_COUNT=${PREFLIGHT_NODES:-3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "cluster.sh: $*" >&2; exit 1; }
POLL_WHO=cluster.sh
. "$(dirname "${BASH_SOURCE[0]}")/poll.sh"
. "$(dirname "${BASH_SOURCE[0]}")/slurm_state.sh"  # all_idle
[[ $NODE_COUNT =~ ^[0-9]+$ ]] && [ "$NODE_COUNT" -ge 1 ] && [ "$NODE_COUNT" -le 16 ] ||
  die "PREFLIGHT_NODES=$NODE_COUNT: expected 1 to 16 (2 cores: 16 slurmd hold ~100 MB, more only slows every test)"
NODES=()
for ((k = 1; k <= NODE_COUNT; k++)); do NODES+=("n$k"); done
mgmt_addr() { echo "127.0.1.${1#n}"; }          # NodeAddr
fabric_addr() { echo "127.0.1.$((100 + ${1#n}))"; }  # node_addresses

# Which Slurm: Debian's (on PATH) or one built by scripts/slurm-from-source,
# named by PREFLIGHT_SLURM_PREFIX (its bin/, sbin/). Every difference between
# releases that the harness must handle is keyed on slurm_version below.
if [ -n "${PREFLIGHT_SLURM_PREFIX:-}" ]; then
  [ -x "$PREFLIGHT_SLURM_PREFIX/sbin/slurmctld" ] || die "PREFLIGHT_SLURM_PREFIX=$PREFLIGHT_SLURM_PREFIX has no sbin/slurmctld"
  export PATH=$PREFLIGHT_SLURM_PREFIX/bin:$PREFLIGHT_SLURM_PREFIX/sbin:$PATH
fi
# slurm_version: e.g. 2505 for 25.05.x, 2211 for 22.05.x... as MAJOR*100+MINOR.
slurm_version() {
  local v
  v=$(slurmctld -V 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
  [ -n "$v" ] || die "cannot tell the Slurm version (slurmctld -V)"
  IFS=. read -r ma mi _ <<<"$v"
  echo $((10#$ma * 100 + 10#$mi))
}

free_port_base() {
  # Consecutive free TCP ports: slurmctld and one slurmd per node (base +
  # 20 on was the stage fan-out's range, before it moved below 1024).
  local used base i ok
  used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
  local try
  for ((try = 0; try < 50; try++)); do  # 50 random tries, no wait
    base=$((20000 + RANDOM % 30000))
    ok=1
    for ((i = 0; i <= 20 + NODE_COUNT; i++)); do grep -qx "$((base + i))" <<<"$used" && ok=0; done
    [ $ok = 1 ] && { echo $base; return; }
  done
  die "no free port range found"
}

# The stage fan-out's port: privileged (only root, i.e. a prolog, may
# listen there; preflight(7) PEER FAN-OUT SECURITY), one free for every
# node's index (each node binds its own address, but a stale listener on
# any address would take it).
free_peer_port() {
  local used base i ok
  used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
  local try
  for ((try = 0; try < 50; try++)); do  # 50 random tries, no wait
    base=$((700 + RANDOM % 280))
    ok=1
    for ((i = 0; i < NODE_COUNT; i++)); do grep -qx "$((base + i))" <<<"$used" && ok=0; done
    [ $ok = 1 ] && { echo $base; return; }
  done
  die "no free privileged port range found"
}

# Topology fixture for the topology-aware environment (issue 3): every node
# is the IBM AC922 of tests/fixtures/topology (4 GPUs, 4 HCAs, GPU i nearest
# mlx5_i); its HCA ports and IPoIB netdevs are laid out ACTIVE/up in the
# node's fixture sysfs. Only adds files under /sys/class/{infiniband,net}.
TOPOLOGY_XML=$here/../fixtures/topology/hwloc-ibm-ac922-lassen-4xv100-cx5.xml
lay_topology_sysfs() {
  local root=$1 i p
  for i in 0 1 2 3; do
    p=$root/sys/class/infiniband/mlx5_$i/ports/1
    mkdir -p "$p" "$root/sys/class/net/hsi$i"
    echo "4: ACTIVE" >"$p/state"
    echo "5: LinkUp" >"$p/phys_state"
    echo "InfiniBand" >"$p/link_layer"
    echo "100 Gb/sec (4X EDR)" >"$p/rate"
    echo "up" >"$root/sys/class/net/hsi$i/operstate"
  done
}

# Sockets live under a short directory of their own, not under DIR: a unix
# socket's path is at most 107 bytes, and slurmstepd's (SlurmdSpoolDir/
# NODE_JOB.STEP), PMIx's (SlurmdSpoolDir/pmix.JOB.STEP/...) and munge's
# would pass that in a deep checkout (CI's cluster of a cluster test
# lives 80 characters down). One per DIR; DIR/run/spool links to it.
sock_dir() {
  local top=/run/preflight-test
  [ -d /run ] && [ -w /run ] || top=/tmp/preflight-test
  echo "$top/$(printf %s "$1" | sha1sum | cut -c1-12)"
}

write_configs() {
  local dir=$1 build=$2 host base sock
  host=$(hostname -s)
  base=$(free_port_base)
  sock=$(sock_dir "$dir")
  mkdir -p "$dir"/{etc,run/state,run/log,munge,fakedev,state,metrics,bin}
  rm -rf "$sock"
  mkdir -p "$sock/spool"
  chmod 755 "$(dirname "$sock")" "$sock"
  ln -sfn "$sock/spool" "$dir/run/spool"
  for n in "${NODES[@]}"; do
    mkdir -p "$dir/run/tmp/$n" "$dir/nodes/$n/root" "$dir/nodes/$n/scratch"
    lay_topology_sysfs "$dir/nodes/$n/root"
    for g in 0 1 2 3; do [ -e "$dir/fakedev/$n-nvidia$g" ] || mknod "$dir/fakedev/$n-nvidia$g" c 1 3; done
  done
  for g in 0 1 2 3; do [ -e "$dir/fakedev/nvidia$g" ] || mknod "$dir/fakedev/nvidia$g" c 1 3; done
  health_fixtures "$dir" "$build"

  cat >"$dir/etc/slurm.conf" <<CONF
# Written by tests/harness/cluster.sh: private $NODE_COUNT-node Slurm for preflight's system tests.
ClusterName=preflight-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$base
AuthType=auth/munge
CredType=cred/munge
# cred_expire=20 (Slurm's default 120, its floor 5): a requeued batch job
# is held cred_expire + 1 seconds (so slurmd's revoked credential of the
# first run has expired); the tests that wait for a restart wait 21 s, not
# 121. A credential is still valid 20 s after it was signed: far past a
# launch RPC on this host.
AuthInfo=socket=$sock/munge.sock,cred_expire=20
MailProg=/bin/true
StateSaveLocation=$dir/run/state
SlurmdSpoolDir=$sock/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.%n.pid
SlurmctldLogFile=$dir/run/log/slurmctld.log
SlurmdLogFile=$dir/run/log/slurmd.%n.log
SlurmctldDebug=debug
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
# batch_sched_delay=0: else every sbatch waits ~3 s. nohold_on_prolog_fail:
# a job whose prolog failed is requeued and runs elsewhere instead of held.
SchedulerParameters=batch_sched_delay=0,nohold_on_prolog_fail
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
# A stage prolog may run past BatchStartTimeout + MessageTimeout (20 s by
# default: a child falling back from a cut parent, fabric_test.sh part 5);
# slurmctld then requeues the job as "missing from batch node" if that node
# happens to register meanwhile (every ~200 s). Sites that stage set it to
# stage_timeout: 'preflight config check' says so.
BatchStartTimeout=300
KillWait=5
Waittime=0
TmpFS=$dir/run/tmp/%n
GresTypes=gpu
PlugStackConfig=$dir/etc/plugstack.conf
Prolog=$dir/bin/prolog
Epilog=$dir/bin/epilog
PrologFlags=${PREFLIGHT_PROLOG_FLAGS:-Alloc,DeferBatch}
HealthCheckProgram=$dir/bin/healthcheck
HealthCheckInterval=0
$(for n in "${NODES[@]}"; do
  echo "NodeName=$n NodeHostname=$host NodeAddr=$(mgmt_addr $n) Port=$((base + ${n#n})) CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=2000 Gres=gpu:4 State=UNKNOWN"
done)
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  {
    echo "# Written by tests/harness/cluster.sh: each emulated node's fabric address."
    for n in "${NODES[@]}"; do echo "$(fabric_addr $n) $n"; done
  } >"$dir/etc/node-addresses"
  # 24.05+ would drive cgroup v2 through systemd's dbus, which this
  # sandbox lacks; the emulated nodes need no cgroups (proctrack/linuxproc).
  if [ "$(slurm_version)" -ge 2405 ]; then
    echo "CgroupPlugin=disabled" >"$dir/etc/cgroup.conf"
  fi
  {
    echo "AutoDetect=off"
    for n in "${NODES[@]}"; do echo "NodeName=$n Name=gpu File=$dir/fakedev/$n-nvidia[0-3]"; done
  } >"$dir/etc/gres.conf"
  cat >"$dir/etc/preflight.conf" <<CONF
# Site config for the system tests (see conf/preflight.conf for every key).
state_dir = $dir/state
textfile_dir = $dir/metrics
fsroot = $dir/nodes/%n/root
scratch_dir = $dir/nodes/%n/scratch
scratch_min_free = 1M
stage_dir = $dir/nodes/%n/stage
# Each job's node-local checkpoint folder (the tasks' PREFLIGHT_CKPT_LOCAL); the
# epilog persists it within the budget (ckpt_epilog_test.sh).
ckpt_dir = $dir/nodes/%n/ckpt
ckpt_epilog_budget = 60s
# Each emulated node's fabric address (127.0.1.(100+K) for nK): the host
# backend and the stage fan-out bind to it, so cluster.sh shape slows them.
node_addresses = $dir/etc/node-addresses
# Peer fan-out (off here; stage_test.sh turns it on): node i of a job
# serves on its fabric address, port stage_peer_port + i.
stage_peers = no
stage_peer_port = $(free_peer_port)
stage_munge_socket = $sock/munge.sock
scontrol = $(command -v scontrol)
# Job, step and node records come from "preflight slurm" (libslurm, JSON).
slurm_query = $build/admin/preflight
slurm_conf = $dir/etc/slurm.conf
probe_timeout = 10s
topology_xml = $(realpath "$TOPOLOGY_XML")
# The AC922's HCAs are NODE/SYS to every GPU (GPUs on NVLink to the CPU): the
# PCIe tree makes them rails only for want of a closer NIC; the site names them.
topo_rails = mlx5_0,mlx5_1,mlx5_2,mlx5_3
# GPU i sits next to mlx5_i on the AC922 fixture; the prolog checks it stays so.
topo_expect = 0:mlx5_0,1:mlx5_1,2:mlx5_2,3:mlx5_3
# Node health checks: every node's GPUs come from the fake NVML (its faults
# from the node's own file), its HCAs from the fixture sysfs in its root.
nvml_library = $build/tests/fakes/libnvidia-ml.so.1
nvml_fault_file = $dir/nodes/%n/nvml.faults
gpu_count = 4
gpu_persistence = on
ib_hcas = mlx5_0,mlx5_1,mlx5_2,mlx5_3
ib_rate = 100
ib_link_layer = InfiniBand
# --nccl-check's collective (host backend here): small messages, bounded waits.
nccl_binary = $build/collective/preflight-nccl
# The GRES GPUs here are character devices, not GPUs: jobs that ask for them
# still run the collective on the host backend.
nccl_backend = host
nccl_max_bytes = 1M
nccl_timeout = 60s
# The straggler rule names, not acts, in the tests whose subject is not
# the rule: at 1 MiB on 2 shared cores a pair's figure swings 2-3x. The
# rule's own test (system.fabric) turns it on and counts false positives.
check_nccl_straggler = warn
CONF
  echo "required $build/spank_plugin/preflight.so conf=$dir/etc/preflight.conf" >"$dir/etc/plugstack.conf"
  for b in epilog healthcheck; do
    printf '#!/bin/sh\nexec %s --config %s "$@"\n' "$build/$([ $b = epilog ] && echo epilog || echo prolog)/preflight-$b" "$dir/etc/preflight.conf" >"$dir/bin/$b"
    chmod 755 "$dir/bin/$b"
  done
  mkdir -p "$dir/hooks" "$dir/run/prolog-done"
  rm -f "$dir/hooks"/* "$dir/run/prolog-done"/*
  cat >"$dir/bin/prolog" <<WRAP
#!/bin/sh
hook=$dir/hooks/prolog-before.\$SLURMD_NODENAME
[ -x "\$hook" ] && "\$hook"
$build/prolog/preflight-prolog --config $dir/etc/preflight.conf "\$@"
rc=\$?
date +%s.%N >$dir/run/prolog-done/\$SLURM_JOB_ID.\$SLURMD_NODENAME
exit \$rc
WRAP
  chmod 755 "$dir/bin/prolog"
}

# Per node, for the health checks (issue 4), on top of the topology sysfs
# above (whose 4 EDR HCAs they check): a link_downed counter per port, the
# kernel log and boot id of the healthy-8 sysfs fixture (generated into
# BUILD/fixtures/sysfs by cmake from tests/fixtures/sysfs/make_fixtures.sh), 4 GPU device
# files, and an NVML fault file emulating 4 healthy GPUs. Reset at every
# start; tests edit them to inject faults. Only adds files.
health_fixtures() {
  local dir=$1 fix=$2/fixtures/sysfs/healthy-8 n g p c
  [ -d "$fix" ] || die "$fix missing: configure the build with tests enabled"
  for n in "${NODES[@]}"; do
    mkdir -p "$dir/nodes/$n/root/dev"
    for p in "$dir/nodes/$n/root"/sys/class/infiniband/*/ports/*; do
      mkdir -p "$p/counters"; echo 0 >"$p/counters/link_downed"
      for c in symbol_error link_error_recovery port_rcv_errors port_xmit_discards local_link_integrity_errors \
        excessive_buffer_overrun_errors; do echo 0 >"$p/counters/$c"; done
    done
    for p in "$dir/nodes/$n/root"/sys/class/infiniband/*; do  # fleet.versions
      echo "16.35.2000" >"$p/fw_ver"; echo "IBM_2190110032" >"$p/board_id"
    done
    cp -a "$fix/proc" "$dir/nodes/$n/root/"
    cp "$fix/dev/kmsg" "$dir/nodes/$n/root/dev/kmsg"
    for g in 0 1 2 3; do : >"$dir/nodes/$n/root/dev/nvidia$g"; done
    echo "gpus 4" >"$dir/nodes/$n/nvml.faults"
  done
}

# The unprivileged account the system tests submit jobs as (runuser).
TEST_USER=${PREFLIGHT_TEST_USER:-pfuser}
ensure_test_user() {
  id -u "$TEST_USER" >/dev/null 2>&1 && return 0
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$TEST_USER" ||
    die "cannot create the test account $TEST_USER"
}

start() {
  local dir=$1 build=$2
  [ "$(id -u)" = 0 ] || die "must run as root (munged, slurmd)"
  command -v slurmctld >/dev/null || die "slurmctld not installed: run scripts/deps"
  [ -f "$build/spank_plugin/preflight.so" ] || die "$build has no built plugin"
  [ -f "$dir/run/slurmctld.pid" ] && stop "$dir" || true
  unshape "$dir"
  rm -rf "$dir/run" "$dir/state" "$dir/metrics"
  write_configs "$dir" "$build"
  printf '%s\n' "${NODES[@]}" >"$dir/run/nodes"
  export SLURM_CONF=$dir/etc/slurm.conf

  # Private munged: own key, socket, pid and log.
  if [ ! -f "$dir/munge/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  fi
  # 755: users submit through this munged as themselves (sbatch/srun run
  # by runuser; tests never use sbatch --uid, which later Slurm removed).
  chmod 755 "$dir/munge"; chmod 400 "$dir/munge/munge.key"
  ensure_test_user
  munged --force --socket="$(sock_dir "$dir")/munge.sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"

  slurmctld -f "$SLURM_CONF"
  for n in "${NODES[@]}"; do slurmd -f "$SLURM_CONF" -N "$n"; done
  # 120 s: accept's 8 nodes start beside a running cluster.
  poll 120 "every node idle" all_idle && { sinfo -h -N -o '%N %T'; return 0; }
  sinfo -N 2>&1 || true
  tail -20 "$dir/run/log/slurmctld.log" >&2 || true
  die "nodes did not become idle"
}

stop_pids() {
  local pids=("$@")
  [ ${#pids[@]} = 0 ] && return 0
  kill "${pids[@]}" 2>/dev/null || true
  poll 10 "${pids[*]} ended on TERM" all_ended "${pids[@]}" 2>/dev/null && return 0
  kill -9 "${pids[@]}" 2>/dev/null || true
}

# all_ended PID...: none of them runs (a zombie has ended).
all_ended() {
  local p
  for p in "$@"; do [ -n "$(ps -o stat= -p "$p" 2>/dev/null | grep -v Z)" ] && return 1; done
  return 0
}
drained_of_jobs() { [ -z "$(squeue -h 2>/dev/null)$(sinfo -h -t completing -o %N 2>/dev/null)" ]; }

pid_of() { [ -f "$1" ] && cat "$1" || true; }

# --- traffic shaping (the emulated fabric) ----------------------------------
# One htb root on lo, made by the first `shape` of a cluster and owned by it
# (DIR/run/tc-owner); class 1:K and two u32 filters per shaped node nK.
# Unclassified traffic (everything else on lo) passes unshaped.
# DIR/run/shaped lists "NODE RATE" per shaped node. Traffic between two
# shaped nodes takes the class of the first one shaped (the first u32
# filter that matches), so shape the slowest node first.
node_known() { local n; for n in $(cat "$1/run/nodes" 2>/dev/null); do [ "$n" = "$2" ] && return 0; done; return 1; }
valid_rate() { [[ $1 =~ ^[1-9][0-9]{0,8}(bit|kbit|mbit|gbit)$ ]]; }
lo_root_is_ours() { [ -f "$1/run/tc-owner" ] && tc qdisc show dev lo | grep -q '^qdisc htb 1: root'; }

shape() {
  local dir=$1 node=$2 rate=$3 k addr
  [ "$(id -u)" = 0 ] || die "shape: must run as root (tc)"
  [ -f "$dir/run/nodes" ] || die "shape: no cluster started in $dir"
  node_known "$dir" "$node" || die "shape: no node '$node' in this cluster ($(tr '\n' ' ' <"$dir/run/nodes"| sed 's/ $//'))"
  valid_rate "$rate" || die "shape: bad rate '$rate' (expected a number and bit, kbit, mbit or gbit, e.g. 40mbit)"
  grep -q "^$node " "$dir/run/shaped" 2>/dev/null && die "shape: $node is already shaped ($(grep "^$node " "$dir/run/shaped" | cut -d' ' -f2)); unshape first"
  k=${node#n}
  addr=$(fabric_addr "$node")
  case $addr in 127.0.1.*) ;; *) die "shape: refusing to shape $addr (only 127.0.1.0/24)" ;; esac
  if ! lo_root_is_ours "$dir"; then
    tc qdisc show dev lo | grep -q '^qdisc htb 1: root' && die "shape: lo already has an htb root made by another cluster; unshape it first"
    tc qdisc add dev lo root handle 1: htb default 0 || die "shape: cannot add an htb qdisc on lo"
    echo "$dir" >"$dir/run/tc-owner"
  fi
  # burst: one lo packet (MTU 64 KiB), so a slow class still sends whole
  # packets; a cut (below 1mbit) gets almost none, or its first 70 KB
  # would pass at full speed.
  local burst=70k
  [[ $rate =~ ^[0-9]+(bit|kbit)$ ]] && burst=2k
  tc class add dev lo parent 1: classid "1:$k" htb rate "$rate" ceil "$rate" burst $burst cburst $burst quantum 65536 ||
    die "shape: tc refused rate '$rate'"
  tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dst "$addr/32" flowid "1:$k" &&
    tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip src "$addr/32" flowid "1:$k" ||
    die "shape: cannot add the filters for $addr"
  echo "$node $rate" >>"$dir/run/shaped"
  echo "cluster.sh: $node ($addr) shaped to $rate"
}

unshape() {
  local dir=$1
  if lo_root_is_ours "$dir"; then
    tc qdisc del dev lo root 2>/dev/null || true
  fi
  rm -f "$dir/run/tc-owner" "$dir/run/shaped"
}

stop() {
  local dir=$1 pids=()
  export SLURM_CONF=$dir/etc/slurm.conf
  # A job a failed test left running is cancelled: its slurmstepd and tasks
  # outlive slurmd, and the next cluster would start its job ids at 1 again
  # beside them. Then let epilogs finish, else slurmd retries to a dead
  # slurmctld (bounded: 60 s).
  squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
  poll 60 "no job left, no node completing" drained_of_jobs 2>/dev/null || true
  for n in $(cat "$dir/run/nodes" 2>/dev/null || echo "${NODES[@]}"); do
    p=$(pid_of "$dir/run/slurmd.$n.pid"); [ -n "$p" ] && pids+=("$p")
  done
  stop_pids "${pids[@]}"
  stop_pids $(pid_of "$dir/run/slurmctld.pid")
  stop_pids $(pid_of "$dir/munge/munged.pid")
  rm -f "$dir/run/slurmctld.pid"
  rm -rf "$(sock_dir "$dir")"
  unshape "$dir"
}

case "${1:-}" in
  start) [ $# = 3 ] || die "usage: cluster.sh start DIR BUILD_DIR"; start "$(realpath -m "$2")" "$(realpath "$3")" ;;
  stop) [ $# = 2 ] || die "usage: cluster.sh stop DIR"; stop "$(realpath -m "$2")" ;;
  shape) [ $# = 4 ] || die "usage: cluster.sh shape DIR NODE RATE"; shape "$(realpath -m "$2")" "$3" "$4" ;;
  cut) [ $# = 3 ] || die "usage: cluster.sh cut DIR NODE"; shape "$(realpath -m "$2")" "$3" 1kbit ;;
  unshape) [ $# = 2 ] || die "usage: cluster.sh unshape DIR"; unshape "$(realpath -m "$2")" ;;
  env)
    echo "export SLURM_CONF=$(realpath -m "$2")/etc/slurm.conf"
    [ -z "${PREFLIGHT_SLURM_PREFIX:-}" ] || echo "export PATH=$PREFLIGHT_SLURM_PREFIX/bin:$PREFLIGHT_SLURM_PREFIX/sbin:\$PATH"
    ;;
  *) die "usage: cluster.sh start DIR BUILD_DIR | stop DIR | env DIR | shape DIR NODE RATE | cut DIR NODE | unshape DIR" ;;
esac
