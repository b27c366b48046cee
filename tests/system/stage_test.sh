#!/bin/bash
# --stage end to end on the private cluster: submit-time refusals, the same
# bytes visible on all 3 nodes, cache hits, one copy shared by two jobs at
# once, a user refused a root-only file without draining anything, and
# nothing left behind (views, mounts, partial builds).
. "$(dirname "$0")/lib.sh"

PF=$B/admin/preflight
CONF=$C/etc/preflight.conf
DS=$(mktemp -d /tmp/pf-stage-sys.XXXXXX)
chmod 755 "$DS"
cleanup() { rm -rf "$DS"; }
trap cleanup EXIT

# A dataset: nested folders, many small files, one large file, a symlink.
mkdir -p "$DS/train/shard0/a" "$DS/train/shard1"
for i in $(seq 1 150); do head -c $((4096 + i)) /dev/urandom >"$DS/train/shard$((i % 2))/s$i.bin"; done
head -c $((3 << 20)) /dev/urandom >"$DS/train/shard0/a/big.bin"
ln -s shard0/a/big.bin "$DS/train/big"
mkdir -p "$DS/second"
for i in $(seq 1 400); do head -c 8192 /dev/urandom >"$DS/second/f$i"; done
echo secret >"$DS/secret"; chmod 600 "$DS/secret"
want=$(cd "$DS/train" && find . -type f | sort | xargs md5sum | md5sum | cut -d' ' -f1)
want2=$(cd "$DS/second" && find . -type f | sort | xargs md5sum | md5sum | cut -d' ' -f1)
chmod -R a+rX "$DS/train" "$DS/second"
mkdir -m 777 "$OUT/u"

sbatch --help >"$OUT/help" 2>&1
check "sbatch --help lists --stage" contains "$OUT/help" '--stage=SRC\[:NAME\]'

# ---- refused at submission (sbatch runs as the user) ----------------------
before=$(squeue -h | wc -l)
refuse() {  # refuse WHAT EXPECTED-TEXT sbatch-args...
  local what=$1 text=$2; shift 2
  set +e; "$@" --wrap true >"$OUT/refused.out" 2>&1; local rc=$?; set -e
  check "$what: refused" test $rc -ne 0
  check "$what: says why" contains "$OUT/refused.out" "$text"
}
refuse "missing source" "refusing --stage: $DS/nope: No such file or directory" sbatch --stage="$DS/nope"
refuse "'..' in path" "'\.\.' is not allowed" sbatch --stage="$DS/train/../secret"
refuse "duplicate names" "given twice" sbatch --stage="$DS/train:x,$DS/second:x"
refuse "bad name" "has '\*'" sbatch "--stage=$DS/train:a*b"
refuse "a root-only file, for an unprivileged user" "refusing --stage: $DS/secret: Permission denied" \
  as_user sbatch --stage="$DS/secret"
check "nothing was queued by refused submissions" test "$(squeue -h | wc -l)" = "$before"

# ---- 3 nodes, identical content, read-only view ------------------------------
show='echo "$SLURMD_NODENAME $(cd "$PREFLIGHT_STAGE_TRAIN" && find . -type f | sort | xargs md5sum | md5sum | cut -d" " -f1) $PREFLIGHT_STAGE_DIR"; touch "$PREFLIGHT_STAGE_TRAIN/x" 2>/dev/null && echo WRITABLE || echo readonly'
jid=$(sbatch --parsable -N3 --stage="$DS/train" -o "$OUT/a-%j.out" --wrap "srun -N3 bash -c '$show'")
wait_job "$jid"
cat "$OUT/a-$jid.out"
check "3-node staged job completed" test "$(job_field "$jid" JobState)" = COMPLETED
check "all 3 nodes see the same bytes as the source" test "$(grep -c "^n[1-3] $want " "$OUT/a-$jid.out")" = 3
check "PREFLIGHT_STAGE_DIR is the node's job view" contains "$OUT/a-$jid.out" "^n2 $want $C/nodes/n2/stage/jobs/$jid\$"
check "the staged data is read-only" test "$(grep -c '^readonly$' "$OUT/a-$jid.out")" = 3
check "the job's output shows the stage summary" contains "$OUT/a-$jid.out" "preflight: stage on n1: train <- $DS/train: 151 files, .*cache miss"
for n in n1 n2 n3; do
  check "first job on $n missed the cache" contains "$C/state/jobs/$jid/$n.stage.json" '"cache": "miss"'
done

# ---- an unprivileged user's job: read as the user, view owned by the user ---
U=$TEST_USER
jidu=$(as_user sbatch --parsable -N1 -w n1 --stage="$DS/train" -o "$OUT/u/u-%j.out" \
  --wrap 'cd "$PREFLIGHT_STAGE_TRAIN" && echo "$(find . -type f | sort | xargs md5sum | md5sum | cut -d" " -f1) $(stat -c %U:%a "$PREFLIGHT_STAGE_DIR") $(id -un)"')
wait_job "$jidu"
cat "$OUT/u/u-$jidu.out"
check "$U's job completed" test "$(job_field "$jidu" JobState)" = COMPLETED
check "$U's view is $U's, mode 700, with the same bytes" contains "$OUT/u/u-$jidu.out" "^$want $U:700 $U\$"
check "$U, able to read the source, got root's cached copy" contains "$C/state/jobs/$jidu/n1.stage.json" '"cache": "hit"'

# ---- the second job hits the cache -----------------------------------------
jid2=$(sbatch --parsable -N3 --stage="$DS/train" -o "$OUT/b-%j.out" --wrap "srun -N3 bash -c '$show'")
wait_job "$jid2"
check "second job completed" test "$(job_field "$jid2" JobState)" = COMPLETED
check "second job sees the same bytes" test "$(grep -c "^n[1-3] $want " "$OUT/b-$jid2.out")" = 3
for n in n1 n2 n3; do
  check "second job on $n hit the cache" contains "$C/state/jobs/$jid2/$n.stage.json" '"cache": "hit"'
done
wait_idle n1 n2 n3
check "epilog recorded the hit in the result JSON" contains "$C/state/jobs/$jid2/n2.epilog.json" '"stage.cache_hits": "1"'
check "epilog recorded bytes in the result JSON" contains "$C/state/jobs/$jid2/n2.epilog.json" '"stage.files": "151"'
check "stage metrics in the textfile" contains "$C/metrics/preflight_n2_stage.prom" '^preflight_stage_last_cache_hits\{node="n2"\} 1$'

# ---- two jobs at once share one copy ----------------------------------------
j1=$(sbatch --parsable -w n1 -n1 --stage="$DS/second:ds" -o "$OUT/c1-%j.out" --wrap 'cd $PREFLIGHT_STAGE_DS && find . -type f | sort | xargs md5sum | md5sum; sleep 2')
j2=$(sbatch --parsable -w n1 -n1 --stage="$DS/second:ds" -o "$OUT/c2-%j.out" --wrap 'cd $PREFLIGHT_STAGE_DS && find . -type f | sort | xargs md5sum | md5sum; sleep 2')
wait_job "$j1"; wait_job "$j2"
check "concurrent job 1 saw the dataset" contains "$OUT/c1-$j1.out" "^$want2 "
check "concurrent job 2 saw the dataset" contains "$OUT/c2-$j2.out" "^$want2 "
misses=$(cat "$C/state/jobs/$j1/n1.stage.json" "$C/state/jobs/$j2/n1.stage.json" | grep -c '"cache": "miss"' || true)
hits=$(cat "$C/state/jobs/$j1/n1.stage.json" "$C/state/jobs/$j2/n1.stage.json" | grep -c '"cache": "hit"' || true)
check "one job copied, the other reused that copy" test "$misses:$hits" = 1:1
key=$("$PF" --config "$CONF" cache ls node=n1 | awk -v s="$DS/second" '$NF == s {print $1}')
check "one cached version of the shared dataset" test "$(ls -d "$C/nodes/n1/stage/cache/$key"/v-* | wc -l)" = 1

# ---- a file the user lost access to after submission fails the job, not the node
# Submitted held while readable (the submit check, as the user, passes), made
# root-only, then released: the prolog, reading as the user, refuses it.
echo later >"$DS/later"; chmod 644 "$DS/later"
jid3=$(as_user sbatch --parsable -H -N1 --stage="$DS/later" -o "$OUT/u/s-%j.out" --wrap 'echo SHOULD-NOT-RUN')
chmod 600 "$DS/later"
scontrol release "$jid3"
wait_job "$jid3"
cat "$OUT/u/s-$jid3.out" || true
check "the job failed" test "$(job_field "$jid3" JobState)" = FAILED
check "the job's output names the path and the cause" contains "$OUT/u/s-$jid3.out" "preflight: stage on n[1-3]: $DS/later: Permission denied \(read as user $U\)"
check "the job's command never ran" bash -c "! grep -q SHOULD-NOT-RUN '$OUT/u/s-$jid3.out'"
check "no node was drained" test "$(sinfo -h -o %T | sort -u)" = idle
check "no refused copy in the cache" bash -c "! grep -rqs '$DS/later' $C/nodes/*/stage/cache/*/v-*/info.json"

# ---- nothing left behind -------------------------------------------------------
wait_idle n1 n2 n3
check "no job views left" test -z "$(find "$C"/nodes/*/stage/jobs -mindepth 1)"
check "no mounts left" bash -c "! grep -q '$C/nodes' /proc/mounts"
check "no partial builds left" test -z "$(ls -d "$C"/nodes/*/stage/cache/*/tmp-* 2>/dev/null)"
check "no job references left" test -z "$(find "$C"/nodes/*/stage/cache/*/refs -mindepth 1)"
"$PF" --config "$CONF" cache ls node=n1 >"$OUT/ls.out"
cat "$OUT/ls.out"
check "cache ls lists both datasets on n1, and nothing else" test "$(grep -c "$DS/" "$OUT/ls.out"):$(grep -c '^[0-9a-f]\{16\} ' "$OUT/ls.out")" = 2:2
for n in n1 n2 n3; do
  for k in $(ls "$C/nodes/$n/stage/cache"); do "$PF" --config "$CONF" cache rm "$k" node=$n >/dev/null; done
done
check "cache rm emptied every node's cache" test -z "$(find "$C"/nodes/*/stage/cache -mindepth 1)"

# ---- peer fan-out: a 3-node job reads the source once -------------------------
cp "$CONF" "$OUT/preflight.conf.orig"
sed -i 's/^stage_peers = no$/stage_peers = yes/' "$CONF"
mkdir -p "$DS/fan/sub"
for i in $(seq 1 60); do head -c $((8192 + i)) /dev/urandom >"$DS/fan/sub/f$i"; done
head -c $((5 << 20)) /dev/urandom >"$DS/fan/big"
chmod -R a+rX "$DS/fan"
want3=$(cd "$DS/fan" && find . -type f | sort | xargs md5sum | md5sum | cut -d' ' -f1)
fanbytes=$(find "$DS/fan" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
showfan='echo "$SLURMD_NODENAME $(cd "$PREFLIGHT_STAGE_FAN" && find . -type f | sort | xargs md5sum | md5sum | cut -d" " -f1)"'
jidf=$(as_user sbatch --parsable -N3 --stage="$DS/fan" -o "$OUT/u/f-%j.out" --wrap "srun -N3 bash -c '$showfan'")
wait_job "$jidf"
cat "$OUT/u/f-$jidf.out"
cat "$C"/state/jobs/"$jidf"/n*.stage.json
check "fan-out job completed" test "$(job_field "$jidf" JobState)" = COMPLETED
check "fan-out: all 3 nodes have the source's bytes" test "$(grep -c "^n[1-3] $want3\$" "$OUT/u/f-$jidf.out")" = 3
read_total=$(cat "$C"/state/jobs/"$jidf"/n*.stage.json | grep -o '"source_bytes": [0-9]*' | awk '{s += $2} END {print s}')
peer_total=$(cat "$C"/state/jobs/"$jidf"/n*.stage.json | grep -o '"peer_bytes": [0-9]*' | awk '{s += $2} END {print s}')
check "fan-out: the source was read once for 3 nodes ($read_total of $fanbytes bytes)" test "$read_total" = "$fanbytes"
check "fan-out: two nodes received it from a peer" test "$peer_total" = $((2 * fanbytes))
check "fan-out: node n1 read the source" contains "$C/state/jobs/$jidf/n1.stage.json" "\"source_bytes\": $fanbytes"
check "fan-out: n2 names its peer" contains "$C/state/jobs/$jidf/n2.stage.json" '"note": "received from peer 127.0.1.101'
cp "$OUT/preflight.conf.orig" "$CONF"
wait_idle n1 n2 n3
for n in n1 n2 n3; do
  for k in $(ls "$C/nodes/$n/stage/cache"); do "$PF" --config "$CONF" cache rm "$k" node=$n >/dev/null; done
done
finish
