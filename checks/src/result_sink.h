// What the check bodies of checks/src share (private to checks/src).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "preflight/checks.h"
#include "preflight/report.h"

namespace preflight::checks_internal {

// Results go to the harness as soon as they exist (ProbeEmit), so a later
// hang in the same check loses nothing; outside the harness they are returned.
struct Sink {
  std::vector<CheckResult> out;
  void operator()(CheckResult r) {
    if (!ProbeEmit(r)) out.push_back(std::move(r));
  }
};

inline CheckResult Make(const std::string& check, const std::string& device) {
  CheckResult r;
  r.check = check;
  r.device = device;
  return r;
}

inline CheckResult Skip(CheckResult r, const std::string& why) {
  r.verdict = Verdict::kSkip;
  r.message = "skipped: " + why;
  return r;
}

inline std::string U(unsigned long long v) { return std::to_string(v); }

}  // namespace preflight::checks_internal
