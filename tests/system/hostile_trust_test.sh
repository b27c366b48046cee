#!/bin/bash
# Trust boundaries (issue 29), as an unprivileged user on the real cluster:
# a user's processes cannot end the root prolog's stage children (which
# once drained the node), and a drain reason with any bytes in it (a user's
# path, an admin's typing) breaks no reader: `preflight slurm` is valid
# JSON, `preflight reasons` reads every node, the health check resumes the
# node. Label: hostile.
. "$(dirname "$0")/lib.sh"

PF=$B/admin/preflight
U=$TEST_USER
DS=$(mktemp -d /tmp/pf-trust.XXXXXX)
KILLER=
cleanup() {
  [ -n "$KILLER" ] && kill "$KILLER" 2>/dev/null || true
  rm -rf "$DS"
}
trap cleanup EXIT
chmod 755 "$DS"
mkdir -m 777 "$OUT/u"
no_drain() { wait_idle n1 n2 n3; check "$1: no node drained" test -z "$(sinfo -h -t drain,drng -o %N)"; }

# ---- 1. pkill -9 -u USER on the stage children while the job stages -----
# 20000 files keep the source walker (cold) and the cache check (warm)
# alive long enough for the loop to find them; before the fix the node
# drained with "source walker ended without a result" / "cache check ended
# without a result" and the requeue drained the next node.
python3 - "$DS/ds" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(20):
    os.makedirs(f"{root}/d{d}")
    for f in range(1000):
        with open(f"{root}/d{d}/f{f}", "w") as fh:
            fh.write(f"{d}/{f}\n")
PY
chmod -R a+rX "$DS/ds"
# The user's kill loop, bounded by its own timeout; it logs what pkill said.
cat >"$OUT/u/killer.sh" <<'EOF2'
#!/bin/bash
end=$((SECONDS + 240))
while [ $SECONDS -lt $end ]; do pkill -9 -u "$(id -un)" -x preflight-prolo 2>&1; done
EOF2
chmod 755 "$OUT/u/killer.sh"
for run in cold warm; do
  as_user "$OUT/u/killer.sh" >"$OUT/u/killer-$run.log" 2>&1 &
  KILLER=$!
  j=$(as_user sbatch --parsable -w n1 --stage="$DS/ds:ds" -o "$OUT/u/kill-$run-%j.out" \
    --wrap 'cat $PREFLIGHT_STAGE_DIR/ds/d19/f999')
  wait_job "$j" 180
  kill "$KILLER" 2>/dev/null || true; wait "$KILLER" 2>/dev/null || true; KILLER=
  cat "$OUT/u/kill-$run-$j.out" || true
  note "$run: pkill was refused $(grep -c 'Operation not permitted' "$OUT/u/killer-$run.log" || true) time(s)"
  check "$run: the job ran on its staged data" contains "$OUT/u/kill-$run-$j.out" '^19/999$'
  check "$run: the job completed" test "$(job_field "$j" JobState)" = COMPLETED
  check "$run: not requeued" test "$(job_field "$j" Restarts)" = 0
  no_drain "pkill of the stage children ($run)"
done
check "the second job was a cache hit" contains "$C/state/jobs/$j/n1.stage.json" '"cache": "hit"'

# ---- 2. a drain reason that is not UTF-8 --------------------------------------
# As an older release wrote it (cut inside an 'é' after a user's path) plus
# what an admin may type (ESC, 0xff): once `preflight slurm` printed invalid
# JSON, `preflight reasons` failed for every node and the health check,
# though the node passed, never resumed it.
e=$(printf 'é%.0s' $(seq 1 60))
bad=$(printf 'preflight[node] stage: staging /data/%s\xc3' "$e")
scontrol update nodename=n2 state=drain reason="$bad"
scontrol update nodename=n3 state=drain reason="$(printf 'admin: \033[31mred\033[0m \xff\xfe by hand')"
"$PF" --config "$C/etc/preflight.conf" slurm nodes 'n[1-3]' >"$OUT/nodes.json"
check "preflight slurm: valid JSON for any byte" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT/nodes.json"
set +e; "$PF" --config "$C/etc/preflight.conf" reasons >"$OUT/reasons.json" 2>"$OUT/reasons.err"; rc=$?; set -e
cat "$OUT/reasons.err"
check "preflight reasons: reads every node" test "$rc" = 0
check "preflight reasons: valid JSON" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT/reasons.json"
check "preflight reasons: n2's reason is read as preflight's stage reason" \
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["drains"]; assert [x for x in d if x["node"]=="n2" and x["check"]=="stage"], d' "$OUT/reasons.json"
"$C/bin/healthcheck" --node n2 >"$OUT/hc-n2.out" 2>&1 || true
cat "$OUT/hc-n2.out"
wait_idle n2
check "the health check resumed n2 (its checks pass)" test "$(node_state n2)" = idle
check "the health check's line is printable" bash -c "! grep -qP '[\x00-\x08\x1b\x7f]' '$OUT/hc-n2.out'"
check "an admin's reason is left alone" test "$(sinfo -h -n n3 -o %T)" = drained
scontrol update nodename=n3 state=resume
no_drain "reasons with any bytes"
finish
