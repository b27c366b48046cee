#!/bin/bash
# The shipped plugstack drop-in loads after pyxis's (issue 29 item 7): Slurm
# expands `include plugstack.conf.d/*.conf` with glob(3), which sorts names
# in the locale's collation, and pyxis documents its file as pyxis.conf. A
# shell glob sorts the same way; checked in the C locale (slurmd's usual)
# and in a UTF-8 one, where collation ignores punctuation at first.
set -euo pipefail
src=${1:?usage: check_plugstack_order.sh SOURCE_DIR}
shipped=$(cd "$src/conf/plugstack.conf.d" && ls *.conf)
[ "$(wc -w <<<"$shipped")" = 1 ] || { echo "expected one shipped drop-in, got: $shipped" >&2; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
touch "$d/pyxis.conf" "$d/$shipped"
rc=0
for loc in C C.UTF-8; do
  order=$(LC_ALL=$loc bash -c 'for f in "$1"/*.conf; do basename "$f"; done' _ "$d" | tr '\n' ' ')
  if [ "$order" = "pyxis.conf $shipped " ]; then
    echo "ok: LC_ALL=$loc loads $order(preflight after pyxis)"
  else
    echo "FAIL: LC_ALL=$loc loads $order: $shipped must sort after pyxis.conf" >&2
    rc=1
  fi
done
exit $rc
