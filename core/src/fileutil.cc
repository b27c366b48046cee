#include "preflight/fileutil.h"

#include <cstdio>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc 2.28)
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <fstream>
#include <sstream>

namespace preflight {

Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty()) return Status::InvalidArgument("empty directory path");
  std::string cur;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    cur = path.substr(0, j);
    if (!cur.empty() && ::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
      return Status::FromErrno(errno, "mkdir " + cur);
    i = j + 1;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISDIR(st.st_mode)) return Status::IOError(path + ": not a directory");
  return Status::Ok();
}

std::string PrivateDirRefusal(const std::string& shown, const struct stat& st, bool last, uid_t me) {
  char mode_text[8];
  std::snprintf(mode_text, sizeof mode_text, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (!S_ISDIR(st.st_mode))
    return shown + ": a symlink or not a directory; refused (it must be a real directory owned by root)";
  if (st.st_uid != 0 && st.st_uid != me)
    return shown + ": owned by uid " + std::to_string(st.st_uid) + ", not root; refused (a user could change what root writes there)";
  if (last && (st.st_mode & 022))
    return shown + ": mode " + mode_text + " lets others write in it; refused (make it root-owned, 0755 or stricter)";
  if ((st.st_mode & 002) && !(st.st_mode & S_ISVTX)) return shown + ": mode " + mode_text + " lets anyone rename what is in it; refused";
  return "";
}

bool UserEntryInStickyDir(const struct stat& parent, const struct stat& entry, uid_t me) {
  return S_ISDIR(parent.st_mode) && (parent.st_mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH) && entry.st_uid != 0 &&
         entry.st_uid != me;
}

namespace {

std::string AsideName(const std::string& name, uid_t owner, int n) {
  time_t now = ::time(nullptr);
  struct tm tm {};
  ::localtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", &tm);
  return name + ".set-aside." + when + ".uid" + std::to_string(owner) + (n ? "." + std::to_string(n + 1) : "");
}

// Moves the user's entry `name` in `dirfd` (shown as `cur`) aside and, where
// the file system can swap two names, leaves a fresh folder with `mode` in
// its place; elsewhere the caller makes it. *out->moved_to stays empty when
// the entry was gone by the time it was moved.
Status SetAsideAt(int dirfd, const std::string& name, const std::string& cur, mode_t mode, uid_t owner, SetAside* out) {
  std::string above = cur.substr(0, cur.size() - name.size());  // "/parent/"
  for (int n = 0; n < 10; ++n) {
    std::string aside = AsideName(name, owner, n);
    if (::mkdirat(dirfd, aside.c_str(), mode) != 0) {
      if (errno == EEXIST) continue;
      return Status::FromErrno(errno, "mkdir " + above + aside);
    }
    *out = {cur, above + aside, owner};
    if (::renameat2(dirfd, name.c_str(), dirfd, aside.c_str(), RENAME_EXCHANGE) == 0) return Status::Ok();
    int e = errno;
    ::unlinkat(dirfd, aside.c_str(), AT_REMOVEDIR);
    if (e == ENOENT) { out->moved_to.clear(); return Status::Ok(); }
    if (e != EINVAL && e != ENOSYS && e != EOPNOTSUPP) return Status::FromErrno(e, "set aside " + cur + " as " + above + aside);
    // No exchange on this file system: move it, never over a name taken
    // meanwhile (no RENAME_NOREPLACE either: a plain rename).
    int r = ::renameat2(dirfd, name.c_str(), dirfd, aside.c_str(), RENAME_NOREPLACE);
    if (r != 0 && (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) r = ::renameat(dirfd, name.c_str(), dirfd, aside.c_str());
    if (r == 0) return Status::Ok();
    if (errno == ENOENT) { out->moved_to.clear(); return Status::Ok(); }
    if (errno != EEXIST && errno != ENOTEMPTY && errno != ENOTDIR && errno != EISDIR)
      return Status::FromErrno(errno, "set aside " + cur + " as " + above + aside);
  }
  return Status::Unavailable(cur + ": no free name to set it aside under");
}

}  // namespace

Status MakePrivateDirs(const std::string& path, mode_t mode, std::vector<SetAside>* set_aside) {
  auto fd = OpenPrivateDir(path, mode, set_aside);
  if (!fd) return fd.status();
  ::close(*fd);
  return Status::Ok();
}

Expected<int> OpenPrivateDir(const std::string& path, mode_t mode, std::vector<SetAside>* set_aside) {
  if (path.empty() || path[0] != '/') return Status::InvalidArgument("'" + path + "': not an absolute path");
  int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open /");
  std::string cur;
  size_t i = 1;
  Status s;
  uid_t me = ::geteuid();
  struct stat parent;
  if (::fstat(fd, &parent) != 0) s = Status::FromErrno(errno, "stat /");
  while (s.ok() && i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string name = path.substr(i, j - i);
    i = j + 1;
    if (name.empty() || name == ".") continue;
    if (name == "..") { s = Status::InvalidArgument(path + ": '..' in a private directory path"); break; }
    cur += "/" + name;
    bool last = i > path.size() || path.find_first_not_of('/', j) == std::string::npos;
    for (int tries = 0;; ++tries) {
      if (::mkdirat(fd, name.c_str(), mode) != 0 && errno != EEXIST) { s = Status::FromErrno(errno, "mkdir " + cur); break; }
      struct stat entry;
      if (!set_aside || ::fstatat(fd, name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) != 0 ||
          !UserEntryInStickyDir(parent, entry, me))
        break;
      if (tries == 5) { s = Status::Unavailable(cur + ": a user keeps placing an entry of theirs here; not used"); break; }
      SetAside a;
      s = SetAsideAt(fd, name, cur, mode, entry.st_uid, &a);
      if (!s.ok()) break;
      if (!a.moved_to.empty()) set_aside->push_back(a);
    }
    if (!s.ok()) break;
    int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      int e = errno;
      s = e == ELOOP || e == ENOTDIR ? Status::Permission(cur + ": a symlink or not a directory; refused (it must be a real directory owned by root)")
                                     : Status::FromErrno(e, "open " + cur);
      break;
    }
    ::close(fd);
    fd = next;
    if (::fstat(fd, &parent) != 0) { s = Status::FromErrno(errno, "stat " + cur); break; }
    std::string why = PrivateDirRefusal(cur, parent, last, me);
    if (!why.empty()) s = Status::Permission(why);
  }
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  return fd;
}

Status WriteFileAtomic(const std::string& path, const std::string& data, mode_t mode) {
  // A hidden name beside the target (globs such as nodes/*.json never see
  // it), unique per process and call so two threads writing the same file
  // do not share one temporary.
  static std::atomic<unsigned> seq{0};
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string tmp = prefix + "." + base + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(seq++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Status::FromErrno(errno, "create " + tmp);
  if (!WriteAll(fd, data)) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::FromErrno(e, "write " + tmp);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno(e, "sync " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno(e, "rename " + tmp + " to " + path);
  }
  // The rename is durable once the folder is: without this a crash can
  // leave the old file (or none) after the call said the new one is there.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Status::FromErrno(errno, "open " + dir + " to sync it");
  int rc = ::fsync(dfd), e = errno;
  ::close(dfd);
  // EINVAL: a file system that cannot sync a folder (some FUSE ones); the
  // rename is as durable there as that file system makes anything.
  if (rc != 0 && e != EINVAL) return Status::FromErrno(e, "sync " + dir);
  return Status::Ok();
}

bool WriteAll(int fd, const void* p, size_t n, bool no_sigpipe) {
  const char* at = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = no_sigpipe ? ::send(fd, at, n, MSG_NOSIGNAL) : ::write(fd, at, n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return false;
    if (k == 0) { errno = EIO; return false; }
    at += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

Expected<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno(errno, "read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status RemoveTreeAt(int dirfd, const std::string& name, const std::string& shown) {
  struct statx sx;
  if (::statx(dirfd, name.c_str(), AT_SYMLINK_NOFOLLOW, STATX_TYPE, &sx) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::FromErrno(errno, "stat " + shown);
  }
  if (!S_ISDIR(sx.stx_mode)) {
    if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) return Status::FromErrno(errno, "unlink " + shown);
    return Status::Ok();
  }
  if (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT && sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)
    return Status::FromErrno(EBUSY, "remove " + shown + " (a mount point)");
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + shown);
  DIR* d = ::fdopendir(fd);
  if (!d) { int e = errno; ::close(fd); return Status::FromErrno(e, "open " + shown); }
  Status first;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    const char* n = e->d_name;
    if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
    names.push_back(n);
  }
  for (const auto& n : names) {
    Status s = RemoveTreeAt(::dirfd(d), n, shown + "/" + n);
    if (!s.ok() && first.ok()) first = s;
  }
  ::closedir(d);
  if (!first.ok()) return first;
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return Status::FromErrno(errno, "rmdir " + shown);
  return Status::Ok();
}

Status RemoveTree(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? Status::Ok() : Status::FromErrno(errno, "open " + parent);
  Status s = RemoveTreeAt(fd, name, path);
  ::close(fd);
  return s;
}

}  // namespace preflight
