#!/bin/bash
# A real, private Slurm on this host: munged, slurmctld and 3 slurmd that
# emulate nodes n1..n3, all under one scratch folder, on free ports, with a
# private munge socket, so nothing of the host's own Slurm or munge is used
# or disturbed. Installs nothing (scripts/deps does that).
#
#   cluster.sh start DIR BUILD_DIR   write configs, start daemons, wait until nodes are idle
#   cluster.sh stop DIR              stop everything it started, by PID, in Slurm's order
#   cluster.sh env DIR               print the exports a client needs (SLURM_CONF, PATH)
#
# Environment: PREFLIGHT_SLURM_PREFIX (a Slurm built by scripts/slurm-from-source
# instead of Debian's), PREFLIGHT_PROLOG_FLAGS (default Alloc,DeferBatch, as
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

NODES=(n1 n2 n3)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "cluster.sh: $*" >&2; exit 1; }

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
  # Four consecutive free TCP ports (slurmctld + 3 slurmd).
  local used base i ok
  used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
  for _ in $(seq 1 50); do
    base=$((20000 + RANDOM % 30000))
    ok=1
    for i in 0 1 2 3; do grep -qx "$((base + i))" <<<"$used" && ok=0; done
    [ $ok = 1 ] && { echo $base; return; }
  done
  die "no free port range found"
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

write_configs() {
  local dir=$1 build=$2 host base
  host=$(hostname -s)
  base=$(free_port_base)
  mkdir -p "$dir"/{etc,run/state,run/log,run/spool,munge,fakedev,state,metrics,bin}
  for n in "${NODES[@]}"; do
    mkdir -p "$dir/run/tmp/$n" "$dir/nodes/$n/root" "$dir/nodes/$n/scratch"
    lay_topology_sysfs "$dir/nodes/$n/root"
    for g in 0 1 2 3; do [ -e "$dir/fakedev/$n-nvidia$g" ] || mknod "$dir/fakedev/$n-nvidia$g" c 1 3; done
  done
  for g in 0 1 2 3; do [ -e "$dir/fakedev/nvidia$g" ] || mknod "$dir/fakedev/nvidia$g" c 1 3; done
  health_fixtures "$dir" "$build"

  cat >"$dir/etc/slurm.conf" <<CONF
# Written by tests/harness/cluster.sh: private 3-node Slurm for preflight's system tests.
ClusterName=preflight-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$base
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
MailProg=/bin/true
StateSaveLocation=$dir/run/state
SlurmdSpoolDir=$dir/run/spool/%n
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
NodeName=n[1-3] NodeHostname=$host NodeAddr=127.0.0.1 Port=$((base + 1))-$((base + 3)) CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=2000 Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
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
# Peer fan-out (off here; stage_test.sh turns it on): the emulated nodes all
# live on 127.0.0.1, node i of a job on stage_peer_port + i.
stage_peers = no
stage_peer_host = 127.0.0.1
stage_peer_port = $((base + 10))
stage_munge_socket = $dir/munge/munge.sock
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
  rm -rf "$dir/run" "$dir/state" "$dir/metrics"
  write_configs "$dir" "$build"
  export SLURM_CONF=$dir/etc/slurm.conf

  # Private munged: own key, socket, pid and log.
  if [ ! -f "$dir/munge/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  fi
  # 755: users submit through this munged as themselves (sbatch/srun run
  # by runuser; tests never use sbatch --uid, which later Slurm removed).
  chmod 755 "$dir/munge"; chmod 400 "$dir/munge/munge.key"
  ensure_test_user
  munged --force --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"

  slurmctld -f "$SLURM_CONF"
  for n in "${NODES[@]}"; do slurmd -f "$SLURM_CONF" -N "$n"; done
  for _ in $(seq 1 200); do
    [ "$(sinfo -h -o %T 2>/dev/null | sort -u)" = idle ] && { sinfo -h -N -o '%N %T'; return 0; }
    sleep 0.05
  done
  sinfo -N 2>&1 || true
  tail -20 "$dir/run/log/slurmctld.log" >&2 || true
  die "nodes did not become idle"
}

stop_pids() {
  local pids=("$@") alive p
  [ ${#pids[@]} = 0 ] && return 0
  kill "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 200); do
    alive=0
    for p in "${pids[@]}"; do [ -n "$(ps -o stat= -p "$p" 2>/dev/null | grep -v Z)" ] && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.05
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
}

pid_of() { [ -f "$1" ] && cat "$1" || true; }

stop() {
  local dir=$1 pids=()
  export SLURM_CONF=$dir/etc/slurm.conf
  # Let epilogs finish first, else slurmd retries to a dead slurmctld.
  for _ in $(seq 1 100); do
    [ -z "$(squeue -h 2>/dev/null)$(sinfo -h -t completing -o %N 2>/dev/null)" ] && break
    sleep 0.05
  done
  for n in "${NODES[@]}"; do p=$(pid_of "$dir/run/slurmd.$n.pid"); [ -n "$p" ] && pids+=("$p"); done
  stop_pids "${pids[@]}"
  stop_pids $(pid_of "$dir/run/slurmctld.pid")
  stop_pids $(pid_of "$dir/munge/munged.pid")
  rm -f "$dir/run/slurmctld.pid"
}

case "${1:-}" in
  start) [ $# = 3 ] || die "usage: cluster.sh start DIR BUILD_DIR"; start "$(realpath -m "$2")" "$(realpath "$3")" ;;
  stop) [ $# = 2 ] || die "usage: cluster.sh stop DIR"; stop "$(realpath -m "$2")" ;;
  env)
    echo "export SLURM_CONF=$(realpath -m "$2")/etc/slurm.conf"
    [ -z "${PREFLIGHT_SLURM_PREFIX:-}" ] || echo "export PATH=$PREFLIGHT_SLURM_PREFIX/bin:$PREFLIGHT_SLURM_PREFIX/sbin:\$PATH"
    ;;
  *) die "usage: cluster.sh start DIR BUILD_DIR | stop DIR | env DIR" ;;
esac
