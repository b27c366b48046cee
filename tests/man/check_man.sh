#!/bin/bash
# Every man page renders without warnings; spank-preflight(8) lists every job
# option of the option table and preflight(8)... lists every config key.
set -euo pipefail
mandir=$1 admin=$2
fail=0
for p in "$mandir"/*.[0-9]; do
  warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$p" 2>&1 >/dev/null || true)
  if [ -n "$warn" ]; then echo "$p: $warn"; fail=1; fi
  [ -s "$p" ] || { echo "$p: empty"; fail=1; }
done
for o in $("$admin" options | awk '{print $1}' | sed 's/\[.*//; s/=.*//'); do
  grep -q -- "${o//-/\\\\-}" "$mandir/spank-preflight.8" || { echo "spank-preflight.8 does not document $o"; fail=1; }
done
for k in $("$admin" config keys | awk '{print $1}'); do
  grep -qw -- "$k" "$mandir/preflight.7" || { echo "preflight.7 does not document config key $k"; fail=1; }
done
[ $fail = 0 ] && echo "man pages ok"
exit $fail
