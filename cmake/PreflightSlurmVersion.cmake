# A SPANK plugin loads only into the Slurm major.minor it was built for:
# SPANK_PLUGIN() stores the headers' SLURM_VERSION_NUMBER and Slurm's loader
# (src/common/plugin.c) refuses another major.minor with "Incompatible Slurm
# plugin ... version". With `required` in plugstack.conf, sbatch and srun
# then fail with "Failed to initialize plugin stack" and slurmd does not
# start. So configure stops when the headers do not match the Slurm installed
# here, before such a plugin is ever built.
#
# In:  SLURM_INCLUDE_DIR, SLURM_ROOT
# Out: PREFLIGHT_SLURM_VERSION (e.g. 22.05.8), PREFLIGHT_SLURM_MAJOR_MINOR (22.05),
#      PREFLIGHT_SLURM_NEXT_MINOR (22.06, for the .deb's Breaks)
option(PREFLIGHT_SLURM_VERSION_CHECK
  "Stop configure when the Slurm headers and the installed Slurm (slurmd/scontrol -V) differ in major.minor" ON)
set(PREFLIGHT_SLURM_VERSION_COMMAND "" CACHE FILEPATH
  "Slurm command whose -V is compared with the headers (default: slurmd, else scontrol, under SLURM_ROOT or on PATH)")

file(STRINGS ${SLURM_INCLUDE_DIR}/slurm/slurm_version.h _pf_line REGEX "^#define SLURM_VERSION_NUMBER")
string(REGEX MATCH "0x[0-9a-fA-F]+" _pf_hex "${_pf_line}")
math(EXPR _pf_num "${_pf_hex}")
math(EXPR _pf_major "(${_pf_num} >> 16) & 255")
math(EXPR _pf_minor "(${_pf_num} >> 8) & 255")
math(EXPR _pf_micro "${_pf_num} & 255")
math(EXPR _pf_next "${_pf_minor} + 1")
function(_pf_two out n)
  if(n LESS 10)
    set(${out} "0${n}" PARENT_SCOPE)
  else()
    set(${out} "${n}" PARENT_SCOPE)
  endif()
endfunction()
_pf_two(_pf_minor2 ${_pf_minor})
_pf_two(_pf_next2 ${_pf_next})
set(PREFLIGHT_SLURM_MAJOR_MINOR "${_pf_major}.${_pf_minor2}")
set(PREFLIGHT_SLURM_NEXT_MINOR "${_pf_major}.${_pf_next2}")
set(PREFLIGHT_SLURM_VERSION "${PREFLIGHT_SLURM_MAJOR_MINOR}.${_pf_micro}")

set(_pf_cmd "${PREFLIGHT_SLURM_VERSION_COMMAND}")
if(NOT _pf_cmd)
  unset(PREFLIGHT_SLURM_FOUND_COMMAND CACHE)
  find_program(PREFLIGHT_SLURM_FOUND_COMMAND NAMES slurmd scontrol HINTS ${SLURM_ROOT}/sbin ${SLURM_ROOT}/bin)
  if(PREFLIGHT_SLURM_FOUND_COMMAND)
    set(_pf_cmd ${PREFLIGHT_SLURM_FOUND_COMMAND})
  endif()
  unset(PREFLIGHT_SLURM_FOUND_COMMAND CACHE)
endif()
if(NOT PREFLIGHT_SLURM_VERSION_CHECK)
  message(STATUS "Slurm version check off: building for Slurm ${PREFLIGHT_SLURM_MAJOR_MINOR} only")
elseif(NOT _pf_cmd)
  message(STATUS "No installed Slurm (slurmd, scontrol) found to compare with: building for Slurm ${PREFLIGHT_SLURM_MAJOR_MINOR} only")
else()
  execute_process(COMMAND ${_pf_cmd} -V OUTPUT_VARIABLE _pf_out ERROR_VARIABLE _pf_err RESULT_VARIABLE _pf_rc
                  TIMEOUT 20 OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX MATCH "([0-9]+)\\.([0-9]+)\\.([0-9]+)" _pf_inst "${_pf_out}")
  if(NOT _pf_rc EQUAL 0 OR NOT _pf_inst)
    message(FATAL_ERROR "preflight: cannot read the installed Slurm's version: `${_pf_cmd} -V` "
      "printed '${_pf_out}${_pf_err}' (exit ${_pf_rc}). Pass -DPREFLIGHT_SLURM_VERSION_COMMAND= "
      "or -DPREFLIGHT_SLURM_VERSION_CHECK=OFF.")
  endif()
  set(_pf_inst_mm "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
  if(NOT _pf_inst_mm STREQUAL PREFLIGHT_SLURM_MAJOR_MINOR)
    message(FATAL_ERROR
      "preflight: Slurm version mismatch: the headers in ${SLURM_INCLUDE_DIR} are Slurm ${PREFLIGHT_SLURM_VERSION}, "
      "but `${_pf_cmd} -V` says ${_pf_inst}. A SPANK plugin loads only into the Slurm major.minor whose headers "
      "built it: Slurm ${_pf_inst_mm} would log \"Incompatible Slurm plugin ... version (${PREFLIGHT_SLURM_VERSION})\", and "
      "with `required` in plugstack.conf every sbatch/srun fails with \"Failed to initialize plugin stack\" and slurmd "
      "does not start. Build against the headers of the Slurm you run (libslurm-dev, slurm-smd-dev, or "
      "-DSLURM_ROOT=<its prefix>); on a package build host without that Slurm pass -DPREFLIGHT_SLURM_VERSION_CHECK=OFF.")
  endif()
  message(STATUS "Slurm ${_pf_inst} installed (${_pf_cmd}): matches the headers (${PREFLIGHT_SLURM_VERSION})")
endif()
