#include "preflight/job_liveness.h"

#include <algorithm>

namespace preflight {

JobWhere ClassifyJob(const std::string& state, const std::vector<std::string>& nodes, const std::string& node) {
  // slurm_job_state_string(): a flag (COMPLETING, CONFIGURING, REQUEUED...)
  // is named before the base state, so a job still completing is not ended.
  static const char* const kEnded[] = {"COMPLETED", "CANCELLED", "FAILED",   "TIMEOUT",      "NODE_FAIL",
                                       "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"};
  for (const char* e : kEnded)
    if (state == e) return JobWhere::kGone;
  if (state == "PENDING") return JobWhere::kElsewhere;
  if (nodes.empty() || std::find(nodes.begin(), nodes.end(), node) != nodes.end()) return JobWhere::kHere;
  return JobWhere::kElsewhere;
}

void AddAnswer(SlurmJobs* s, const std::string& job, JobWhere where) {
  s->asked.insert(job);
  if (where != JobWhere::kGone) s->alive.insert(job);
  if (where == JobWhere::kHere) s->on_node.insert(job);
}

bool MayReleaseStage(const SlurmJobs& s, const std::string& job) {
  return s.answered && s.asked.count(job) && !s.on_node.count(job);
}

bool MayRemoveRecords(const SlurmJobs& s, const std::string& job) {
  return s.answered && s.asked.count(job) && !s.alive.count(job) && !s.on_node.count(job);
}

std::string KeptBecause(const SlurmJobs& s, const std::string& job, bool records) {
  if (records ? MayRemoveRecords(s, job) : MayReleaseStage(s, job)) return "";
  if (!s.answered) return "slurmctld could not be asked (" + s.error + ")";
  if (!s.asked.count(job)) return "slurmctld not asked about it this time";
  if (s.on_node.count(job)) return "slurmctld lists it as running on this node";
  return "slurmctld lists it as not ended";
}

}  // namespace preflight
