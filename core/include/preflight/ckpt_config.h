// Checkpoint persistence's site vocabulary (ckpt/, preflight-run's
// --persist-to, the epilog's finishing copy; config keys ckpt_*): its value
// types and the parsers config.cc's key table uses for them.
#pragma once

#include <cstdint>
#include <string>

#include "preflight/status.h"

namespace preflight {

// The I/O priority of a persist (ioprio_set(2)): idle (the idle class: only
// when the disk is otherwise unused), low (best-effort, level 7), normal
// (left as it is).
enum class CkptIoClass { kIdle, kLow, kNormal };
const char* CkptIoClassName(CkptIoClass c);
Expected<CkptIoClass> ParseCkptIoClass(const std::string& s);

struct CkptConfig {
  // Node-local folder under which the prolog makes each job's checkpoint
  // folder <dir>/<job> (the job's user's, 0700; the tasks see it as
  // $PREFLIGHT_CKPT_LOCAL) and the epilog persists and frees it; %n is the
  // node's name. Empty: none.
  std::string dir;
  // The shared tier preflight-run persists to when --persist-to is not
  // given; %u is the job user's name. Empty: no default.
  std::string persist_to;
  // The epilog's finishing copy stops after this long (keep it well under
  // slurm.conf's EpilogTimeout); what did not fit is named, the node stays
  // in service.
  uint32_t epilog_budget_ms = 120000;
  // How often preflight-run's per-node agent looks for a new complete checkpoint.
  uint32_t interval_ms = 10000;
  CkptIoClass io_class = CkptIoClass::kLow;
  uint64_t rate_cap = 0;    // bytes per second per node; 0: none
  uint64_t keep_local = 1;  // durable checkpoints kept on local disk for a fast resume
};

// The job's local checkpoint folder on this node, <dir>/<job> (the
// prolog's, the plugin's $PREFLIGHT_CKPT_LOCAL, the epilog's; see
// prolog's node_ckpt.h); "" when ckpt_dir is unset or there is no job.
inline std::string CkptJobDir(const CkptConfig& c, const std::string& job_id) {
  if (c.dir.empty() || job_id.empty()) return "";
  return c.dir + "/" + job_id;
}

}  // namespace preflight
