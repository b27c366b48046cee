// What preflight needs to know of slurm.conf itself (read as text: it is an
// admin's file, not a user's): PrologFlags, because RunInJob (Slurm
// 24.05+) changes how a failed prolog may name its drain reason; and any
// single key's value (PlugStackConfig, for plugstack.h).
#pragma once

#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/job.h"
#include "preflight/status.h"

namespace preflight {

// slurm_conf from the site config, else $SLURM_CONF, else /etc/slurm/slurm.conf.
std::string SlurmConfPath(const Config& cfg, const EnvMap& env);

// The PrologFlags of slurm.conf's text, lower-cased ("alloc", "contain",
// "runinjob", ...); the last PrologFlags= line wins, as in Slurm. Include
// lines are not followed.
std::vector<std::string> ParsePrologFlags(const std::string& slurm_conf_text);
// The value of KEY=VALUE in slurm.conf's text (key case-insensitive, the
// last one wins, surrounding double quotes dropped); "" when absent. Include
// lines are not followed.
std::string SlurmConfValue(const std::string& slurm_conf_text, const std::string& key);
Expected<std::vector<std::string>> ReadPrologFlags(const std::string& path);

// slurmctld requeues a batch job whose script its batch node does not
// report when that node registers (every ~200 s, or at a reconfigure) more
// than BatchStartTimeout + min(MessageTimeout, 10) seconds after the job
// started (job_mgr.c, _purge_missing_jobs: "Batch JobId=N missing from
// batch node ... Requeuing job"). With DeferBatch the script does not run
// while any node's prolog does, so a prolog that stages for longer than
// that window may get its job requeued at random. The window in seconds
// (defaults 10 and 10), from slurm.conf's text.
long BatchStartWindow(const std::string& slurm_conf_text);

// How a failed prolog names its drain reason.
//  kDetached: a detached helper waits until Slurm has drained the node, then
//             replaces "Prolog error" (the prolog never blocks on slurmctld).
//  kNow:      PrologFlags=RunInJob runs the prolog inside the job's extern
//             step, and a detached helper is killed with the job; the prolog
//             drains the node itself before it exits (bounded by
//             probe_timeout). Slurm keeps an existing drain reason when it
//             then drains for "Prolog error" (_drain_node returns early for a
//             node already DRAIN).
enum class DrainHow { kDetached, kNow };
DrainHow DrainHowFor(const std::vector<std::string>& prolog_flags);

}  // namespace preflight
