#!/bin/bash
# Containers and the plugin order (issue 31, item 3), on the real cluster
# with a test-only stand-in for pyxis (tests/fakes/spank_fake_pyxis.c,
# spank_pyxis.so): its task_init imports an "image" environment over each
# task's with overwrite, as pyxis does. The image bakes NCCL_IB_HCA=mlx5_9.
#   preflight before pyxis (the old 90-preflight.conf order): the image's
#     value silently replaces preflight's, and `preflight config check` warns;
#   preflight after pyxis (zz-preflight.conf): preflight sees the image's
#     value, leaves it, and the job output names it with the --container-env
#     spelling; with that option the task gets preflight's own value. (The
#     fake joins no mount namespace, so the words are those for an unknown
#     source; real pyxis's are "the container image sets ...".)
. "$(dirname "$0")/lib.sh"

stack=$C/etc/plugstack.conf
cp "$stack" "$OUT/plugstack.conf.orig"
trap 'cp "$OUT/plugstack.conf.orig" "$stack"' EXIT
pf_line=$(cat "$OUT/plugstack.conf.orig")
pyxis_line="optional $B/tests/fakes/spank_pyxis.so"
echo "NCCL_IB_HCA=mlx5_9" >"$OUT/image.env"
show='echo "task=$SLURM_PROCID hca=${NCCL_IB_HCA:-unset} ucx=${UCX_NET_DEVICES:-unset}"'

# preflight first, then pyxis.
printf '%s\n%s\n' "$pf_line" "$pyxis_line" >"$stack"
"$B/admin/preflight" --config /dev/null --set "slurm_conf=$SLURM_CONF" config check >"$OUT/check-before.txt" 2>&1 || true
cat "$OUT/check-before.txt"
check "config check warns: preflight loads before pyxis" contains "$OUT/check-before.txt" "warning: preflight.so \($stack:1\) loads before spank_pyxis.so \($stack:2\)"
srun -N1 -w n1 -n1 --gres=gpu:1 --container-image="$OUT/image.env" -o "$OUT/before.out" -e "$OUT/before.err" bash -c "$show"
cat "$OUT/before.out" "$OUT/before.err"
check "wrong order: the image's value replaced preflight's" contains "$OUT/before.out" '^task=0 hca=mlx5_9 '
check "wrong order: nothing says so" test -z "$(grep 'was set after submission' "$OUT/before.err" || true)"

# pyxis first, then preflight: the shipped order.
printf '%s\n%s\n' "$pyxis_line" "$pf_line" >"$stack"
"$B/admin/preflight" --config /dev/null --set "slurm_conf=$SLURM_CONF" config check >"$OUT/check-after.txt" 2>&1 || true
cat "$OUT/check-after.txt"
check "config check: preflight loads after pyxis, no warning" contains "$OUT/check-after.txt" "preflight.so \($stack:2\) loads after spank_pyxis.so \($stack:1\)"
check "config check: no order warning" test -z "$(grep 'loads before' "$OUT/check-after.txt" || true)"
srun -N1 -w n1 -n2 --gpus-per-task=1 --container-image="$OUT/image.env" -o "$OUT/after-%t.out" -e "$OUT/after.err" bash -c "$show"
cat "$OUT"/after-*.out "$OUT/after.err"
check "right order: the image's value is left alone" contains "$OUT/after-0.out" '^task=0 hca=mlx5_9 '
check "right order: preflight's per-task values are still set" contains "$OUT/after-1.out" '^task=1 hca=mlx5_9 ucx=mlx5_1:1$'
check "the job output names the image's value and the option" contains "$OUT/after.err" \
  "^preflight: on n1 NCCL_IB_HCA=mlx5_9 was set after submission \(a container image, a TaskProlog or an earlier SPANK plugin\) where preflight computed =mlx5_0:1,mlx5_1:1 for this task, and left it; in a pyxis container, --container-env=NCCL_IB_HCA lets preflight's value win$"
check "said once per step (task 0 only)" test "$(grep -c 'was set after submission' "$OUT/after.err")" = 1
srun -N1 -w n1 -n1 --gres=gpu:1 --container-image="$OUT/image.env" --container-env=NCCL_IB_HCA -o "$OUT/env.out" -e "$OUT/env.err" bash -c "$show"
cat "$OUT/env.out" "$OUT/env.err"
check "with --container-env the task gets preflight's value" contains "$OUT/env.out" '^task=0 hca==mlx5_0:1 '
check "and nothing to say" test -z "$(grep 'was set after submission' "$OUT/env.err" || true)"
# The user's own export is never called an image's.
NCCL_IB_HCA=mine srun -N1 -w n1 -n1 --gres=gpu:1 -o "$OUT/user.out" -e "$OUT/user.err" bash -c "$show"
check "the user's own value: kept, and not named" contains "$OUT/user.out" '^task=0 hca=mine ' 
check "the user's own value: nothing said" test -z "$(grep 'sets NCCL_IB_HCA' "$OUT/user.err" || true)"
finish
