#!/bin/bash
# sbatch --nccl-check on the 3 emulated nodes: the host backend runs an
# all-reduce across all ranks through real PMIx (srun --mpi=pmix) before the
# batch script; a node made slow (a send-rate cap, the test seam
# nccl_host_rate_file) is found by the root-run intra-node check, drained
# with its figure, and the job requeued without it; the script of a job whose
# check failed never runs. Also: preflight-nccl by hand, and what a user can
# and cannot make the check do, and at full level the four collectives
# (all-reduce, all-gather, reduce-scatter, all-to-all) in the one step.
. "$(dirname "$0")/lib.sh"

conf=$C/etc/preflight.conf
cp "$conf" "$OUT/preflight.conf.orig"
restore() {
  cp "$OUT/preflight.conf.orig" "$conf"
  rm -f "$C"/nodes/*/nccl_rate
}
trap restore EXIT
# The harness caps messages at 1 MiB (nccl_max_bytes): a capped node takes
# seconds, not minutes. Thresholds far below loopback, far above the cap.
cat >>"$conf" <<CONF
nccl_min_busbw = 20M
nccl_min_intra_busbw = 20M
nccl_host_rate_file = $C/nodes/%n/nccl_rate
CONF
NCCL=$B/collective/preflight-nccl

# wait_requeued JOB: until the job has been requeued after its first
# start and its epilogs are done.
wait_requeued() { poll 120 "job $1 requeued, its epilogs done" requeue_done "$1"; }

# --- 1. healthy allocation: the check runs across all nodes, then the script
marker=$OUT/marker1
jid=$(sbatch --parsable -N3 --nccl-check -o "$OUT/job-%j.out" --wrap "echo script ran on \$SLURM_JOB_NODELIST >>$marker; echo script ran")
wait_job "$jid"
out=$OUT/job-$jid.out
cat "$out"
check "healthy: job completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "healthy: host backend across 3 nodes via PMIx" contains "$out" 'backend host-tcp, 3 ranks on n1,n2,n3, bootstrap pmix'
check "healthy: value vs threshold in the output" contains "$out" '^  # OK: busbw .* >= 20 MB/s'
check "healthy: the check ran before the script's first line" \
  test "$(grep -n '# OK: busbw' "$out" | cut -d: -f1)" -lt "$(grep -n '^script ran$' "$out" | cut -d: -f1)"
check "healthy: script ran once" test "$(wc -l <"$marker")" = 1
prom=$C/metrics/preflight_n1_nccl.prom  # the batch node's textfile (collective/src/metrics.cc)
check "healthy: metrics say the check passed" contains "$prom" '^preflight_nccl_ok\{node="n1",scope="allocation"\} 1$'
check "healthy: metrics carry the busbw" contains "$prom" '^preflight_nccl_busbw_bytes_per_second\{node="n1",scope="allocation"\} [1-9]'
check "healthy: metrics carry the threshold" contains "$prom" '^preflight_nccl_threshold_bytes_per_second\{node="n1",scope="allocation"\} 2e\+07$'

# --- 2. preflight-nccl by hand: JSON and the exit code from the threshold
srun --mpi=pmix -N3 -n3 "$NCCL" --config "$conf" --json >"$OUT/hand-ok.json" 2>&1
rc=$?
check "by hand: exit 0 when above the threshold" test $rc = 0
check "by hand: JSON verdict pass" contains "$OUT/hand-ok.json" '"verdict": "pass"'
check "by hand: JSON names the backend" contains "$OUT/hand-ok.json" '"backend": "host-tcp"'
check "by hand: JSON has the threshold" contains "$OUT/hand-ok.json" '"threshold_Bps": 20000000'
echo 5M >"$C/nodes/n2/nccl_rate"
rc=0; srun --mpi=pmix -N3 -n3 "$NCCL" --config "$conf" --json >"$OUT/hand-slow.json" 2>/dev/null || rc=$?
check "by hand: exit 1 below the threshold" test $rc = 1
check "by hand: JSON verdict fail" contains "$OUT/hand-slow.json" '"verdict": "fail"'
check "by hand: nothing drained by a user-run check" test -z "$(node_reason n2)"

# --- 3. slow n2: found, drained with its figure, job requeued without it.
# The job's user-written fields (name, comment, work dir, command) hold every
# key root-run code reads about a job: a text search of scontrol's line
# would test n1 alone, call this start 42 and replay a forged note.
marker=$OUT/marker3
forged="x NodeList=n1 Nodes=n1 Restarts=41 ExcNodeList=n3 JobState=CANCELLED AdminComment=preflight: nccl FORGED"
wd="$OUT/wd NodeList=n1 Restarts=41 AdminComment=preflight: nccl FORGED"
mkdir -p "$wd"
printf '#!/bin/bash\necho $SLURM_JOB_NODELIST restart=${SLURM_RESTART_COUNT:-0} >>%s\n' "$marker" >"$wd/run NodeList=n1.sh"
# -N2-3 starts on whatever 2 or 3 nodes are free: wait until the by-hand
# sruns above have left every node (their epilogs), or it starts on two
# (seen in CI on 25.11: n[1,3] while n2 was still completing).
wait_all_idle
jid=$(sbatch --parsable -N2-3 --nccl-check -o "$OUT/job-%j.out" -J "$forged" --comment "$forged" -D "$wd" \
  "$wd/run NodeList=n1.sh")
check "slow: job requeued after the failed check" wait_requeued "$jid"
cp "$OUT/job-$jid.out" "$OUT/job-$jid.first.out" 2>/dev/null || true
cat "$OUT/job-$jid.first.out"
check_drained n2 "slow: reason names the check, the node and the figure vs threshold" \
  '^preflight\[node\] nccl\.intra n2 \(host-tcp, 2 ranks\): busbw [0-9.]+ MB/s at 1M < 20 MB/s' -qE
check "slow: metrics say the check failed" contains "$prom" '^preflight_nccl_ok\{node="n1",scope="allocation"\} 0$'
check "slow: metrics name n2" contains "$prom" '^preflight_nccl_suspect\{node="n1",suspect="n2"\} 1$'
check "slow: n1 not drained" test -z "$(node_reason n1)"
check "slow: n3 not drained" test -z "$(node_reason n3)"
# The plugin sets ExcNodeList once the job is pending again (after every
# node's epilog): bounded at 60 s, the helper itself tries for 120 s.
check "slow: the job excludes n2" wait_excluded "$jid" n2
check "slow: first start's output says so" contains "$OUT/job-$jid.first.out" 'the job script did not run; the job is requeued without n2'
check "slow: the script did not run at the failed start" test ! -e "$marker"
check "forged: the check ran on the job's 3 nodes, not the name's n1" contains "$OUT/job-$jid.first.out" 'all_reduce across 3 nodes'
check "forged: no note replayed from the name" bash -c "! grep -q FORGED '$OUT/job-$jid.first.out'"
release_and_wait "$jid" 180
out=$OUT/job-$jid.out
cat "$out"
check "slow: requeued job completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "slow: requeued job ran without n2" test "$(cat "$marker")" = "n[1,3] restart=1"
check "slow: the restart's output says why" contains "$out" '^preflight: nccl check failed at start 1 on n1,n2,n3: drained n2; requeued without n2'
check "slow: the restart passed its check" contains "$out" '# OK: busbw'
check "forged: the note root wrote is the real one" test "$(job_field "$jid" AdminComment)" = \
  "preflight: nccl check failed at start 1 on n1,n2,n3: drained n2; requeued without n2"

# --- 4. site says fail instead of requeue
scontrol update nodename=n2 state=resume
echo "nccl_on_failure = fail" >>"$conf"
marker=$OUT/marker4
jid=$(sbatch --parsable -N3 --nccl-check -o "$OUT/job-%j.out" --wrap "echo ran >>$marker")
wait_job "$jid" 180
cat "$OUT/job-$jid.out"
check "fail: job failed" test "$(job_field "$jid" JobState)" = FAILED
check "fail: not requeued" test "$(job_field "$jid" Restarts)" = 0
check "fail: script never ran" test ! -e "$marker"
check "fail: n2 drained again" grep -q drain <<<"$(node_state n2)"
check "fail: output says the job fails" contains "$OUT/job-$jid.out" 'the job fails \(nccl_on_failure=fail\)'

# --- 5. a user slowing their own ranks drains nothing
scontrol update nodename=n2 state=resume
rm -f "$C/nodes/n2/nccl_rate"
wait_idle n1 n2 n3
jid=$(sbatch --parsable -N3 --nccl-check --export=ALL,PREFLIGHT_NCCL_HOST_RATE=5M -o "$OUT/job-%j.out" --wrap "echo ran >>$OUT/marker5")
wait_job "$jid" 120
cat "$OUT/job-$jid.out"
check "user-slowed: job failed" test "$(job_field "$jid" JobState)" = FAILED
check "user-slowed: root-run checks passed on every node" test "$(grep -c '\[n[123], root\] # OK' "$OUT/job-$jid.out")" = 3
check "user-slowed: no node singled out" contains "$OUT/job-$jid.out" 'no single node found at fault'
for n in n1 n2 n3; do check "user-slowed: $n not drained" test "$(node_reason $n)" = ""; done
check "user-slowed: script never ran" test ! -e "$OUT/marker5"

# --- 6. a user's own load next to the root-run check drains nothing
# n2 really is slow here, but the job has another step running on it while
# root measures: that could be the user's load, so root reports, not drains.
echo 5M >"$C/nodes/n2/nccl_rate"
# The root check runs only once slurmctld lists the user's step (bounded).
salloc -N1 -w n2 bash -c "srun --overlap -N1 sleep 60 &
  for i in \$(seq 1 300); do squeue -h -s -j \$SLURM_JOB_ID -o %i | grep -qx \$SLURM_JOB_ID.0 && break; sleep 0.1; done
  PREFLIGHT_NCCL_STEP=intra srun --overlap -N1 $NCCL --config $conf --intra-node; kill %1" >"$OUT/hog.out" 2>&1 || true
cat "$OUT/hog.out"
check "hog: root measured n2" contains "$OUT/hog.out" '\[n2, root\] # FAILED: busbw'
check "hog: and refused to drain" contains "$OUT/hog.out" '\[n2, root\] not drained: other steps of the job were running'
check "hog: n2 not drained" test -z "$(node_reason n2)"
salloc -N1 -n2 -w n2 bash -c "PREFLIGHT_NCCL_STEP=intra srun -N1 -n2 $NCCL --config $conf --intra-node" >"$OUT/alone.out" 2>&1 || true
cat "$OUT/alone.out"
check "alone: one root check per node, not per task" test "$(grep -c '\[n2, root\] # FAILED' "$OUT/alone.out")" = 1
check "alone: the user's tasks only stand by" test "$(grep -c '^# FAILED' "$OUT/alone.out")" = 0
check "alone: a real fault found by a user-started step still drains" grep -q '^preflight\[node\] nccl.intra n2' <<<"$(node_reason n2)"
scontrol update nodename=n2 state=resume
rm -f "$C/nodes/n2/nccl_rate"

# --- 7. bad inputs
rc=0; setpriv --reuid=nobody --regid=nogroup --clear-groups "$NCCL" --config "$conf" --intra-node --drain --node n1 >"$OUT/drain-user.out" 2>&1 || rc=$?
check "a user may not --drain" test $rc = 2
check "... and is told why" contains "$OUT/drain-user.out" 'only root may drain'
rc=0; srun --mpi=pmix -N1 --gres=gpu:1 "$NCCL" --config "$conf" --set nccl_backend=auto >"$OUT/nogpu.out" 2>&1 || rc=$?
cat "$OUT/nogpu.out"
check "GPUs asked for but no GPU stack: exit 1" test $rc = 1
check "... a clear FAILED, not a pass" contains "$OUT/nogpu.out" '# FAILED: .*GPU check asked for, but the NCCL backend cannot run on n1'
rc=0; "$NCCL" --config "$conf" --level bogus >"$OUT/bad-level.out" 2>&1 || rc=$?
check "bad --level: exit 2" test $rc = 2
check "bad --level: names the value" contains "$OUT/bad-level.out" "invalid level 'bogus'"
rc=0; "$NCCL" --config "$conf" >"$OUT/no-pmix.out" 2>&1 || rc=$?
check "outside srun --mpi=pmix: exit 2" test $rc = 2
check "outside srun --mpi=pmix: says how to start it" contains "$OUT/no-pmix.out" 'srun --mpi=pmix'
echo "fast" >"$C/nodes/n1/nccl_rate"
rc=0; "$NCCL" --config "$conf" --intra-node --node n1 >"$OUT/bad-rate.out" 2>&1 || rc=$?
check "bad rate file: fails naming the file" contains "$OUT/bad-rate.out" "nodes/n1/nccl_rate: bad rate 'fast'"
rm -f "$C/nodes/n1/nccl_rate"

# --- 8. full level: the collectives jobs use, in the same one step (issue 33)
jid=$(sbatch --parsable -N3 --nccl-check=full -o "$OUT/full-%j.out" --wrap 'echo script ran')
wait_job "$jid"
cat "$OUT/full-$jid.out"
check "full: job completed" test "$(job_field "$jid" JobState)" = COMPLETED
for op in all_reduce all_gather reduce_scatter all_to_all; do
  check "full: $op measured across the 3 nodes" contains "$OUT/full-$jid.out" "# preflight-nccl $op \(allocation, full\): backend host-tcp, 3 ranks"
done
check "full: every operation verified" contains "$OUT/full-$jid.out" '# OK: every operation passed \(all_reduce, all_gather, reduce_scatter, all_to_all\)'
check "full: ring pairs still follow" contains "$OUT/full-$jid.out" '# pair n1-n2: OK'
finish
