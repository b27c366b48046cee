#!/bin/bash
# Hostile peers against the stage fan-out (issue 29, defects 4 and 5), as
# the unprivileged test user on the real cluster. Before protocol 3 the
# fan-out listened on an unprivileged port and a child sent its root
# credential to whatever answered there: a user who took a parent's port
# fed forged files into the shared cache (served to later jobs of any
# user) and replayed the children's credentials to other nodes of the job.
# Now:
#   1. the user cannot bind any node's fan-out port (below 1024): EACCES;
#   2. a user's listener on an unprivileged port (the old kind) gets no
#      connection from a fan-out job;
#   3. a 3-node --stage job with a squatter attempt in place gets the
#      source's bytes on every node, two of them from a peer, and every
#      cached copy equals the source (nothing forged reached the cache).
# A credential replayed to another serving node is refused: unit tests
# PeerFanOut.ACredentialReplayedToAnotherServingNodeIsRefused and
# PeerCredential.BoundToOneJobOneLinkAndOneNonce (stage_peer_auth_test.cc),
# as the cluster's credentials can't be taken here without the squatter
# this test shows can no longer exist. Label: hostile.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || { echo "[$T] skipped: needs $PY"; exit 77; }
CONF=$C/etc/preflight.conf
U=$TEST_USER
DS=$(mktemp -d /tmp/pf-hostile-peer.XXXXXX)
chmod 755 "$DS"
cp "$CONF" "$OUT/preflight.conf.orig"
squatter=
cleanup() {
  [ -z "$squatter" ] || kill "$squatter" 2>/dev/null || true
  cp "$OUT/preflight.conf.orig" "$CONF"
  rm -rf "$DS"
}
trap cleanup EXIT
mkdir -m 777 "$OUT/u"
sed -i 's/^stage_peers = no$/stage_peers = yes/' "$CONF"
port=$(sed -n 's/^stage_peer_port = //p' "$CONF")
addr() { awk -v n="$1" '$2 == n {print $1}' "$C/etc/node-addresses"; }
check "the fan-out port is privileged ($port)" test "$port" -lt 1024

# ---- 1. the user tries to take each node's fan-out port ---------------------
cat >"$DS/bind.py" <<'PY'
import errno, socket, sys
# bind.py OUT ADDR:PORT...: one line per attempt, "ADDR:PORT bound" or the errno's name.
with open(sys.argv[1], "w") as out:
    for ap in sys.argv[2:]:
        a, p = ap.rsplit(":", 1)
        s = socket.socket()
        try:
            s.bind((a, int(p)))
            s.listen()
            out.write(ap + " bound\n")
        except OSError as e:
            out.write(ap + " " + errno.errorcode.get(e.errno, str(e.errno)) + "\n")
        s.close()
PY
cat >"$DS/decoy.py" <<'PY'
import socket, sys
# decoy.py LOG ADDR PORT: a user's listener of the old, unprivileged kind;
# logs every connection and answers with forged bytes.
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[2], int(sys.argv[3])))
s.listen()
open(sys.argv[1], "a").write("listening\n")
while True:
    c, peer = s.accept()
    open(sys.argv[1], "a").write("connection from %s\n" % (peer,))
    try:
        c.sendall(b"A" + b"FORGED" * 1000)
    except OSError:
        pass
    c.close()
PY
chmod 755 "$DS"/*.py
targets=()
for i in 0 1 2; do targets+=("$(addr n$((i + 1))):$((port + i))"); done
as_user "$PY" "$DS/bind.py" "$OUT/u/bind.txt" "${targets[@]}"
cat "$OUT/u/bind.txt"
check "the user could bind no fan-out port" test "$(grep -c ' EACCES$' "$OUT/u/bind.txt")" = 3

# ---- 2. a user's listener on an unprivileged port, on n1's address ----------
decoy_port=$((port + 30000))
runuser -u "$U" -- "$PY" "$DS/decoy.py" "$OUT/u/decoy.log" "$(addr n1)" "$decoy_port" &
squatter=$!
check "the decoy listens" soon_contains "$OUT/u/decoy.log" listening

# ---- 3. a fan-out job stages the source's bytes, and only those -------------
mkdir -p "$DS/pub/sub"
for i in $(seq 1 40); do head -c $((4096 + i)) /dev/urandom >"$DS/pub/sub/f$i"; done
head -c $((2 << 20)) /dev/urandom >"$DS/pub/big"
chmod -R a+rX "$DS/pub"
want=$(cd "$DS/pub" && find . -type f | sort | xargs md5sum | md5sum | cut -d' ' -f1)
bytes=$(find "$DS/pub" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
show='echo "$SLURMD_NODENAME $(cd "$PREFLIGHT_STAGE_PUB" && find . -type f | sort | xargs md5sum | md5sum | cut -d" " -f1)"'
j=$(as_user sbatch --parsable -N3 --stage="$DS/pub:pub" -o "$OUT/u/p-%j.out" --wrap "srun -N3 bash -c '$show'")
wait_job "$j"
cat "$OUT/u/p-$j.out" || true
cat "$C"/state/jobs/"$j"/n*.stage.json || true
check "fan-out job completed" test "$(job_field "$j" JobState)" = COMPLETED
check "all 3 nodes saw the source's bytes" test "$(grep -c "^n[1-3] $want\$" "$OUT/u/p-$j.out")" = 3
peer_total=$(cat "$C"/state/jobs/"$j"/n*.stage.json | grep -o '"peer_bytes": [0-9]*' | awk '{s += $2} END {print s}')
check "two nodes received it from a peer (the fan-out worked, authenticated)" test "$peer_total" = $((2 * bytes))
check "no node named an attack" bash -c "! grep -q ATTACK '$C'/state/jobs/'$j'/n*.stage.json"
check "the decoy got no connection" bash -c "! grep -q connection '$OUT/u/decoy.log'"
for n in n1 n2 n3; do
  # This dataset's copies only: earlier tests leave other datasets in the cache.
  copies=$(grep -lsF "$DS/pub" "$C/nodes/$n"/stage/cache/*/v-*/info.json | xargs -r -n1 dirname | sed 's|$|/data|')
  check "$n: one cached copy" test "$(echo "$copies" | grep -c .)" = 1
  check "$n: the cached copy is the source, byte for byte" diff -r "$DS/pub" "$copies"
  check "$n: nothing forged in the cache" bash -c "! grep -rq FORGED '$C/nodes/$n/stage/cache'"
done
kill "$squatter" 2>/dev/null || true
wait "$squatter" 2>/dev/null || true
squatter=
cp "$OUT/preflight.conf.orig" "$CONF"
wait_idle n1 n2 n3
check "no node drained" test "$(sinfo -h -o %T | sort -u)" = idle
for n in n1 n2 n3; do
  for k in $(ls "$C/nodes/$n/stage/cache"); do "$B/admin/preflight" --config "$CONF" cache rm "$k" node=$n >/dev/null; done
done
check "cache emptied" test -z "$(find "$C"/nodes/*/stage/cache -mindepth 1)"
finish
