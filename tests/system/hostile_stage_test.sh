#!/bin/bash
# Hostile input against staging (issue 19), as an unprivileged user on the
# real cluster: every case ends with a message naming its cause, no node is
# drained for what a user typed or placed, nothing is left behind (views,
# mounts, cache entries). Label: hostile.
. "$(dirname "$0")/lib.sh"

PF=$B/admin/preflight
CONF=$C/etc/preflight.conf
U=$TEST_USER
DS=$(mktemp -d /tmp/pf-hostile.XXXXXX)
chmod 755 "$DS"
cp "$CONF" "$OUT/preflight.conf.orig"
cleanup() {
  cp "$OUT/preflight.conf.orig" "$CONF"
  chmod 755 "$C/nodes/n3/stage" 2>/dev/null || true
  rm -rf "$DS"
}
trap cleanup EXIT
mkdir -p "$DS/ds1"; echo x >"$DS/ds1/f"; chmod -R a+rX "$DS/ds1"
mkdir -m 777 "$OUT/u"
before=$(squeue -h | wc -l)
AS=(runuser -u "$U" -- env SLURM_CONF="$SLURM_CONF")  # as_user, for timeout
no_drain() { wait_idle n1 n2 n3; check "$1: no node drained" test "$(sinfo -h -o %T | sort -u)" = idle; }
# refuse WHAT TEXT CMD...: refused at submission, promptly, saying why.
refuse() {
  local what=$1 text=$2; shift 2
  set +e; timeout 60 "$@" --wrap true >"$OUT/refused.out" 2>&1; local rc=$?; set -e
  cat "$OUT/refused.out"
  check "$what: refused" test $rc -ne 0 -a $rc -ne 124
  check "$what: says why" contains "$OUT/refused.out" "$text"
}

# ---- 1. an 8000-entry list: once drained n2 (slurmd could not exec the prolog)
for i in $(seq 1 8000); do echo "$DS/ds1:n$i"; done >"$DS/l.8k"
chmod 644 "$DS/l.8k"
refuse "8000-entry --stage list" "refusing --stage: .*the limit is 256 per job" "${AS[@]}" sbatch -w n2 --stage=@"$DS/l.8k"
# 200 long entries: under the count, over the encoded bound.
long=$DS/$(printf 'd%.0s' $(seq 1 150)); mkdir -p "$long"; chmod a+rx "$long"
for i in $(seq 1 200); do echo "$long:n$i"; done >"$DS/l.long"; chmod 644 "$DS/l.long"
refuse "a list whose expanded value is over 16 KiB" "expanded dataset list is [0-9]* bytes; the limit is 16384" "${AS[@]}" sbatch --stage=@"$DS/l.long"
# ---- 2. @FIFO: once blocked sbatch forever
mkfifo -m 644 "$DS/fifo"
refuse "--stage=@FIFO" "list file $DS/fifo: not a regular file" "${AS[@]}" sbatch --stage=@"$DS/fifo"
# ---- 3. kernel pseudo filesystems
refuse "/proc as a source" "on the kernel's proc pseudo filesystem" "${AS[@]}" sbatch --stage=/proc/self/status:st
refuse "/sys as a source" "on the kernel's sysfs pseudo filesystem" "${AS[@]}" sbatch --stage=/sys/kernel:k
check "nothing was queued by refused submissions" test "$(squeue -h | wc -l)" = "$before"
no_drain "refused submissions"

# ---- 4. a tree deeper than PATH_MAX: once ENAMETOOLONG, node drained, requeued
(cd "$DS" && mkdir deep && cd deep && for i in $(seq 1 25); do n=$(printf "%0250d" "$i"); mkdir "$n"; cd "$n"; done; echo leaf >leaf)
chmod -R a+rX "$DS/deep"
jd=$(as_user sbatch --parsable -w n2 --stage="$DS/deep" -o "$OUT/u/deep-%j.out" --wrap 'echo SHOULD-NOT-RUN')
wait_job "$jd" 120
cat "$OUT/u/deep-$jd.out" || true
check "deep tree: the job failed" test "$(job_field "$jd" JobState)" = FAILED
check "deep tree: the output names the bound" contains "$OUT/u/deep-$jd.out" "preflight: stage on n2: .*the limit is 4000 \(PATH_MAX\); refused"
check "deep tree: the command never ran" bash -c "! grep -q SHOULD-NOT-RUN '$OUT/u/deep-$jd.out'"
check "deep tree: not requeued" test "$(job_field "$jd" Restarts)" = 0
no_drain "deep tree"

# ---- 5. a 1 TB sparse file: once written out until the disk was full
mkdir "$DS/sparse"; truncate -s 1T "$DS/sparse/huge"; chmod -R a+rX "$DS/sparse"
js=$(as_user sbatch --parsable -w n1 --stage="$DS/sparse" -o "$OUT/u/sparse-%j.out" --wrap 'echo SHOULD-NOT-RUN')
wait_job "$js" 120
cat "$OUT/u/sparse-$js.out" || true
check "sparse 1 TB: the job failed" test "$(job_field "$js" JobState)" = FAILED
check "sparse 1 TB: the output says it does not fit" contains "$OUT/u/sparse-$js.out" "dataset does not fit in .*: the dataset needs at least 1.0T"
check "sparse 1 TB: nothing of it on n1's disk" test "$(du -sk "$C/nodes/n1/stage" | cut -f1)" -lt 102400
no_drain "sparse 1 TB"

# ---- 5b. more entries than stage_max_entries (the copy keeps each in the
# prolog's memory: a million-file tree would once have grown root's memory
# without a bound). The site's bound is 50 here, the dataset has 60 files.
mkdir "$DS/many"; (cd "$DS/many" && touch $(printf 'f%d ' $(seq 1 60))); chmod -R a+rX "$DS/many"
echo "stage_max_entries = 50" >>"$CONF"
jm=$(as_user sbatch --parsable -w n1 --stage="$DS/many" -o "$OUT/u/many-%j.out" --wrap 'echo SHOULD-NOT-RUN')
wait_job "$jm" 120
cp "$OUT/preflight.conf.orig" "$CONF"
cat "$OUT/u/many-$jm.out" || true
check "past stage_max_entries: the job failed" test "$(job_field "$jm" JobState)" = FAILED
check "past stage_max_entries: the output names the bound" contains "$OUT/u/many-$jm.out" \
  "preflight: stage on n1: $DS/many: it has more than 50 files, folders and symlinks, the most one staged dataset may have \(stage_max_entries"
check "past stage_max_entries: the command never ran" bash -c "! grep -q SHOULD-NOT-RUN '$OUT/u/many-$jm.out'"
no_drain "past stage_max_entries"

# ---- 6. a stage request the prolog never saw (exported by hand): once ran
# with PREFLIGHT_STAGE_DIR pointing at nothing
jf=$(as_user env SLURM_SPANK_PREFLIGHT_STAGE="$DS/ds1:ds1" sbatch --parsable -w n1 -o "$OUT/u/forged-%j.out" --wrap 'echo SHOULD-NOT-RUN $PREFLIGHT_STAGE_DIR')
wait_job "$jf" 120
cat "$OUT/u/forged-$jf.out" || true
check "forged stage variable: the job failed" test "$(job_field "$jf" JobState)" = FAILED
check "forged stage variable: the output says no staging was recorded" contains "$OUT/u/forged-$jf.out" "recorded no staging"
check "forged stage variable: the command never ran" bash -c "! grep -q SHOULD-NOT-RUN '$OUT/u/forged-$jf.out'"
no_drain "forged stage variable"

# ---- 7. a stage_dir others can write (1777 scratch): the site's fault, named
chmod 1777 "$C/nodes/n3/stage"
jw=$(as_user sbatch --parsable -w n3 --stage="$DS/ds1" -o "$OUT/u/ww-%j.out" --wrap 'echo ran')
poll 60 "n3's reason is preflight's config reason" has_preflight_reason n3 'config\]' || true
check_drained n3 "world-writable stage_dir: the reason names the folder and its mode" "^preflight\[config\] stage: stage_dir $C/nodes/n3/stage: mode 1777 lets others write in it"
scancel "$jw"; wait_job "$jw" 60 || true
check "world-writable stage_dir: no dataset was written there" bash -c "! grep -rqs '$DS/ds1' $C/nodes/n3/stage/cache/*/v-*/info.json"
chmod 755 "$C/nodes/n3/stage"
scontrol update nodename=n3 state=resume
no_drain "after the admin fixed stage_dir"

# ---- 8. state_dir stays bounded: finished jobs' folders pruned, never a running one's
jr=$(sbatch --parsable -w n1 -o /dev/null --wrap 'sleep 30')
poll 30 "job $jr running" job_is "$jr" R || true
"$PF" --config "$CONF" state gc --dry-run node=n1 >"$OUT/gc-dry.out"
n_before=$(ls "$C/state/jobs" | wc -l)
"$PF" --config "$CONF" --set state_keep_size=1 state gc node=n1 >"$OUT/gc.out"
tail -3 "$OUT/gc.out"
check "state gc removed finished jobs' folders" contains "$OUT/gc.out" "^removed $jd [0-9]+ finished, over state_keep_size"
check "state gc kept the running job's folder" test -d "$C/state/jobs/$jr"
check "state gc: fewer folders than before" test "$(ls "$C/state/jobs" | wc -l)" -lt "$n_before"
scancel "$jr"; wait_job "$jr" 60

# ---- nothing left behind ---------------------------------------------------------
wait_idle n1 n2 n3
check "no job views left" test -z "$(find "$C"/nodes/*/stage/jobs -mindepth 1 2>/dev/null)"
check "no mounts left" bash -c "! grep -q '$C/nodes' /proc/mounts"
check "no refused dataset in any cache" bash -c "! grep -rqsE '$DS/(deep|sparse|many)' $C/nodes/*/stage/cache/*/v-*/info.json"
check "no partial builds left" test -z "$(ls -d "$C"/nodes/*/stage/cache/*/tmp-* 2>/dev/null)"
no_drain "the whole suite"
finish
