#!/bin/bash
# Hostile or mistaken input that needs the real cluster (issue #19), each as
# the one who would type it: the user's options refused at submission with
# the reason and no node drained; a broken site config refused at
# submission and, met by a prolog, drained with file, line and key.
. "$(dirname "$0")/lib.sh"

# try NAME CMD...: run CMD as the test user; its output in $OUT/NAME.out, exit in $rc.
try() {
  local name=$1
  shift
  set +e
  as_user "$@" >"$OUT/$name.out" 2>&1
  rc=$?
  set -e
  sed "s/^/[$T] $name: /" "$OUT/$name.out"
}
no_drain() { [ -z "$(sinfo -h -t drain,drng -o %N)" ]; }

# 1. Empty values are refused, not taken as the bare option.
try nccl_empty sbatch -J hostile-refused -N1 --nccl-check= --wrap true
check "--nccl-check= refused" test "$rc" != 0
check "--nccl-check= names the empty value" contains "$OUT/nccl_empty.out" \
  "refusing --nccl-check: empty value after '--nccl-check='"
try env_empty sbatch -J hostile-refused -N1 --preflight-env= --wrap true
check "--preflight-env= refused" test "$rc" != 0
check "--preflight-env= names the empty value" contains "$OUT/env_empty.out" "empty value after '--preflight-env='"
try env_long sbatch -J hostile-refused -N1 --preflight-env="$(printf 'x%.0s' $(seq 100))" --wrap true
check "an over-long value names the bound" contains "$OUT/env_long.out" "longer than the limit of 16 bytes"

# 2. A heterogeneous job with --nccl-check: refused at submission.
cat >"$OUT/het.sh" <<'EOF'
#!/bin/sh
#SBATCH -J hostile-refused -N1 --nccl-check
#SBATCH hetjob
#SBATCH -N1
true
EOF
chmod 644 "$OUT/het.sh"
try het sbatch "$OUT/het.sh"
check "hetjob with --nccl-check refused" test "$rc" != 0
check "hetjob refusal says why" contains "$OUT/het.out" "a heterogeneous job cannot be checked"

# 3. srun --nccl-check inside an allocation would run nothing: refused at srun.
try salloc_srun salloc -J hostile-salloc -N1 srun --nccl-check=full true
check "srun --nccl-check=full in salloc refused" test "$rc" != 0
check "srun refusal says why" contains "$OUT/salloc_srun.out" "srun would run no check"
check "nothing queued by the refusals" test -z "$(squeue -h -n hostile-refused -o %i)"
# The bare option still means its default (Slurm hands NULL for it).
try env_bare sbatch -N1 --parsable --preflight-env --wrap true
check "bare --preflight-env accepted" test "$rc" = 0
[ "$rc" = 0 ] && wait_job "$(tail -1 "$OUT/env_bare.out")" 60
check "no node drained by the user's input" no_drain

# 4. A broken site config (an admin's typo): submissions refused with file,
# line and key; a prolog that meets it drains its node with the same.
conf=$C/etc/preflight.conf
cp "$conf" "$OUT/preflight.conf.orig"
restore() { cp "$OUT/preflight.conf.orig" "$conf"; }
trap restore EXIT
try held sbatch -N1 -w n3 -H --parsable --wrap true  # queued while the config is good
held=$(tail -1 "$OUT/held.out")
line=$(grep -n '^stage_peer_port' "$conf" | cut -d: -f1)
sed -i 's/^stage_peer_port = .*/stage_peer_port = 70000/' "$conf"
try broken sbatch -J hostile-refused -N1 --wrap true
check "submission refused while the config is broken" test "$rc" != 0
check "nothing queued while the config is broken" test -z "$(squeue -h -n hostile-refused -o %i)"
check "refusal names file, line and key" contains "$OUT/broken.out" \
  "preflight.conf:$line: key 'stage_peer_port': bad value '70000' \(expected a number from 1 to 1023: a privileged port, where only root may listen\)"
scontrol release "$held"
wait_preflight_reason n3 || true
check_drained n3 "drain reason names file, line and key" \
  "preflight\[config\] config: .*preflight.conf:$line: key 'stage_peer_port': bad value '70000'"
check "only the node that met the config drained" test "$(sinfo -h -t drain,drng -o %N)" = n3
scancel "$held" 2>/dev/null || true
restore
trap - EXIT
wait_job "$held" 60 || true
finish
