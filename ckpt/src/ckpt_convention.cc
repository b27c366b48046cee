#include "preflight/ckpt_convention.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "ckpt_io.h"

namespace preflight {
namespace {

using ckpt_internal::Fd;

double Mtime(const struct stat& st) { return st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9; }

CkptEntryKind KindOf(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return CkptEntryKind::kFile;
  if (S_ISDIR(st.st_mode)) return CkptEntryKind::kDir;
  if (S_ISLNK(st.st_mode)) return CkptEntryKind::kSymlink;
  return CkptEntryKind::kOther;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Megatron's folder for an iteration: "iter_" and the number, any padding.
bool IsMegatronFolder(const std::string& name) { return name == "release" || (name.rfind("iter_", 0) == 0 && AllDigits(name.substr(5))); }

bool MegatronTrackerNames(const std::string& tracker, const std::string& name) {
  std::string t = Trim(tracker);
  if (t == "release") return name == "release";
  if (!AllDigits(t) || name.rfind("iter_", 0) != 0 || !AllDigits(name.substr(5))) return false;
  return std::stoull(t) == std::stoull(name.substr(5));
}

// NeMo's marker for a checkpoint: the name less ".ckpt", less "-EMA", and
// "-unfinished" (NeMo's format_checkpoint_unfinished_marker_path).
std::string NemoBase(std::string name) {
  auto strip = [&](const std::string& suffix) {
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      name.resize(name.size() - suffix.size());
  };
  strip(".ckpt");
  strip("-EMA");
  return name;
}

const CkptListedEntry* Find(const std::vector<CkptListedEntry>& v, const std::string& name) {
  for (const auto& e : v)
    if (e.name == name) return &e;
  return nullptr;
}

bool IsFile(const CkptListedEntry* e) { return e != nullptr && e->kind == CkptEntryKind::kFile; }

}  // namespace

Expected<CkptConvention> ParseCkptConvention(const std::string& s) {
  if (s == "marker") return CkptConvention::kMarker;
  if (s == "dcp" || s == "torchtitan") return CkptConvention::kDcp;
  if (s == "megatron") return CkptConvention::kMegatron;
  if (s == "deepspeed") return CkptConvention::kDeepSpeed;
  if (s == "nemo") return CkptConvention::kNemo;
  return Status::InvalidArgument("checkpoint convention '" + s +
                                 "': expected marker, dcp, torchtitan, megatron, deepspeed or nemo");
}

const char* CkptConventionName(CkptConvention c) {
  switch (c) {
    case CkptConvention::kMarker: return "marker";
    case CkptConvention::kDcp: return "dcp";
    case CkptConvention::kMegatron: return "megatron";
    case CkptConvention::kDeepSpeed: return "deepspeed";
    case CkptConvention::kNemo: return "nemo";
  }
  return "?";
}

std::vector<std::string> CkptProbeNames(const CkptConventionSpec& spec) {
  std::vector<std::string> v{kCkptPartMarker};
  if (spec.kind == CkptConvention::kMarker && !spec.marker.empty()) v.push_back(spec.marker);
  if (spec.kind == CkptConvention::kDcp) v.push_back(kDcpMetadata);
  return v;
}

std::string CkptTrackerName(CkptConvention c) {
  if (c == CkptConvention::kMegatron) return kMegatronTracker;
  if (c == CkptConvention::kDeepSpeed) return kDeepSpeedLatest;
  return "";
}

Expected<CkptDirListing> ListCkptDir(const std::string& dir, const CkptConventionSpec& spec) {
  CkptDirListing out;
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    return Status::FromErrno(errno, "checkpoint dir " + dir);
  }
  Fd dfd(fd);
  DIR* d = ::fdopendir(::dup(fd));
  if (d == nullptr) return Status::FromErrno(errno, "checkpoint dir " + dir);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  const std::vector<std::string> probes = CkptProbeNames(spec);
  const std::string tracker = CkptTrackerName(spec.kind);
  for (const auto& n : names) {
    struct stat st;
    if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone since readdir
    CkptListedEntry e{n, KindOf(st), Mtime(st)};
    out.top.push_back(e);
    if (e.kind == CkptEntryKind::kDir && n[0] != '.') {
      auto& pv = out.probes[n];
      for (const auto& p : probes) {
        struct stat ps;
        CkptListedEntry pe{p, CkptEntryKind::kMissing, 0};
        if (::fstatat(fd, (n + "/" + p).c_str(), &ps, AT_SYMLINK_NOFOLLOW) == 0) pe = {p, KindOf(ps), Mtime(ps)};
        pv.push_back(pe);
      }
    }
    if (!tracker.empty() && n == tracker && e.kind == CkptEntryKind::kFile) {
      auto text = ckpt_internal::ReadSmallAt(fd, n, kCkptTrackerMaxBytes, dir + "/" + n);
      if (text) {
        out.tracker_present = true;
        out.tracker = *text;
        out.tracker_mtime = e.mtime;
      }
    }
  }
  return out;
}

std::vector<LocalCkpt> ClassifyCkpts(const CkptDirListing& l, const CkptConventionSpec& spec) {
  static const std::vector<CkptListedEntry> kNone;
  std::vector<LocalCkpt> out;
  for (const auto& e : l.top) {
    if (e.kind != CkptEntryKind::kDir || e.name.empty() || e.name[0] == '.') continue;
    if (spec.kind == CkptConvention::kMegatron && !IsMegatronFolder(e.name)) continue;
    auto it = l.probes.find(e.name);
    const auto& probes = it == l.probes.end() ? kNone : it->second;
    const CkptListedEntry* part = Find(probes, kCkptPartMarker);
    LocalCkpt c;
    c.name = e.name;
    c.time = e.mtime;
    auto proven = [&](const std::string& what, double t) {
      c.complete = true;
      c.evidence = what;
      c.time = t;
    };
    switch (spec.kind) {
      case CkptConvention::kMarker: {
        const CkptListedEntry* m = Find(probes, spec.marker);
        // Only a regular file: a directory or a symlink named like the
        // marker does not finish a checkpoint.
        if (!spec.marker.empty() && IsFile(m)) proven(spec.marker, m->mtime);
        else c.why_not = "no " + spec.marker + " marker (a regular file)";
        break;
      }
      case CkptConvention::kDcp: {
        const CkptListedEntry* m = Find(probes, kDcpMetadata);
        if (IsFile(m)) proven(kDcpMetadata, m->mtime);
        else if (IsFile(part)) proven(kCkptPartMarker, part->mtime);
        else c.why_not = "no .metadata (the coordinator's node) and no .preflight-part (this node's part)";
        break;
      }
      case CkptConvention::kMegatron:
      case CkptConvention::kDeepSpeed: {
        bool named = l.tracker_present && (spec.kind == CkptConvention::kMegatron ? MegatronTrackerNames(l.tracker, e.name)
                                                                                  : Trim(l.tracker) == e.name);
        std::string tracker = CkptTrackerName(spec.kind);
        if (named) proven(tracker, l.tracker_mtime);
        else if (IsFile(part)) proven(kCkptPartMarker, part->mtime);
        else if (l.tracker_present)
          c.why_not = tracker + " names '" + Trim(l.tracker) + "', and there is no .preflight-part";
        else
          c.why_not = "no " + tracker + " here and no .preflight-part";
        break;
      }
      case CkptConvention::kNemo: {
        std::string base = NemoBase(e.name);
        const CkptListedEntry* unf = Find(l.top, base + kNemoUnfinishedSuffix);
        if (unf == nullptr) unf = Find(l.top, e.name + kNemoUnfinishedSuffix);
        if (unf != nullptr) c.why_not = "NeMo's marker " + unf->name + " is present (being written or deleted)";
        else if (IsFile(part)) proven(kCkptPartMarker, part->mtime);
        else if (spec.coordinator) proven("no -unfinished marker", e.mtime);
        else c.why_not = "no -unfinished marker, but this is not the coordinator's node and there is no .preflight-part";
        break;
      }
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const LocalCkpt& a, const LocalCkpt& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.name.size() != b.name.size()) return a.name.size() < b.name.size();  // step_9 < step_10
    return a.name < b.name;
  });
  return out;
}

Expected<std::vector<LocalCkpt>> LocalCkpts(const std::string& dir, const CkptConventionSpec& spec) {
  auto l = ListCkptDir(dir, spec);
  if (!l) return l.status();
  return ClassifyCkpts(*l, spec);
}

std::vector<std::string> CkptPartSkipNames(const CkptConventionSpec& spec) {
  std::vector<std::string> v{kCkptPartMarker};
  if (spec.kind == CkptConvention::kMarker && !spec.marker.empty() && spec.marker != kCkptPartMarker)
    v.push_back(spec.marker);
  return v;
}

std::string CkptCommitMarker(const CkptConventionSpec& spec) {
  return spec.kind == CkptConvention::kMarker ? spec.marker : std::string();
}

}  // namespace preflight
