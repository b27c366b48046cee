#!/bin/bash
# preflight-run's hang attribution on the real Slurm (issue 31, item 1).
# NCCL's RAS socket is played by tests/fakes/fake_ras (the seam: real NCCL
# needs GPUs), started by the job script at the address the plugin gave the
# job ($NCCL_RAS_ADDR), replaying a report about the job's own nodes (nK's
# fabric address is 127.0.1.(100+K), node_addresses). The app hangs; the
# stall watch fires; preflight-run asks RAS, names the node, and requeues
# the job without it.
#   1. a dead process on the job's second node: named, requeued excluding
#      it, the restart completes elsewhere; result JSON and metrics say so
#   2. a healthy report (equal counts): no one named, nothing excluded
#   3. a listener on the job's port owned by another user (root): not asked
#   4. NCCL_RAS_ADDR per job: 127.0.0.1, in run_ras_ports, a user's value kept
#   5. the GPU watch on every node (issue 31, item 2; the fake NVML per node):
#      no RAS, the second node's GPUs idle while the first's spin (busy at
#      low power): the second node named and excluded from the restart
. "$(dirname "$0")/lib.sh"
run="$B/wrapper/preflight-run --config $C/etc/preflight.conf"
app=$B/tests/pf_test_app
fake=$B/tests/fakes/fake_ras
fix=$S/tests/fixtures/ras
mkdir -p "$OUT/u"
chmod 0777 "$OUT/u"
chmod -R a+rX "$OUT" "$fix"

# The job script: restart 0 starts the fake RAS at $NCCL_RAS_ADDR with
# REPORT rewritten to name the allocation's second node, then hangs.
cat >"$OUT/u/hang.sh" <<SH
#!/bin/bash
report=\$1 own=\$2
if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ]; then
  second=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | sed -n 2p)
  echo "second node \$second"
  sed "s/127\\.0\\.1\\.102/127.0.1.\$((100 + \${second#n}))/" "$fix/\$report" >"$OUT/u/reply.\$SLURM_JOB_ID"
  if [ "\$own" = own ]; then
    $fake --listen "\$NCCL_RAS_ADDR" --reply "$OUT/u/reply.\$SLURM_JOB_ID" --ready "$OUT/u/ready.\$SLURM_JOB_ID" --max-seconds 60 &
    echo \$! >"$OUT/u/fake.\$SLURM_JOB_ID"
    i=0; until [ -f "$OUT/u/ready.\$SLURM_JOB_ID" ] || [ \$i -ge 100 ]; do sleep 0.1; i=\$((i + 1)); done
  fi
  echo "NCCL_RAS_ADDR=\$NCCL_RAS_ADDR"
  exec $run --stall-output 2s --stall-restart yes --max-failure-restarts \$3 --kill-wait 2s -- $app --steps 1000 --step-ms 10 --hang-at 3
fi
echo "restart \$SLURM_RESTART_COUNT on \$SLURM_JOB_NODELIST"
SH
chmod 0755 "$OUT/u/hang.sh"

# --- 1. a dead process on the second node --------------------------------
# As root, like run_failures: the result JSON and the metrics go to the
# site's root-owned state and textfile dirs (a user's run says it cannot).
wait_all_idle
jid=$(sbatch --parsable -N2 --open-mode=append -o "$OUT/u/dead-%j.out" --wrap "$OUT/u/hang.sh dead_2.29.txt own 1")
wait_restarted "$jid" 120 || true
out=$OUT/u/dead-$jid.out
second=$(sed -n 's/^second node //p' "$out" | head -1)
note "the job's second node: $second"
check "dead: the stall alert fired" soon_contains "$out" '^preflight: run: ALERT output: no output line'
check "dead: preflight-run asked RAS at the job's address" contains "$out" '^preflight: run: hang: asking NCCL RAS at 127\.0\.0\.1:[0-9]+ which node is behind$'
check "dead: the node is named with the process" contains "$out" \
  "^preflight: run: hang: node\(s\) at fault: $second: NCCL RAS considers dead: \(pid 4242, GPU 0\) on $second$"
check "dead: requeued excluding the named node" soon_contains "$out" \
  "^preflight: run: requeued job $jid: stopped the command: no output line .*: requeue 1 of 1; hang attributed to $second; excluding $second$"
check "dead: the named node is excluded from the requeued job" wait_excluded "$jid" "$second"
node=$(sed -n "s/^preflight: run: job $jid on \([^,]*\), restart 0.*/\1/p" "$out")
check "dead: the result JSON has the finding" contains "$C/state/jobs/$jid/$node.run.json" '"check": "run.hang"'
check "dead: ... naming the node" contains "$C/state/jobs/$jid/$node.run.json" "\"device\": \"$second\""
check "dead: the metrics name the node" contains "$C/metrics/preflight_${node}_run.prom" \
  "preflight_check_ok\{.*check=\"run.hang\",device=\"$second\",verdict=\"fail\".*\} 0"
# The restart starts when Slurm's requeue hold ends (21 s here, cluster.sh): a
# release right after the requeue met a Slurm 22.05 race on the batch node
# (its REQUEST_LAUNCH_PROLOG never seen, "giving up after 20 sec"), which
# drained it and left the restart without nodes (CI).
wait_job "$jid" 400
cat "$out"
check "dead: the restart completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "dead: the restart ran without the named node" test -z "$(scontrol show hostnames "$(job_field "$jid" NodeList)" | grep -x "$second")"
# The fake stands for the job's own NCCL: proctrack/linuxproc loses it once
# preflight-run (its parent) has ended; the test ends it.
end_fake() { kill "$(cat "$OUT/u/fake.$1" 2>/dev/null)" 2>/dev/null || true; }
end_fake "$jid"

# --- 2. a healthy report: no one named -----------------------------------
jid=$(as_user sbatch --parsable -N2 -o "$OUT/u/healthy-%j.out" --wrap "$OUT/u/hang.sh healthy_2.29.json own 0")
wait_job "$jid" 120
out=$OUT/u/healthy-$jid.out
cat "$out"
check "healthy: RAS answered, no node named" contains "$out" \
  '^preflight: run: hang: NCCL RAS: every rank launched the same collectives .*no node named by RAS; GPU watch: .*no node named$'
check "healthy: not requeued, nothing excluded" test "$(job_field "$jid" Restarts)" = 0
check "healthy: no node excluded" test -z "$(job_field "$jid" ExcNodeList | grep -v '(null)')"
end_fake "$jid"

# --- 3. another user's listener on the job's port ------------------------
jid=$(as_user sbatch --parsable -H -N2 -o "$OUT/u/foreign-%j.out" --wrap "$OUT/u/hang.sh dead_2.29.txt none 0")
lo=$(sed -n 's/^run_ras_ports *= *\([0-9]*\)-.*/\1/p' "$C/etc/preflight.conf")
port=$(( ${lo:-28100} + jid % 900 ))
"$fake" --listen "127.0.0.1:$port" --reply "$fix/dead_2.29.txt" --ready "$OUT/foreign.ready" --max-seconds 120 &
foreign=$!
poll 10 "the root-owned fake RAS listens" test -f "$OUT/foreign.ready"
scontrol release "$jid"
wait_job "$jid" 120
kill "$foreign" 2>/dev/null || true
wait "$foreign" 2>/dev/null || true
out=$OUT/u/foreign-$jid.out
cat "$out"
check "foreign: the job's address is the port run_ras_ports gives it" contains "$out" "^NCCL_RAS_ADDR=127\.0\.0\.1:$port$"
check "foreign: root's listener is not asked" contains "$out" \
  "^preflight: run: hang: NCCL RAS not reached: 127\.0\.0\.1:$port: its listening socket belongs to uid 0, not this job's user \(uid $(id -u "$TEST_USER")\): not asked; no node named; GPU watch: .*no node named$"
check "foreign: nobody named" bash -c "! grep -q 'node(s) at fault' '$out'"

# --- 4. a user's own NCCL_RAS_ADDR is kept -------------------------------
# In sbatch's environment (--export=ALL, the default): Slurm 25.11 held a job
# whose --export listed a variable ("user env retrieval failed").
jid=$(as_user NCCL_RAS_ADDR=localhost:29999 sbatch --parsable -N1 -o "$OUT/u/own-%j.out" --wrap 'echo "addr=$NCCL_RAS_ADDR"; srun -N1 printenv NCCL_RAS_ADDR')
wait_job "$jid" 60
out=$OUT/u/own-$jid.out
check "own: the user's value reaches the batch script" contains "$out" '^addr=localhost:29999$'
check "own: ... and the step's tasks" contains "$out" '^localhost:29999$'
# --- 5. the GPU watch: an idle node among spinning ones -------------------
# As root (it writes the nodes' fake NVML faults). No fake RAS: NCCL's
# RAS is not reached, and the watch decides.
cat >"$OUT/gpu.sh" <<SH
#!/bin/bash
if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ]; then
  first=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | sed -n 1p)
  second=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | sed -n 2p)
  echo "second node \$second"
  # Appended, not replaced: the node's GPU count and health faults stay as
  # the prolog and epilog checks know them (a changed count drains it).
  for n in \$first \$second; do cp "$C/nodes/\$n/nvml.faults" "$OUT/faults.\$n" 2>/dev/null || : >"$OUT/faults.\$n.none"; done
  printf 'util * 100\npower * 110\npower_limit * 700\n' >>"$C/nodes/\$first/nvml.faults"
  printf 'util * 0\npower * 70\npower_limit * 700\n' >>"$C/nodes/\$second/nvml.faults"
  exec $run --stall-output 4s --watch-gpus 1s --stall-restart yes --max-failure-restarts 1 --kill-wait 2s -- $app --steps 1000 --step-ms 10 --hang-at 3
fi
echo "restart \$SLURM_RESTART_COUNT on \$SLURM_JOB_NODELIST"
SH
chmod 0755 "$OUT/gpu.sh"
jid=$(sbatch --parsable -N2 --open-mode=append -o "$OUT/gpu-%j.out" --wrap "$OUT/gpu.sh")
wait_restarted "$jid" 120 || true
out=$OUT/gpu-$jid.out
second=$(sed -n 's/^second node //p' "$out" | head -1)
check "gpu: RAS not reached, then the GPU watch names the idle node" soon_contains "$out" \
  "^preflight: run: hang: node\(s\) at fault: $second: NCCL RAS not reached: .*; GPU watch: GPUs idle on $second \(GPU 0 0% at 70 W of 700 W\) while n[0-9]+ spins at low power in a collective it never reached"
check "gpu: requeued excluding it" soon_contains "$out" "; hang attributed to $second; excluding $second$"
check "gpu: the watch lines are not in the job output" bash -c "! grep -q '^preflight-watch' '$out'"
check "gpu: the named node is excluded from the requeued job" wait_excluded "$jid" "$second"
# The restart starts when Slurm's requeue hold ends (21 s here, cluster.sh): a
# release right after the requeue met a Slurm 22.05 race on the batch node
# (its REQUEST_LAUNCH_PROLOG never seen, "giving up after 20 sec"), which
# drained it and left the restart without nodes (CI).
wait_job "$jid" 400
cat "$out"
check "gpu: the restart completed without it" test "$(job_field "$jid" JobState)" = COMPLETED
for f in "$OUT"/faults.n*; do
  case $f in
    *.none) n=${f%.none}; rm -f "$C/nodes/${n##*.}/nvml.faults" ;;
    *) cp "$f" "$C/nodes/${f##*.}/nvml.faults" ;;
  esac
done
check "gpu: no node drained" bash -c "! sinfo -h -N -o '%T' | grep -q drain"
finish
