#!/bin/bash
# Golden test of `preflight topo` on captured real machines: the table and
# the JSON against tests/fixtures/topology/golden/*.txt|*.json, plus the
# refusals for bad arguments. PREFLIGHT_REGENERATE_GOLDEN=1 rewrites the
# goldens (review the diff).
#   topo_cli.sh PREFLIGHT_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
fix=$src/tests/fixtures/topology
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# No site config: --config /dev/null keeps the host's /etc/preflight out.
run() { "$bin" --config /dev/null topo "$@" 2>&1; }
norm() { sed "s#$fix/##g"; }

for name in hwloc-dell-xe8640-4xh100-cx7-cx6 hwloc-aws-p4d-24xlarge-8xa100-4xefa hwloc-ibm-ac922-lassen-4xv100-cx5 \
  hwloc-24em64t-2n6c2t-pci-mlx4-noports hwloc-llnl-corona-8xmi50-cx6 hwloc-llnl-tuolumne-4xmi300a-slingshot \
  hwloc1-llnl-corona-4xmi50-vga-cx6 hwloc-llnl-tuolumne-4xmi300a-cpx-slingshot; do
  got=$(run --xml "$fix/$name.xml" --gpus 0 | norm)
  want=$fix/golden/$name.topo.txt
  if [ -n "${PREFLIGHT_REGENERATE_GOLDEN:-}" ]; then printf '%s\n' "$got" >"$want"; continue; fi
  diff -u "$want" <(printf '%s\n' "$got") || fail "$name table differs from $want"
done

# JSON is the same document the unit test checks (whole-node env there).
# The AC922's HCAs are NODE/SYS to every GPU and none is closer: they are the
# compute network, paired by NUMA, with or without topo_rails.
lassen=$fix/hwloc-ibm-ac922-lassen-4xv100-cx5.xml
out=$(run --xml "$lassen" --gpus 2,3 --json)
grep -q '"NCCL_IB_HCA": "=mlx5_2:1,mlx5_3:1"' <<<"$out" || fail "json env for GPUs 2,3 without topo_rails: $out"
grep -q '"role_why": "no NIC closer to a GPU (' <<<"$out" || fail "json role without topo_rails: $out"
out=$(run --set topo_rails=mlx5_0,mlx5_1,mlx5_2,mlx5_3 --xml "$lassen" --gpus 2,3 --json)
grep -q '"NCCL_IB_HCA": "=mlx5_2:1,mlx5_3:1"' <<<"$out" || fail "json env for GPUs 2,3: $out"
grep -q '"role_why": "named in topo_rails"' <<<"$out" || fail "json role: $out"
# The site can still call the lone set storage.
out=$(run --set topo_rails=mlx5_0 --xml "$lassen" --gpus 3 --json)
grep -q '"role_why": "not in topo_rails"' <<<"$out" || fail "json storage by topo_rails: $out"

# MI300A CPX: logical GPU 7 (ROCm index) is the second APU's; Slingshot's
# NCCL_NET only for a job on several nodes (never forced on one node).
cpx=$fix/hwloc-llnl-tuolumne-4xmi300a-cpx-slingshot.xml
out=$(run --xml "$cpx" --gpus 6,7 --nodes 2)
grep -q 'set   NCCL_NET=AWS Libfabric$' <<<"$out" || fail "cpx --nodes 2 lacks NCCL_NET: $out"
grep -q 'set   NCCL_CROSS_NIC=1$' <<<"$out" || fail "cpx lacks NCCL_CROSS_NIC: $out"
out=$(run --xml "$cpx" --gpus 6,7 --nodes 1 --json)
grep -q '"NCCL_NET": "single-node job: NCCL_NET would force the network transport"' <<<"$out" || fail "cpx --nodes 1: $out"
grep -q '"FI_MR_CACHE_MONITOR": "userfaultfd"' <<<"$out" || fail "cpx FI_MR_CACHE_MONITOR: $out"
expect_rc() { "$@" >/dev/null 2>&1; echo $?; }
[ "$(expect_rc "$bin" --config /dev/null topo --xml "$cpx" --nodes -1)" = 2 ] || fail "--nodes -1 not refused"

# Foreign XML: nothing from this machine, not even the site config's fsroot;
# --fsroot reads port state under that root instead. The fixture root says
# every Dell port is DOWN; the XML says mlx5_0 is ACTIVE.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for d in mlx5_0 mlx5_1 mlx5_2 mlx5_3; do
  mkdir -p "$tmp/sys/class/infiniband/$d/ports/1"; echo "1: DOWN" >"$tmp/sys/class/infiniband/$d/ports/1/state"
done
dell=$fix/hwloc-dell-xe8640-4xh100-cx7-cx6.xml
out=$(run --set fsroot="$tmp" --xml "$dell" --gpus 0)
grep -q '^Port state: from the XML ' <<<"$out" || fail "--xml without --fsroot does not say the state is the XML's: $out"
grep -q 'set   NCCL_IB_HCA==mlx5_0:1$' <<<"$out" || fail "--xml read the config's fsroot: $out"
out=$(run --xml "$dell" --fsroot "$tmp" --gpus 0)
grep -q "^Port state: from $tmp\$" <<<"$out" || fail "--fsroot not named in the header: $out"
grep -q 'port 1  DOWN' <<<"$out" && grep -q 'not set NCCL_IB_HCA  (no usable RDMA NIC for GPU 0)' <<<"$out" ||
  fail "--fsroot port states not used: $out"
out=$(run --xml "$dell" --fsroot "$tmp" --json)
grep -q "\"state_from\": \"sysfs:$tmp\"" <<<"$out" || fail "json state_from: $out"

# Slurm says GPUs, the topology shows none: a warning on stderr and in the
# JSON, exit 0. The node's own topology (--fsroot), not a foreign --xml.
nogpu=$fix/hwloc-96em64t-4n4d3ca2co-pci-nogpu.xml
out=$(SLURM_JOB_GPUS=0,1 "$bin" --config /dev/null topo --xml "$nogpu" --fsroot "$tmp" 2>&1 >/dev/null) ||
  fail "topo with SLURM_JOB_GPUS and no GPU exited non-zero"
grep -q '^preflight: topo: warning: Slurm gave this node GPUs (SLURM_JOB_GPUS=0,1) but the topology shows none' <<<"$out" ||
  fail "no GRES warning on stderr: $out"
out=$(SLURM_JOB_GPUS=0,1 "$bin" --config /dev/null topo --xml "$nogpu" --fsroot "$tmp" --json 2>/dev/null)
grep -q '"warnings": \[' <<<"$out" || fail "no warnings array in the JSON: $out"
out=$(SLURM_JOB_GPUS=0,1 "$bin" --config /dev/null topo --xml "$nogpu" 2>&1)
grep -q 'warning' <<<"$out" && fail "foreign --xml warned about this node's GRES: $out"

# A real probe of this machine (whatever it has) works and says so.
out=$(run) || fail "topo (probe) exited non-zero: $out"
grep -q '^Topology: probe$' <<<"$out" || fail "topo (probe) does not name its source: $out"

# Bad inputs: exit code and a message naming the input.
expect() {  # CODE PATTERN ARGS...
  local code=$1 pat=$2; shift 2
  local o rc
  o=$(run "$@"); rc=$?
  [ "$rc" = "$code" ] || fail "topo $*: exit $rc, want $code ($o)"
  grep -qE -- "$pat" <<<"$o" || fail "topo $*: output lacks '$pat': $o"
}
expect 2 "no GPU 9" --xml "$fix/hwloc-dell-xe8640-4xh100-cx7-cx6.xml" --gpus 9
expect 2 "--gpus 'x'" --xml "$fix/hwloc-dell-xe8640-4xh100-cx7-cx6.xml" --gpus x
expect 1 "/nonexistent.xml" --xml /nonexistent.xml
expect 1 "$fix/README.md: not XML" --xml "$fix/README.md"
# Load errors name the file and the cause (real files; see the fixtures README).
expect 1 "$fix/nccl-topo-azure-ndv4-8xa100.xml: an NCCL topology file, not hwloc XML: export with \`lstopo --of xml\`" \
  --xml "$fix/nccl-topo-azure-ndv4-8xa100.xml"
expect 1 "hwloc-v3.0-24em64t-2n6c2t-pci.xml: hwloc XML version 3.0 needs hwloc >= 3 \(this is 2\.[0-9]+\)" \
  --xml "$fix/hwloc-v3.0-24em64t-2n6c2t-pci.xml"
expect 1 "hwloc-32em64t-2n8c2t-pci-noio.xml: no PCI objects: exported without I/O \(\`lstopo --whole-io" \
  --xml "$fix/hwloc-32em64t-2n8c2t-pci-noio.xml"
: >"$tmp/empty.xml"
expect 1 "$tmp/empty.xml: empty file" --xml "$tmp/empty.xml"
head -n 300 "$dell" >"$tmp/cut.xml"
expect 1 "$tmp/cut.xml: truncated at line 300" --xml "$tmp/cut.xml"
expect 2 "--gpus '': empty list" --xml "$dell" --gpus ''
expect 2 "--gpus '0,0': GPU 0 given twice" --xml "$dell" --gpus 0,0
# Nothing pairs (no GPU, no RDMA NIC): no empty topo_expect line is offered.
out=$(run --xml "$fix/hwloc-96em64t-4n4d3ca2co-pci-nogpu.xml")
grep -q '^No placement to pin' <<<"$out" && ! grep -q 'topo_expect = *$' <<<"$out" || fail "empty topo_expect suggested: $out"
expect 1 "topo_rails names NIC 'mlx5_9', which this node does not have \(its NICs: mlx5_0, mlx5_1, mlx5_2, mlx5_3\)" \
  --set topo_rails=mlx5_0,mlx5_9 --xml "$lassen"
expect 1 "topo_rails.*NIC 'mlx5_0' named twice" --set topo_rails=mlx5_0,mlx5_0 --xml "$lassen"
expect 2 "unexpected argument 'extra'" --xml "$fix/hwloc-dell-xe8640-4xh100-cx7-cx6.xml" extra
[ $fails = 0 ] && echo "topo_cli: all checks passed" || { echo "topo_cli: $fails failed"; exit 1; }
