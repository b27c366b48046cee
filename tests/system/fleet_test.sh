#!/bin/bash
# Fleet consistency on a real Slurm (issue 13, item 6). The test cluster's
# nodes share one state_dir, so each node's fleet.versions check sees the
# others' version records (as a partition sharing state_dir would).
#  - n2 on another NVML driver (the fake NVML's `driver` fault): its health
#    check drains it naming the field, its value and the majority's;
#    `preflight fleet` names it too; back on the same driver, it is resumed;
#  - one of n3's GPUs on another VBIOS: a warning (node Comment), no drain,
#    and a 3-node --nccl-check job's output names n3 ("preflight: versions:").
. "$(dirname "$0")/lib.sh"

healthy() { echo "gpus 4" >"$C/nodes/$1/nvml.faults"; }
node_comment() { scontrol show node "$1" | sed -n 's/^ *Comment=//p'; }
fleet() { "$B/admin/preflight" --config "$C/etc/preflight.conf" fleet "$@"; }
restore() {
  for n in n1 n2 n3; do healthy $n; done
  for n in n1 n2 n3; do "$C/bin/healthcheck" --node $n >/dev/null 2>&1 || true; done
  resume_all
}
trap restore EXIT

for n in n1 n2 n3; do "$C/bin/healthcheck" --node $n >/dev/null 2>&1; done
check "every node recorded its versions" test -s "$C/state/nodes/n1.versions.json" -a -s "$C/state/nodes/n3.versions.json"
rc=0; fleet 'n[1-3]' >"$OUT/fleet-ok.out" 2>&1 || rc=$?
cat "$OUT/fleet-ok.out"
check "preflight fleet: the three nodes agree (exit 0)" test $rc = 0
check "preflight fleet shows each node's driver and HCA firmware" contains "$OUT/fleet-ok.out" '^n2 +550\.00\.fake +96\.00\.74\.00\.11 +G520\.0200\.00\.05 +16\.35\.2000'

# --- n2 on another driver ------------------------------------------------------
printf 'gpus 4\ndriver 535.00.fake\n' >"$C/nodes/n2/nvml.faults"
rc=0; "$C/bin/healthcheck" --node n2 >"$OUT/hc-n2-driver.out" 2>&1 || rc=$?
cat "$OUT/hc-n2-driver.out"
check "health check exits 1 on a driver that differs from the fleet" test $rc = 1
check_drained n2 "n2 reason names the field, its value and the majority's" \
  "^preflight\[node\] fleet.versions node: driver 535.00.fake differs from the other 2 nodes' 550.00.fake"
rc=0; fleet 'n[1-3]' >"$OUT/fleet-odd.out" 2>&1 || rc=$?
cat "$OUT/fleet-odd.out"
check "preflight fleet exits 1 when a node differs" test $rc = 1
check "preflight fleet names n2 and the majority's driver" contains "$OUT/fleet-odd.out" \
  '^n2: driver 535\.00\.fake, the other 2 nodes have 550\.00\.fake$'
"$C/bin/healthcheck" --node n1 >"$OUT/hc-n1.out" 2>&1
check "n1, with the majority, passes" contains "$OUT/hc-n1.out" 'health ok on n1'
healthy n2
"$C/bin/healthcheck" --node n2 >"$OUT/hc-n2-clear.out" 2>&1
wait_idle n2
check "back on the fleet's driver, n2 is resumed" test "$(node_state n2)" = idle

# --- a VBIOS that differs only warns ---------------------------------------------
printf 'gpus 4\nvbios 2 96.00.61.00.01\n' >"$C/nodes/n3/nvml.faults"
rc=0; "$C/bin/healthcheck" --node n3 >"$OUT/hc-n3-vbios.out" 2>&1 || rc=$?
cat "$OUT/hc-n3-vbios.out"
check "a differing VBIOS does not fail (vbios is not in fleet_fail_fields)" test $rc = 0
check "n3 stays in service" test "$(node_state n3)" = idle
check "n3's Comment names the VBIOS difference" \
  grep -q '^preflight warn: \[node\] fleet.versions node: vbios 96.00.61.00.01,96.00.74.00.11 differs' <<<"$(node_comment n3)"
jid=$(sbatch --parsable -N3 --nccl-check -o "$OUT/job-%j.out" --wrap 'echo script ran')
wait_job "$jid" 120 || true
cat "$OUT/job-$jid.out"
check "the job ran: a VBIOS difference does not fail the prolog" contains "$OUT/job-$jid.out" '^script ran$'
check "the --nccl-check batch step names n3's VBIOS" contains "$OUT/job-$jid.out" \
  '^preflight: versions: n3: vbios 96\.00\.61\.00\.01,96\.00\.74\.00\.11, the other 2 nodes have 96\.00\.74\.00\.11$'
wait_idle n1 n2 n3
healthy n3
"$C/bin/healthcheck" --node n3 >/dev/null 2>&1
check "the Comment is cleared once n3 agrees again" test -z "$(node_comment n3)"
finish
