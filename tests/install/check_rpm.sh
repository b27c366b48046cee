#!/bin/bash
# The .rpm holds what `cmake --install` lays out (install.layout), the plugin
# in Slurm's plugin directory, and requires the Slurm major.minor it was built
# for by SchedMD's package name `slurm` (CMakeLists.txt says why that name).
#   check_rpm.sh BUILD_DIR SLURM_VERSION_H PLUGIN_DIR
# Skipped (77) where rpmbuild is absent (Debian's `rpm` package provides it).
set -euo pipefail
build=$1 verh=$2 plugindir=$3
case $plugindir in /*) ;; *) plugindir=/usr/$plugindir ;; esac
command -v rpmbuild >/dev/null && command -v rpm >/dev/null ||
  { echo "SKIP: rpmbuild/rpm not installed (apt-get install rpm)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$build" && cpack -G RPM -B "$tmp" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; exit 1; }
rpmf=$(ls "$tmp"/*.rpm)
hdr=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]*\).*/\1/p' "$verh")
mm=$(printf '%d.%02d' $((16#${hdr:0:2})) $((16#${hdr:2:2})))
next=$(printf '%d.%02d' $((16#${hdr:0:2})) $((16#${hdr:2:2} + 1)))
fail=0
echo "== rpm -qpR $(basename "$rpmf")"
req=$(rpm -qpR "$rpmf" 2>/dev/null)
echo "$req"
for want in "slurm >= $mm" "slurm < $next"; do
  grep -qxF "$want" <<<"$req" || { echo "FAIL: Requires lacks '$want'"; fail=1; }
done
# rpm's own version ordering: every MM.x satisfies the range, the next release does not.
vercmp() { rpm --eval "%{lua: print(rpm.vercmp('$1', '$2'))}"; }
[ "$(vercmp "$mm.0" "$mm")" = 1 ] && [ "$(vercmp "$mm.99" "$next")" = -1 ] && [ "$(vercmp "$next.0" "$next")" = 1 ] ||
  { echo "FAIL: rpm orders $mm.x / $next unexpectedly"; fail=1; }
# Every file cmake --install lays out is in the package, at the same path under /usr.
rpm -qpl "$rpmf" 2>/dev/null | sort >"$tmp/rpm.list"
DESTDIR=$tmp/root cmake --install "$build" --prefix /usr >/dev/null
(cd "$tmp/root" && find . ! -type d | sed 's/^\.//' | sort) >"$tmp/install.list"
missing=$(comm -23 "$tmp/install.list" "$tmp/rpm.list")
[ -z "$missing" ] || { echo "FAIL: installed but not in the rpm:"; echo "$missing"; fail=1; }
extra=$(comm -13 "$tmp/install.list" "$tmp/rpm.list" | while read -r f; do [ -d "$tmp/root$f" ] || echo "$f"; done)
[ -z "$extra" ] || { echo "FAIL: in the rpm but not installed:"; echo "$extra"; fail=1; }
for f in "$plugindir/preflight.so" /usr/sbin/preflight-prolog /usr/sbin/preflight /usr/bin/preflight-run \
         /usr/share/man/man7/preflight.7 /usr/share/man/man8/spank-preflight.8 \
         /usr/share/doc/preflight/examples/slurm.conf.fragment \
         /usr/share/doc/preflight/examples/prometheus/preflight.rules.yml; do
  grep -qxF "$f" "$tmp/rpm.list" || { echo "FAIL: the rpm lacks $f"; fail=1; }
done
# Directories of the filesystem or of slurm are not claimed (a conflict on install otherwise).
for d in /usr /usr/bin /usr/sbin /usr/share/man/man8 "$plugindir"; do
  grep -qxF "$d" "$tmp/rpm.list" && { echo "FAIL: the rpm owns $d"; fail=1; }
done
[ $fail = 0 ] && echo "rpm ok ($(basename "$rpmf"), $(wc -l <"$tmp/install.list") files)"
exit $fail
