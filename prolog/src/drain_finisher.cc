#include "preflight/drain_finisher.h"

#include <unistd.h>

#include <cstdint>
#include <ctime>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/state_paths.h"
#include "preflight/text.h"

namespace preflight {
namespace {

std::string ClaimPath(const Config& cfg, const std::string& node) {
  return state::NodeFile(cfg, node, state::kDrainFinisher);
}

// A token no other claim shares: this process and the wall clock in ns.
std::string NewToken() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return std::to_string(::getpid()) + "-" +
         std::to_string(static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec);
}

// Another claim is on record. An unreadable or missing record supersedes
// nobody (the state folder wiped meanwhile): the helper goes on.
bool Superseded(const Config& cfg, const std::string& node, const std::string& token) {
  if (token.empty()) return false;
  auto held = ReadWholeFile(ClaimPath(cfg, node));
  if (!held) return false;
  std::string h = *held;
  while (!h.empty() && (h.back() == '\n' || h.back() == ' ')) h.pop_back();
  return h != token;
}

}  // namespace

bool IsSlurmFailureReason(const std::string& reason) {
  return reason == "Prolog error" || reason == "Epilog error";
}

FinishAct DecideFinish(const NodeState* node, bool superseded, bool bound_passed) {
  if (superseded) return FinishAct::kSuperseded;
  if (node && node->drained()) return IsSlurmFailureReason(node->reason) ? FinishAct::kSetReason : FinishAct::kLeave;
  return bound_passed ? FinishAct::kDrain : FinishAct::kWait;
}

Expected<std::string> ClaimDrainFinish(const Config& cfg, const std::string& node) {
  Status s = MakeDirs(state::NodesDir(cfg));
  std::string token = NewToken();
  if (s.ok()) s = WriteFileAtomic(ClaimPath(cfg, node), token + "\n", 0644);
  if (!s.ok()) return s;
  return token;
}

Status FinishDrain(const Config& cfg, const std::string& node, const std::string& reason, std::string token,
                   unsigned wait_ms, std::string* what) {
  std::string said;
  if (!what) what = &said;
  if (token.empty()) {  // started by hand: this helper is the newest
    auto claim = ClaimDrainFinish(cfg, node);
    if (claim) token = *claim;
  }
  const double deadline = MonotonicSeconds() + wait_ms / 1000.0;
  for (;;) {
    bool bound_passed = MonotonicSeconds() >= deadline;
    bool superseded = Superseded(cfg, node, token);
    auto st = superseded ? Expected<NodeState>(Status::Unavailable("not asked")) : QueryNode(cfg, node);
    switch (DecideFinish(st ? &*st : nullptr, superseded, bound_passed)) {
      case FinishAct::kWait:
        ::usleep(100 * 1000);
        continue;
      case FinishAct::kSetReason:
        *what = "reason set on " + node + " (was \"" + st->reason + "\")";
        return SetNodeReason(cfg, node, reason);
      case FinishAct::kLeave:
        *what = node + " is drained for another reason, kept: " + PrintableText(st->reason);
        return Status::Ok();
      case FinishAct::kSuperseded:
        *what = "a newer failure on " + node + " sets its reason; this one is dropped";
        return Status::Ok();
      case FinishAct::kDrain:
        *what = "Slurm did not drain " + node + " within " + std::to_string(wait_ms / 1000) + " s; drained";
        return DrainNode(cfg, node, reason);
    }
  }
}

}  // namespace preflight
