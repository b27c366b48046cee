#!/bin/bash
# PrologFlags=Alloc,DeferBatch (the harness's default, as
# conf/slurm.conf.fragment recommends): the batch script's first line runs
# only after every node's prolog has ended. With Alloc alone slurmctld sends
# the batch launch as soon as the first node's prolog completes
# (slurm.conf(5)), and the script starts while other nodes are still checked.
#
# n2's prolog is held through the harness's prolog-before hook until n1's and
# n3's prologs have ended, then it waits (bounded) for the script's first
# line. With DeferBatch the script cannot start meanwhile, so the first line
# finds n2's prolog-done marker; without it, the script starts during that
# wait and the first line finds none (and n2's hook records that it saw it).
. "$(dirname "$0")/lib.sh"

done_dir=$C/run/prolog-done
hook=$C/hooks/prolog-before.n2
restart() { PREFLIGHT_PROLOG_FLAGS=$1 "$S/tests/harness/cluster.sh" start "$C" "$B" >"$OUT/start-$1.log" 2>&1; }
trap 'rm -f "$hook"' EXIT

# hold_n2 TENTHS: install the hook (cluster.sh start clears DIR/hooks); once
# n1's and n3's prologs ended, n2's waits at most TENTHS/10 s for the first
# line. With DeferBatch that wait always runs out: it is the window in which a
# wrong order would show (a shorter one could only miss it, never fail the
# test). Without DeferBatch it ends at the first line, so its bound is generous.
hold_n2() {
  cat >"$hook" <<HOOK
#!/bin/sh
i=0
while [ \$i -lt 600 ] && ! { [ -e $done_dir/\$SLURM_JOB_ID.n1 ] && [ -e $done_dir/\$SLURM_JOB_ID.n3 ]; }; do sleep 0.1; i=\$((i + 1)); done
i=0
while [ \$i -lt $1 ]; do
  [ -e $OUT/first-line.\$SLURM_JOB_ID ] && { echo "n2's prolog saw the script's first line" >$OUT/n2-saw-first-line.\$SLURM_JOB_ID; exit 0; }
  sleep 0.1; i=\$((i + 1))
done
HOOK
  chmod 755 "$hook"
}

cat >"$OUT/job.sh" <<JOB
#!/bin/bash
date +%s.%N >$OUT/first-line.\$SLURM_JOB_ID; [ -e $done_dir/\$SLURM_JOB_ID.n2 ] && echo "first line: n2 prolog done" || echo "first line: n2 prolog still running"
echo "batch host \$SLURMD_NODENAME"
JOB

# run_job PART TENTHS: a 3-node job with n2's prolog held; sets jid, first, n2end, out.
# Job ids start again at 1 after a restart: the markers of a previous part go first.
run_job() {
  rm -f "$OUT"/first-line.* "$OUT"/n2-saw-first-line.*
  hold_n2 "$2"
  jid=$(sbatch --parsable -N3 -w n[1-3] -o "$OUT/job-$1-%j.out" "$OUT/job.sh")
  out=$OUT/job-$1-$jid.out
  check "job $jid completed" wait_job "$jid" 120
  cat "$out" || true
  check "job $jid state COMPLETED" test "$(job_field "$jid" JobState)" = COMPLETED
  check "all three prologs of job $jid ended" test -e "$done_dir/$jid.n1" -a -e "$done_dir/$jid.n2" -a -e "$done_dir/$jid.n3"
  first=$(cat "$OUT/first-line.$jid" 2>/dev/null || echo 0) n2end=$(cat "$done_dir/$jid.n2" 2>/dev/null || echo 0)
  note "n2 prolog ended at $n2end, first line at $first"
}
before() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > 0 && b + 0 > 0 && a <= b) }'; }

# 1. Alloc,DeferBatch (the harness's default).
"$B/admin/preflight" --config "$C/etc/preflight.conf" config check >"$OUT/config-check.out" 2>&1 || true
check "config check has no DeferBatch note (the harness sets it)" bash -c "! grep -q DeferBatch '$OUT/config-check.out'"
run_job deferbatch 100
check "DeferBatch: the script's first line ran after n2's prolog ended" contains "$out" '^first line: n2 prolog done$'
check "DeferBatch: n2's prolog never saw the script running" test ! -e "$OUT/n2-saw-first-line.$jid"
check "DeferBatch: timestamps: n2's prolog ended before the first line" before "$n2end" "$first"

# 2. Alloc alone: what DeferBatch prevents. The script starts while n2 is
# still in its prolog, and preflight config check says so.
trap 'rm -f "$hook"; restart Alloc,DeferBatch' EXIT
check "cluster restarted with PrologFlags=Alloc" restart Alloc
"$B/admin/preflight" --config "$C/etc/preflight.conf" config check >"$OUT/config-check-alloc.out" 2>&1 || true
check "config check: without DeferBatch the script starts at the first node's prolog" \
  contains "$OUT/config-check-alloc.out" 'without DeferBatch slurmctld starts the batch script as soon as the first node.s prolog completes'
run_job alloc 1200
check "Alloc alone: the script's first line ran while n2's prolog was running" contains "$out" '^first line: n2 prolog still running$'
check "Alloc alone: n2's prolog saw the script running" test -e "$OUT/n2-saw-first-line.$jid"
check "Alloc alone: timestamps: the first line before n2's prolog ended" before "$first" "$n2end"
finish
