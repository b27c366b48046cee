#!/bin/bash
# --nccl-check reaches sbatch's help, the prolog on every node, and the job.
. "$(dirname "$0")/lib.sh"

sbatch --help >"$OUT/help" 2>&1
check "sbatch --help lists --nccl-check" contains "$OUT/help" '--nccl-check\[?=LEVEL'
check "sbatch --help lists --preflight-env" contains "$OUT/help" '--preflight-env'

# Every topo.pairing result in a prolog JSON passed (and there are some).
pairing_passed() {
  local verdicts
  verdicts=$(grep -A4 '"check": "topo.pairing"' "$1" | grep '"verdict"' | sort -u)
  [ "$verdicts" = '      "verdict": "pass",' ]
}

# --gres=gpu:2 with the default 1 CPU per node: the collective still starts
# one rank per GPU (its step overcommits the job's CPUs).
jid=$(sbatch --parsable -N3 --gres=gpu:2 --nccl-check=quick -o "$OUT/job-%j.out" \
  --wrap 'echo "level=$PREFLIGHT_NCCL_CHECK"; srun -N3 bash -c "echo task \$SLURM_PROCID level \$PREFLIGHT_NCCL_CHECK"')
wait_job "$jid"
check "3-node job completed" test "$(job_field "$jid" JobState)" = COMPLETED
out=$OUT/job-$jid.out
cat "$out"
check "job output shows the level" contains "$out" '^level=quick$'
check "every task sees the level" test "$(grep -c '^task [0-2] level quick$' "$out")" = 3
check "the collective ran one rank per GPU and passed" contains "$out" '^  # OK: busbw'
check "job output shows the prolog summary" contains "$out" 'preflight: prolog ok on n[1-3]: level quick'
for n in n1 n2 n3; do
  f=$C/state/jobs/$jid/$n.prolog.json
  check "prolog on $n saw level quick" contains "$f" '"level": "quick"'
  check "prolog on $n passed" contains "$f" '"verdict": "pass"'
  check "prolog on $n checked the pinned GPU-NIC placement" pairing_passed "$f"
done

# A bare --nccl-check means quick (Slurm hands the prolog the text "(null)").
jid=$(sbatch --parsable --nccl-check -o "$OUT/bare-%j.out" --wrap 'echo "level=$PREFLIGHT_NCCL_CHECK"')
wait_job "$jid"
check "bare --nccl-check is quick" contains "$OUT/bare-$jid.out" '^level=quick$'

# No option: the prolog runs at the site default (off) and says so.
jid=$(sbatch --parsable -o "$OUT/none-%j.out" --wrap 'echo "level=${PREFLIGHT_NCCL_CHECK:-unset}"')
wait_job "$jid"
check "no option leaves the task variable unset" contains "$OUT/none-$jid.out" '^level=unset$'
f=$(ls "$C"/state/jobs/$jid/*.prolog.json)
check "prolog without the option ran at level off" contains "$f" '"level": "off"'

# Refused at submission: clear message, non-zero exit, nothing queued.
before=$(squeue -h | wc -l)
for bad in --nccl-check=bogus --nccl-check=QUICK --nccl-check=quick,full --preflight-env=maybe; do
  set +e
  sbatch "$bad" --wrap true >"$OUT/refused.out" 2>&1
  rc=$?
  set -e
  check "sbatch $bad exits non-zero" test $rc -ne 0
  check "sbatch $bad says why" contains "$OUT/refused.out" "preflight: submit: refusing --(nccl-check|preflight-env): invalid"
done
check "nothing was queued by refused submissions" test "$(squeue -h | wc -l)" = "$before"

# srun refuses the same way.
set +e
srun --nccl-check=bogus true >"$OUT/srun.out" 2>&1
rc=$?
set -e
check "srun --nccl-check=bogus refused" test $rc -ne 0
check "srun refusal says why" contains "$OUT/srun.out" "invalid level 'bogus'"
finish
