#include "preflight/ckpt_commit.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ckpt_io.h"
#include "preflight/ckpt_tier.h"
#include "preflight/fileutil.h"

namespace preflight {
namespace {

using ckpt_internal::Fd;

Status Fault(const CkptCommitOptions& o, CkptFaultPoint p, const std::string& shown) {
  if (!o.fault) return Status::Ok();
  int e = o.fault(p, 0);
  return e == 0 ? Status::Ok() : Status::FromErrno(e, std::string(CkptFaultPointName(p)) + " " + shown);
}

// NAME as found on the tier: its folder, manifest and marker.
struct Named {
  Fd fd;
  std::string bytes;   // the manifest's
  CkptManifest m;
  bool marked = false;
  std::string marker;  // the marker's text
};

Expected<Named> ReadNamed(int tierfd, const std::string& name, const std::string& shown) {
  Named n;
  auto fd = ckpt_internal::OpenDirAt(tierfd, name, shown);
  if (!fd) return fd.status().code() == Status::Code::kInvalidArgument ? Status::Failed(fd.status().message()) : fd.status();
  n.fd = std::move(*fd);
  auto bytes = ckpt_internal::ReadSmallAt(n.fd.get(), kCkptManifestFile, kCkptMaxManifestBytes, shown + "/" + kCkptManifestFile);
  if (!bytes) {
    if (bytes.status().code() == Status::Code::kNotFound)
      return Status::Failed(shown + ": no " + kCkptManifestFile + " (not written by preflight, or not finished)");
    return bytes.status();
  }
  n.bytes = std::move(*bytes);
  auto m = ParseCkptManifest(n.bytes);
  if (!m) return Status::Failed(shown + "/" + kCkptManifestFile + ": " + m.status().message());
  if (!m->combined || m->name != name)
    return Status::Failed(shown + "/" + kCkptManifestFile + ": not the combined manifest of " + name);
  n.m = std::move(*m);
  auto marker = ckpt_internal::ReadSmallAt(n.fd.get(), kCkptDurableMarker, 4096, shown + "/" + kCkptDurableMarker);
  if (marker) {
    n.marked = true;
    n.marker = *marker;
  } else if (marker.status().code() != Status::Code::kNotFound) {
    return marker.status();
  }
  return n;
}

struct Parts {
  std::vector<CkptManifest> parts;
  std::vector<std::string> arrived, missing;
};

Expected<Parts> ReadParts(int pfd, const std::string& shown, const std::string& run, const std::string& name) {
  Parts out;
  std::string pshown = shown + "/" + kCkptPartsDir;
  int fd = ::openat(pfd, kCkptPartsDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    return Status::FromErrno(errno, pshown);
  }
  Fd dfd(fd);
  DIR* d = ::fdopendir(::dup(fd));
  if (d == nullptr) return Status::FromErrno(errno, pshown);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    auto text = ckpt_internal::ReadSmallAt(fd, n, kCkptMaxManifestBytes, pshown + "/" + n);
    if (!text) return text.status();
    auto m = ParseCkptManifest(*text);
    if (!m) return Status::Failed(pshown + "/" + n + ": " + m.status().message());
    if (m->combined || m->node != n || m->run != run || m->name != name)
      return Status::Failed(pshown + "/" + n + ": not " + n + "'s part of " + name + " for run " + run);
    if (!out.parts.empty() && (m->nodes != out.parts[0].nodes || m->marker != out.parts[0].marker))
      return Status::Failed(pshown + ": the parts of " + n + " and " + out.parts[0].node +
                            " name different node lists or markers");
    out.arrived.push_back(n);
    out.parts.push_back(std::move(*m));
  }
  if (!out.parts.empty())
    for (const auto& node : out.parts[0].nodes)
      if (!std::binary_search(out.arrived.begin(), out.arrived.end(), node)) out.missing.push_back(node);
  return out;
}

// The combined manifest: every part's entries, a path held by two parts
// only when both hold the same thing, and the commit's marker file.
Expected<CkptManifest> Merge(const Parts& p) {
  CkptManifest c;
  c.combined = true;
  c.name = p.parts[0].name;
  c.run = p.parts[0].run;
  c.nodes = p.parts[0].nodes;
  c.marker = p.parts[0].marker;
  std::unordered_map<std::string, size_t> at;
  for (const auto& part : p.parts) {
    c.time = std::max(c.time, part.time);
    for (const auto& e : part.entries) {
      auto [it, fresh] = at.emplace(e.path, c.entries.size());
      if (fresh) {
        c.entries.push_back(e);
        continue;
      }
      const CkptEntry& had = c.entries[it->second];
      bool same = had.type == e.type && (e.type == 'd' || (had.size == e.size && had.hash == e.hash && had.link == e.link));
      if (!same)
        return Status::Failed("nodes " + c.nodes[had.node] + " and " + part.node + " both hold " + CkptEscape(e.path) +
                              " with different contents");
    }
  }
  if (!c.marker.empty()) {
    if (at.count(c.marker)) return Status::Failed("a part holds " + CkptEscape(c.marker) + ", the file the commit writes");
    CkptEntry m;
    m.type = 'f';
    m.mode = 0644;
    m.hash = CkptCombinePieces({});
    m.path = c.marker;
    c.entries.push_back(m);
  }
  return c;
}

// Removes what no manifest lists (a dead attempt's leftovers): every node
// has declared its part complete, so nobody writes here any more.
Status RemoveUnlisted(int dfd, const std::string& prefix, const std::string& shown,
                      const std::unordered_set<std::string>& listed, const std::unordered_set<std::string>& dirs) {
  DIR* d = ::fdopendir(::dup(dfd));
  if (d == nullptr) return Status::FromErrno(errno, "list " + shown);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : names) {
    if (prefix.empty() && CkptReservedName(n)) continue;
    std::string rel = prefix.empty() ? n : prefix + "/" + n;
    if (!listed.count(rel)) {
      if (Status s = RemoveTreeAt(dfd, n, shown + "/" + CkptEscape(n)); !s.ok()) return s;
    } else if (dirs.count(rel)) {
      auto sub = ckpt_internal::OpenDirAt(dfd, n, shown + "/" + CkptEscape(n));
      if (!sub) return sub.status();
      if (Status s = RemoveUnlisted(sub->get(), rel, shown + "/" + CkptEscape(n), listed, dirs); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

// Removes the temporaries a killed part-manifest write left in the parts folder.
Status RemovePartTemporaries(int pfd, const std::string& shown) {
  auto parts = ckpt_internal::OpenDirAt(pfd, kCkptPartsDir, shown + "/" + kCkptPartsDir);
  if (!parts) return parts.status();
  DIR* d = ::fdopendir(::dup(parts->get()));
  if (d == nullptr) return Status::FromErrno(errno, "list " + shown + "/" + kCkptPartsDir);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n[0] == '.' && n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : names)
    if (Status s = RemoveTreeAt(parts->get(), n, shown + "/" + kCkptPartsDir + "/" + n); !s.ok()) return s;
  return Status::Ok();
}

// The convention's marker (empty) in the partial folder. Several nodes may
// commit at once, each verifying the folder: a marker already there as an
// empty regular file is kept (only synced), never removed and made again,
// or another committer's verification would find it missing in between.
Status WriteCommitMarkerFile(int pfd, const std::string& marker, const std::string& shown) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    struct stat st;
    if (::fstatat(pfd, marker.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size == 0) {
      int fd = ::openat(pfd, marker.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return Status::FromErrno(errno, "open " + shown);
      Fd f(fd);
      return ckpt_internal::SyncFd(fd, shown);
    }
    if (::unlinkat(pfd, marker.c_str(), 0) != 0 && errno != ENOENT) return Status::FromErrno(errno, "replace " + shown);
    int fd = ::openat(pfd, marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;  // another committer made it just now
    if (fd < 0) return Status::FromErrno(errno, "create " + shown);
    Fd f(fd);
    if (::fchmod(fd, 0644) != 0) return Status::FromErrno(errno, "chmod " + shown);
    return ckpt_internal::SyncFd(fd, shown);
  }
  return Status::Failed(shown + ": replaced by another writer while being made");
}

bool SameContents(const CkptManifest& a, const CkptManifest& b) {
  if (a.entries.size() != b.entries.size() || a.marker != b.marker) return false;
  auto key = [](const CkptManifest& m) {
    std::map<std::string, const CkptEntry*> k;
    for (const auto& e : m.entries) k[e.path] = &e;
    return k;
  };
  auto ka = key(a), kb = key(b);
  for (const auto& [path, e] : ka) {
    auto it = kb.find(path);
    if (it == kb.end()) return false;
    const CkptEntry& f = *it->second;
    if (e->type != f.type || e->size != f.size || e->hash != f.hash || e->link != f.link) return false;
  }
  return true;
}

// Writes the marker into NAME, verifying it first when `verify`.
Status Mark(int tierfd, Named& n, const std::string& shown, const CkptCommitOptions& o, bool verify,
            CkptCommitResult* r) {
  if (verify) {
    if (Status s = VerifyCkptTreeAt(n.fd.get(), shown, n.m, o.verify); !s.ok()) return s;
  }
  // The rename must be on disk before the marker: a marker that survives a
  // crash whose rename did not would mark nothing.
  if (Status s = ckpt_internal::SyncFd(tierfd, "the shared tier"); !s.ok()) return s;
  if (Status s = ckpt_internal::WriteAtomicAt(n.fd.get(), kCkptDurableMarker, CkptMarkerText(n.bytes),
                                              shown + "/" + kCkptDurableMarker);
      !s.ok())
    return s;
  r->files = n.m.Files();
  r->bytes = n.m.Bytes();
  r->state = CkptCommitState::kDurable;
  return Fault(o, CkptFaultPoint::kCommitMarked, shown);
}

}  // namespace

std::string CkptMarkerText(const std::string& manifest_bytes) {
  return "preflight-durable 1 xxh3=" + CkptHex(CkptManifestDigest(manifest_bytes)) + "\n";
}

Expected<CkptManifest> CheckCkptDurable(const std::string& tier, const std::string& name, const CkptVerifyOptions& v) {
  if (Status s = ValidCkptName(name); !s.ok()) return s;
  auto tfd = ckpt_internal::OpenDirAt(AT_FDCWD, tier, "shared tier " + tier);
  if (!tfd) return tfd.status();
  std::string shown = tier + "/" + name;
  auto n = ReadNamed(tfd->get(), name, shown);
  if (!n) return n.status();
  if (!n->marked) return Status::Failed(shown + ": no " + kCkptDurableMarker + " (its commit did not finish)");
  if (n->marker != CkptMarkerText(n->bytes)) return Status::Failed(shown + ": the marker does not name this manifest");
  if (Status s = VerifyCkptTreeAt(n->fd.get(), shown, n->m, v); !s.ok()) return s;
  return std::move(n->m);
}

Expected<CkptCommitResult> RepairCkpt(const std::string& tier, const std::string& name, const CkptCommitOptions& o) {
  if (Status s = ValidCkptName(name); !s.ok()) return s;
  auto tfd = ckpt_internal::OpenDirAt(AT_FDCWD, tier, "shared tier " + tier);
  if (!tfd) return tfd.status();
  std::string shown = tier + "/" + name;
  auto n = ReadNamed(tfd->get(), name, shown);
  if (!n) return n.status();
  CkptCommitResult r;
  if (n->marked) {
    if (n->marker != CkptMarkerText(n->bytes)) return Status::Failed(shown + ": the marker does not name this manifest");
    if (Status s = VerifyCkptTreeAt(n->fd.get(), shown, n->m, o.verify); !s.ok()) return s;
    r.state = CkptCommitState::kDurable;
    r.files = n->m.Files();
    r.bytes = n->m.Bytes();
    return r;
  }
  if (Status s = Mark(tfd->get(), *n, shown, o, true, &r); !s.ok()) return s;
  r.repaired = true;
  return r;
}

Expected<CkptCommitResult> CommitCkpt(const std::string& tier, const std::string& run, const std::string& name,
                                      const CkptCommitOptions& o) {
  if (Status s = ValidCkptRun(run); !s.ok()) return s;
  if (Status s = ValidCkptName(name); !s.ok()) return s;
  auto tfd = ckpt_internal::OpenDirAt(AT_FDCWD, tier, "shared tier " + tier);
  if (!tfd) return tfd.status();
  const std::string partial = CkptPartialName(run, name), pshown = tier + "/" + partial, shown = tier + "/" + name;
  auto kind = ckpt_internal::KindAt(tfd->get(), partial, pshown);
  if (!kind) return kind.status();
  if (*kind == 0) {
    if (auto nk = ckpt_internal::KindAt(tfd->get(), name, shown); nk && *nk == 0)
      return Status::NotFound(pshown + ": no such commit in progress, and no " + name + " on the tier");
    return RepairCkpt(tier, name, o);
  }
  auto pfd = ckpt_internal::OpenDirAt(tfd->get(), partial, pshown);
  if (!pfd) return pfd.status();
  auto parts = ReadParts(pfd->get(), pshown, run, name);
  if (!parts) return parts.status();
  CkptCommitResult r;
  if (parts->parts.empty() || !parts->missing.empty()) {
    r.arrived = parts->arrived;
    r.missing = parts->missing;
    return r;
  }
  auto combined = Merge(*parts);
  if (!combined) return combined.status().Context("commit of " + shown);
  if (!combined->marker.empty()) {
    if (Status s = WriteCommitMarkerFile(pfd->get(), combined->marker, pshown + "/" + combined->marker); !s.ok()) return s;
  }
  if (Status s = VerifyCkptTreeAt(pfd->get(), pshown, *combined, o.verify); !s.ok()) return s.Context("commit of " + shown);
  std::unordered_set<std::string> listed, dirs;
  for (const auto& e : combined->entries) {
    listed.insert(e.path);
    if (e.type == 'd') dirs.insert(e.path);
  }
  if (Status s = RemoveUnlisted(pfd->get(), "", pshown, listed, dirs); !s.ok()) return s;
  if (Status s = RemovePartTemporaries(pfd->get(), pshown); !s.ok()) return s;
  if (Status s = Fault(o, CkptFaultPoint::kCommitVerified, shown); !s.ok()) return s;
  std::string bytes = SerializeCkptManifest(*combined);
  if (Status s = ckpt_internal::WriteAtomicAt(pfd->get(), kCkptManifestFile, bytes, pshown + "/" + kCkptManifestFile);
      !s.ok())
    return s;
  if (Status s = Fault(o, CkptFaultPoint::kCommitManifestDone, shown); !s.ok()) return s;
  if (::renameat(tfd->get(), partial.c_str(), tfd->get(), name.c_str()) == 0) {
    r.committed_here = true;
  } else if (errno != ENOENT && errno != EEXIST && errno != ENOTEMPTY && errno != ENOTDIR && errno != EISDIR) {
    return Status::FromErrno(errno, "rename " + pshown + " to " + name);
  }
  // ENOENT: another caller renamed it first. EEXIST/ENOTEMPTY: NAME came
  // from elsewhere. Either way NAME must now hold these very contents.
  if (Status s = ckpt_internal::SyncFd(tfd->get(), "the shared tier " + tier); !s.ok()) return s;
  if (Status s = Fault(o, CkptFaultPoint::kCommitRenamed, shown); !s.ok()) return s;
  auto n = ReadNamed(tfd->get(), name, shown);
  if (!n) return n.status().Context("after committing " + pshown);
  if (!r.committed_here && !SameContents(n->m, *combined))
    return Status::Failed(shown + " already exists on the tier with other contents; this run's copy stays in " +
                          pshown + " until gc");
  if (!r.committed_here && n->m.run != run) {
    // Another run committed the same bytes: this run's folder is redundant.
    std::string trash = std::string(kCkptTrashPrefix) + partial.substr(1);
    if (::renameat(tfd->get(), partial.c_str(), tfd->get(), trash.c_str()) == 0)
      (void)RemoveTreeAt(tfd->get(), trash, tier + "/" + trash);
  }
  if (n->marked && n->marker == CkptMarkerText(n->bytes)) {
    r.state = CkptCommitState::kDurable;
    r.files = n->m.Files();
    r.bytes = n->m.Bytes();
    return r;
  }
  // Verified above when this call renamed it; otherwise verify before marking.
  if (Status s = Mark(tfd->get(), *n, shown, o, !r.committed_here, &r); !s.ok()) return s;
  r.repaired = !r.committed_here;
  return r;
}

}  // namespace preflight
