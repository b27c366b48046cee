#!/bin/bash
# The enroot hook (conf/enroot/hooks.d/90-preflight.sh) in a fake enroot
# environment: ENROOT_MOUNTS, ENROOT_ROOTFS and ENROOT_ENVIRON as enroot
# sets them for a hook, a rootfs folder, and the task's Slurm variables.
# Checks the fstab lines it appends, then performs them as enroot's
# mount step does (target relative to the rootfs; x-create makes the mount
# point; bind, then read-only remount) in a private mount namespace and
# reads each folder's content back from inside the rootfs: the checkpoint
# folder writable, the others not.
#   enroot_hook.sh PREFLIGHT_BINARY SOURCE_DIR
set -uo pipefail
bin=$(realpath "$1") src=$2
hook=$src/conf/enroot/hooks.d/90-preflight.sh
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/state/jobs/42" "$tmp/stage/jobs/42/imagenet" "$tmp/ckpt/n7/42" "$tmp/rootfs/etc"
echo '{"gpus":"0,1"}' >"$tmp/state/jobs/42/n7.gpus"
echo "shard" >"$tmp/stage/jobs/42/imagenet/part-0"
echo "<system/>" >"$tmp/topo.xml"
cat >"$tmp/preflight.conf" <<CONF
state_dir = $tmp/state
stage_dir = $tmp/stage
ckpt_dir = $tmp/ckpt/%n
nccl_topo_file = $tmp/topo.xml
CONF
run_hook() {  # run the hook as enroot would, with extra VAR=VALUE words
  : >"$tmp/mounts.fstab"
  env -i PATH=/usr/bin:/bin HOME=/nonexistent ENROOT_ROOTFS="$tmp/rootfs" ENROOT_MOUNTS="$tmp/mounts.fstab" \
    ENROOT_ENVIRON="$tmp/environ" PREFLIGHT_BIN="$bin" PREFLIGHT_CONFIG="$tmp/preflight.conf" "$@" bash "$hook"
}

run_hook SLURM_JOB_ID=42 SLURMD_NODENAME=n7 || fail "hook exited $?"
want="$tmp/topo.xml $tmp/topo.xml none x-create=file,bind,ro,nosuid,nodev,private,nofail
$tmp/state/jobs/42 $tmp/state/jobs/42 none x-create=dir,bind,ro,nosuid,nodev,private,nofail
$tmp/stage/jobs/42 $tmp/stage/jobs/42 none x-create=dir,bind,ro,nosuid,nodev,private,nofail
$tmp/ckpt/n7/42 $tmp/ckpt/n7/42 none x-create=dir,bind,rw,nosuid,nodev,private,nofail"
diff -u <(echo "$want") "$tmp/mounts.fstab" || fail "fstab lines for job 42 on n7"

# Outside a job, or for a job whose folders are not there: nothing, and
# the container still starts (exit 0).
run_hook || fail "hook outside a job exited $?"
[ -s "$tmp/mounts.fstab" ] && fail "outside a job the hook wrote: $(cat "$tmp/mounts.fstab")"
run_hook SLURM_JOB_ID=43 SLURMD_NODENAME=n7 || fail "hook for job 43 exited $?"
[ "$(cat "$tmp/mounts.fstab")" = "$tmp/topo.xml $tmp/topo.xml none x-create=file,bind,ro,nosuid,nodev,private,nofail" ] ||
  fail "job 43 (no folders): expected only the topology file, got: $(cat "$tmp/mounts.fstab")"
# A job id that is not one, and a broken site config: nothing written, exit 0.
run_hook 'SLURM_JOB_ID=42/../../x' SLURMD_NODENAME=n7 || fail "hook with a bad job id exited $?"
[ -s "$tmp/mounts.fstab" ] && fail "a bad job id produced mounts"
echo "no_such_key = 1" >"$tmp/bad.conf"
: >"$tmp/mounts.fstab"
env -i PATH=/usr/bin:/bin ENROOT_MOUNTS="$tmp/mounts.fstab" PREFLIGHT_BIN="$bin" PREFLIGHT_CONFIG="$tmp/bad.conf" \
  SLURM_JOB_ID=42 bash "$hook" || fail "hook with a broken config exited $?"
[ -s "$tmp/mounts.fstab" ] && fail "a broken config produced mounts"
# A path enroot's fstab cannot carry (a blank) is left out, the rest kept.
mkdir -p "$tmp/sp ace/jobs/42"
sed -i "s#^stage_dir = .*#stage_dir = $tmp/sp ace#" "$tmp/preflight.conf"
run_hook SLURM_JOB_ID=42 SLURMD_NODENAME=n7 || fail "hook exited $?"
grep -q 'sp ace' "$tmp/mounts.fstab" && fail "a path with a blank reached the fstab"
[ "$(wc -l <"$tmp/mounts.fstab")" = 3 ] || fail "with a blank in stage_dir: expected 3 lines, got $(cat "$tmp/mounts.fstab")"
sed -i "s#^stage_dir = .*#stage_dir = $tmp/stage#" "$tmp/preflight.conf"

# The mounts, done as enroot does them, as root in a private namespace.
if [ "$(id -u)" = 0 ] && unshare --mount true 2>/dev/null; then
  run_hook SLURM_JOB_ID=42 SLURMD_NODENAME=n7
  out=$(unshare --mount --propagation private bash -c '
    set -e
    r=$1
    while read -r src dst _ opts; do
      t=$r$dst
      case ,$opts, in *,x-create=file,*) mkdir -p "$(dirname "$t")"; : >"$t" ;; *) mkdir -p "$t" ;; esac
      mount --bind "$src" "$t"
      case ,$opts, in *,ro,*) mount -o remount,bind,ro,nosuid,nodev "$t" ;; esac
    done <"$2"
    cat "$r'"$tmp"'/topo.xml" "$r'"$tmp"'/state/jobs/42/n7.gpus" "$r'"$tmp"'/stage/jobs/42/imagenet/part-0"
    echo saved >"$r'"$tmp"'/ckpt/n7/42/step-1" && echo ckpt-writable
    { echo x >"$r'"$tmp"'/stage/jobs/42/imagenet/new"; } 2>/dev/null && echo stage-writable
    true' _ "$tmp/rootfs" "$tmp/mounts.fstab" 2>&1)
  want_out=$'<system/>\n{"gpus":"0,1"}\nshard\nckpt-writable'
  [ "$out" = "$want_out" ] || fail "inside the rootfs: expected $(printf %q "$want_out"), got $(printf %q "$out")"
  [ "$(cat "$tmp/ckpt/n7/42/step-1" 2>/dev/null)" = saved ] || fail "a checkpoint written inside is not on the host"
else
  echo "note: not root or no mount namespaces here: the fstab lines were checked, not mounted"
fi

[ $fails = 0 ] && echo "enroot hook ok"
exit $((fails > 0))
