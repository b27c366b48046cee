#!/bin/bash
# The epilog's finishing copy of a job's checkpoints (issue 30) on the
# private cluster, without preflight-run: a plain 3-node job whose tasks
# write a persist plan and checkpoints into $PREFLIGHT_CKPT_LOCAL, then is
# cancelled. The epilogs (as the job's user) make the newest complete
# checkpoint durable on the tier with all 3 parts, never copy the
# incomplete one, free the job folders, write records and metrics, drain
# nothing. A tier that cannot be written keeps the local checkpoints (not
# durable: not lost) and says so, draining nothing.
. "$(dirname "$0")/lib.sh"

mkdir -p "$OUT"
chmod 755 "$OUT"
mkdir -p -m 777 "$OUT/u"
PART=$((1 << 20))

# The task: on each node, the plan (nodes = the job's), step_10 and step_20
# complete (marker COMPLETE), step_30 incomplete, then "ready" and sleep.
cat >"$OUT/task.sh" <<'TASK'
#!/bin/bash
d=$PREFLIGHT_CKPT_LOCAL
[ -n "$d" ] && [ -d "$d" ] || { echo "NOLOCAL $SLURMD_NODENAME"; exit 1; }
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed 's/.*/"&"/' | paste -sd,)
printf '{"tier":"%s","run":"%s.0","nodes":[%s],"convention":"marker","marker":"COMPLETE","keep_shared":0,"keep_local":0,"verify":"sizes"}\n' \
  "$1" "$SLURM_JOB_ID" "$nodes" >"$d/.preflight-persist.json.tmp"
mv "$d/.preflight-persist.json.tmp" "$d/.preflight-persist.json"
for s in step_10 step_20 step_30; do
  mkdir -p "$d/$s"
  head -c "$2" /dev/urandom >"$d/$s/part-$SLURMD_NODENAME.bin"
  [ $s = step_30 ] || : >"$d/$s/COMPLETE"
done
echo "ready $SLURMD_NODENAME $d"
exec sleep 600
TASK
chmod 755 "$OUT/task.sh"

# run_job TIER: the job, cancelled once every node is ready; prints its id.
run_job() {
  local jid
  jid=$(as_user sbatch --parsable -N3 -o "$OUT/u/job-%j.out" --wrap "srun -N3 --ntasks-per-node=1 $OUT/task.sh $1 $PART")
  poll 60 "job $jid: every rank ready" ready_or_nolocal "$OUT/u/job-$jid.out" >&2 || true
  scancel "$jid"
  wait_job "$jid" 120 >&2
  # Every node's epilog wrote its record (they run as the job completes).
  for n in n1 n2 n3; do
    poll 90 "$n's epilog record of job $jid" test -f "$C/state/jobs/$jid/$n.ckpt.json" >&2 || true
  done
  echo "$jid"
}

# ---- the newest complete checkpoint becomes durable, the folders go ----------
TIER=$OUT/tier
mkdir -p "$TIER"
chown "$TEST_USER" "$TIER"
jid=$(run_job "$TIER")
cat "$OUT/u/job-$jid.out"
check "every node's task saw its PREFLIGHT_CKPT_LOCAL" test "$(grep -c '^ready ' "$OUT/u/job-$jid.out")" = 3
check "PREFLIGHT_CKPT_LOCAL is the node's job folder" contains "$OUT/u/job-$jid.out" "^ready n2 $C/nodes/n2/ckpt/$jid\$"
check "step_20 is durable on the tier" test -f "$TIER/step_20/.preflight-durable"
for n in n1 n2 n3; do
  check "step_20 holds $n's part manifest" test -f "$TIER/step_20/.preflight-parts/$n"
  check "step_20 holds $n's part, whole" test "$(stat -c %s "$TIER/step_20/part-$n.bin" 2>/dev/null)" = "$PART"
  check "$n: the job folder is gone" test ! -e "$C/nodes/$n/ckpt/$jid"
  check "$n: the record names step_20 durable" contains "$C/state/jobs/$jid/$n.ckpt.json" '"newest_durable": "step_20"'
  check "$n: the epilog's result has the ckpt finding" contains "$C/state/jobs/$jid/$n.epilog.json" '"ckpt.newest_durable": "step_20"'
  check "$n: the record says the folder was removed" contains "$C/state/jobs/$jid/$n.ckpt.json" '"removed": true'
  check "$n: metrics: nothing left not durable" contains "$C/metrics/preflight_${n}_ckpt.prom" "^preflight_ckpt_bytes_not_durable\{node=\"$n\"\} 0$"
  check "$n: metrics: the newest durable time" contains "$C/metrics/preflight_${n}_ckpt.prom" "^preflight_ckpt_newest_durable_timestamp_seconds\{node=\"$n\"\} [1-9]"
done
check "the incomplete step_30 never reached the tier" test -z "$(ls -A "$TIER" | grep step_30)"
check "the tier's checkpoint is the user's" test "$(stat -c %U "$TIER/step_20")" = "$TEST_USER"
wait_all_idle
check "no node was drained" test "$(sinfo -h -o %T | sort -u)" = idle

# ---- a tier that cannot be written: nothing lost, nothing drained ------------
echo "not a folder" >"$OUT/tierfile"
chown "$TEST_USER" "$OUT/tierfile"
jid=$(run_job "$OUT/tierfile")
cat "$OUT/u/job-$jid.out"
for n in n1 n2 n3; do
  check "$n: the not durable step_20 is kept on local disk" test -f "$C/nodes/$n/ckpt/$jid/step_20/COMPLETE"
  check "$n: the record says it is kept and why" contains "$C/state/jobs/$jid/$n.ckpt.json" 'folder is kept: its newest complete checkpoint is not durable'
  check "$n: the record names step_20 not durable" contains "$C/state/jobs/$jid/$n.ckpt.json" 'checkpoint step_20: not durable'
  check "$n: metrics: bytes not durable" contains "$C/metrics/preflight_${n}_ckpt.prom" "^preflight_ckpt_bytes_not_durable\{node=\"$n\"\} [1-9]"
  check "$n: the epilog's result warns (the user's) naming the tier" contains "$C/state/jobs/$jid/$n.epilog.json" 'checkpoint step_20: not durable: shared tier .*tierfile: Not a directory'
  check "$n: metrics: the epilog's copy not ok" contains "$C/metrics/preflight_${n}_ckpt.prom" "^preflight_ckpt_epilog_ok\{node=\"$n\"\} 0$"
  rm -rf "${C:?}/nodes/$n/ckpt/$jid"
done
wait_all_idle
check "no node was drained by a tier that fails" test "$(sinfo -h -o %T | sort -u)" = idle

finish
