# Slurm state predicates shared by preflight's test scripts, for poll
# (poll.sh); sourced by tests/system/lib.sh, tests/harness/cluster.sh and
# scripts/demo. Each asks Slurm once and is false when it cannot answer.
#
# all_idle: every node of the cluster is idle (sinfo answered).
all_idle() { [ "$(sinfo -h -o %T 2>/dev/null | sort -u)" = idle ]; }
# job_gone JOBID: squeue answered and no longer lists the job (an squeue
# that failed, e.g. a slurmctld busy past MessageTimeout, says nothing).
job_gone() {
  local out rc=0
  out=$(squeue -h -j "$1" -o %i 2>&1) || rc=$?
  if [ $rc = 0 ]; then [ -z "$out" ]; else grep -q 'Invalid job id' <<<"$out"; fi
}
