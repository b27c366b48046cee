#!/bin/bash
# scripts/slurm-from-source's build cache (issue 34, item 6) on a stand-in
# Slurm tarball (a configure that writes a Makefile installing sbin/slurmd):
# built once per key outside the checkout, found by a later run, built anew
# when the tarball changes, never taken from a build cut short, one build
# for two runs at once.
#   slurm_cache.sh SOURCE_DIR
set -uo pipefail
src=$1
tmp=$(mktemp -d /tmp/preflight-slurm-cache-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
export PREFLIGHT_SLURM_TARBALLS=$tmp/tarballs PREFLIGHT_SLURM_CACHE=$tmp/cache
unset PREFLIGHT_SLURM_DIR
mkdir -p "$tmp/tarballs" "$tmp/src/slurm-99.1.1"
tarball() {  # tarball EXIT_OF_CONFIGURE
  cat >"$tmp/src/slurm-99.1.1/configure" <<SH
#!/bin/sh
for a; do case \$a in --prefix=*) p=\${a#--prefix=};; esac; done
[ $1 = 0 ] || { echo "configure: cut short"; exit $1; }
printf 'all:\n\ttrue\ninstall:\n\tmkdir -p \$(DESTDIR)%s/sbin && printf "#!/bin/sh\\\\n" >\$(DESTDIR)%s/sbin/slurmd && chmod +x \$(DESTDIR)%s/sbin/slurmd\n' "\$p" "\$p" "\$p" >Makefile
SH
  chmod +x "$tmp/src/slurm-99.1.1/configure"
  tar -czf "$tmp/tarballs/slurm-99.1.1.tar.gz" -C "$tmp/src" slurm-99.1.1
}
build() { "$src/scripts/slurm-from-source" 99.1.1 2>"$tmp/err"; }

tarball 0
p1=$(build)
grep -q '^slurm-from-source: building Slurm 99.1.1' "$tmp/err" && ok "first run builds" || fail "first run did not build: $(cat "$tmp/err")"
[ -x "$p1/sbin/slurmd" ] && ok "the prefix holds slurmd" || fail "no $p1/sbin/slurmd"
case $p1 in "$tmp/cache/99.1.1-"*/prefix) ok "outside the checkout, keyed: $p1" ;; *) fail "prefix $p1" ;; esac
p2=$(build)
[ "$p2" = "$p1" ] && grep -q 'found built' "$tmp/err" && ok "a later run finds it" || fail "second run: $p2 $(cat "$tmp/err")"
echo "# changed" >>"$tmp/src/slurm-99.1.1/configure"; tar -czf "$tmp/tarballs/slurm-99.1.1.tar.gz" -C "$tmp/src" slurm-99.1.1
p3=$(build)
[ "$p3" != "$p1" ] && [ -x "$p3/sbin/slurmd" ] && ok "another tarball, another key, built" || fail "changed tarball: $p3"
tarball 3
if build >/dev/null; then fail "a failed configure succeeded"; else ok "a failed configure fails"; fi
p4=$(ls -d "$tmp"/cache/99.1.1-*/ | grep -v -e "${p1%/prefix}/" -e "${p3%/prefix}/" | head -1)
[ -n "$p4" ] && [ ! -e "${p4}prefix" ] && ok "a build cut short leaves no prefix" || fail "cut short left ${p4}prefix"
tarball 0
echo "# twice" >>"$tmp/src/slurm-99.1.1/configure"; tar -czf "$tmp/tarballs/slurm-99.1.1.tar.gz" -C "$tmp/src" slurm-99.1.1
"$src/scripts/slurm-from-source" 99.1.1 >"$tmp/a" 2>"$tmp/ea" & pa=$!
"$src/scripts/slurm-from-source" 99.1.1 >"$tmp/b" 2>"$tmp/eb"
wait $pa
[ "$(cat "$tmp/a")" = "$(cat "$tmp/b")" ] && [ "$(cat "$tmp/ea" "$tmp/eb" | grep -c '^slurm-from-source: building')" = 1 ] &&
  ok "two runs at once: one build" || fail "two runs at once: $(cat "$tmp/ea" "$tmp/eb")"
[ $fails = 0 ] || { echo "$fails check(s) failed"; exit 1; }
