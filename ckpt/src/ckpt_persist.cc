#include "preflight/ckpt_persist.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <unordered_map>

#include "ckpt_copy.h"
#include "ckpt_io.h"
#include "ckpt_walk.h"
#include "preflight/ckpt_tier.h"
#include "preflight/clock.h"

namespace preflight {
namespace {

using ckpt_internal::Fd;

Status Validate(const CkptPersistRequest& r, std::vector<std::string>* nodes) {
  if (r.local_dir.empty() || r.tier.empty()) return Status::InvalidArgument("persist: local dir and tier are required");
  if (Status s = ValidCkptName(r.name); !s.ok()) return s;
  if (Status s = ValidCkptRun(r.run); !s.ok()) return s;
  if (Status s = ValidCkptNode(r.node); !s.ok()) return s;
  *nodes = r.nodes;
  std::sort(nodes->begin(), nodes->end());
  nodes->erase(std::unique(nodes->begin(), nodes->end()), nodes->end());
  if (nodes->size() > kCkptMaxNodes)
    return Status::InvalidArgument("persist: more than kCkptMaxNodes (" + std::to_string(kCkptMaxNodes) + ") parts");
  for (const auto& n : *nodes)
    if (Status s = ValidCkptNode(n); !s.ok()) return s;
  if (!std::binary_search(nodes->begin(), nodes->end(), r.node))
    return Status::InvalidArgument("persist: this node (" + r.node + ") is not among the checkpoint's nodes");
  return Status::Ok();
}

// One persist per node at a time: preflight-run's persister and the
// epilog must never copy the same part at once.
Expected<Fd> Lock(const std::string& local_dir) {
  std::string path = local_dir + "/" + kCkptPersistLock;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "lock " + path);
  Fd f(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return Status::Unavailable("another persist of this node holds " + path);
    return Status::FromErrno(errno, "lock " + path);
  }
  return f;
}

// Copies this node's part and publishes its manifest (steps 1 and 2).
Status CopyAndPublish(const CkptPersistRequest& r, const std::vector<std::string>& nodes, int tierfd,
                      const std::string& partial, const CkptPersistOptions& o, CkptPersistResult* out) {
  const std::string src_shown = r.local_dir + "/" + r.name, pshown = r.tier + "/" + partial;
  auto entries = ckpt_internal::WalkCheckpoint(src_shown, CkptPartSkipNames(r.convention));
  if (!entries) return entries.status();
  auto src = ckpt_internal::OpenDirAt(AT_FDCWD, src_shown, "checkpoint " + src_shown);
  if (!src) return src.status();
  struct stat rst;
  if (::fstat(src->get(), &rst) != 0) return Status::FromErrno(errno, src_shown);
  if (Status s = ckpt_internal::MakeDirAt(tierfd, partial, 0700, pshown); !s.ok()) return s;
  if (Status s = ckpt_internal::SyncFd(tierfd, "the shared tier " + r.tier); !s.ok()) return s;
  auto pfd = ckpt_internal::OpenDirAt(tierfd, partial, pshown);
  if (!pfd) return pfd.status();
  if (::fchmod(pfd->get(), (rst.st_mode & 07777) | 0700) != 0) return Status::FromErrno(errno, "chmod " + pshown);
  if (Status s = ckpt_internal::MakeDirAt(pfd->get(), kCkptPartsDir, 0700, pshown + "/" + kCkptPartsDir); !s.ok())
    return s;
  uint32_t index = static_cast<uint32_t>(std::lower_bound(nodes.begin(), nodes.end(), r.node) - nodes.begin());
  ckpt_internal::CopyOptions co;
  co.threads = o.threads;
  co.deadline = o.deadline;
  co.rate_cap = o.rate_cap;
  co.fault = o.fault;
  ckpt_internal::CopyStats stats;
  double t0 = MonotonicSeconds();
  auto copied = ckpt_internal::CopyPart(src->get(), src_shown, pfd->get(), pshown, *entries, index, co, &stats);
  out->files = stats.files;
  out->bytes = stats.bytes;
  out->seconds = MonotonicSeconds() - t0;
  if (!copied) return copied.status();
  if (o.fault) {
    if (int e = o.fault(CkptFaultPoint::kPartDataSynced, 0); e != 0)
      return Status::FromErrno(e, std::string(CkptFaultPointName(CkptFaultPoint::kPartDataSynced)) + " " + pshown);
  }
  CkptManifest m;
  m.name = r.name;
  m.run = r.run;
  m.node = r.node;
  m.nodes = nodes;
  m.marker = CkptCommitMarker(r.convention);
  m.time = r.complete_time;
  m.entries = std::move(*copied);
  auto parts = ckpt_internal::OpenDirAt(pfd->get(), kCkptPartsDir, pshown + "/" + kCkptPartsDir);
  if (!parts) return parts.status();
  if (Status s = ckpt_internal::WriteAtomicAt(parts->get(), r.node, SerializeCkptManifest(m),
                                              pshown + "/" + kCkptPartsDir + "/" + r.node);
      !s.ok())
    return s;
  out->copied = true;
  if (o.fault) {
    if (int e = o.fault(CkptFaultPoint::kPartManifestDone, 0); e != 0)
      return Status::FromErrno(e, std::string(CkptFaultPointName(CkptFaultPoint::kPartManifestDone)) + " " + pshown);
  }
  return Status::Ok();
}

}  // namespace

Expected<CkptPersistResult> PersistCkpt(const CkptPersistRequest& r, const CkptPersistOptions& o) {
  std::vector<std::string> nodes;
  if (Status s = Validate(r, &nodes); !s.ok()) return s;
  auto lock = Lock(r.local_dir);
  if (!lock) return lock.status();
  auto tierfd = ckpt_internal::OpenDirAt(AT_FDCWD, r.tier, "shared tier " + r.tier);
  if (!tierfd) return tierfd.status();
  const std::string partial = CkptPartialName(r.run, r.name);
  const std::string mine = partial + "/" + kCkptPartsDir + "/" + r.node;
  CkptPersistResult out;
  auto pkind = ckpt_internal::KindAt(tierfd->get(), partial, r.tier + "/" + partial);
  if (!pkind) return pkind.status();
  auto nkind = ckpt_internal::KindAt(tierfd->get(), r.name, r.tier + "/" + r.name);
  if (!nkind) return nkind.status();
  bool copy = false;
  if (*pkind == 'd') {
    auto k = ckpt_internal::KindAt(tierfd->get(), mine, r.tier + "/" + mine);
    if (!k) return k.status();
    copy = *k == 0;  // a published part is never written again
  } else if (*pkind != 0) {
    return Status::Failed(r.tier + "/" + partial + ": not a directory");
  } else {
    copy = *nkind == 0;  // NAME there: this run's commit was renamed, or another run's
  }
  if (copy) {
    if (Status s = CopyAndPublish(r, nodes, tierfd->get(), partial, o, &out); !s.ok()) return s;
  }
  CkptCommitOptions co;
  co.verify = o.verify;
  co.verify.threads = o.threads;
  if (co.verify.deadline == 0) co.verify.deadline = o.deadline;
  co.fault = o.fault;
  auto c = CommitCkpt(r.tier, r.run, r.name, co);
  if (!c) {
    // Another node's commit may have renamed the partial folder while this
    // one checked it (seen as a file missing from it): then NAME is there,
    // durable, with this part. Anything else is this commit's failure.
    CkptVerifyOptions sizes;
    sizes.threads = o.threads;
    if (c.status().code() != Status::Code::kTimeout &&
        LocalPartDurable(r.local_dir, r.name, r.tier, r.node, r.convention, sizes).ok()) {
      out.state = CkptCommitState::kDurable;
      out.path = r.tier + "/" + r.name;
      return out;
    }
    return c.status();
  }
  out.state = c->state;
  out.missing = c->missing;
  out.committed_here = c->committed_here;
  if (c->state == CkptCommitState::kDurable) {
    // NAME may be another run's: durable for this node only if it holds this part.
    CkptVerifyOptions sizes;
    sizes.threads = o.threads;
    if (Status s = LocalPartDurable(r.local_dir, r.name, r.tier, r.node, r.convention, sizes); !s.ok()) return s;
    out.path = r.tier + "/" + r.name;
  }
  return out;
}

Status LocalPartDurable(const std::string& local_dir, const std::string& name, const std::string& tier,
                        const std::string& node, const CkptConventionSpec& convention, const CkptVerifyOptions& v) {
  auto m = CheckCkptDurable(tier, name, v);
  if (!m) return m.status();
  if (std::find(m->nodes.begin(), m->nodes.end(), node) == m->nodes.end())
    return Status::Failed(tier + "/" + name + " holds no part of node " + node);
  auto local = ckpt_internal::WalkCheckpoint(local_dir + "/" + name, CkptPartSkipNames(convention));
  if (!local) return local.status();
  std::unordered_map<std::string, const CkptEntry*> by_path;
  for (const auto& e : m->entries) by_path[e.path] = &e;
  for (const auto& w : *local) {
    auto it = by_path.find(w.path);
    if (it == by_path.end())
      return Status::Failed(tier + "/" + name + " lacks " + CkptEscape(w.path) + " of the local checkpoint");
    const CkptEntry& e = *it->second;
    if (e.type != w.type || (w.type == 'f' && e.size != w.size) || (w.type == 'l' && e.link != w.link))
      return Status::Failed(tier + "/" + name + ": " + CkptEscape(w.path) + " differs from the local checkpoint's");
  }
  return Status::Ok();
}

}  // namespace preflight
