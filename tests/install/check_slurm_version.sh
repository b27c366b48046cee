#!/bin/bash
# configure refuses headers of another Slurm major.minor than the installed
# one (a plugin built so would stop every slurmd); same major.minor passes.
# The installed Slurm is faked with a script printing what `slurmd -V` prints.
#   check_slurm_version.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hdr=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]*\).*/\1/p' /usr/include/slurm/slurm_version.h)
ma=$((16#${hdr:0:2})) mi=$((16#${hdr:2:2})) mc=$((16#${hdr:4:2}))
mm=$(printf '%d.%02d' "$ma" "$mi")
fake() { printf '#!/bin/sh\necho "%s"\n' "$2" >"$tmp/$1"; chmod +x "$tmp/$1"; }
fake other "slurm 24.11.7"
fake same "slurm-wlm $mm.99"
configure() { cmake -S "$src" -B "$tmp/b-$1" -DPREFLIGHT_BUILD_TESTS=OFF -DPREFLIGHT_SLURM_VERSION_COMMAND="$tmp/$1" "${@:2}" >"$tmp/$1.log" 2>&1; }
fail=0
if configure other; then echo "FAIL: configure accepted Slurm 24.11.7 with $mm headers"; fail=1; fi
msg=$(tr -s ' \n' '  ' <"$tmp/other.log")  # cmake wraps its messages
grep -q "Slurm version mismatch: the headers in .* are Slurm $mm.$mc, but .* says 24.11.7" <<<"$msg" ||
  { echo "FAIL: no clear mismatch message:"; cat "$tmp/other.log"; fail=1; }
grep -q 'Failed to initialize plugin stack' <<<"$msg" || { echo "FAIL: the message does not say what breaks"; fail=1; }
grep -q 'PREFLIGHT_SLURM_VERSION_CHECK=OFF' <<<"$msg" || { echo "FAIL: the message does not say how to override"; fail=1; }
configure same || { echo "FAIL: same major.minor ($mm.99) refused:"; tail -5 "$tmp/same.log"; fail=1; }
configure other -DPREFLIGHT_SLURM_VERSION_CHECK=OFF || { echo "FAIL: the check cannot be switched off"; fail=1; }
[ $fail = 0 ] && echo "slurm version check ok: $(grep -o 'preflight: Slurm version mismatch.*' <<<"$msg" | sed 's/ Call Stack.*//')"
exit $fail
