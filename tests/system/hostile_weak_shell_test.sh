#!/bin/bash
# Issue 29's weak spots in the shells, on the real cluster, each as the one
# who would meet it:
#   1. the user: --stage on one component of a heterogeneous job was
#      accepted, and the steps on the other components failed: refused at
#      submission, saying why, nothing queued;
#   2. the user: a bare --preflight-env meant show; it means on (the
#      environment set, nothing printed), =show still shows;
#   3. the admin (root): state gc on folders named with control bytes and
#      on folders it can never empty (an immutable file, a bind mount over a
#      file, one over the folder itself): one "cannot remove PATH: REASON"
#      each, escaped, nothing of them removed (nor of the mounted tree),
#      the others removed, exit 4;
#   4. preflight accept's storage worker on scratch_dir = .../%n/scratch
#      (the default path): each node measures its own directory.
# No node drained; nothing left behind (attributes, mounts, folders).
. "$(dirname "$0")/lib.sh"

PF=$B/admin/preflight
CONF=$C/etc/preflight.conf
DS=$(mktemp -d /tmp/pf-weak-shell.XXXXXX)
chmod 755 "$DS"
J=$C/state/jobs
esc=$'pf-weak\x1b]0;pwned\x07'  # ESC ] 0 ; ... BEL: sets a terminal's title
stuck=("$esc" pf-weak-mntfile pf-weak-mntdir)
cleanup() {
  chattr -i "$J/$esc/n1.prolog.json" 2>/dev/null || true
  umount "$J/pf-weak-mntfile/n1.gpus" 2>/dev/null || true
  umount "$J/pf-weak-mntdir" 2>/dev/null || true
  rm -rf "$DS" "${stuck[@]/#/$J/}" "$J/pf-weak-ok1" "$J/pf-weak-ok2"
  rm -rf "$C"/nodes/n[12]/scratch/.preflight-accept-n[12]-weak
}
trap cleanup EXIT
mkdir -p "$DS/ds"; echo x >"$DS/ds/f"; chmod -R a+rX "$DS/ds"
mkdir -m 777 "$OUT/u"
no_drain() { wait_idle n1 n2 n3; check "$1: no node drained" test "$(sinfo -h -o %T | sort -u)" = idle; }
# refuse WHAT TEXT CMD...: as the user, refused at submission, saying why.
refuse() {
  local what=$1 text=$2; shift 2
  set +e; timeout 60 runuser -u "$TEST_USER" -- env SLURM_CONF="$SLURM_CONF" "$@" >"$OUT/refused.out" 2>&1
  local rc=$?; set -e
  sed "s/^/[$T] $what: /" "$OUT/refused.out"
  check "$what: refused" test $rc -ne 0 -a $rc -ne 124
  check "$what: says why" contains "$OUT/refused.out" "$text"
}

# ---- 1. --stage in a heterogeneous job
why="preflight: submit: refusing --stage: a heterogeneous job cannot be staged \(the prolog would stage the datasets on one component's nodes only, and the steps on the other components' nodes would fail\); submit the components without --stage"
before=$(squeue -h | wc -l)
refuse "het job, --stage on the first component" "$why" \
  sbatch -J pf-weak-refused -N1 --stage="$DS/ds" : -N1 --wrap true
refuse "het job, --stage on the second component" "$why" \
  sbatch -J pf-weak-refused -N1 : -N1 --stage="$DS/ds" --wrap true
cat >"$OUT/het.sh" <<EOF
#!/bin/sh
#SBATCH -J pf-weak-refused -N1 --stage=$DS/ds
#SBATCH hetjob
#SBATCH -N1
true
EOF
chmod 644 "$OUT/het.sh"
refuse "het job script, #SBATCH --stage" "$why" sbatch "$OUT/het.sh"
check "nothing queued by the refusals" test "$(squeue -h | wc -l)" = "$before"
check "no refused job in the queue" test -z "$(squeue -h -n pf-weak-refused -o %i)"
# One component still stages as before.
j=$(as_user sbatch --parsable -N1 -w n2 --stage="$DS/ds" -o "$OUT/u/one-%j.out" --wrap 'cat "$PREFLIGHT_STAGE_DIR/ds/f"')
wait_job "$j" 120
check "a one-component job with --stage still stages" contains "$OUT/u/one-$j.out" '^x$'
no_drain "--stage refusals"

# ---- 2. bare --preflight-env is on
show='echo "mode=${PREFLIGHT_ENV:-unset} hca=${NCCL_IB_HCA:-unset}"'
j=$(as_user sbatch --parsable -N1 -w n3 --gres=gpu:2 --preflight-env -o "$OUT/u/bare-%j.out" -e "$OUT/u/bare-%j.err" --wrap "$show")
wait_job "$j" 60
sed "s/^/[$T] bare: /" "$OUT/u/bare-$j.out" "$OUT/u/bare-$j.err"
check "bare --preflight-env: the mode is on" contains "$OUT/u/bare-$j.out" '^mode=on '
check "bare --preflight-env: the environment is set" contains "$OUT/u/bare-$j.out" ' hca==mlx5_0:1,mlx5_1:1$'
check "bare --preflight-env: nothing shown" bash -c "! grep -q '^preflight-env:' '$OUT/u/bare-$j.err'"
j=$(as_user sbatch --parsable -N1 -w n3 --gres=gpu:2 --preflight-env=show -o "$OUT/u/show-%j.out" -e "$OUT/u/show-%j.err" --wrap "$show")
wait_job "$j" 60
check "--preflight-env=show: the mode is show" contains "$OUT/u/show-$j.out" '^mode=show '
check "--preflight-env=show: still shows" contains "$OUT/u/show-$j.err" '^preflight-env: n3 task 0 '
no_drain "--preflight-env"

# ---- 3. state gc (the admin, root) on folders it cannot empty
wait_all_idle 60  # no epilog's own gc running beside this one
for d in "${stuck[@]}" pf-weak-ok1 pf-weak-ok2; do
  mkdir -p "$J/$d"
  for f in n1.prolog.json n1.gpus n1.epilog.json; do echo "{}" >"$J/$d/$f"; done
done
mkdir -p "$DS/victim"; echo keep >"$DS/victim/keep"; echo keep >"$DS/victim/n1.epilog.json"
echo mounted >"$DS/file"
# Old enough for state_keep=1h, set before the attribute and the mounts
# (an immutable file's times cannot be set; a bind mount shows its source's).
touch -h -d '3 hours ago' "$J"/pf-weak*/* "$J"/pf-weak* "$DS/victim"/* "$DS/victim" "$DS/file"
chattr_ok=1
chattr +i "$J/$esc/n1.prolog.json" 2>/dev/null || chattr_ok=0
mount --bind "$DS/file" "$J/pf-weak-mntfile/n1.gpus"
mount --bind "$DS/victim" "$J/pf-weak-mntdir"
set +e
"$PF" --config "$CONF" --set state_keep=1h state gc node=n1 >"$OUT/gc.out" 2>"$OUT/gc.err"
rc=$?
set -e
sed "s/^/[$T] gc stdout: /" "$OUT/gc.out"; sed "s/^/[$T] gc stderr: /" "$OUT/gc.err" | cat -v
check "state gc: exit 4 (ran through, left folders)" test "$rc" = 4
esc_shown='pf-weak\\x1b\]0;pwned\\x07'
if [ $chattr_ok = 1 ]; then
  check "state gc: the immutable file named, escaped" contains "$OUT/gc.err" \
    "^preflight: state gc: cannot remove $J/$esc_shown/n1\.prolog\.json: immutable \(chattr \+i\); the folder is left as it is$"
  check "state gc: the immutable file's folder kept whole" test -e "$J/$esc/n1.epilog.json" -a -e "$J/$esc/n1.gpus"
else
  note "chattr +i not supported under $J: that case skipped"
  check "state gc: the control-byte folder removed, its name escaped" contains "$OUT/gc.out" "^removed $esc_shown "
fi
check "state gc: the bind-mounted file named" contains "$OUT/gc.err" \
  "^preflight: state gc: cannot remove $J/pf-weak-mntfile/n1\.gpus: a mount point \(gc never removes across a mount\); the folder is left as it is$"
check "state gc: the folder mounted over named" contains "$OUT/gc.err" \
  "^preflight: state gc: cannot remove $J/pf-weak-mntdir: a mount point \(gc never removes across a mount\); left as it is$"
check "state gc: each named once" test "$(grep -c 'cannot remove' "$OUT/gc.err")" = $((2 + chattr_ok))
check "state gc: no control byte printed" bash -c "! LC_ALL=C grep -q '[[:cntrl:]]' '$OUT/gc.out' '$OUT/gc.err'"
check "state gc: the mounted tree untouched" test -e "$DS/victim/keep" -a -e "$DS/victim/n1.epilog.json"
check "state gc: the file mounted over untouched" test -e "$J/pf-weak-mntfile/n1.epilog.json"
check "state gc: the others removed" contains "$OUT/gc.out" '^removed pf-weak-ok1 '
check "state gc: ... both" contains "$OUT/gc.out" '^removed pf-weak-ok2 '
check "state gc: the others are gone" test ! -e "$J/pf-weak-ok1" -a ! -e "$J/pf-weak-ok2"
check "state gc: the summary says what was left" contains "$OUT/gc.out" "; left $((2 + chattr_ok)) it could not remove$"
# Once unblocked, the next gc removes them, and the mounted tree stays.
chattr -i "$J/$esc/n1.prolog.json" 2>/dev/null || true
umount "$J/pf-weak-mntfile/n1.gpus"
umount "$J/pf-weak-mntdir"
touch -h -d '3 hours ago' "$J"/pf-weak*/* "$J"/pf-weak*
set +e
"$PF" --config "$CONF" --set state_keep=1h state gc node=n1 >"$OUT/gc2.out" 2>"$OUT/gc2.err"
rc=$?
set -e
check "state gc again: exit 0" test "$rc" = 0
check "state gc again: the unblocked folders gone" bash -c "! ls -d '$J'/pf-weak* 2>/dev/null | grep -q ."
check "state gc again: the once-mounted tree untouched" test -e "$DS/victim/keep"
no_drain "state gc"

# ---- 4. accept's storage worker on the site's scratch_dir (…/nodes/%n/scratch)
scratch=$(sed -n 's/^scratch_dir = //p' "$CONF")
check "the site's scratch_dir names the node" test "${scratch##*%n}" != "$scratch"
srun -N2 -w n1,n2 --label -o "$OUT/storage.out" "$PF" --config "$CONF" accept --storage-worker --level quick \
  --storage-bytes 4M --storage-files 10 --storage-runtime 1 --tag weak --storage "$scratch" || true
sed "s/^/[$T] storage: /" "$OUT/storage.out"
for n in n1 n2; do
  check "storage on $n: measured, the path as configured" \
    contains "$OUT/storage.out" "#accept-storage \{\"path\":\"${scratch//./\\.}\",\"node\":\"$n\",\"seq_write\":[1-9]"
  check "storage on $n: no error" bash -c "! grep '\"node\":\"$n\"' '$OUT/storage.out' | grep -q '\"error\":\"[^\"]'"
  check "storage on $n: nothing left in its scratch" test -z "$(ls -A "$C/nodes/$n/scratch" | grep preflight-accept || true)"
done
no_drain "accept storage"
finish
