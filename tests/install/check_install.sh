#!/bin/bash
# Install into a scratch prefix and check every piece lands where admins expect.
set -euo pipefail
build=$1 plugindir=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
fail=0
for f in "$plugindir/preflight.so" sbin/preflight-prolog sbin/preflight-epilog sbin/preflight-healthcheck \
         sbin/preflight bin/preflight-run share/man/man7/preflight.7 share/man/man8/spank-preflight.8 \
         share/man/man1/preflight-run.1 share/doc/preflight/examples/preflight.conf \
         share/doc/preflight/examples/slurm.conf.fragment share/doc/preflight/examples/prometheus/preflight.rules.yml; do
  [ -e "$prefix/$f" ] || { echo "missing after install: $f"; fail=1; }
done
"$prefix/sbin/preflight" --version | grep -q '^preflight ' || { echo "installed preflight does not run"; fail=1; }
[ $fail = 0 ] && echo "install layout ok ($(find "$prefix" -type f | wc -l) files)"
exit $fail
