#!/bin/bash
# Slow is a fault too, on the emulated fabric (issue 20): a 6-node cluster
# whose nodes each have their own loopback addresses (tests/harness/
# cluster.sh, PREFLIGHT_NODES=6), links shaped with tc on lo. No threshold
# is set (nccl_backend = host has no profile figure): only the straggler
# rule, which compares each node with its own allocation, can name a node.
#
#   1. no fault: 10 jobs, nobody named (the false-positive count is printed)
#   2. one node shaped to a few percent of the others' pair bandwidth, the
#      site drains on job figures: named with figures, drained, the job
#      requeued and run on the other five
#   3. the same with check_nccl_straggler = warn: named, the job runs;
#      then on, with a job that named the node (-w): it fails with the reason
#   4. a cut node: named by the check itself (no watchdog kill), the job
#      requeued without it
#   5. --stage with stage_peers = yes over a shaped, then a cut parent:
#      completes within stage_timeout, every node with the source's bytes
. "$(dirname "$0")/lib.sh"

CL=$S/tests/harness/cluster.sh
conf=$C/etc/preflight.conf
cp "$conf" "$OUT/preflight.conf.orig"
restore() {
  "$CL" unshape "$C" >/dev/null 2>&1 || true
  cp "$OUT/preflight.conf.orig" "$conf"
}
trap restore EXIT
# A tighter budget than the default cluster's, so a cut link costs seconds;
# 4 MiB messages, so one sample says more than scheduling noise does.
sed -i 's/^nccl_timeout = .*/nccl_timeout = 20s/; s/^nccl_max_bytes = .*/nccl_max_bytes = 4M/' "$conf"
sed -i 's/^check_nccl_straggler = .*/check_nccl_straggler = on/' "$conf"
mkdir -p "$OUT/u" && chmod 777 "$OUT/u"
nodes_all=$(sinfo -h -N -o %N | sort -u | tr '\n' ' ')
note "nodes: $nodes_all"
check "the fabric cluster has 6 nodes" test "$(wc -w <<<"$nodes_all")" = 6

# named JOB: the nodes the job's result record names as stragglers.
named() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(",".join(s["node"] for s in d["straggler"]["nodes"]))' \
    "$C/state/jobs/$1/nccl.json" 2>/dev/null
}
# wait_check JOB: until the check of the job's (first) start has finished:
# its result record exists and the job left RUNNING (requeued or ended).
wait_check() { poll 120 "job $1's check result, the job out of RUNNING" check_done "$1"; }
check_done() { [ -f "$C/state/jobs/$1/nccl.json" ] && [ "$(job_field "$1" JobState)" != RUNNING ]; }

# --- 0. bad input to the harness: a clear error, lo unchanged -------------
before=$(tc qdisc show dev lo)
check "shape: a node that does not exist is refused" bash -c "! '$CL' shape '$C' n9 40mbit 2>'$OUT/e1'"
check "... naming the cluster's nodes" grep -q "no node 'n9' in this cluster (n1 n2 n3 n4 n5 n6)" "$OUT/e1"
check "shape: a malformed rate is refused" bash -c "! '$CL' shape '$C' n2 fast 2>'$OUT/e2'"
check "... with the expected form" grep -q "bad rate 'fast' (expected a number and bit, kbit, mbit or gbit" "$OUT/e2"
check "lo unchanged by the refusals" test "$(tc qdisc show dev lo)" = "$before"
"$CL" shape "$C" n2 40mbit >/dev/null
shaped=$(tc class show dev lo)
check "shape: twice on one node is refused" bash -c "! '$CL' shape '$C' n2 80mbit 2>'$OUT/e3'"
check "... saying it is shaped already" grep -q "n2 is already shaped (40mbit); unshape first" "$OUT/e3"
check "lo unchanged by the second shape" test "$(tc class show dev lo)" = "$shaped"
"$CL" unshape "$C"
check "unshape removed the qdisc" test "$(tc qdisc show dev lo)" = "$before"

# --- 1. no fault: nobody is named -------------------------------------------
fp=0
jobs=()
for i in $(seq 1 10); do
  jobs+=("$(as_user sbatch --parsable -N3 --nccl-check=quick -o "$OUT/u/clean-%j.out" --wrap true)")
done
for j in "${jobs[@]}"; do
  wait_job "$j" 180
  n=$(named "$j")
  [ -n "$n" ] && { fp=$((fp + 1)); note "false positive in job $j: $n"; cat "$OUT/u/clean-$j.out"; }
  [ "$(job_field "$j" JobState)" = COMPLETED ] || { note "job $j: $(job_field "$j" JobState)"; cat "$OUT/u/clean-$j.out"; }
done
note "no fault: $fp false positive(s) in ${#jobs[@]} jobs"
check "no fault: nobody named in ${#jobs[@]} jobs" test "$fp" = 0
check "no fault: every job ran" test "$(for j in "${jobs[@]}"; do job_field "$j" JobState; done | sort -u)" = COMPLETED
check "no fault: the check measured ring pairs" grep -q "# pair n1-n2: OK" "$OUT/u/clean-${jobs[0]}.out"

note "part took $SECONDS s"; SECONDS=0
# --- 2. a slow node, drained on job figures, the job runs on the other five
"$CL" shape "$C" n3 300mbit
cat >>"$conf" <<CONF
nccl_drain_internode = yes
CONF
wait_all_idle  # -N5 of 6: n3 must be free, or the job starts without it
j=$(as_user sbatch --parsable -N5 --nccl-check=quick -o "$OUT/u/slow-%j.out" --wrap 'echo script ran on $SLURM_JOB_NODELIST')
wait_check "$j"
cat "$OUT/u/slow-$j.out"
check "slow: the rule names n3" test "$(named "$j")" = n3
check "slow: the output names n3 with its figure, the median and the fraction" \
  grep -qE "preflight: nccl: straggler n3: ring pairs [0-9.]+ [MG]B/s \(its better pair\) < 0.5 x the allocation's median [0-9.]+ [MG]B/s" "$OUT/u/slow-$j.out"
check "slow: the second sample was taken" grep -qE "# pair n2-n3: .*\(samples: .*, .*\)" "$OUT/u/slow-$j.out"
check "slow: the result record has the figures" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); s=d["straggler"]["nodes"][0]
assert s["node"]=="n3" and 0 < s["figure_Bps"] < 0.5*s["median_Bps"] and s["fraction"]==0.5, s
assert d["requeue"] and d["excluded"]==["n3"] and d["drained"]==["n3"], d' "$C/state/jobs/$j/nccl.json"
check_drained n3 "slow: n3's drain reason names the straggler with figures" \
  "^preflight\[node\] nccl.straggler n3: ring pairs [0-9.]* [MG]B/s < 0.5 x median [0-9.]* [MG]B/s"
release_and_wait "$j" 180
check "slow: the job ran after the requeue" test "$(job_field "$j" JobState)" = COMPLETED
check "slow: ... on the other five nodes" grep -q "script ran on n\[1-2,4-6\]" "$OUT/u/slow-$j.out"
scontrol update nodename=n3 state=resume
wait_idle n1 n2 n3 n4 n5 n6
sed -i '/^nccl_drain_internode = yes$/d' "$conf"

note "part took $SECONDS s"; SECONDS=0
# --- 3. the same slow node, check_nccl_straggler = warn: named, the job runs
sed -i 's/^check_nccl_straggler = .*/check_nccl_straggler = warn/' "$conf"
j=$(as_user sbatch --parsable -N5 -w n1,n2,n3,n4,n5 --nccl-check=quick -o "$OUT/u/warn-%j.out" --wrap 'echo script ran on $SLURM_JOB_NODELIST')
wait_job "$j" 120
cat "$OUT/u/warn-$j.out"
check "warn: n3 named" test "$(named "$j")" = n3
check "warn: said it is not acted on" grep -q "check_nccl_straggler = warn: named, not acted on" "$OUT/u/warn-$j.out"
check "warn: the job ran on n1-n5" grep -q "script ran on n\[1-5\]" "$OUT/u/warn-$j.out"
check "warn: n3 not drained" bash -c "! grep -q drain <<<'$(node_state n3)'"

# --- 3b. on, and the job names the slow node (-w): on a shared node the slow
# link may be another job's traffic; a requeue without n3 could never start
# (issue 29): the job fails, saying so, and nothing is drained.
sed -i 's/^check_nccl_straggler = .*/check_nccl_straggler = on/' "$conf"
wait_idle n1 n2 n3 n4 n5
j=$(as_user sbatch --parsable -N5 -w n1,n2,n3,n4,n5 --nccl-check=quick -o "$OUT/u/named-%j.out" --wrap 'echo SCRIPT-RAN')
wait_job "$j" 120
cat "$OUT/u/named-$j.out"
check "named: n3 named the straggler" test "$(named "$j")" = n3
check "named: the output says why the job fails" \
  grep -q "preflight: nccl: the job script did not run; the job fails: it names n3 (-w), so a requeue without n3 could never start" "$OUT/u/named-$j.out"
check "named: the script never ran" bash -c "! grep -q SCRIPT-RAN '$OUT/u/named-$j.out'"
check "named: not requeued" test "$(job_field "$j" Restarts)" = 0
check "named: the result record says no requeue" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert not d["requeue"], d' "$C/state/jobs/$j/nccl.json"
check "named: n3 not drained" bash -c "! grep -q drain <<<'$(node_state n3)'"

"$CL" unshape "$C"

note "part took $SECONDS s"; SECONDS=0
# --- 4. a cut node: named by the check itself, within its budget ------------
"$CL" cut "$C" n4
wait_all_idle  # -N5 of 6: n4 must be free, or the job starts without it
j=$(as_user sbatch --parsable -N5 --nccl-check=quick -o "$OUT/u/cut-%j.out" --wrap 'echo script ran')
wait_check "$j"
cat "$OUT/u/cut-$j.out"
check "cut: the rule names n4" test "$(named "$j")" = n4
check "cut: n4's pairs failed with no figure" grep -qE "straggler n4: ring pairs none \(both pairs failed\)" "$OUT/u/cut-$j.out"
check "cut: the step ended by its own deadlines, not the watchdog" bash -c "! grep -qE 'killed after|no verdict within nccl_timeout' '$OUT/u/cut-$j.out'"
check "cut: requeued without n4, n4 not drained (job figures, nccl_drain_internode=no)" \
  grep -q "the job is requeued without n4" "$OUT/u/cut-$j.out"
check "cut: n4 stays in service" bash -c "! grep -q drain <<<'$(node_state n4)'"
check "cut: the requeued job excludes n4" wait_excluded "$j" n4
scancel "$j"
wait_job "$j" 60
"$CL" unshape "$C"

note "part took $SECONDS s"; SECONDS=0
# --- 5. stage fan-out over a shaped, then a cut parent ------------------------
sed -i 's/^stage_peers = no$/stage_peers = yes/' "$conf"
DS=$OUT/ds
mkdir -p "$DS/fan"
for i in $(seq 1 20); do head -c $((4096 + i)) /dev/urandom >"$DS/fan/f$i"; done
head -c $((3 << 20)) /dev/urandom >"$DS/fan/big"
chmod -R a+rX "$OUT/ds" "$OUT"
want=$(cd "$DS/fan" && find . -type f | sort | xargs md5sum | md5sum | cut -d' ' -f1)
bytes=$(find "$DS/fan" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
show='echo "$SLURMD_NODENAME $(cd "$PREFLIGHT_STAGE_FAN" && find . -type f | sort | xargs md5sum | md5sum | cut -d" " -f1)"'
stage_run() {  # stage_run TAG: a 3-node job on n1..n3 (n1 reads the source, the parent)
  local j
  j=$(as_user sbatch --parsable -N3 -w n1,n2,n3 --stage="$DS/fan" -o "$OUT/u/$1-%j.out" --wrap "srun -N3 bash -c '$show'")
  wait_job "$j" 120
  cat "$OUT/u/$1-$j.out" >&2
  echo "$j"
}
"$CL" shape "$C" n1 40mbit
j=$(stage_run shaped)
check "stage, shaped parent: the job completed" test "$(job_field "$j" JobState)" = COMPLETED
check "stage, shaped parent: all 3 nodes have the source's bytes" test "$(grep -c " $want\$" "$OUT/u/shaped-$j.out")" = 3
read_total=$(cat "$C"/state/jobs/"$j"/n*.stage.json | grep -o '"source_bytes": [0-9]*' | awk '{s += $2} END {print s}')
check "stage, shaped parent: the source was read once ($read_total of $bytes bytes)" test "$read_total" = "$bytes"
check "stage, shaped parent: n2 names its peer's fabric address" contains "$C/state/jobs/$j/n2.stage.json" '"note": "received from peer 127.0.1.101'
for n in n1 n2 n3; do for k in $(ls "$C/nodes/$n/stage/cache"); do "$B/admin/preflight" --config "$conf" cache rm "$k" node=$n >/dev/null; done; done
"$CL" unshape "$C"
"$CL" cut "$C" n1
j=$(stage_run cutparent)
check "stage, cut parent: the job completed (children fell back to the source)" test "$(job_field "$j" JobState)" = COMPLETED
check "stage, cut parent: the job ran at its first start (no prolog held past the batch launch)" test "$(job_field "$j" Restarts)" = 0
check "stage, cut parent: all 3 nodes have the source's bytes" test "$(grep -c " $want\$" "$OUT/u/cutparent-$j.out")" = 3
"$CL" unshape "$C"
for n in n1 n2 n3; do for k in $(ls "$C/nodes/$n/stage/cache"); do "$B/admin/preflight" --config "$conf" cache rm "$k" node=$n >/dev/null; done; done
note "part took $SECONDS s"
check "unshape left lo as it was" bash -c "! tc qdisc show dev lo | grep -q htb"
wait_idle n1 n2 n3 n4 n5 n6
finish
