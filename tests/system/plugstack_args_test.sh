#!/bin/bash
# The plugin refuses to load with an unknown or bad plugstack.conf argument,
# naming the key; a required plugin that fails makes sbatch refuse.
. "$(dirname "$0")/lib.sh"

conf=$OUT/slurm.conf
sed "s|^PlugStackConfig=.*|PlugStackConfig=$OUT/plugstack.conf|" "$SLURM_CONF" >"$conf"
try() {
  echo "required $B/spank_plugin/preflight.so $*" >"$OUT/plugstack.conf"
  set +e
  SLURM_CONF=$conf sbatch --wrap true >"$OUT/try.out" 2>&1
  rc=$?
  set -e
  cat "$OUT/try.out"
  return $rc
}
before=$(squeue -h | wc -l)
try "conf=$C/etc/preflight.conf frobnicate=1" && fail "unknown key accepted" || ok "unknown key refused"
check "message names the unknown key" contains "$OUT/try.out" "plugstack.conf argument 'frobnicate=1': unknown key 'frobnicate'"
try "conf=$C/etc/preflight.conf default_level=sometimes" && fail "bad value accepted" || ok "bad value refused"
check "message names the key and value" contains "$OUT/try.out" "key 'default_level'.*invalid level 'sometimes'"
try "conf=$C/etc/preflight.conf scratch_min_free=lots" && fail "bad size accepted" || ok "bad size refused"
check "bad size is named" contains "$OUT/try.out" "bad size 'lots'"
check "nothing queued" test "$(squeue -h | wc -l)" = "$before"

# A config file error names file, line and key.
printf 'state_dir = /tmp/x\n\nprobe_timeout = soon\n' >"$OUT/bad.conf"
set +e
"$B/prolog/preflight-prolog" --config "$OUT/bad.conf" >"$OUT/badconf.out" 2>&1
rc=$?
set -e
check "prolog with a bad config exits 2" test $rc = 2
check "config error names file:line and key" contains "$OUT/badconf.out" "bad.conf:3: key 'probe_timeout': bad duration 'soon'"
try "conf=$C/etc/preflight.conf" || fail "a good plugstack line was refused"
finish
