#!/bin/bash
# --stage from a network file system (issue 32): the source is served by
# preflight-netfs (tests/harness/netfs: FUSE, 1 ms per operation, no
# caching), the seam a real NFS or Lustre mount takes, and the jobs are real
# sbatch jobs of the unprivileged test user.
#   1. a cold copy from the mount: the bytes, and the job's line saying the
#      source is a fuse file system read with many operations in flight;
#   2. the next job is a cache hit, checked against the mount;
#   3. stage_peers: a 3-node job reads the mount once for all three nodes;
#   4. EIO on one file: the job fails naming the file, no node is drained,
#      nothing is cached;
#   5. a source that stops answering (an open held in the server): the job
#      fails at stage_timeout saying so, no node is drained.
. "$(dirname "$0")/lib.sh"

PF=$B/admin/preflight
CONF=$C/etc/preflight.conf
export PREFLIGHT_NETFS=${PREFLIGHT_NETFS:-$B/tests/harness/netfs/preflight-netfs}
if [ ! -x "$PREFLIGHT_NETFS" ] || [ ! -c /dev/fuse ]; then
  note "SKIPPED: no preflight-netfs ($PREFLIGHT_NETFS) or /dev/fuse"
  exit 77
fi
SRC=$OUT/src MNT=$OUT/mnt CTL=$OUT/netfs.control
mkdir -p "$SRC" "$MNT" "$OUT/u"
chmod 755 "$OUT" "$SRC"
chmod 777 "$OUT/u"
cp "$CONF" "$OUT/preflight.conf.orig"
cleanup() {
  printf '' >"$CTL"  # a held operation goes on
  "$S/tests/harness/netfs.sh" umount "$MNT" >/dev/null 2>&1 || true
  cp "$OUT/preflight.conf.orig" "$CONF"
}
trap cleanup EXIT

# dataset NAME FILES: FILES files over 3 folders, one of 1 MiB.
dataset() {
  local d=$SRC/$1 i
  mkdir -p "$d/a" "$d/b" "$d/c"
  for i in $(seq 1 "$2"); do head -c $((2048 + i)) /dev/urandom >"$d/$(printf 'a\nb\nc' | sed -n "$((i % 3 + 1))p")/f$i"; done
  head -c $((1 << 20)) /dev/urandom >"$d/a/big"
  chmod -R a+rX "$d"
}
sum_of() { (cd "$1" && find . -type f | sort | xargs md5sum | md5sum | cut -d' ' -f1); }
show='echo "$SLURMD_NODENAME $(cd "$PREFLIGHT_STAGE_DS" && find . -type f | sort | xargs md5sum | md5sum | cut -d" " -f1)"'
no_drain() { test -z "$(sinfo -h -t drain,draining,down -o %N)"; }
cache_rm_all() {
  local n k
  for n in n1 n2 n3; do
    for k in $(ls "$C/nodes/$n/stage/cache" 2>/dev/null); do "$PF" --config "$CONF" cache rm "$k" node=$n >/dev/null; done
  done
}
cached() { "$PF" --config "$CONF" cache ls node="$1" | grep -c -- "$2" || true; }

dataset main 240
dataset fan 120
dataset eio 90
dataset hang 60
"$S/tests/harness/netfs.sh" mount "$SRC" "$MNT" --allow-other --control "$CTL" --latency-us 1000 >/dev/null
check "the mount is a fuse file system" test "$(stat -f -c %T "$MNT")" = fuseblk -o "$(stat -f -c %T "$MNT")" = fuse
want=$(sum_of "$SRC/main")

# ---- 1. cold, from the mount -------------------------------------------------
j=$(as_user sbatch --parsable -w n1 --stage="$MNT/main:ds" -o "$OUT/u/cold-%j.out" --wrap "$show")
wait_job "$j" 180
cat "$OUT/u/cold-$j.out"
check "cold: the job completed" test "$(job_field "$j" JobState)" = COMPLETED
check "cold: the node has the source's bytes" contains "$OUT/u/cold-$j.out" "^n1 $want\$"
check "cold: the job's line says where the source lives and how it was read" \
  contains "$OUT/u/cold-$j.out" "preflight: stage on n1: ds <- $MNT/main: 241 files, .*cache miss .*, read from a fuse file system, 32 operations in flight"

# ---- 2. warm, checked against the mount --------------------------------------
j=$(as_user sbatch --parsable -w n1 --stage="$MNT/main:ds" -o "$OUT/u/warm-%j.out" --wrap "$show")
wait_job "$j" 180
cat "$OUT/u/warm-$j.out"
check "warm: the job completed" test "$(job_field "$j" JobState)" = COMPLETED
check "warm: a cache hit" contains "$C/state/jobs/$j/n1.stage.json" '"cache": "hit"'
check "warm: the same bytes" contains "$OUT/u/warm-$j.out" "^n1 $want\$"

# ---- 3. fan-out: the mount read once for three nodes -------------------------
sed -i 's/^stage_peers = no$/stage_peers = yes/' "$CONF"
wantf=$(sum_of "$SRC/fan")
fanbytes=$(find "$SRC/fan" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
j=$(as_user sbatch --parsable -N3 -w n1,n2,n3 --stage="$MNT/fan:ds" -o "$OUT/u/fan-%j.out" --wrap "srun -N3 bash -c '$show'")
wait_job "$j" 240
cat "$OUT/u/fan-$j.out"
check "fan-out: the job completed" test "$(job_field "$j" JobState)" = COMPLETED
check "fan-out: all 3 nodes have the source's bytes" test "$(grep -c "^n[1-3] $wantf\$" "$OUT/u/fan-$j.out")" = 3
read_total=$(cat "$C"/state/jobs/"$j"/n*.stage.json | grep -o '"source_bytes": [0-9]*' | awk '{s += $2} END {print s}')
check "fan-out: the mount was read once for 3 nodes ($read_total of $fanbytes bytes)" test "$read_total" = "$fanbytes"
cp "$OUT/preflight.conf.orig" "$CONF"
wait_idle n1 n2 n3

# ---- 4. EIO on one file --------------------------------------------------------
echo "eio read */f17" >"$CTL"
j=$(as_user sbatch --parsable -w n2 --stage="$MNT/eio:ds" -o "$OUT/u/eio-%j.out" --wrap 'echo SHOULD-NOT-RUN')
wait_job "$j" 180
cat "$OUT/u/eio-$j.out" || true
check "EIO: the job failed" test "$(job_field "$j" JobState)" = FAILED
check "EIO: the job's output names the file and the error" \
  contains "$OUT/u/eio-$j.out" "preflight: stage on n2: .*read $MNT/eio/./f17: Input/output error"
check "EIO: the command never ran" bash -c "! grep -q SHOULD-NOT-RUN '$OUT/u/eio-$j.out'"
check "EIO: no node drained for the source's fault" no_drain
check "EIO: nothing cached for that source" test "$(cached n2 "$MNT/eio")" = 0
printf '' >"$CTL"

# ---- 5. a source that stops answering ----------------------------------------
echo "stage_timeout = 15s" >>"$CONF"
echo "hold open */f5" >"$CTL"
j=$(as_user sbatch --parsable -w n3 --stage="$MNT/hang:ds" -o "$OUT/u/hang-%j.out" --wrap 'echo SHOULD-NOT-RUN')
check "hang: the server holds the open" poll 120 "a held open in $MNT.netfs.log" grep -q ': holding open ' "$MNT.netfs.log"
wait_job "$j" 180
cat "$OUT/u/hang-$j.out" || true
check "hang: the job failed" test "$(job_field "$j" JobState)" = FAILED
check "hang: the job's output says the source timed out" contains "$OUT/u/hang-$j.out" "preflight: stage on n3: .*timed out"
check "hang: no node drained for the source's fault" no_drain
check "hang: nothing cached for that source" test "$(cached n3 "$MNT/hang")" = 0
# The reader stuck in the server was killed and left; once the server
# answers it is gone.
held=$(sed -n 's/.*: holding open .* of pid \([0-9]*\) .*/\1/p' "$MNT.netfs.log" | head -1)
printf '' >"$CTL"
check "hang: the stuck reader ($held) ends once the server answers" poll 60 "pid $held gone" bash -c "! kill -0 ${held:-1} 2>/dev/null"
cp "$OUT/preflight.conf.orig" "$CONF"

wait_idle n1 n2 n3
check "no partial builds left" test -z "$(ls -d "$C"/nodes/*/stage/cache/*/tmp-* 2>/dev/null)"
check "no job views left" test -z "$(find "$C"/nodes/*/stage/jobs -mindepth 1)"
cache_rm_all
"$S/tests/harness/netfs.sh" umount "$MNT" || fail "netfs unmount"
finish
