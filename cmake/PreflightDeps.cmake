# Every external dependency becomes an imported target here; a missing one
# stops configure with the Debian package to install.
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: apt-get install pkg-config")
endif()

function(preflight_require_pc target module package)
  pkg_check_modules(${target} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${target}_FOUND)
    message(FATAL_ERROR "${module} (pkg-config ${module}) not found: apt-get install ${package}")
  endif()
  add_library(preflight::${module} ALIAS PkgConfig::${target})
endfunction()

preflight_require_pc(HWLOC hwloc libhwloc-dev)
preflight_require_pc(PMIX pmix libpmix-dev)
# Peer fan-out of --stage (stage_peer.cc) authenticates prologs with munge.
preflight_require_pc(MUNGE munge libmunge-dev)
# Digests of --stage (cache keys, manifests, peer transfers): XXH3.
preflight_require_pc(XXHASH libxxhash libxxhash-dev)

# Slurm: Debian's 22.05 ships no slurm.pc, so try pkg-config, then SLURM_ROOT, then /usr.
set(SLURM_ROOT "" CACHE PATH "Prefix holding include/slurm/spank.h")
pkg_check_modules(SLURM_PC QUIET slurm)
find_path(SLURM_INCLUDE_DIR slurm/spank.h
  HINTS ${SLURM_ROOT}/include ${SLURM_PC_INCLUDE_DIRS})
if(NOT SLURM_INCLUDE_DIR)
  message(FATAL_ERROR "Slurm headers (slurm/spank.h) not found: apt-get install libslurm-dev, or pass -DSLURM_ROOT=")
endif()
add_library(preflight::slurm INTERFACE IMPORTED GLOBAL)
target_include_directories(preflight::slurm INTERFACE ${SLURM_INCLUDE_DIR})
file(STRINGS ${SLURM_INCLUDE_DIR}/slurm/slurm_version.h _slurm_ver REGEX "#define SLURM_VERSION_NUMBER")
message(STATUS "Slurm headers: ${SLURM_INCLUDE_DIR} (${_slurm_ver})")
# libslurm, for slurmapi/ only (the `preflight slurm` records).
find_library(SLURM_LIBRARY NAMES slurm HINTS ${SLURM_ROOT}/lib ${SLURM_ROOT}/lib64 ${SLURM_PC_LIBRARY_DIRS})
if(NOT SLURM_LIBRARY)
  message(FATAL_ERROR "libslurm not found: apt-get install libslurm-dev, or pass -DSLURM_ROOT=")
endif()
add_library(preflight::libslurm UNKNOWN IMPORTED GLOBAL)
set_target_properties(preflight::libslurm PROPERTIES IMPORTED_LOCATION ${SLURM_LIBRARY})
include(PreflightSlurmVersion)

# JSON reader for what preflight's own tools print (header-only).
find_package(nlohmann_json 3.2 QUIET)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR "nlohmann_json not found: apt-get install nlohmann-json3-dev")
endif()

find_package(Boost 1.67 COMPONENTS program_options)
if(NOT Boost_PROGRAM_OPTIONS_FOUND)
  message(FATAL_ERROR "Boost.Program_options not found: apt-get install libboost-program-options-dev")
endif()

# CUDA/NCCL: headers only at build time; the libraries are dlopen'ed at run time.
set(CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit prefix (headers for cuda_runtime.h and nccl.h)")
find_path(CUDA_RUNTIME_INCLUDE_DIR cuda_runtime_api.h HINTS ${CUDA_ROOT}/include NO_DEFAULT_PATH)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDA_ROOT}/include NO_DEFAULT_PATH)
if(NOT CUDA_RUNTIME_INCLUDE_DIR OR NOT NCCL_INCLUDE_DIR)
  message(FATAL_ERROR "CUDA/NCCL headers not found under ${CUDA_ROOT}: install the CUDA toolkit and NCCL, or pass -DCUDA_ROOT=")
endif()
add_library(preflight::cuda_headers INTERFACE IMPORTED GLOBAL)
target_include_directories(preflight::cuda_headers SYSTEM INTERFACE ${CUDA_RUNTIME_INCLUDE_DIR} ${NCCL_INCLUDE_DIR})

if(PREFLIGHT_BUILD_TESTS)
  find_package(GTest)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "GoogleTest not found: apt-get install libgtest-dev")
  endif()
endif()

# Slurm's plugin directory, relative to the install prefix so --prefix and
# DESTDIR work: Debian's layout (lib/<triplet>/slurm-wlm) when this machine's
# Slurm uses it, upstream's (lib/slurm) otherwise. -DPREFLIGHT_SLURM_PLUGIN_DIR= wins.
if(NOT PREFLIGHT_SLURM_PLUGIN_DIR)
  if(NOT SLURM_ROOT AND CMAKE_LIBRARY_ARCHITECTURE AND EXISTS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm-wlm)
    set(PREFLIGHT_SLURM_PLUGIN_DIR lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm-wlm)
  else()
    set(PREFLIGHT_SLURM_PLUGIN_DIR ${CMAKE_INSTALL_LIBDIR}/slurm)
  endif()
endif()
message(STATUS "SPANK plugin install dir: ${PREFLIGHT_SLURM_PLUGIN_DIR}")

find_package(Threads REQUIRED)
