// Everything in preflight that differs between Slurm releases, in one place.
// A build is for one Slurm major.minor (the loader refuses any other, see
// cmake/PreflightSlurmVersion.cmake); this header keeps the sources the same
// from 22.05 to 25.11 and beyond.
#pragma once

extern "C" {
#include <slurm/slurm.h>
#include <slurm/slurm_version.h>
}

#include <cstdint>
#include <string>

// Slurm 25.05 added slurm_spank_init_failure_mode: a plugin may say that its
// failing slurm_spank_init fails the job rather than draining the node.
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
#define PREFLIGHT_HAVE_SPANK_INIT_FAILURE_MODE 1
#else
#define PREFLIGHT_HAVE_SPANK_INIT_FAILURE_MODE 0
#endif

// libslurm exports the state-name functions scontrol prints with (through
// slurm_xlator.h's slurm_ aliases) on every release since 2.x, but slurm.h
// declares none of them. Their signatures have not changed.
extern "C" {
char* slurm_job_state_string(uint32_t state);
char* slurm_node_state_string_complete(uint32_t state);
void slurm_xfree_ptr(void* p);
}

namespace preflight::compat {

// "RUNNING", "COMPLETING", "PENDING", ...: scontrol's JobState= text.
inline const char* JobStateName(uint32_t state) { return slurm_job_state_string(state); }

// Every step of `job`. 25.11 (seen in its slurm.h; 24.11 still has the old
// form) takes a slurm_step_id_t, with its new sluid, instead of
// (update_time, job_id, step_id).
inline int GetJobSteps(uint32_t job, job_step_info_response_msg_t** resp) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  slurm_step_id_t id{};
  id.job_id = job;
  id.step_id = NO_VAL;
  id.step_het_comp = NO_VAL;
  return slurm_get_job_steps(&id, resp, SHOW_ALL);
#else
  return slurm_get_job_steps(0, job, NO_VAL, resp, SHOW_ALL);
#endif
}

// "IDLE+DRAIN", "MIXED", ...: scontrol's State= text.
inline std::string NodeStateName(uint32_t state) {
  char* s = slurm_node_state_string_complete(state);
  std::string out = s ? s : "";
  slurm_xfree_ptr(s);
  return out;
}

}  // namespace preflight::compat
