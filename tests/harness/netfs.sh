#!/bin/bash
# The emulated network file system (preflight-netfs, tests/harness/netfs):
# SOURCE served at MOUNTPOINT with a latency on every operation.
#
#   netfs.sh mount SOURCE MOUNTPOINT [netfs options]   start the daemon, wait until mounted,
#                                                      print its pid file (MOUNTPOINT.netfs.pid,
#                                                      its log beside it: MOUNTPOINT.netfs.log)
#   netfs.sh umount MOUNTPOINT                         unmount, wait for the daemon to end
#
# Options are preflight-netfs's (--latency-us, --max-inflight, --bandwidth,
# --control, --allow-other; preflight-netfs --help). The binary is
# $PREFLIGHT_NETFS, else $PREFLIGHT_BUILD_DIR/tests/harness/netfs/preflight-netfs.
# Every wait is a bounded poll (10 s, tests/harness/poll.sh) that fails
# naming what it waited for.
set -uo pipefail
bin=${PREFLIGHT_NETFS:-${PREFLIGHT_BUILD_DIR:-build}/tests/harness/netfs/preflight-netfs}

die() { echo "netfs.sh: $*" >&2; exit 1; }
# mounted MP: MP is in the mount table, even when its daemon is gone (where
# mountpoint(1) only sees "Transport endpoint is not connected").
mounted() { mountpoint -q "$1" 2>/dev/null || awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/self/mounts; }
# alive PID: running; a zombie (ended, not yet reaped by whoever adopted it) is not.
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
POLL_WHO=netfs.sh
. "$(dirname "${BASH_SOURCE[0]}")/poll.sh"
unmounted() { ! mounted "$1"; }
dead() { ! alive "$1"; }
try_umount() { unmounted "$1" || { fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null; unmounted "$1"; }; }

do_mount() {
  [ $# -ge 2 ] || die "usage: netfs.sh mount SOURCE MOUNTPOINT [netfs options]"
  local src=$1 mp pid
  mp=$(realpath -e "$2") || die "no folder $2 to mount on"
  shift 2
  [ -x "$bin" ] || die "no preflight-netfs at $bin (set PREFLIGHT_NETFS or PREFLIGHT_BUILD_DIR)"
  mounted "$mp" && die "$mp is mounted already"
  "$bin" -f "$@" "$src" "$mp" </dev/null >"$mp.netfs.log" 2>&1 &
  pid=$!
  echo "$pid" >"$mp.netfs.pid"
  poll 10 "$mp mounted or preflight-netfs ended" eval 'mountpoint -q "$mp" || dead "$pid"' 2>/dev/null
  mountpoint -q "$mp" && { echo "$mp.netfs.pid"; return 0; }
  alive "$pid" || { rm -f "$mp.netfs.pid"; die "preflight-netfs exited before $mp was mounted: $(tail -3 "$mp.netfs.log")"; }
  kill "$pid"
  die "$mp not mounted 10 s after preflight-netfs started: $(tail -3 "$mp.netfs.log")"
}

# fusermount3 -u, retried for 10 s while busy, then a lazy unmount; then the
# daemon, whose loop ends with the mount, must exit (else TERM, then KILL).
do_umount() {
  [ $# = 1 ] || die "usage: netfs.sh umount MOUNTPOINT"
  local mp pid
  mp=$(realpath -m "$1")
  pid=$(cat "$mp.netfs.pid" 2>/dev/null)
  if ! poll 10 "$mp unmounted" try_umount "$mp" 2>/dev/null; then
    echo "netfs.sh: $mp still mounted after 10 s (busy?): unmounting lazily" >&2
    fusermount3 -uz "$mp" 2>/dev/null || umount -l "$mp" || die "cannot unmount $mp"
  fi
  poll 5 "preflight-netfs $pid ended" dead "$pid" 2>/dev/null || { kill -TERM "$pid"; poll 5 "preflight-netfs $pid ended on TERM" dead "$pid"; } ||
    { kill -KILL "$pid"; die "preflight-netfs $pid still running 10 s after $mp was unmounted: killed"; }
  rm -f "$mp.netfs.pid"
}

case "${1:-}" in
  mount) shift; do_mount "$@" ;;
  umount) shift; do_umount "$@" ;;
  *) die "usage: netfs.sh mount SOURCE MOUNTPOINT [netfs options] | umount MOUNTPOINT" ;;
esac
