#!/bin/bash
# preflight-run's cost against what a user would otherwise write, in one run:
#   direct    the command alone
#   bash      a bash wrapper that traps USR2 and relays it (the usual batch-script idiom)
#   bash+grep that, plus `| tee | grep nan` for NaN detection
#   run       preflight-run with its default watch (every line matched against the NaN pattern)
# Two loads: a chatty command (N output lines as fast as it can) and start-up
# (M runs of `true`). Prints seconds and ratios to direct / to bash+grep.
#   bench/run_overhead.sh BUILD_DIR [LINES] [STARTS]
set -euo pipefail
build=${1:?usage: run_overhead.sh BUILD_DIR [LINES] [STARTS]}
lines=${2:-2000000} starts=${3:-200}
run=$build/wrapper/preflight-run
work=$(mktemp -d /tmp/pf_bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
t() { local s e; s=$(now); "$@" >"$work/out" 2>"$work/err"; e=$(now); echo "$e - $s" | bc; }
bashwrap() { bash -c 'trap "kill -USR2 \$pid" USR2; "$@" & pid=$!; wait $pid' bash "$@"; }
bashgrep() { bash -c 'trap "kill -USR2 \$pid" USR2; "$@" | tee /dev/stdout | { grep --line-buffered -E "\b([Nn]a[Nn]|NAN)\b" >&2 || true; } & pid=$!; wait $pid' bash "$@"; }
prun() { "$run" --config /dev/null -- "$@"; }
loop() { local f=$1; shift; for ((i = 0; i < starts; i++)); do "$f" "$@"; done; }

unset SLURM_JOB_ID SLURM_JOBID  # outside a job: nothing is requeued or published
seq 1 "$lines" >/dev/null; "$run" --version >/dev/null  # warm the page cache
echo "chatty: seq 1 $lines"
d=$(t seq 1 "$lines"); b=$(t bashwrap seq 1 "$lines"); g=$(t bashgrep seq 1 "$lines"); r=$(t prun seq 1 "$lines")
cmp -s <(seq 1 "$lines") "$work/out" || { echo "preflight-run changed the output"; exit 1; }
printf '  %-14s %8.3f s\n' direct "$d" bash "$b" bash+grep "$g" preflight-run "$r"
printf '  ratio preflight-run/direct %.2f, preflight-run/bash+grep %.2f\n' "$(echo "$r / $d" | bc -l)" "$(echo "$r / $g" | bc -l)"
echo "start-up: $starts x true"
d=$(t loop command true); b=$(t loop bashwrap true); g=$(t loop bashgrep true); r=$(t loop prun true)
printf '  %-14s %8.3f s (%.2f ms each)\n' direct "$d" "$(echo "$d * 1000 / $starts" | bc -l)" bash "$b" "$(echo "$b * 1000 / $starts" | bc -l)" \
  bash+grep "$g" "$(echo "$g * 1000 / $starts" | bc -l)" preflight-run "$r" "$(echo "$r * 1000 / $starts" | bc -l)"
printf '  ratio preflight-run/bash %.2f\n' "$(echo "$r / $b" | bc -l)"
