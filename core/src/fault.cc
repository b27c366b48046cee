#include "preflight/fault.h"

namespace preflight {

FaultAction ActionFor(FaultOwner owner) {
  FaultAction a;
  switch (owner) {
    case FaultOwner::kNone: break;
    case FaultOwner::kNode: a.drain = true; break;
    case FaultOwner::kConfig: a.drain = true; break;
    case FaultOwner::kUser: a.fail_job = true; break;
  }
  return a;
}

const char* FaultOwnerName(FaultOwner owner) {
  switch (owner) {
    case FaultOwner::kNone: return "none";
    case FaultOwner::kNode: return "node";
    case FaultOwner::kUser: return "user";
    case FaultOwner::kConfig: return "config";
  }
  return "none";
}

std::optional<FaultOwner> FaultOwnerFromName(const std::string& name) {
  for (FaultOwner o : {FaultOwner::kNone, FaultOwner::kNode, FaultOwner::kUser, FaultOwner::kConfig})
    if (name == FaultOwnerName(o)) return o;
  return std::nullopt;
}

}  // namespace preflight
