#!/bin/bash
# Compile the plugin's Slurm-facing sources (and slurmapi/) against the
# headers of other Slurm releases, taken from their source tarballs: the #if
# in slurmapi/slurm_compat.h must hold on each, and on 25.05+ the plugin must
# define slurm_spank_init_failure_mode.
#   check_slurm_headers.sh SOURCE_DIR BUILD_DIR DEFAULT_TARBALL_DIR VERSION...
# The tarballs slurm-VERSION.tar.gz are looked for in $PREFLIGHT_SLURM_TARBALLS,
# else DEFAULT_TARBALL_DIR (../shared/slurm/src beside the checkout). With
# none of them there (any user's fresh clone) the test is skipped, exit 77
# (ctest's SKIP_RETURN_CODE), saying where it looked; never failed for that.
set -euo pipefail
src=$1 build=$2 dir=${PREFLIGHT_SLURM_TARBALLS:-$3}; shift 3
cxxflags=(-std=c++17 -fsyntax-only -I"$src/slurmapi")
for d in core topo checks stage collective; do cxxflags+=(-I"$src/$d/include"); done
cxxflags+=(
          -I/usr/local/cuda/include)
checked=0
for want in "$@"; do
  tb=$dir/slurm-$want.tar.gz
  [ -f "$tb" ] || { echo "skip: $tb not present"; continue; }
  v=$(basename "$tb" .tar.gz); v=${v#slurm-}
  inc=$build/slurm-headers/$v
  if [ ! -f "$inc/slurm/slurm_version.h" ]; then
    rm -rf "$inc"; mkdir -p "$inc"
    tar -xzf "$tb" -C "$inc" --strip-components=1 --wildcards "slurm-$v/slurm/*.h" "slurm-$v/slurm/*.h.in"
    IFS=. read -r ma mi mc <<<"$v"
    sed -e "s/#undef SLURM_VERSION_NUMBER/#define SLURM_VERSION_NUMBER 0x$(printf '%02x%02x%02x' "$ma" "$((10#$mi))" "$mc")/" \
        -e "s/#undef SLURM_VERSION_MAJOR/#define SLURM_VERSION_MAJOR $ma/" \
        -e "s/#undef SLURM_VERSION_MINOR/#define SLURM_VERSION_MINOR $((10#$mi))/" \
        -e "s/#undef SLURM_VERSION_MICRO/#define SLURM_VERSION_MICRO $mc/" \
        "$inc/slurm/slurm_version.h.in" >"$inc/slurm/slurm_version.h"
  fi
  for f in "$src"/spank_plugin/*.cc "$src"/slurmapi/*.cc; do
    f=${f#"$src/"}
    g++ "${cxxflags[@]}" -I"$inc" "$src/$f" || { echo "FAIL: $f does not compile against Slurm $v's headers"; exit 1; }
  done
  # On 25.05+ the failure mode must be defined, on older releases absent.
  n=$(g++ -std=c++17 -E -dM -I"$inc" -I"$src/slurmapi" -x c++ - <<<'#include "slurm_compat.h"' | grep -c 'PREFLIGHT_HAVE_SPANK_INIT_FAILURE_MODE 1' || true)
  case $v in 2[5-9].*) want=1 ;; *) want=0 ;; esac
  [ "$n" = "$want" ] || { echo "FAIL: Slurm $v: PREFLIGHT_HAVE_SPANK_INIT_FAILURE_MODE should be $want"; exit 1; }
  echo "ok: plugin and slurmapi compile against Slurm $v (init failure mode declared: $want)"
  checked=$((checked + 1))
done
[ $checked -gt 0 ] || {
  echo "SKIP: no Slurm source tarball (slurm-{$(IFS=,; echo "$*")}.tar.gz) in $dir; set PREFLIGHT_SLURM_TARBALLS to a directory holding them"
  exit 77
}
