#include "preflight/ckpt_retention.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "ckpt_io.h"
#include "preflight/ckpt_commit.h"
#include "preflight/ckpt_persist.h"
#include "preflight/ckpt_tier.h"
#include "preflight/fileutil.h"

namespace preflight {
namespace {

using ckpt_internal::Fd;

using ckpt_internal::Discard;

}  // namespace

std::vector<std::string> PlanTierRetention(const std::vector<CkptCandidate>& shared, uint64_t keep) {
  std::vector<const CkptCandidate*> ok;
  for (const auto& c : shared)
    if (c.ok && c.where == CkptWhere::kShared) ok.push_back(&c);
  std::sort(ok.begin(), ok.end(), [](const CkptCandidate* a, const CkptCandidate* b) {
    if (a->time != b->time) return a->time < b->time;
    if (a->name.size() != b->name.size()) return a->name.size() < b->name.size();
    return a->name < b->name;
  });
  std::vector<std::string> out;
  if (keep == 0 || ok.size() <= keep) return out;
  for (size_t i = 0; i + keep < ok.size(); ++i) out.push_back(ok[i]->name);
  return out;
}

Expected<CkptTierGcResult> CkptTierGc(const std::string& tier, const CkptTierGcOptions& o) {
  CkptTierGcResult r;
  auto entries = ListCkptTier(tier);
  if (!entries) return entries.status();
  auto tfd = ckpt_internal::OpenDirAt(AT_FDCWD, tier, "shared tier " + tier);
  if (!tfd) return tfd.status();
  CkptCommitOptions co;
  co.verify = o.verify;
  for (const auto& e : *entries) {
    if (e.kind == CkptTierKind::kTrash) {
      if (Status s = RemoveTreeAt(tfd->get(), e.entry, tier + "/" + e.entry); !s.ok())
        r.notes.push_back(s.message());
    } else if (e.kind == CkptTierKind::kUnmarked) {
      auto c = RepairCkpt(tier, e.name, co);
      if (c) r.repaired.push_back(e.name);
      else r.notes.push_back(e.name + ": left alone: " + c.status().message());
    } else if (e.kind == CkptTierKind::kPartial) {
      auto c = CommitCkpt(tier, e.run, e.name, co);
      if (c && c->state == CkptCommitState::kDurable) {
        r.committed.push_back(e.entry);
        continue;
      }
      if (auto k = ckpt_internal::KindAt(tfd->get(), e.entry, e.entry); k && *k == 0) continue;  // gone meanwhile
      if (o.run_dead && o.run_dead(e.run)) {
        if (Status s = Discard(tfd->get(), tier, e.entry); !s.ok()) r.notes.push_back(s.message());
        else r.stale.push_back(e.entry);
      } else {
        r.notes.push_back(e.entry + ": left alone: " +
                          (c ? std::string("its run may still be copying") : c.status().message()));
      }
    }
  }
  if (o.keep == 0) return r;
  auto shared = SharedCkptCandidates(tier, o.verify);
  if (!shared) return shared.status();
  for (const auto& c : *shared)
    if (!c.ok && c.path == tier + "/" + c.name) r.notes.push_back(c.name + ": kept, not counted: " + c.why);
  for (const auto& name : PlanTierRetention(*shared, o.keep)) {
    if (Status s = Discard(tfd->get(), tier, name); !s.ok()) return s;
    r.removed.push_back(name);
  }
  return r;
}

std::vector<std::string> PlanLocalRetention(const std::vector<LocalCkpt>& local, const std::set<std::string>& durable,
                                            uint64_t keep) {
  std::vector<std::string> out;
  uint64_t complete_seen = 0;
  for (auto it = local.rbegin(); it != local.rend(); ++it) {
    if (!it->complete) continue;
    if (++complete_seen <= keep) continue;
    if (durable.count(it->name)) out.push_back(it->name);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

Expected<std::vector<std::string>> CkptLocalGc(const std::string& local_dir, const CkptLocalGcOptions& o) {
  std::string lock_path = local_dir + "/" + kCkptPersistLock;
  int lfd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lfd < 0) return Status::FromErrno(errno, "lock " + lock_path);
  Fd lock(lfd);
  if (::flock(lfd, LOCK_EX | LOCK_NB) != 0)
    return errno == EWOULDBLOCK ? Status::Unavailable("a persist of this node holds " + lock_path)
                                : Status::FromErrno(errno, "lock " + lock_path);
  auto local = LocalCkpts(local_dir, o.convention);
  if (!local) return local.status();
  std::set<std::string> durable;
  uint64_t complete_seen = 0;
  for (auto it = local->rbegin(); it != local->rend(); ++it) {
    if (!it->complete || ++complete_seen <= o.keep) continue;  // kept anyway: no need to ask the tier
    if (LocalPartDurable(local_dir, it->name, o.tier, o.node, o.convention, o.verify).ok()) durable.insert(it->name);
  }
  auto dfd = ckpt_internal::OpenDirAt(AT_FDCWD, local_dir, local_dir);
  if (!dfd) return dfd.status();
  auto listing = ListCkptDir(local_dir, o.convention);
  if (!listing) return listing.status();
  for (const auto& e : listing->top)  // what an earlier removal left
    if (e.kind == CkptEntryKind::kDir && e.name.rfind(kCkptTrashPrefix, 0) == 0)
      if (Status s = RemoveTreeAt(dfd->get(), e.name, local_dir + "/" + e.name); !s.ok()) return s;
  std::vector<std::string> removed;
  for (const auto& name : PlanLocalRetention(*local, durable, o.keep)) {
    if (Status s = Discard(dfd->get(), local_dir, name); !s.ok()) return s;
    removed.push_back(local_dir + "/" + name);
  }
  return removed;
}

}  // namespace preflight
