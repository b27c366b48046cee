#!/bin/bash
# `preflight --help` lists every command with its synopses in one column and
# what each does in a second, aligned; `preflight COMMAND --help` prints that
# command's usage (not the general one) and exits 0.
#   admin_help.sh PREFLIGHT
set -euo pipefail
pf=$1
fail=0
general=$("$pf" --help)
block=$(sed -n '/^Commands:$/,/^$/p' <<<"$general" | sed '1d;/^$/d')
[ -n "$block" ] || { echo "FAIL: no Commands: block in preflight --help"; echo "$general"; exit 1; }
# The description column: where the first run of 2+ spaces after the synopsis ends.
cols=$(awk '{ s = substr($0, 3); i = match(s, /  +[^ ]/); print i + RLENGTH - 1 + 2 }' <<<"$block" | sort -u)
[ "$(wc -l <<<"$cols")" = 1 ] || { echo "FAIL: the general usage's columns do not line up:"; echo "$block"; fail=1; }
cmds=$(awk '{print $1}' <<<"$block" | sort -u)
[ "$(wc -l <<<"$cmds")" -ge 7 ] || { echo "FAIL: expected >= 7 commands, got: $cmds"; fail=1; }
for c in $cmds; do
  out=$("$pf" "$c" --help) || { echo "FAIL: preflight $c --help exited $?"; fail=1; continue; }
  head -1 <<<"$out" | grep -qx "Usage: preflight \[OPTIONS\] $c \.\.\." || { echo "FAIL: preflight $c --help: first line: $(head -1 <<<"$out")"; fail=1; }
  grep -q '^Commands:' <<<"$out" && { echo "FAIL: preflight $c --help printed the general usage"; fail=1; }
  # Every synopsis line of this command from the general list, and no other command's.
  want=$(awk -v c="$c" '$1 == c' <<<"$block")
  got=$(sed -n '2,/^$/p' <<<"$out" | sed '/^$/d' | sed 's/   */  /g')
  [ "$(sed 's/   */  /g' <<<"$want")" = "$got" ] || { echo "FAIL: preflight $c --help lists:"; echo "$got"; echo "expected:"; echo "$want"; fail=1; }
  grep -q -- '--help' <<<"$out" || { echo "FAIL: preflight $c --help lacks the common options"; fail=1; }
done
# topo's own options appear with topo's help only.
"$pf" topo --help | grep -q -- '--compare' || { echo "FAIL: preflight topo --help lacks --compare"; fail=1; }
"$pf" fleet --help | grep -q -- '--compare' && { echo "FAIL: preflight fleet --help shows topo's options"; fail=1; }
# Options before the command word work the same.
"$pf" --help fleet | head -1 | grep -qx 'Usage: preflight \[OPTIONS\] fleet \.\.\.' || { echo "FAIL: preflight --help fleet"; fail=1; }
[ $fail = 0 ] && echo "help ok: $(wc -w <<<"$cmds") commands, description column at $cols"
exit $fail
