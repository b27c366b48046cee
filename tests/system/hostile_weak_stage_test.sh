#!/bin/bash
# Issue 29, trust boundaries v2: what a user places, or the site names
# badly, around staging. As the unprivileged test user where a user acts:
#   1. a user pre-creates stage_dir under a sticky world-writable parent:
#      once every node a stage job landed on drained as a config fault
#      (and `config check` said ok); now `config check` warns, the prolog
#      sets the user's folder aside untouched, the job runs, no drain;
#   2. node_addresses bad, oversized, missing, or naming a node twice: once
#      passed `config check` and drained every node of the first
#      multi-node stage job; now `config check` names file, line, problem;
#   3. a dataset with more entries than the node's stage disk has free
#      inodes: once "No space left on device" while df -h showed room;
#      now the job fails saying inodes, no drain.
# Everything is put back as it was; nothing is left behind. Label: hostile.
. "$(dirname "$0")/lib.sh"

PF=$B/admin/preflight
CONF=$C/etc/preflight.conf
U=$TEST_USER
UID_U=$(id -u "$U")
DS=$(mktemp -d /tmp/pf-weak-stage.XXXXXX)
chmod 755 "$DS"
N2=$C/nodes/n2
N3=$C/nodes/n3
n2_mode=$(stat -c %a "$N2")
cleanup() {
  umount "$N3/stage" 2>/dev/null || true
  if [ -d "$N3/stage.saved-by-test" ]; then rm -rf "$N3/stage"; mv "$N3/stage.saved-by-test" "$N3/stage"; fi
  chmod "$n2_mode" "$N2"
  rm -rf "$N2"/stage.set-aside.*
  if [ -d "$N2/stage.saved-by-test" ]; then rm -rf "$N2/stage"; mv "$N2/stage.saved-by-test" "$N2/stage"; fi
  rm -rf "$DS"
}
trap cleanup EXIT
mkdir -p "$DS/ds1"; echo staged-bytes >"$DS/ds1/f"; chmod -R a+rX "$DS/ds1"
mkdir -m 777 "$OUT/u"
no_drain() { wait_idle n1 n2 n3; check "$1: no node drained" test "$(sinfo -h -o %T | sort -u)" = idle; }

# ---- 1. a user's stage_dir under a sticky world-writable parent -------------
# n2's stage_dir's parent made a 1777 scratch, stage_dir itself not there yet
# (its cache kept aside, put back at the end).
if [ -d "$N2/stage" ]; then mv "$N2/stage" "$N2/stage.saved-by-test"; fi
chmod 1777 "$N2"
rc=0; "$PF" --config "$CONF" config check n2 >"$OUT/check-missing.out" 2>&1 || rc=$?
cat "$OUT/check-missing.out"
check "config check, stage_dir missing under a 1777 folder: still ok (exit 0)" test $rc = 0
check "config check warns that any user can create stage_dir first" contains "$OUT/check-missing.out" \
  "^warning: stage_dir $N2/stage: does not exist, in the sticky world-writable $N2: any user can create it"
# The user gets there first, with a file of theirs in it.
as_user mkdir -m 777 "$N2/stage"
as_user sh -c "echo mine >'$N2/stage/planted'"
rc=0; "$PF" --config "$CONF" config check n2 >"$OUT/check-user.out" 2>&1 || rc=$?
cat "$OUT/check-user.out"
check "config check, a user's stage_dir: a warning, not a failure" test $rc = 0
check "config check names the user's folder and its owner" contains "$OUT/check-user.out" \
  "^warning: stage_dir $N2/stage: owned by uid $UID_U \($U\), not root, in the sticky world-writable $N2: a user's; the first stage job on this node sets it aside"
ja=$(as_user sbatch --parsable -w n2 --stage="$DS/ds1" -o "$OUT/u/aside-%j.out" --wrap 'cat "$PREFLIGHT_STAGE_DIR/ds1/f"; echo ran')
wait_job "$ja" 120
cat "$OUT/u/aside-$ja.out" || true
check "user's stage_dir: the job ran" test "$(job_field "$ja" JobState)" = COMPLETED
check "user's stage_dir: the job read the staged bytes" contains "$OUT/u/aside-$ja.out" "^staged-bytes$"
check "user's stage_dir: the output says it was set aside, naming the owner" contains "$OUT/u/aside-$ja.out" \
  "preflight: stage on n2: warning: set aside $N2/stage \(owned by uid $UID_U \($U\), not root, in a sticky world-writable folder\) as $N2/stage\.set-aside\.[0-9-]+\.uid$UID_U, untouched"
aside=$(ls -d "$N2"/stage.set-aside.* 2>/dev/null || true)
check "user's stage_dir: exactly one set-aside folder" test "$(echo "$aside" | grep -c .)" = 1
check "user's stage_dir: the set-aside folder is still the user's" test "$(stat -c %u "$aside")" = "$UID_U"
check "user's stage_dir: the user's file in it is untouched" test "$(cat "$aside/planted")" = mine
check "user's stage_dir: a fresh stage_dir, root's and private" test "$(stat -c '%u %a' "$N2/stage")" = "0 711"
no_drain "a user's stage_dir under a sticky parent"
# Put n2 back.
wait_idle n2
rm -rf "$aside" "$N2/stage"
if [ -d "$N2/stage.saved-by-test" ]; then mv "$N2/stage.saved-by-test" "$N2/stage"; fi
chmod "$n2_mode" "$N2"

# ---- 2. config check reads node_addresses ----------------------------------
cfg_with() {  # cfg_with FILE: the cluster's config with node_addresses = FILE
  sed "s|^node_addresses = .*|node_addresses = $1|" "$CONF" >"$OUT/na.conf"
}
expect_check() {  # expect_check WHAT PATTERN: config check fails, saying PATTERN
  local rc=0
  "$PF" --config "$OUT/na.conf" config check >"$OUT/na.out" 2>&1 || rc=$?
  cat "$OUT/na.out"
  check "$1: config check fails" test $rc = 1
  check "$1: names the file, line and problem" contains "$OUT/na.out" "$2"
  check "$1: does not say ok" bash -c "! grep -q ': ok$' '$OUT/na.out'"
}
printf '127.0.1.101 n1\n127.0.1.10x n2\n127.0.1.103 n3\n' >"$OUT/na-bad"
cfg_with "$OUT/na-bad"
expect_check "a bad address" "node_addresses $OUT/na-bad:2: '127\.0\.1\.10x' is not an IPv4 or IPv6 address"
printf '127.0.1.101 n1\n127.0.1.102 n2\n# n1 again\n127.0.1.103 n1\n' >"$OUT/na-dup"
cfg_with "$OUT/na-dup"
expect_check "a node named twice" "node_addresses $OUT/na-dup:4: node 'n1' is named twice \(lines 1 and 4\)"
head -c $((2 << 20)) /dev/urandom >"$OUT/na-junk"
cfg_with "$OUT/na-junk"
expect_check "2 MB of random bytes" "node_addresses $OUT/na-junk: 2097152 bytes; the limit is 1048576"
cfg_with "$OUT/na-missing"
expect_check "a missing file" "node_addresses $OUT/na-missing: No such file or directory"
rc=0; "$PF" --config "$CONF" config check >"$OUT/check-good.out" 2>&1 || rc=$?
check "the cluster's own config still passes" test $rc = 0
check "the cluster's own config: ok" contains "$OUT/check-good.out" "^$CONF: ok$"

# ---- 3. more entries than free inodes ---------------------------------------
# n3's stage disk: a tmpfs with 300 inodes and 64 MB; the dataset has 500 files.
mkdir "$DS/many"; for i in $(seq 1 500); do echo "$i" >"$DS/many/f$i"; done; chmod -R a+rX "$DS/many"
if [ -d "$N3/stage" ]; then mv "$N3/stage" "$N3/stage.saved-by-test"; else mkdir "$N3/stage.saved-by-test"; fi
mkdir -m 711 "$N3/stage"
mount -t tmpfs -o size=64m,nr_inodes=300,mode=0711 tmpfs "$N3/stage"
ji=$(as_user sbatch --parsable -w n3 --stage="$DS/many" -o "$OUT/u/inodes-%j.out" --wrap 'echo SHOULD-NOT-RUN')
wait_job "$ji" 120
cat "$OUT/u/inodes-$ji.out" || true
check "inodes: the job failed" test "$(job_field "$ji" JobState)" = FAILED
check "inodes: the output says it does not fit, in inodes" contains "$OUT/u/inodes-$ji.out" \
  "preflight: stage on n3: dataset does not fit in $N3/stage on n3: it has at least [0-9]+ files and folders, the file system has [0-9]+ free inodes"
check "inodes: not 'No space left on device'" bash -c "! grep -q 'No space left' '$OUT/u/inodes-$ji.out'"
check "inodes: the command never ran" bash -c "! grep -q SHOULD-NOT-RUN '$OUT/u/inodes-$ji.out'"
check "inodes: no partial copy left on the disk" test -z "$(ls -d "$N3"/stage/cache/*/tmp-* "$N3"/stage/cache/*/v-* 2>/dev/null)"
no_drain "more entries than free inodes"
wait_idle n3
umount "$N3/stage"
rmdir "$N3/stage"
mv "$N3/stage.saved-by-test" "$N3/stage"  # (an empty one if n3 had none: the prolog would make it so)

# ---- nothing left behind ------------------------------------------------------
wait_idle n1 n2 n3
check "n2's folder mode is back" test "$(stat -c %a "$N2")" = "$n2_mode"
check "no set-aside folder left" test -z "$(ls -d "$C"/nodes/*/stage.set-aside.* "$C"/nodes/*/stage.saved-by-test 2>/dev/null)"
check "every stage_dir is root's" test -z "$(find "$C"/nodes/*/stage -maxdepth 0 ! -user 0 2>/dev/null)"
check "no job views left" test -z "$(find "$C"/nodes/*/stage/jobs -mindepth 1 2>/dev/null)"
check "no mounts left" bash -c "! grep -q '$C/nodes' /proc/mounts"
no_drain "the whole suite"
finish
