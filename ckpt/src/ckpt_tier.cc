#include "preflight/ckpt_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "ckpt_io.h"
#include "preflight/ckpt_manifest.h"

namespace preflight {

bool CkptReservedName(const std::string& name) {
  return name == kCkptPartsDir || name == kCkptManifestFile || name == kCkptDurableMarker ||
         name.rfind(std::string(".") + kCkptManifestFile, 0) == 0 ||  // WriteAtomicAt's temporaries
         name.rfind(std::string(".") + kCkptDurableMarker, 0) == 0;
}

std::string CkptPartialName(const std::string& run, const std::string& name) {
  return std::string(kCkptPartialPrefix) + run + "-" + name;
}

bool ParseCkptPartialName(const std::string& entry, std::string* run, std::string* name) {
  const std::string p = kCkptPartialPrefix;
  if (entry.rfind(p, 0) != 0) return false;
  size_t dash = entry.find('-', p.size());
  if (dash == std::string::npos) return false;
  std::string r = entry.substr(p.size(), dash - p.size()), n = entry.substr(dash + 1);
  if (!ValidCkptRun(r).ok() || !ValidCkptName(n).ok()) return false;
  *run = r;
  *name = n;
  return true;
}

Expected<std::vector<CkptTierEntry>> ListCkptTier(const std::string& tier) {
  std::vector<CkptTierEntry> out;
  int fd = ::open(tier.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    return Status::FromErrno(errno, "shared tier " + tier);
  }
  ckpt_internal::Fd dfd(fd);
  DIR* d = ::fdopendir(::dup(fd));
  if (d == nullptr) return Status::FromErrno(errno, "shared tier " + tier);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    struct stat st;
    if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
    CkptTierEntry e;
    e.entry = n;
    e.mtime = st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
    if (n.rfind(kCkptTrashPrefix, 0) == 0) {
      e.kind = CkptTierKind::kTrash;
    } else if (ParseCkptPartialName(n, &e.run, &e.name)) {
      e.kind = CkptTierKind::kPartial;
    } else if (ValidCkptName(n).ok()) {
      e.name = n;
      struct stat ms;
      bool manifest = ::fstatat(fd, (n + "/" + kCkptManifestFile).c_str(), &ms, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ms.st_mode);
      bool marker = ::fstatat(fd, (n + "/" + kCkptDurableMarker).c_str(), &ms, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ms.st_mode);
      e.kind = !manifest ? CkptTierKind::kForeign : marker ? CkptTierKind::kMarked : CkptTierKind::kUnmarked;
    } else {
      continue;  // other hidden names: not ours
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace preflight
