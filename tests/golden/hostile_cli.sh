#!/bin/bash
# Hostile input to the command-line tools that needs no Slurm (issue #19):
# each case is refused with its reason and a usage exit status, within a
# memory cap (the 12-group hostlist once grew to 1.5 GB and std::bad_alloc).
# The user-run tool (preflight-nccl) runs as nobody, as a user would.
# Usage: hostile_cli.sh BUILD_DIR
set -uo pipefail
B=$1
work=$(mktemp -d /tmp/preflight-hostile-XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
fail=0
# expect NAME RC PATTERN CMD...: CMD exits RC and its output matches PATTERN (grep -E).
expect() {
  local name=$1 want=$2 pattern=$3 rc
  shift 3
  ( ulimit -v 1048576; timeout 60 "$@" ) >"$work/out" 2>&1
  rc=$?
  if [ "$rc" != "$want" ] || ! grep -qE -- "$pattern" "$work/out"; then
    echo "FAIL: $name: exit $rc (want $want), output:"; sed 's/^/  /' "$work/out"; fail=1
  else
    echo "ok: $name: $(head -1 "$work/out")"
  fi
}
as_user=(); [ "$(id -u)" = 0 ] && as_user=(runuser -u nobody --)

P=$B/admin/preflight
twelve=$(printf 'n[1-9]%.0s' $(seq 12))
expect "fleet: 12 range groups" 2 "expands to more than 65536 names \(the limit\)" "$P" --config /dev/null fleet "$twelve"
expect "slurm nodes: open bracket" 2 "hostlist 'n\[1-': unbalanced '\['" "$P" slurm nodes 'n[1-'
expect "slurm nodes: product bound" 2 "expands to more than 65536" "$P" slurm nodes "$twelve"
expect "cache ls node=../../x" 2 "node name '../../x': only letters, digits" "$P" --config /dev/null cache ls node=../../x
expect "fleet: a path in a hostlist" 2 "node name '\.\.'" "$P" --config /dev/null fleet '..'

N=$B/collective/preflight-nccl
expect "preflight-nccl --ranks 100000" 2 "--ranks 100000: expected 1 to 64 \(the limit of ranks per node\)" \
  "${as_user[@]}" "$N" --config /dev/null --intra-node --backend host --ranks 100000
expect "preflight-nccl --ranks 5000" 2 "--ranks 5000: expected 1 to 64" \
  "${as_user[@]}" "$N" --config /dev/null --intra-node --backend host --ranks 5000
expect "preflight-nccl --ranks without --intra-node" 2 "--ranks: only with --intra-node" \
  "${as_user[@]}" "$N" --config /dev/null --ranks 2

printf '# site\nstage_peer_port = 70000\n' >"$work/port.conf"
expect "config: port out of range" 1 "port.conf:2: key 'stage_peer_port': bad value '70000' \(expected a number from 1 to 1023: a privileged port, where only root may listen\)" \
  "$P" config check --config "$work/port.conf"
printf 'state_dir = var/lib/preflight\n' >"$work/rel.conf"
expect "config: relative state_dir" 1 "rel.conf:1: key 'state_dir': relative path 'var/lib/preflight'" \
  "$P" config check --config "$work/rel.conf"
printf '\xef\xbb\xbfstate_dir = /var/lib/preflight\n' >"$work/bom.conf"
expect "config: leading UTF-8 BOM accepted" 0 "bom.conf: ok" "$P" config check --config "$work/bom.conf"

# state gc (issue 29): a folder it cannot empty (a folder inside it: gc
# removes only files) named once as "cannot remove PATH: REASON", control
# bytes escaped, the others removed, exit 4. Names that are no job id need
# no slurmctld (they are no job).
st=$work/state
esc=$'bad\x1b[31mname\x07'
for j in old1 "$esc" old2; do
  mkdir -p "$st/jobs/$j"; echo '{}' >"$st/jobs/$j/n1.epilog.json"
done
mkdir "$st/jobs/$esc/sub"
touch -h -d '2 hours ago' "$st/jobs/"*/* "$st/jobs/"*
gc=("$P" --config /dev/null --set "state_dir=$st" --set state_keep=1h --set state_keep_size=1 state gc)
expect "state gc: a folder it cannot empty" 4 \
  "^preflight: state gc: cannot remove $st/jobs/bad\\\\x1b\[31mname\\\\x07/sub: a folder \(a job folder holds only files; gc removes no folder inside it\); the folder is left as it is$" \
  "${gc[@]}"
gcout() { local what=$1; shift; if "$@"; then echo "ok: state gc: $what"; else echo "FAIL: state gc: $what"; sed 's/^/  /' "$work/out"; fail=1; fi; }
gcout "named once" test "$(grep -c 'cannot remove' "$work/out")" = 1
gcout "no control byte printed" bash -c "! LC_ALL=C grep -q '[[:cntrl:]]' '$work/out'"
gcout "the others removed" bash -c "grep -q '^removed old1 ' '$work/out' && grep -q '^removed old2 ' '$work/out'"
gcout "the summary says what was left" grep -q "; left 1 it could not remove$" "$work/out"
gcout "the folder kept whole" test -e "$st/jobs/$esc/n1.epilog.json"
gcout "the others gone" test "$(ls "$st/jobs" | wc -l)" = 1

exit $fail
