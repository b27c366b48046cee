#!/bin/bash
# dcgm-exporter's HPC job mapping (dcgm_job_map_dir, core/gpu_job_map.h)
# through the real Slurm: the prolog lists a running job in the file of
# each GPU slurmd gave it (the GRES indices of tests/harness/cluster.sh's
# fake GPUs), the epilog takes it out again.
#  - two jobs on one node at once (CR_Core, one core each), 2 GPUs and 1:
#    each GPU file names its own job while both run; the first job's end
#    removes its files only;
#  - a line of another job in a GPU file (as a GPU shared by two jobs has)
#    survives this job's epilog;
#  - a job without GPUs writes nothing; the folder is made root's, 0755.
. "$(dirname "$0")/lib.sh"

conf=$C/etc/preflight.conf
cp "$conf" "$OUT/preflight.conf.orig"
map=$C/dcgm-map
restore() {
  cp "$OUT/preflight.conf.orig" "$conf"
  rm -rf "$map"
}
trap restore EXIT
rm -rf "$map"
echo "dcgm_job_map_dir = $map/%n" >>"$conf"
m=$map/n1

# gone FILE [SECONDS]: FILE has disappeared within SECONDS (default 30): the
# epilog runs after the job has left squeue's running list.
gone() {
  local i
  for ((i = 0; i < ${2:-30} * 10; i++)); do [ ! -e "$1" ] && return 0; sleep 0.1; done
  return 1
}
# lines FILE: the file's lines, comma-separated ("" when it is missing).
lines() { paste -sd, "$1" 2>/dev/null || true; }
# A job that says which GPUs it holds and runs until its release file exists.
cat >"$OUT/hold.sh" <<SCRIPT
#!/bin/bash
echo "gpus=\${SLURM_JOB_GPUS:-none}"
for i in \$(seq 1 1200); do [ -e "$OUT/release.\$SLURM_JOB_ID" ] && exit 0; sleep 0.1; done
exit 1
SCRIPT
chmod 755 "$OUT/hold.sh"
job_gpus() { sed -n 's/^gpus=//p' "$OUT/job-$1.out"; }
# The GPU files of a job's GRES list "0,1" / "2": one name per line.
gpu_names() { tr ',' '\n' <<<"$1"; }

# 1. Two jobs sharing n1.
j1=$(sbatch --parsable -w n1 -n1 --gres=gpu:2 -o "$OUT/job-%j.out" "$OUT/hold.sh")
check "job 1 started" soon_contains "$OUT/job-$j1.out" '^gpus=' 60
j2=$(sbatch --parsable -w n1 -n1 --gres=gpu:1 -o "$OUT/job-%j.out" "$OUT/hold.sh")
check "job 2 started beside job 1" soon_contains "$OUT/job-$j2.out" '^gpus=' 60
g1=$(job_gpus "$j1") g2=$(job_gpus "$j2")
note "job $j1 holds GPUs $g1, job $j2 holds $g2; $m: $(ls -A "$m" 2>/dev/null | paste -sd' ')"
check "job 1 got two GPUs" grep -qE '^[0-9],[0-9]$' <<<"$g1"
check "job 2 got one GPU" grep -qE '^[0-9]$' <<<"$g2"
for g in $(gpu_names "$g1"); do
  check "GPU $g's file names job 1 alone while it runs" test "$(lines "$m/$g")" = "$j1"
done
check "GPU $g2's file names job 2 alone while it runs" test "$(lines "$m/$g2")" = "$j2"
check "no GPU file beyond the jobs' three" test "$(ls "$m" | grep -cE '^[0-9]+$')" = 3
check "no temporary left in the folder" test -z "$(ls -A "$m" | grep '\.tmp\.')"
check "the folder is root's, 0755" test "$(stat -c '%U %a' "$m")" = "root 755"
check "the files are root's, 0644" test "$(stat -c '%U %a' "$m/$g2")" = "root 644"

touch "$OUT/release.$j1"
wait_job "$j1"
for g in $(gpu_names "$g1"); do check "job 1's epilog removed GPU $g's file" gone "$m/$g"; done
check "job 2's file stays while job 2 runs" test "$(lines "$m/$g2")" = "$j2"
touch "$OUT/release.$j2"
wait_job "$j2"
check "job 2's epilog removed GPU $g2's file" gone "$m/$g2"
check "job 1 completed" test "$(job_field "$j1" JobState)" = COMPLETED
check "job 2 completed" test "$(job_field "$j2" JobState)" = COMPLETED

# 2. Another job's line in a GPU file (a GPU two jobs share): this job's
#    epilog removes its own line only.
printf '4242\n' >"$m/3"
j3=$(sbatch --parsable -w n1 -n1 --gres=gpu:4 -o "$OUT/job-%j.out" "$OUT/hold.sh")
check "job 3 started" soon_contains "$OUT/job-$j3.out" '^gpus=' 60
check "GPU 3 lists the other job, then job 3" test "$(lines "$m/3")" = "4242,$j3"
touch "$OUT/release.$j3"
wait_job "$j3"
check "job 3's epilog removed GPU 0's file" gone "$m/0"
check "GPU 3 keeps the other job's line only" test "$(lines "$m/3")" = 4242
rm -f "$m/3"

# 3. No GPUs: nothing written.
srun -w n1 -n1 -o "$OUT/nogpu.out" bash -c 'echo gpus=${SLURM_JOB_GPUS:-none}'
check "a job without GPUs ran" contains "$OUT/nogpu.out" '^gpus=none$'
check "a job without GPUs writes no GPU file" test -z "$(ls "$m" | grep -E '^[0-9]+$')"
finish
