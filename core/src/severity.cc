#include "preflight/severity.h"

namespace preflight {

int ApplySeverityPolicy(const std::map<std::string, CheckMode>& modes, std::vector<CheckResult>& results) {
  int changed = 0;
  for (auto& r : results) {
    // The job's own fault never drains the node.
    if (r.owner == FaultOwner::kUser && r.verdict == Verdict::kFail) {
      r.verdict = Verdict::kWarn;
      ++changed;
    }
    if (modes.empty()) continue;
    std::string key;
    CheckMode m = ModeFor(modes, r.check, &key);
    if (m == CheckMode::kWarn && r.verdict == Verdict::kFail) {
      r.verdict = Verdict::kWarn;
      r.message += " [warn only: " + key + " = warn]";
      ++changed;
    } else if (m == CheckMode::kOff && r.verdict != Verdict::kSkip) {
      // Kept, so the result file shows what was silenced and by which key.
      std::string was = r.message;
      r.verdict = Verdict::kSkip;
      r.message = "skipped: off by " + key + (was.empty() ? "" : " (found: " + was + ")");
      ++changed;
    }
  }
  return changed;
}

}  // namespace preflight
