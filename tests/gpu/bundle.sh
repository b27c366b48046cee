#!/bin/bash
# Builds what the GPU machine runs and puts it, with every shared library it
# loads that a bare GPU image lacks, into one folder that travels with the
# working tree (tests/gpu/README.md): nothing is compiled on the GPU machine.
#
#   tests/gpu/bundle.sh [--no-build] [BUILD_DIR [BUNDLE_DIR]]
#       default BUILD_DIR: build (configured by scripts/build), BUNDLE_DIR: gpu-bundle
#   tests/gpu/bundle.sh --check BUNDLE_DIR      only the check below
#
# Contents:
#   bin/preflight-nccl        the collective check (NCCL backend dlopen'ed):
#                             target preflight-nccl-local, the same main and
#                             libraries without libpmix (--intra-node only;
#                             Debian's libevent under libpmix needs glibc 2.36)
#   bin/preflight             `preflight topo` (the live hwloc probe)
#   bin/gpu-check             node checks: GPU/NVML, Xid, bandwidth tier, DCGM
#   bin/nccl-ref-allreduce    the plain NCCL loop (CUDA/NCCL dlopen'ed)
#   lib/*.so.*                the libraries those load that are not glibc,
#                             libstdc++ or libgcc (hwloc,
#                             Boost.Program_options, munge, xxhash, libslurm,
#                             libudev), found with ldd, copied from this
#                             machine's Debian packages
#   lib/fake/libnvidia-ml.so.1  the fake NVML (tests/fakes), for the hung-call check
#   lib/fake/libfake_cuda_gemm.so  the fake CUDA runtime + cuBLAS (tests/fakes),
#                             for the script selftest's GEMM soak on a CPU
#   MANIFEST                  every file: size, sha256, where it came from;
#                             the glibc/libstdc++ symbol versions it needs
# Binaries are stripped of debug info and of their build-tree RUNPATH; the
# scripts run them with LD_LIBRARY_PATH=BUNDLE/lib. No hwloc plugins are
# carried: hwloc's linux component finds PCI devices from sysfs itself
# (HWLOC_PLUGINS_PATH points at lib/, which holds none).
#
# The check (always run last): with only lib/ on the library path, ldd of
# every file in bin/ and lib/ resolves nothing outside the bundle but glibc,
# libstdc++ and libgcc (and the loader, linux-vdso); nothing "not found";
# no file needs a glibc newer than 2.35; the whole bundle at most 48 MiB. Exit 0 when it holds.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
max_bytes=$((48 * 1024 * 1024))
# glibc (libc, libm, libpthread, libdl, librt, libresolv, libutil, libanl,
# libmvec, the loader), libstdc++, libgcc: on every x86-64 GPU image.
system_re='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libmvec|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so'

check() {
  local b=$1 fails=0 f line lib path n=0
  [ -f "$b/MANIFEST" ] || { echo "bundle check: no $b/MANIFEST"; return 1; }
  echo "bundle check: ldd with LD_LIBRARY_PATH=$b/lib only"
  for f in "$b"/bin/* "$b"/lib/*.so* "$b"/lib/fake/*.so*; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    local out
    out=$(LD_LIBRARY_PATH=$b/lib ldd "$f" 2>&1) || { echo "FAIL ${f#"$b"/}: ldd: $out"; fails=$((fails + 1)); continue; }
    local outside=()
    while read -r line; do
      case $line in
        *"not found"*) outside+=("$line") ;;
        *"=>"*)
          lib=${line%% =>*}; path=${line#*=> }; path=${path%% (*}
          if [[ $path == "$b"/lib/* ]]; then :
          elif [[ $lib =~ $system_re ]]; then :
          else outside+=("$lib => $path"); fi ;;
      esac
    done <<<"$out"
    if [ ${#outside[@]} -gt 0 ]; then
      echo "FAIL ${f#"$b"/}: resolves outside the bundle: ${outside[*]}"; fails=$((fails + 1))
    else
      echo "ok   ${f#"$b"/}: $(grep -c '=>' <<<"$out") libraries, $(grep -c "=> $b/lib/" <<<"$out" || true) from the bundle, the rest glibc/libstdc++/libgcc"
    fi
  done
  local size
  size=$(du -sb "$b" | cut -f1)
  echo "bundle: $n ELF files, $(find "$b" -type f | wc -l) files in all, $size bytes ($((size / 1024 / 1024)) MiB; limit 48 MiB)"
  [ "$size" -le $max_bytes ] || { echo "FAIL: bundle over 48 MiB"; fails=$((fails + 1)); }
  # The oldest glibc of a CUDA 13 image with PyTorch here is Ubuntu 22.04's 2.35.
  local glibc
  glibc=$(awk '/^needs / {print $2}' "$b/MANIFEST")
  if [ "$(printf '%s\nGLIBC_2.35\n' "$glibc" | sort -V | tail -1)" != GLIBC_2.35 ]; then
    echo "FAIL: the bundle needs $glibc, newer than Ubuntu 22.04's GLIBC_2.35 (objdump -T finds which file)"; fails=$((fails + 1))
  else
    echo "ok   needs $glibc (at most GLIBC_2.35, Ubuntu 22.04's)"
  fi
  for f in bin/preflight-nccl bin/preflight bin/gpu-check bin/nccl-ref-allreduce lib/fake/libnvidia-ml.so.1 \
           lib/fake/libfake_cuda_gemm.so; do
    [ -f "$b/$f" ] || { echo "FAIL: $f missing"; fails=$((fails + 1)); }
  done
  [ $fails = 0 ] && echo "BUNDLE: OK" || echo "BUNDLE: FAILED ($fails)"
  [ $fails = 0 ]
}

if [ "${1:-}" = --check ]; then check "$(realpath "${2:?usage: bundle.sh --check BUNDLE_DIR}")"; exit; fi
build_first=1
[ "${1:-}" = --no-build ] && { build_first=0; shift; }
build=$(realpath -m "${1:-$src/build}")
bundle=$(realpath -m "${2:-$src/gpu-bundle}")
declare -A bins=([preflight-nccl]=collective/preflight-nccl-local [preflight]=admin/preflight
                 [gpu-check]=tests/gpu/gpu-check [nccl-ref-allreduce]=tests/gpu/nccl-ref-allreduce)
fake=tests/fakes/libnvidia-ml.so.1
fake_gemm=tests/fakes/libfake_cuda_gemm.so
if [ $build_first = 1 ]; then
  [ -f "$build/CMakeCache.txt" ] || PREFLIGHT_BUILD_DIR=$build "$src/scripts/build" >/dev/null
  cmake --build "$build" -j2 --target preflight-nccl-local preflight gpu-check nccl-ref-allreduce fake_nvml fake_cuda_gemm >/dev/null
fi
for rel in "${bins[@]}" $fake $fake_gemm; do
  [ -x "$build/$rel" ] || { echo "bundle.sh: $build/$rel not built (cmake --build $build)"; exit 1; }
done

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/fake"
declare -A origin=()
for name in "${!bins[@]}"; do
  strip --strip-debug -o "$bundle/bin/$name" "$build/${bins[$name]}"
  origin[bin/$name]="build: ${bins[$name]}"
done
cp "$build/$fake" "$bundle/lib/fake/"
origin[lib/fake/libnvidia-ml.so.1]="build: $fake (tests/fakes/fake_nvml.c)"
cp "$build/$fake_gemm" "$bundle/lib/fake/"
origin[lib/fake/libfake_cuda_gemm.so]="build: $fake_gemm (tests/fakes/fake_cuda_gemm.c)"
# The build tree's RUNPATH (e.g. PMIx's private lib dir) would reach outside the bundle.
echo 'file(RPATH_REMOVE FILE "${F}")' >"$bundle/rpath.cmake"
for f in "$bundle"/bin/*; do cmake -DF="$f" -P "$bundle/rpath.cmake"; done
rm "$bundle/rpath.cmake"

# Every library the binaries load (ldd lists the whole closure), except the
# system's, copied under its soname. ldd runs on the build tree's binaries,
# whose RUNPATH still finds a library outside the system's dirs (a Slurm
# built from source under SLURM_ROOT).
for f in "${bins[@]/#/$build/}" "$build/$fake" "$build/$fake_gemm"; do
  while read -r lib path; do
    [[ $lib =~ $system_re ]] && continue
    [ -e "$bundle/lib/$lib" ] && continue
    cp -L "$path" "$bundle/lib/$lib"
    real=$(readlink -f "$path")
    pkg=$(dpkg -S "$real" 2>/dev/null | head -1 | cut -d: -f1,2 || true)
    [ -n "$pkg" ] || pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1,2 || true)
    origin[lib/$lib]="$real${pkg:+ (Debian package ${pkg%%:*} $(dpkg-query -W -f='${Version}' "${pkg%%:*}" 2>/dev/null || true))}"
  done < <(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done

needs() {  # the newest symbol version of a kind that any file needs
  find "$bundle" -type f -name '*' ! -name MANIFEST -exec objdump -T {} + 2>/dev/null | grep -oE "\\b$1_[0-9.]+\\b" | sort -uV | tail -1
}
{
  echo "# preflight GPU bundle (tests/gpu/bundle.sh); run it with tests/gpu/run_all.sh (tests/gpu/README.md)"
  echo "commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$src" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME") $(uname -m), $(getconf GNU_LIBC_VERSION)"
  echo "needs $(needs GLIBC) $(needs GLIBCXX) (glibc and libstdc++ of the GPU machine at least these)"
  echo "headers CUDA $(awk '/#define CUDART_VERSION/ {print $3}' /usr/local/cuda/include/cuda_runtime_api.h 2>/dev/null)," \
       "NCCL $(awk '/#define NCCL_(MAJOR|MINOR|PATCH) / {printf "%s%s", sep, $3; sep="."}' /usr/local/cuda/include/nccl.h 2>/dev/null)"
  echo "# file  bytes  sha256  from"
  (cd "$bundle" && find bin lib -type f | sort) | while read -r f; do
    echo "$f  $(stat -c %s "$bundle/$f")  $(sha256sum "$bundle/$f" | cut -c1-16)  ${origin[$f]:-?}"
  done
} >"$bundle/MANIFEST"
cat "$bundle/MANIFEST"
check "$bundle"
