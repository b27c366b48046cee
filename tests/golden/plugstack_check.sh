#!/bin/bash
# Golden test of `preflight config check` reading plugstack.conf as slurmd
# does (core/plugstack.h): the fixture trees of tests/fixtures/plugstack
# against golden/<case>.txt, paths shown relative to the fixture folder.
# PREFLIGHT_REGENERATE_GOLDEN=1 rewrites the goldens (review the diff).
#   plugstack_check.sh PREFLIGHT_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
fix=$src/tests/fixtures/plugstack
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# No site config (--config /dev/null keeps the host's /etc/preflight out);
# slurm.conf named by the key, as a site would.
check() { "$bin" --config /dev/null --set "slurm_conf=$1" config check 2>&1; }

for name in before-pyxis after-pyxis broken; do
  got=$(check "$fix/$name/slurm.conf" | sed "s#$fix/##g")
  want=$fix/golden/$name.txt
  if [ -n "${PREFLIGHT_REGENERATE_GOLDEN:-}" ]; then printf '%s\n' "$got" >"$want"; continue; fi
  diff -u "$want" <(printf '%s\n' "$got") || fail "$name differs from $want"
done

# PlugStackConfig in slurm.conf moves the stack; its includes are relative
# to that file's folder. Built in a temporary folder (the path is absolute).
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/etc" "$tmp/spank/conf.d"
printf 'ClusterName=x PrologFlags=Alloc,DeferBatch\nPlugStackConfig=%s/spank/stack.conf\n' "$tmp" >"$tmp/etc/slurm.conf"
printf 'include %s/etc/plugstack.conf\n' "$tmp" >"$tmp/etc/plugstack.conf"  # not read: PlugStackConfig wins
printf 'include conf.d/*.conf\n' >"$tmp/spank/stack.conf"
echo "required /opt/slurm/preflight.so" >"$tmp/spank/conf.d/a.conf"
echo "optional spank_pyxis.so" >"$tmp/spank/conf.d/b.conf"
out=$(check "$tmp/etc/slurm.conf")
grep -qxF "$tmp/spank/stack.conf: warning: preflight.so ($tmp/spank/conf.d/a.conf:1) loads before spank_pyxis.so ($tmp/spank/conf.d/b.conf:1): pyxis's task_init then copies the container image's environment over each task's, replacing the per-task NCCL_*/UCX_* values preflight set; load preflight after pyxis (a plugstack.conf.d snippet named to sort after pyxis.conf, such as zz-preflight.conf, or its line below pyxis's)" <<<"$out" ||
  fail "PlugStackConfig: expected the order warning for $tmp/spank/stack.conf, got: $out"
mv "$tmp/spank/conf.d/a.conf" "$tmp/spank/conf.d/c.conf"
out=$(check "$tmp/etc/slurm.conf")
grep -q 'warning' <<<"$out" && fail "PlugStackConfig, preflight after pyxis: no warning expected, got: $out"
grep -qF "preflight.so ($tmp/spank/conf.d/c.conf:1) loads after spank_pyxis.so" <<<"$out" || fail "PlugStackConfig: no 'loads after' line: $out"
# An unreadable slurm.conf: said, and config check still passes.
out=$(check "$tmp/nonexistent/slurm.conf") || fail "config check failed for an unreadable slurm.conf: $out"
grep -qF "$tmp/nonexistent/slurm.conf: not read (No such file or directory): plugstack.conf not checked" <<<"$out" ||
  fail "unreadable slurm.conf: $out"

[ $fails = 0 ] && echo "plugstack check ok"
exit $((fails > 0))
