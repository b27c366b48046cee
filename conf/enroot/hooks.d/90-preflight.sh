#!/bin/bash
# enroot hook (install in /etc/enroot/hooks.d/): gives every container that
# pyxis starts in a Slurm job what preflight gave the job on this node, at
# the same paths as on the host, so that the task environment preflight set
# means the same inside: NCCL_TOPO_FILE (read-only), the job's preflight
# records (read-only), the staged datasets of --stage (read-only) and the
# node-local checkpoint folder (read-write). A container then needs no
# --container-mounts for them. See preflight(7), CONTAINERS.
#
# enroot runs hooks as the user who starts the container, with the task's
# environment; `preflight container enroot-mounts` prints the fstab lines
# (nothing outside a Slurm job). A failure here never stops the container:
# the job then runs as it would without the hook.
set -u
[ -n "${SLURM_JOB_ID-}" ] && [ -n "${ENROOT_MOUNTS-}" ] || exit 0
# Where the site keeps the binary and its config, if not the defaults.
preflight=${PREFLIGHT_BIN:-/usr/sbin/preflight}
config=${PREFLIGHT_CONFIG:-/etc/preflight/preflight.conf}
[ -x "$preflight" ] || exit 0
lines=$("$preflight" --config "$config" container enroot-mounts 2>/dev/null) || exit 0
[ -z "$lines" ] || printf '%s\n' "$lines" >>"$ENROOT_MOUNTS"
exit 0
