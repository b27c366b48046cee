#!/bin/bash
# Issue 30's fault suite, the shared tier and the checkpoint's contents, on
# the real cluster (3 nodes), through the epilog's finishing copy: plain
# jobs whose tasks write a persist plan and checkpoints into
# $PREFLIGHT_CKPT_LOCAL (the prolog's folder) and are cancelled; each
# node's epilog persists, as the user, the newest checkpoint complete on
# every node. Faults:
#   - the tier full (ENOSPC on write) and failing (EIO on fsync): the tier
#     is preflight-netfs (tests/harness/netfs, a FUSE network file system
#     with scriptable faults: the harness's seam for a failing NFS);
#   - the committing copy killed -9 between the last part and the commit
#     (held in its rename by preflight-netfs);
#   - a checkpoint holding a symlink out of the tree, or a fifo;
#   - a checkpoint of 100k files;
#   - the job's time limit (the epilogs persist, as after a scancel);
#   - two jobs of one chain (the same checkpoint names) on one tier at once.
# After each: every checkpoint visible on the tier verifies (each part's
# sha256 matches the one its task wrote beside it; every node's part and
# manifest present), it is the user's, no node is drained, and what could
# not be made durable is kept on local disk and said, never lost.
. "$(dirname "$0")/lib.sh"

PART=$((256 << 10))
mkdir -p -m 777 "$OUT/u"
chmod 755 "$OUT"

# task.sh TIER KIND PART_BYTES: on each node, the plan, step_10 and step_20 (marker
# COMPLETE last), each holding this node's part and its sha256; KIND adds
# to step_20: "symlink" (-> /etc/shadow), "fifo", "many" (100k files on
# n1), "plain" nothing. Then "ready" and sleep.
cat >"$OUT/task.sh" <<'TASK'
#!/bin/bash
set -e
d=$PREFLIGHT_CKPT_LOCAL n=$SLURMD_NODENAME PART=$3
[ -n "$d" ] && [ -d "$d" ] || { echo "NOLOCAL $n"; exit 1; }
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed 's/.*/"&"/' | paste -sd,)
printf '{"tier":"%s","run":"%s.0","nodes":[%s],"convention":"marker","marker":"COMPLETE","keep_shared":0,"keep_local":0,"verify":"sizes"}\n' \
  "$1" "$SLURM_JOB_ID" "$nodes" >"$d/.preflight-persist.json.tmp"
mv "$d/.preflight-persist.json.tmp" "$d/.preflight-persist.json"
for s in step_10 step_20; do
  mkdir -p "$d/$s"
  head -c "$PART" /dev/urandom >"$d/$s/part-$n.bin"
  sha256sum <"$d/$s/part-$n.bin" | cut -d' ' -f1 >"$d/$s/part-$n.sha"
  echo "$SLURM_JOB_ID" >"$d/$s/job-$n"
  if [ $s = step_20 ]; then
    case $2 in
      symlink) ln -s /etc/shadow "$d/$s/leak" ;;
      fifo) mkfifo "$d/$s/pipe" ;;
      many) if [ "$n" = n1 ]; then mkdir "$d/$s/many" && (cd "$d/$s/many" && seq -f 'f%06g' 1 100000 | xargs touch); fi ;;
    esac
  fi
  : >"$d/$s/COMPLETE"
done
echo "ready $n"
exec sleep 600
TASK
chmod 755 "$OUT/task.sh"

# submit TIER KIND [SBATCH_OPTION...]: the job's id.
submit() {
  local t=$1 k=$2
  shift 2
  # PART as an argument: with Slurm 25.11, sbatch --export=ALL,VAR=... as
  # this user made every launch fail ("user env retrieval failed requeued held").
  as_user sbatch --parsable -N3 -o "$OUT/u/job-%j.out" "$@" \
    --wrap "srun -N3 --ntasks-per-node=1 $OUT/task.sh $t $k $PART"
}
# ready_then_cancel JOBID...: every node of each job ready (or one failed), then scancel, and
# each job gone with every node's epilog record written.
ready_then_cancel() {
  local j n
  for j in "$@"; do poll 180 "job $j: every rank ready" ready_or_nolocal "$OUT/u/job-$j.out" || true; done
  scancel "$@"
  for j in "$@"; do
    wait_job "$j" 300 || true
    records_written "$j" || true
  done
}
# records_written JOBID: every node's epilog wrote its record (300 s each).
records_written() {
  local n
  for n in n1 n2 n3; do poll 300 "$n's epilog record of job $1" test -f "$C/state/jobs/$1/$n.ckpt.json" || return 1; done
}
record() { cat "$C/state/jobs/$1/$2.ckpt.json" 2>/dev/null; }

# verify_tier TIER: every visible checkpoint is durable, whole and the user's.
verify_tier() {
  local t=$1 c n bad=0 jobs
  for c in $(ls "$t"); do
    [ -f "$t/$c/.preflight-durable" ] || { note "$c: visible without .preflight-durable"; bad=1; continue; }
    [ "$(stat -c %U "$t/$c")" = "$TEST_USER" ] || { note "$c: not the user's"; bad=1; }
    for n in n1 n2 n3; do
      [ -f "$t/$c/.preflight-parts/$n" ] || { note "$c: no part manifest of $n"; bad=1; }
      [ "$(sha256sum <"$t/$c/part-$n.bin" 2>/dev/null | cut -d' ' -f1)" = "$(cat "$t/$c/part-$n.sha" 2>/dev/null)" ] ||
        { note "$c: part-$n.bin does not match its sha256"; bad=1; }
    done
    jobs=$(cat "$t/$c"/job-n* 2>/dev/null | sort -u | wc -l)
    [ "$jobs" = 1 ] || { note "$c: parts of $jobs jobs"; bad=1; }
    [ -z "$(find "$t/$c" ! -user "$TEST_USER" | head -1)" ] || { note "$c: holds files not the user's"; bad=1; }
  done
  return $bad
}
no_drain() { test -z "$(sinfo -h -t drain,draining,down -o %N)"; }
visible() { ls "$1" 2>/dev/null | tr '\n' ' '; }

# ---- the tier on preflight-netfs: full, then failing ------------------------
nsrc=$OUT/nsrc nmnt=$OUT/nmnt ctl=$OUT/netfs.control
mkdir -p "$nsrc/tier" "$nmnt"
chown "$TEST_USER" "$nsrc/tier"
export PREFLIGHT_NETFS=${PREFLIGHT_NETFS:-$B/tests/harness/netfs/preflight-netfs}
if [ -x "$PREFLIGHT_NETFS" ] && [ -c /dev/fuse ]; then
  trap '"$S/tests/harness/netfs.sh" umount "$nmnt" >/dev/null 2>&1 || true' EXIT
  "$S/tests/harness/netfs.sh" mount "$nsrc" "$nmnt" --allow-other --control "$ctl" --latency-us 200 >/dev/null
  tier=$nmnt/tier
  for fault in "enospc write:No space left on device" "eio fsync:Input/output error"; do
    rule=${fault%%:*} err=${fault#*:}
    printf '%s\n' "$rule" >"$ctl"
    jid=$(submit "$tier" plain)
    ready_then_cancel "$jid"
    note "tier fault '$rule': job $jid: n1's record: $(record "$jid" n1 | tr -d '\n' | cut -c1-400)"
    for n in n1 n2 n3; do
      check "$rule: $n keeps step_20 on local disk" test -f "$C/nodes/$n/ckpt/$jid/step_20/COMPLETE"
      check "$rule: $n's record: not durable, kept" contains "$C/state/jobs/$jid/$n.ckpt.json" 'folder is kept: its newest complete checkpoint is not durable'
    done
    check "$rule: some record names the error ($err)" grep -qE "$err" "$C/state/jobs/$jid/"n[123].ckpt.json
    check "$rule: nothing visible on the tier is incomplete ($(visible "$tier"))" verify_tier "$tier"
    check "$rule: no node drained for the tier's fault" no_drain
    rm -rf "${C:?}"/nodes/n[123]/ckpt/"$jid"
  done
  # The fault cleared: the next job persists through the same mount.
  rm -f "$ctl"
  jid=$(submit "$tier" plain)
  ready_then_cancel "$jid"
  check "tier healthy again: step_20 durable" test -f "$tier/step_20/.preflight-durable"
  check "tier healthy again: everything visible verifies ($(visible "$tier"))" verify_tier "$tier"

  # Between the last part and the commit: the committing copy (an epilog's,
  # as the user) is held in its rename of .partial-JOB.0-step_20 to step_20
  # (preflight-netfs "hold"), killed -9 there, and the rename released. The
  # kill lands once the rename is done, before the marker. Whatever it left
  # (step_20 renamed with its marker pending, or marked by another node's
  # epilog that waited for the same rename), the next run of preflight-run
  # on the tier finishes what is left, cleans the rest and resumes from it.
  rm -rf "${nsrc:?}"/tier/* "$nsrc"/tier/.[!.]*
  printf 'hold rename tier/step_*\n' >"$ctl.new" && mv "$ctl.new" "$ctl"
  jid=$(submit "$tier" plain)
  poll 180 "job $jid: every rank ready" ready_or_nolocal "$OUT/u/job-$jid.out" || true
  scancel "$jid"
  # The daemon says which caller it holds (a thread id: kill(2) of it ends
  # its process).
  poll 180 "the netfs daemon holds a rename" grep -qs ': holding rename ' "$nmnt.netfs.log" || true
  held=$(sed -n 's/.*: holding rename .* of pid \([0-9]*\) .*/\1/p' "$nmnt.netfs.log" | head -1)
  check "commit cut: a node's finishing copy reaches the commit and waits in its rename" test -n "$held"
  note "commit cut: held: $(grep ': holding ' "$nmnt.netfs.log" | head -3 | tr '\n' ';') $(ps -o pid=,user=,args= -p "${held:-0}")"
  [ -n "$held" ] && kill -9 "$held"
  rm -f "$ctl"
  wait_job "$jid" 300 || true
  records_written "$jid" || true
  note "commit cut: job $jid: tier $(ls -A "$tier" | tr '\n' ' '); step_20 holds $(ls -A "$tier/step_20" 2>/dev/null | tr '\n' ' ')"
  check "commit cut: a node's record says its copy was killed" grep -q 'did not finish: killed by signal 9' "$C/state/jobs/$jid/"n[123].ckpt.json
  # Another node's epilog, waiting for the same rename, may finish the
  # commit (measured: it did); else step_20 waits renamed, marker pending.
  if [ -e "$tier/step_20/.preflight-durable" ]; then
    note "commit cut: another node's epilog finished the commit"
    check "commit cut: the commit another node finished verifies" verify_tier "$tier"
  else
    check "commit cut: step_20 renamed with its manifest, its marker pending" test -f "$tier/step_20/.preflight-manifest"
  fi
  check "commit cut: no node drained" no_drain
  as_user sbatch --parsable -N1 -o "$OUT/u/next-%j.out" --wrap \
    "$B/wrapper/preflight-run --config $C/etc/preflight.conf --persist-to $tier -- true" >"$OUT/next.jid"
  next=$(cat "$OUT/next.jid")
  wait_job "$next" 120 || true
  cat "$OUT/u/next-$next.out"
  check "commit cut: the next run finished the commit: step_20 durable" test -f "$tier/step_20/.preflight-durable"
  check "commit cut: everything visible verifies ($(visible "$tier"))" verify_tier "$tier"
  check "commit cut: the next run resumes from step_20" contains "$OUT/u/next-$next.out" "^preflight: resume from step_20 on the shared tier"
  check "commit cut: nothing hidden is left on the tier" test -z "$(ls -A "$tier" | grep '^\.')"
  rm -rf "${C:?}"/nodes/n[123]/ckpt/"$jid"
  "$S/tests/harness/netfs.sh" umount "$nmnt" || fail "netfs unmount"
  trap - EXIT
else
  note "SKIPPED the netfs tier faults: no preflight-netfs ($PREFLIGHT_NETFS) or /dev/fuse"
fi

# ---- what a checkpoint may hold ---------------------------------------------
tier=$OUT/tier
mkdir -p "$tier"
chown "$TEST_USER" "$tier"
for kind in symlink fifo; do
  jid=$(submit "$tier" $kind)
  ready_then_cancel "$jid"
  note "$kind: job $jid: n2's record: $(record "$jid" n2 | tr -d '\n' | cut -c1-400)"
  word=$([ $kind = symlink ] && echo "is a symlink to '/etc/shadow'" || echo "is a FIFO")
  check "$kind: the record names the entry refused ($word)" grep -q "leak' $word\|pipe' $word\|$word" "$C/state/jobs/$jid/n2.ckpt.json"
  check "$kind: step_20 was not published" test ! -e "$tier/step_20"
  check "$kind: nothing of /etc/shadow reached the tier" test -z "$(grep -rl root: "$tier" 2>/dev/null)"
  check "$kind: everything visible on the tier verifies ($(visible "$tier"))" verify_tier "$tier"
  check "$kind: no node drained for the user's checkpoint" no_drain
  rm -rf "${C:?}"/nodes/n[123]/ckpt/"$jid"
done

# 100k files in one node's part: persisted whole within the epilog's budget.
rm -rf "${tier:?}"/* "$tier"/.[!.]*
jid=$(submit "$tier" many)
t0=$SECONDS
ready_then_cancel "$jid"
note "100k files: job $jid, cancel to records $((SECONDS - t0)) s; n1: $(record "$jid" n1 | tr -d '\n' | cut -c1-300)"
check "100k files: step_20 durable" test -f "$tier/step_20/.preflight-durable"
check "100k files: all of them there" test "$(find "$tier/step_20/many" -type f | wc -l)" = 100000
check "100k files: everything visible verifies" verify_tier "$tier"
check "100k files: no node drained" no_drain

# ---- the time limit ends the job: the epilogs persist as after a scancel -----
tl=$OUT/tier-timelimit
mkdir -p "$tl"
chown "$TEST_USER" "$tl"
jid=$(submit "$tl" plain --time=1)
wait_job "$jid" 300 || true
records_written "$jid" || true
check "time limit: the job ended by it" test "$(job_field "$jid" JobState)" = TIMEOUT
check "time limit: step_20 durable" test -f "$tl/step_20/.preflight-durable"
check "time limit: everything visible verifies ($(visible "$tl"))" verify_tier "$tl"
check "time limit: the local folders freed" test -z "$(compgen -G "$C/nodes/n*/ckpt/$jid")"
check "time limit: no node drained" no_drain

# ---- two jobs of one chain on one tier at once -------------------------------
rm -rf "${tier:?}"/* "$tier"/.[!.]*
wait_all_idle
a=$(submit "$tier" plain)
b=$(submit "$tier" plain)
ready_then_cancel "$a" "$b"
note "two jobs $a $b: tier: $(ls -A "$tier" | tr '\n' ' ')"
check "two jobs: step_20 durable" test -f "$tier/step_20/.preflight-durable"
check "two jobs: every visible checkpoint is one job's, whole" verify_tier "$tier"
check "two jobs: no node drained" no_drain
# The tier's step_20 is one job's; the other job's is not durable (its
# record said durable, and its local copy went, when names and sizes were
# all LocalPartDurable compared), is kept on local disk, and says why.
winner=$(cat "$tier/step_20/job-n1" 2>/dev/null)
check "two jobs: the tier's step_20 is one of theirs ($winner)" test "$winner" = "$a" -o "$winner" = "$b"
loser=$([ "$winner" = "$a" ] && echo "$b" || echo "$a")
for n in n1 n2 n3; do
  check "two jobs: $winner's record on $n: step_20 durable" contains "$C/state/jobs/$winner/$n.ckpt.json" '"newest_durable": "step_20"'
  check "two jobs: $loser on $n keeps its step_20" test -f "$C/nodes/$n/ckpt/$loser/step_20/COMPLETE"
  check "two jobs: $loser's record on $n says the tier's step_20 is another run's" \
    contains "$C/state/jobs/$loser/$n.ckpt.json" 'checkpoint step_20: not durable: .*/step_20 already exists on the tier with other contents'
  check "two jobs: $loser's record on $n does not call step_20 durable" \
    test -z "$(grep '"newest_durable": "step_20"' "$C/state/jobs/$loser/$n.ckpt.json")"
done
rm -rf "${C:?}"/nodes/n[123]/ckpt/"$loser"
wait_all_idle
finish
