#include "preflight/run_decide.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "preflight/fileutil.h"
#include "preflight/regex.h"

namespace preflight {

std::string CountersPath(const std::string& checkpoint_dir) { return checkpoint_dir + "/.preflight-run.state"; }

RunCounters LoadCounters(const std::string& path, const std::string& job_id, uint64_t slurm_restarts) {
  RunCounters c;
  if (path.empty()) {
    c.preempt_requeues = c.failure_restarts = slurm_restarts;
    return c;
  }
  std::ifstream in(path);
  std::string line, job;
  RunCounters got;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    auto n = ParseCount(v);
    if (k == "job") job = v;
    else if (k == "preempt_requeues" && n) got.preempt_requeues = *n;
    else if (k == "failure_restarts" && n) got.failure_restarts = *n;
  }
  // Counters of another job (the directory reused by a new submission) start over.
  if (!job.empty() && job == job_id) c = got;
  return c;
}

Status SaveCounters(const std::string& path, const std::string& job_id, const RunCounters& c) {
  return WriteFileAtomic(path, "job=" + job_id + "\npreempt_requeues=" + std::to_string(c.preempt_requeues) +
                                   "\nfailure_restarts=" + std::to_string(c.failure_restarts) + "\n");
}

Expected<std::string> ClassifyFailure(const std::vector<std::string>& tail, const std::vector<RetryClass>& classes,
                                      std::string* matched) {
  std::vector<Regex> res;
  for (const auto& c : classes) {
    auto re = Regex::Compile(c.pattern);
    if (!re) return re.status().Context("retry class " + c.name);
    res.push_back(*re);
  }
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    for (size_t i = 0; i < classes.size(); ++i) {
      if (res[i].Search(*it)) {
        if (matched) *matched = *it;
        return classes[i].name;
      }
    }
  }
  return std::string();
}

std::vector<std::string> CondemnedNodes(const std::string& matched_line, const std::vector<std::string>& job_nodes,
                                        const std::vector<std::string>& drained_by_preflight,
                                        const std::string& self) {
  std::set<std::string> named;
  std::string tok;
  auto flush = [&] {
    std::string t = tok.substr(0, tok.find('.'));  // n2.cluster.local -> n2
    for (const auto& n : job_nodes)
      if (tok == n || t == n) named.insert(n);
    tok.clear();
  };
  for (char c : matched_line) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') tok += c;
    else flush();
  }
  flush();
  std::vector<std::string> out;
  for (const auto& n : job_nodes)
    if (named.count(n) || std::find(drained_by_preflight.begin(), drained_by_preflight.end(), n) !=
                              drained_by_preflight.end())
      out.push_back(n);
  if (out.empty() && !self.empty()) out.push_back(self);
  return out;
}

RunDecision Decide(const SuperviseResult& r, const RunPolicy& p, const RunCounters& c, bool in_slurm) {
  RunDecision d;
  const int code = r.exit.exit_code;
  auto gate = [&](uint64_t done, uint64_t max, const std::string& what) {
    if (!in_slurm) { d.reason = what + ", but not in a Slurm job: nothing to requeue"; return; }
    if (!p.requeue) { d.reason = what + ", but requeueing is off (--requeue / run_requeue)"; return; }
    if (max == 0) { d.reason = what + ", but requeues for this are off (max 0)"; return; }
    if (done >= max) {
      d.reason = what + ", but already requeued " + std::to_string(done) + " time(s) for this (max " +
                 std::to_string(max) + ")";
      return;
    }
    d.action = RunAction::kRequeue;
    d.reason = what + ": requeue " + std::to_string(done + 1) + " of " + std::to_string(max);
  };
  if (r.preempted) {
    d.kind = "preemption";
    gate(c.preempt_requeues, p.max_requeues,
         "preempted (" + SignalName(r.preempt_signal) + "), command exited " + std::to_string(code) +
             (r.grace_expired ? " after the grace period ran out" : " after the checkpoint request"));
    return d;
  }
  if (r.killed_for_alert && !r.alerts.empty()) {
    const Alert& a = r.alerts.front();
    d.kind = std::string("stall:") + AlertKindName(a.kind);
    gate(c.failure_restarts, p.max_failure_restarts, "stopped the command: " + a.detail);
    return d;
  }
  if (code == 0) {
    d.kind = "done";
    d.reason = "command exited 0";
    return d;
  }
  std::string line;
  auto cls = ClassifyFailure(r.tail, p.retry_classes, &line);
  if (!cls) {
    d.kind = "user-error";
    d.reason = "exit " + std::to_string(code) + ": " + cls.status().message();
    return d;
  }
  if (cls->empty()) {
    d.kind = "user-error";
    d.reason = "command exited " + std::to_string(code) + "; its output matches no retryable failure class: not retried";
    return d;
  }
  d.kind = "failure:" + *cls;
  d.matched_line = line;
  d.exclude_nodes = true;
  gate(c.failure_restarts, p.max_failure_restarts,
       "command exited " + std::to_string(code) + " with a retryable " + *cls + " failure");
  return d;
}

}  // namespace preflight
