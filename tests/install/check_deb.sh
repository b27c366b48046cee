#!/bin/bash
# The .deb depends on the Slurm major.minor the plugin was built for, in
# Debian's and SchedMD's package names, and breaks the next one, so that apt
# cannot upgrade Slurm under a plugin that would stop every slurmd.
#   check_deb.sh BUILD_DIR SLURM_VERSION_H (the headers it was built with)
set -euo pipefail
build=$1 verh=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v dpkg-deb >/dev/null || { echo "dpkg-deb missing"; exit 1; }
(cd "$build" && cpack -G DEB -B "$tmp" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; exit 1; }
deb=$(ls "$tmp"/*.deb)
hdr=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]*\).*/\1/p' "$verh")
mm=$(printf '%d.%02d' $((16#${hdr:0:2})) $((16#${hdr:2:2})))
next=$(printf '%d.%02d' $((16#${hdr:0:2})) $((16#${hdr:2:2} + 1)))
dep=$(dpkg-deb -f "$deb" Depends) brk=$(dpkg-deb -f "$deb" Breaks)
echo "Depends: $dep"
echo "Breaks: $brk"
fail=0
for want in "slurm-client (>= $mm) | slurm-smd-client (>= $mm)" "libslurm"; do
  grep -qF "$want" <<<"$dep" || { echo "FAIL: Depends lacks '$want'"; fail=1; }
done
for want in "slurm-client (>= $next~)" "slurm-smd-client (>= $next~)" "slurmd (>= $next~)"; do
  grep -qF "$want" <<<"$brk" || { echo "FAIL: Breaks lacks '$want'"; fail=1; }
done
so=$(dpkg-deb -c "$deb" | grep -o 'slurm-wlm/preflight.so\|slurm/preflight.so' || true)
[ -n "$so" ] || { echo "FAIL: the .deb has no plugin"; fail=1; }
# Debian's own version ordering: the installed Slurm satisfies Depends and is not broken.
inst=""
[ "$verh" = /usr/include/slurm/slurm_version.h ] && inst=$(dpkg-query -W -f='${Version}' slurm-client 2>/dev/null || true)
if [ -n "$inst" ]; then
  dpkg --compare-versions "$inst" ge "$mm" || { echo "FAIL: installed slurm-client $inst does not satisfy >= $mm"; fail=1; }
  dpkg --compare-versions "$inst" lt "$next~" || { echo "FAIL: installed slurm-client $inst is broken by >= $next~"; fail=1; }
fi
[ $fail = 0 ] && echo "deb dependencies ok ($(basename "$deb"))"
exit $fail
