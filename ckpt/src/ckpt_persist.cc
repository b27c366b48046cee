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

// What LocalPartDurable reads to tell two runs' parts apart when their
// names and sizes agree (two jobs of one chain writing step_20 to one
// tier): the first and last kSameEdgeBytes of up to kSameFiles files, from
// each side. A safetensors or torch.save header is alike across runs; the
// tensors at the end are not. Bounded: 2 MiB read from each side.
constexpr uint64_t kSameEdgeBytes = 64 << 10;
constexpr size_t kSameFiles = 16;

// `rel` (a/b/c) beneath `rootfd`, no component followed through a symlink.
Expected<Fd> OpenFileBeneath(int rootfd, const std::string& rel, const std::string& shown) {
  Fd dir;
  int at = rootfd;
  size_t start = 0;
  for (size_t slash; (slash = rel.find('/', start)) != std::string::npos; start = slash + 1) {
    auto d = ckpt_internal::OpenDirAt(at, rel.substr(start, slash - start), shown);
    if (!d) return d.status();
    dir = std::move(*d);
    at = dir.get();
  }
  int fd = ::openat(at, rel.substr(start).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, shown);
  return Fd(fd);
}

Status ReadAt(int fd, uint64_t off, std::string* buf, const std::string& shown) {
  for (size_t got = 0; got < buf->size();) {
    ssize_t n = ::pread(fd, &(*buf)[got], buf->size() - got, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read " + shown);
    if (n == 0) return Status::Failed(shown + ": shorter than its size");
    got += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Ok when the sampled bytes of the local part's files (walk order) equal the tier's.
Status SameSampledBytes(const std::string& local_root, const std::string& tier_root,
                        const std::vector<ckpt_internal::WalkedEntry>& local) {
  auto lfd = ckpt_internal::OpenDirAt(AT_FDCWD, local_root, local_root);
  if (!lfd) return lfd.status();
  auto tfd = ckpt_internal::OpenDirAt(AT_FDCWD, tier_root, tier_root);
  if (!tfd) return tfd.status();
  size_t files = 0;
  for (const auto& e : local) {
    if (e.type != 'f' || e.size == 0) continue;
    if (++files > kSameFiles) break;
    const std::string lshown = local_root + "/" + CkptEscape(e.path), tshown = tier_root + "/" + CkptEscape(e.path);
    auto a = OpenFileBeneath(lfd->get(), e.path, lshown);
    if (!a) return a.status();
    auto b = OpenFileBeneath(tfd->get(), e.path, tshown);
    if (!b) return b.status();
    const uint64_t n = std::min(e.size, kSameEdgeBytes);
    for (uint64_t off : {uint64_t{0}, e.size - n}) {
      std::string x(n, '\0'), y(n, '\0');
      if (Status s = ReadAt(a->get(), off, &x, lshown); !s.ok()) return s;
      if (Status s = ReadAt(b->get(), off, &y, tshown); !s.ok()) return s;
      if (x != y)
        return Status::Failed(tshown + " holds other bytes than the local checkpoint's (another run's checkpoint of the same name)");
      if (e.size <= n) break;
    }
  }
  return Status::Ok();
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
  // Names and sizes agree; another run's checkpoint of this name could too.
  return SameSampledBytes(local_dir + "/" + name, tier + "/" + name, *local);
}

}  // namespace preflight
