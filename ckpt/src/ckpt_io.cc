#include "ckpt_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <vector>

#include "preflight/ckpt_tier.h"
#include "preflight/fileutil.h"

namespace preflight::ckpt_internal {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int Fd::release() {
  int f = fd_;
  fd_ = -1;
  return f;
}

Expected<Fd> OpenDirAt(int at, const std::string& rel, const std::string& shown) {
  int fd = ::openat(at, rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ELOOP) return Status::InvalidArgument(shown + ": is a symlink, not a directory");
    return Status::FromErrno(e, shown);
  }
  return Fd(fd);
}

Status SyncFd(int fd, const std::string& shown) {
  if (::fsync(fd) != 0) return Status::FromErrno(errno, "fsync " + shown);
  return Status::Ok();
}

Status MakeDirAt(int at, const std::string& rel, mode_t mode, const std::string& shown) {
  if (::mkdirat(at, rel.c_str(), mode) == 0) return Status::Ok();
  int e = errno;
  if (e != EEXIST) return Status::FromErrno(e, "mkdir " + shown);
  struct stat st;
  if (::fstatat(at, rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Status::FromErrno(errno, shown);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(shown + ": exists and is not a directory");
  return Status::Ok();
}

Status WriteAtomicAt(int dirfd, const std::string& name, const std::string& data, const std::string& shown,
                     mode_t mode) {
  static std::atomic<uint64_t> seq{0};
  std::string tmp = "." + name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(seq++);
  int fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Status::FromErrno(errno, "create " + shown);
  Fd f(fd);
  if (!WriteAll(fd, data)) {
    int e = errno;
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return Status::FromErrno(e, "write " + shown);
  }
  if (Status s = SyncFd(fd, shown); !s.ok()) {
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return s;
  }
  if (::close(f.release()) != 0) {
    int e = errno;
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return Status::FromErrno(e, "close " + shown);
  }
  if (::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    int e = errno;
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return Status::FromErrno(e, "rename into " + shown);
  }
  return SyncFd(dirfd, "the directory of " + shown);
}

Expected<std::string> ReadSmallAt(int at, const std::string& rel, uint64_t max, const std::string& shown) {
  int fd = ::openat(at, rel.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ELOOP) return Status::InvalidArgument(shown + ": is a symlink");
    return Status::FromErrno(e, shown);
  }
  Fd f(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, shown);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(shown + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max)
    return Status::InvalidArgument(shown + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                                   std::to_string(max) + " allowed");
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, &out[got], out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read " + shown);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

Expected<char> KindAt(int at, const std::string& rel, const std::string& shown) {
  struct stat st;
  if (::fstatat(at, rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) return char{0};
    return Status::FromErrno(e, shown);
  }
  if (S_ISDIR(st.st_mode)) return 'd';
  if (S_ISREG(st.st_mode)) return 'f';
  if (S_ISLNK(st.st_mode)) return 'l';
  return 'o';
}

Status Discard(int tierfd, const std::string& tier, const std::string& entry) {
  static std::atomic<uint64_t> seq{0};
  std::string base = entry[0] == '.' ? entry.substr(1) : entry;
  std::string trash = kCkptTrashPrefix + base + "." + std::to_string(::getpid()) + "." + std::to_string(seq++);
  if (::renameat(tierfd, entry.c_str(), tierfd, trash.c_str()) != 0)
    return Status::FromErrno(errno, "rename " + tier + "/" + entry + " to " + trash);
  if (Status s = SyncFd(tierfd, tier); !s.ok()) return s;
  return RemoveTreeAt(tierfd, trash, tier + "/" + trash);
}

Expected<CkptManifest> HeaderAt(int at, const std::string& rel) {
  constexpr size_t kHeaderBytes = 1u << 20;
  int fd = ::openat(at, rel.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, rel);
  Fd f(fd);
  std::string buf(kHeaderBytes, '\0');
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::read(fd, &buf[got], buf.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  buf.resize(got);
  return ParseCkptManifestHeader(buf);
}

}  // namespace preflight::ckpt_internal
