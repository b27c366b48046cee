#!/bin/bash
# GPU and interconnect health on a real Slurm. Each emulated node loads the
# fake NVML through the production dlopen path, with faults from its own
# file (DIR/nodes/<n>/nvml.faults), and reads its HCAs from its fixture sysfs.
#  - an ECC fault on n1: the prolog fails, Slurm drains n1, preflight names
#    the check, GPU and figure vs threshold; the job is requeued and runs on
#    a healthy node; the health check resumes n1 once the fault is cleared;
#  - a downed HCA port on n2: the health check drains n2 and later resumes it;
#  - a hung NVML call: the health check ends within its budget and drains
#    with a reason naming the call;
#  - error counters rising on an n2 port: above ib_counter_fail the health
#    check drains n2 naming HCA, port, counter and figure, and resumes it
#    once they stop rising; above ib_counter_warn only: a node Comment, no
#    drain, cleared when clean; check_ib_counters=warn silences the drain;
#  - Xid classes: 79 drains naming the GPU (drain_reset: stays until the
#    admin clears it); 31 (the job's own fault) never drains, comments [user];
#  - DCGM in the idle sweep (dcgm_health_level=1, the fake dcgmi printing
#    tests/fixtures/dcgm outputs): a failed test drains naming GPU and test,
#    a passing diag resumes; no dcgmi is "skipped: ... not found";
#  - an admin's drain stays, whatever preflight finds.
. "$(dirname "$0")/lib.sh"

healthy() { echo "gpus 4" >"$C/nodes/$1/nvml.faults"; }
port_state() { echo "$3" >"$C/nodes/$1/root/sys/class/infiniband/$2/ports/1/state"; }
counter() { echo "$4" >"$C/nodes/$1/root/sys/class/infiniband/$2/ports/1/counters/$3"; }
node_comment() { scontrol show node "$1" | sed -n 's/^ *Comment=//p'; }
restore() {
  for n in n1 n2 n3; do healthy $n; done
  port_state n2 mlx5_3 "4: ACTIVE"
  for c in symbol_error port_xmit_discards; do counter n2 mlx5_1 $c 0; done
  rm -f "$C/state/nodes/n3.xid" "$C/state/nodes/n2.ibcounters"
  resume_all  # a failure half-way must not leave drained nodes to the next test
}
trap restore EXIT


# --- ECC fault on n1, found by the prolog --------------------------------
printf 'gpus 4\necc_volatile 2 3\n' >"$C/nodes/n1/nvml.faults"
jid=$(sbatch --parsable -N1 --nccl-check=quick -o "$OUT/job-%j.out" --wrap 'echo ran on $SLURMD_NODENAME')
wait_restarted "$jid" || true
check "job was requeued after the GPU check failed" test "$(job_field "$jid" Restarts)" -ge 1
release_and_wait "$jid"
check "requeued job ran on a healthy node" contains "$OUT/job-$jid.out" '^ran on n[23]$'
check "requeued job completed" test "$(job_field "$jid" JobState)" = COMPLETED
wait_preflight_reason n1 || true
check_drained n1 "reason names check, GPU, PCI bus and figure vs threshold" \
  '^preflight\[node\] gpu.ecc GPU2 0000:3a:00.0: uncorrected ECC errors volatile 3, aggregate 0 > 0'
sinfo -R -h -N -o '%N|%E' >"$OUT/sinfo-R"
check "sinfo -R shows the reason for n1" contains "$OUT/sinfo-R" '^n1\|preflight\[node\] gpu.ecc GPU2'
f=$C/state/jobs/$jid/n1.prolog.json
tr -d ' \n' <"$f" >"$OUT/n1.prolog.flat"  # one line, no blanks: the JSON writer indents
check "n1's result file records the ECC check with value and threshold" contains "$OUT/n1.prolog.flat" \
  '"check":"gpu.ecc","device":"GPU20000:3a:00.0","value":"volatile3,aggregate0","threshold":"<=0","verdict":"fail"'
check "metrics name the failed GPU check" contains "$C/metrics/preflight_n1_prolog.prom" \
  'preflight_check_ok\{.*check="gpu.ecc",device="GPU2 0000:3a:00.0",verdict="fail".*\} 0'
wait_idle n2 n3
check "n2 is not drained" test "$(node_state n2)" = idle

"$C/bin/healthcheck" --node n1 >"$OUT/hc-n1-fault.out" 2>&1 || true
check "health check keeps n1 drained while the ECC fault remains" grep -q drain <<<"$(node_state n1)"
healthy n1
"$C/bin/healthcheck" --node n1 >"$OUT/hc-n1-clear.out" 2>&1
cat "$OUT/hc-n1-clear.out"
wait_idle n1
check "health check returned n1 to service after the fault was cleared" test "$(node_state n1)" = idle
check "health check said why" contains "$OUT/hc-n1-clear.out" 'n1 passes again; resumed \(was: preflight\[node\] gpu.ecc'

# --- a downed HCA port on n2, found by the health check -------------------
port_state n2 mlx5_3 "1: DOWN"
rc=0; "$C/bin/healthcheck" --node n2 >"$OUT/hc-n2-fault.out" 2>&1 || rc=$?
check "health check exits 1 on a downed port" test $rc = 1
check_drained n2 "n2 reason names the HCA, port and state" \
  '^preflight\[node\] ib.port mlx5_3 port 1: port DOWN/LinkUp, need ACTIVE/LinkUp'
port_state n2 mlx5_3 "4: ACTIVE"
"$C/bin/healthcheck" --node n2 >"$OUT/hc-n2-clear.out" 2>&1
wait_idle n2
check "health check returned n2 to service" test "$(node_state n2)" = idle

# --- a hung NVML call fails its check, not the run ------------------------
printf 'gpus 4\nhang nvmlDeviceGetTemperature 1\n' >"$C/nodes/n2/nvml.faults"
rc=0; timeout 60 "$C/bin/healthcheck" --node n2 --set probe_timeout=1s >"$OUT/hc-n2-hang.out" 2>&1 || rc=$?
cat "$OUT/hc-n2-hang.out"
check "health check with a hung NVML call ends with a verdict (exit 1, not killed)" test $rc = 1
check "the hang is reported against the GPU and call" contains "$OUT/hc-n2-hang.out" \
  'fail gpu.temperature GPU1 0000:2a:00.0: probe hung in nvmlDeviceGetTemperature: no answer within 1000 ms'
check "the other checks still ran" contains "$OUT/hc-n2-hang.out" 'passed, 0 skipped, 1 failed|passed, [0-9]+ skipped, 1 failed'
check "n2 drained for the hang" grep -q '^preflight\[node\] gpu.temperature GPU1' <<<"$(node_reason n2)"
healthy n2
"$C/bin/healthcheck" --node n2 >/dev/null 2>&1
wait_idle n2
check "n2 back after the hang cleared" test "$(node_state n2)" = idle

# --- an Xid in n3's kernel log --------------------------------------------
"$C/bin/healthcheck" --node n3 >/dev/null 2>&1  # baseline (earlier jobs may have set it already)
echo "3,900,900000,-;NVRM: Xid (PCI:0000:2a:00): 79, pid=4242, name=python, GPU has fallen off the bus." \
  >>"$C/nodes/n3/root/dev/kmsg"
rc=0; "$C/bin/healthcheck" --node n3 >"$OUT/hc-n3-xid.out" 2>&1 || rc=$?
check "health check fails on a new Xid" test $rc = 1
check "n3 drained naming the GPU, the Xid, its catalogue bucket and action" \
  grep -q '^preflight\[node\] gpu.xid GPU1 0000:2a:00.0: Xid 79 (GPU has fallen off the bus, NVIDIA: RESTART_BM): drain_reset' \
  <<<"$(node_reason n3)"
"$C/bin/healthcheck" --node n3 >/dev/null 2>&1 || true
check "the Xid finding stays open on the next check" grep -q drain <<<"$(node_state n3)"
rm "$C/state/nodes/n3.xid"  # the admin's acknowledgement (documented in preflight(7))
"$C/bin/healthcheck" --node n3 >/dev/null 2>&1
wait_idle n3
check "after the admin clears the Xid state, n3 returns to service" test "$(node_state n3)" = idle

# --- an Xid that is the job's own fault ------------------------------------
echo "3,901,950000,-;NVRM: Xid (PCI:0000:3a:00): 31, pid=4243, name=python, Ch 00000008, intr 10000000. MMU Fault" \
  >>"$C/nodes/n3/root/dev/kmsg"
rc=0; "$C/bin/healthcheck" --node n3 >"$OUT/hc-n3-xid31.out" 2>&1 || rc=$?
cat "$OUT/hc-n3-xid31.out"
check "an application Xid does not fail the health check" test $rc = 0
check "n3 is not drained for the job's own fault" test "$(node_state n3)" = idle
check "the job output tags it as the user's" contains "$OUT/hc-n3-xid31.out" 'warn\[user\] gpu.xid GPU2 0000:3a:00.0: Xid 31'
check "n3's Comment carries the user warning" grep -q '^preflight warn: \[user\] gpu.xid GPU2' <<<"$(node_comment n3)"
rm "$C/state/nodes/n3.xid"
"$C/bin/healthcheck" --node n3 >/dev/null 2>&1
check "a clean health check clears the Comment it set" test -z "$(node_comment n3)"

# --- port error counters on n2 ----------------------------------------------
"$C/bin/healthcheck" --node n2 >/dev/null 2>&1  # baseline of this boot's counters
counter n2 mlx5_1 symbol_error 500
rc=0; "$C/bin/healthcheck" --node n2 >"$OUT/hc-n2-counters.out" 2>&1 || rc=$?
cat "$OUT/hc-n2-counters.out"
check "health check exits 1 when a counter rises past ib_counter_fail" test $rc = 1
check_drained n2 "n2 reason names HCA, port, counter, rise and figure" \
  '^preflight\[node\] ib.counters mlx5_1 port 1: symbol_error rose by 500 (0 -> 500) > 100'
rc=0; "$C/bin/healthcheck" --node n2 >/dev/null 2>&1 || rc=$?
check "within ib_counter_window (1h) the rise still counts: n2 stays drained" test $rc = 1
sed -i 's/^at .*/at 1/' "$C/state/nodes/n2.ibcounters"  # the window has passed
"$C/bin/healthcheck" --node n2 >/dev/null 2>&1 || true   # judges the closing window, takes a new base
"$C/bin/healthcheck" --node n2 >"$OUT/hc-n2-counters-clear.out" 2>&1
wait_idle n2
check "a new window without a rise: the health check resumes n2" test "$(node_state n2)" = idle
# Per-check rises from here (ib_counter_window=0), to show warn and the switch one check each.
w0=(--set ib_counter_window=0)
"$C/bin/healthcheck" --node n2 "${w0[@]}" >/dev/null 2>&1
counter n2 mlx5_1 port_xmit_discards 150
rc=0; "$C/bin/healthcheck" --node n2 "${w0[@]}" >"$OUT/hc-n2-discards.out" 2>&1 || rc=$?
check "a rise past ib_counter_warn only does not fail" test $rc = 0
check "n2 stays in service on a warning" test "$(node_state n2)" = idle
check "n2's Comment names the warning" \
  grep -q '^preflight warn: \[node\] ib.counters mlx5_1 port 1: port_xmit_discards rose by 150' <<<"$(node_comment n2)"
counter n2 mlx5_1 symbol_error 2000
rc=0; "$C/bin/healthcheck" --node n2 "${w0[@]}" --set check_ib_counters=warn >"$OUT/hc-n2-switch.out" 2>&1 || rc=$?
check "check_ib_counters=warn: a fail-sized rise only warns" test $rc = 0
check "the output says which key silenced it" contains "$OUT/hc-n2-switch.out" 'check_ib_counters = warn'
check "n2 still in service" test "$(node_state n2)" = idle
"$C/bin/healthcheck" --node n2 "${w0[@]}" >/dev/null 2>&1
check "the next clean check clears n2's Comment" test -z "$(node_comment n2)"

# --- DCGM diag in the idle sweep ------------------------------------------------
dc=(--set "dcgmi=$S/tests/fakes/fake_dcgmi.sh" --set dcgm_health_level=1)
rc=0; PREFLIGHT_FAKE_DCGMI=fail "$C/bin/healthcheck" --node n1 "${dc[@]}" >"$OUT/hc-n1-dcgm.out" 2>&1 || rc=$?
cat "$OUT/hc-n1-dcgm.out"
check "a failed DCGM test fails the health check" test $rc = 1
check "n1 drained naming the GPU, DCGM's test and its warning" \
  grep -q '^preflight\[node\] gpu.dcgm GPU3: dcgmi diag -r 1: Custom/software FAIL: GPU 3 had uncorrectable memory errors' <<<"$(node_reason n1)"
PREFLIGHT_FAKE_DCGMI=pass "$C/bin/healthcheck" --node n1 "${dc[@]}" >"$OUT/hc-n1-dcgm-pass.out" 2>&1
wait_idle n1
check "a passing DCGM diag resumes n1" test "$(node_state n1)" = idle
"$C/bin/healthcheck" --node n1 --set dcgmi=/nonexistent/dcgmi --set dcgm_health_level=1 >"$OUT/hc-n1-nodcgm.out" 2>&1
check "no dcgmi: skipped with why, not pass" contains "$OUT/hc-n1-nodcgm.out" \
  'skipped gpu.dcgm node: skipped: /nonexistent/dcgmi not found \(DCGM is not installed on this node\)'

# --- a reason an older preflight wrote is still preflight's -----------------
# (drain_reason.h reads the pre-grammar "preflight: ..." reasons): listed by
# `preflight reasons`, and the health check still returns the node.
healthy n3
scontrol update nodename=n3 state=drain reason="preflight: gpu.ecc GPU0 0000:1a:00.0: uncorrected ECC errors volatile 3, aggregate 0 > 0"
reasons() { "$B/admin/preflight" --config "$C/etc/preflight.conf" reasons "$@"; }
reasons n3 >"$OUT/reasons-n3.json"
cat "$OUT/reasons-n3.json"
check "reasons: the old-format drain parsed into its parts" contains "$OUT/reasons-n3.json" \
  '"node":"n3".*"owner":"node","check":"gpu.ecc","device":"GPU0 0000:1a:00.0".*"legacy":true'
check "reasons: when slurmctld set it" contains "$OUT/reasons-n3.json" '"reason_time":[1-9][0-9]+'
rc=0; reasons 'n[1-' >"$OUT/reasons-bad.out" 2>&1 || rc=$?
check "reasons: a bad hostlist exits 2" test $rc = 2
"$C/bin/healthcheck" --node n3 >"$OUT/hc-n3-legacy.out" 2>&1
check "an old-format preflight drain is resumed once the node passes" \
  contains "$OUT/hc-n3-legacy.out" 'n3 passes again; resumed \(was: preflight: gpu.ecc GPU0'

# --- an admin's drain stays -----------------------------------------------
scontrol update nodename=n3 state=drain reason="admin: reseat GPU tray"
printf 'gpus 4\ngone 3\n' >"$C/nodes/n3/nvml.faults"
"$C/bin/healthcheck" --node n3 >"$OUT/hc-n3-fault.out" 2>&1 || true
check "preflight does not replace an admin's reason" test "$(node_reason n3)" = "admin: reseat GPU tray"
healthy n3
"$C/bin/healthcheck" --node n3 >"$OUT/hc-n3-clear.out" 2>&1
check "a passing health check leaves the admin's drain alone" grep -q drain <<<"$(node_state n3)"
check "the admin's reason is kept" test "$(node_reason n3)" = "admin: reseat GPU tray"
reasons >"$OUT/reasons-all.json"
check "reasons (every node): the query worked" contains "$OUT/reasons-all.json" '^\{"drains":\['
check "reasons (every node): an admin's drain is not listed" test -z "$(grep '"n3"' "$OUT/reasons-all.json")"
finish
