# poll: the one bounded wait of preflight's test scripts; sourced by
# tests/system/lib.sh, tests/harness/cluster.sh, tests/harness/netfs.sh
# and scripts/demo.
#
# poll SECONDS DESCRIPTION CMD...: runs CMD (a command or a function of the
# caller) until it succeeds, every 0.1 s, SECONDS x 10 times: at least
# SECONDS, more by what CMD itself takes. False when the bound passes,
# saying on stderr "not within SECONDS s: DESCRIPTION" (prefixed with
# "[$POLL_WHO] " when the caller set POLL_WHO). SECONDS is a whole number:
# every bound in the test scripts is in seconds.
poll() {
  local limit=$1 what=$2 i
  shift 2
  for ((i = 0; i < limit * 10; i++)); do "$@" && return 0; sleep 0.1; done
  echo "${POLL_WHO:+[$POLL_WHO] }not within ${limit}s: $what" >&2
  return 1
}
