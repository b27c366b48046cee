#include "ckpt_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "ckpt_io.h"
#include "preflight/ckpt_manifest.h"
#include "preflight/ckpt_tier.h"

namespace preflight::ckpt_internal {
namespace {

const char* TypeWord(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "of an unknown type";
}

struct Walker {
  std::string root;
  const std::vector<std::string>& skip;
  std::vector<WalkedEntry> out;

  Status Refuse(const std::string& rel, const std::string& why) {
    return Status::InvalidArgument("checkpoint " + root + ": " + CkptEscape(rel) + " " + why);
  }

  Status Dir(int fd, const std::string& prefix, size_t depth) {
    DIR* d = ::fdopendir(::dup(fd));
    if (d == nullptr) return Status::FromErrno(errno, "list " + root + "/" + prefix);
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    int rerr = errno;
    ::closedir(d);
    if (rerr != 0) return Status::FromErrno(rerr, "list " + root + "/" + prefix);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      if (depth == 0 && std::find(skip.begin(), skip.end(), n) != skip.end()) continue;
      std::string rel = prefix.empty() ? n : prefix + "/" + n;
      if (depth == 0 && CkptReservedName(n)) return Refuse(rel, "is a name preflight reserves on the shared tier");
      if (Status s = ValidCkptRelPath(rel); !s.ok()) return Refuse(rel, "breaks a bound: " + s.message());
      if (out.size() >= kCkptMaxEntries)
        return Refuse(rel, "is past kCkptMaxEntries (" + std::to_string(kCkptMaxEntries) + " entries)");
      struct stat st;
      if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Status::FromErrno(errno, root + "/" + rel);
      WalkedEntry e;
      e.path = rel;
      e.mode = st.st_mode & 07777;
      e.mtime_sec = st.st_mtim.tv_sec;
      e.mtime_nsec = st.st_mtim.tv_nsec;
      if (S_ISREG(st.st_mode)) {
        e.type = 'f';
        e.size = static_cast<uint64_t>(st.st_size);
        out.push_back(std::move(e));
      } else if (S_ISLNK(st.st_mode)) {
        std::string target(kCkptMaxPathBytes + 1, '\0');
        ssize_t k = ::readlinkat(fd, n.c_str(), &target[0], target.size());
        if (k < 0) return Status::FromErrno(errno, "readlink " + root + "/" + rel);
        target.resize(static_cast<size_t>(k));
        if (static_cast<size_t>(k) > kCkptMaxPathBytes) return Refuse(rel, "is a symlink with an over-long target");
        if (!DownwardSymlink(target))
          return Refuse(rel, "is a symlink to '" + CkptEscape(target) +
                                 "', which may point out of the checkpoint (absolute, or through '..'); "
                                 "only relative links without '..' are copied, as links, and none is followed");
        e.type = 'l';
        e.link = target;
        out.push_back(std::move(e));
      } else if (S_ISDIR(st.st_mode)) {
        e.type = 'd';
        out.push_back(std::move(e));
        auto sub = OpenDirAt(fd, n, root + "/" + rel);
        if (!sub) return sub.status();
        if (Status s = Dir(sub->get(), rel, depth + 1); !s.ok()) return s;
      } else {
        return Refuse(rel, std::string("is ") + TypeWord(st.st_mode) +
                               "; a checkpoint may hold only files, directories and in-tree symlinks");
      }
    }
    return Status::Ok();
  }
};

}  // namespace

bool DownwardSymlink(const std::string& target) {
  if (target.empty() || target[0] == '/') return false;
  if (target.find('\0') != std::string::npos) return false;
  for (size_t i = 0; i <= target.size();) {
    size_t j = target.find('/', i);
    if (j == std::string::npos) j = target.size();
    if (target.compare(i, j - i, "..") == 0) return false;
    i = j + 1;
  }
  return true;
}

Expected<std::vector<WalkedEntry>> WalkCheckpoint(const std::string& root, const std::vector<std::string>& skip) {
  auto fd = OpenDirAt(AT_FDCWD, root, "checkpoint " + root);
  if (!fd) return fd.status();
  Walker w{root, skip, {}};
  if (Status s = w.Dir(fd->get(), "", 0); !s.ok()) return s;
  return std::move(w.out);
}

}  // namespace preflight::ckpt_internal

