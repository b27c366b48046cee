#include "preflight/fileutil.h"

#include <cstdio>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

Status MakePrivateDirs(const std::string& path, mode_t mode) {
  auto fd = OpenPrivateDir(path, mode);
  if (!fd) return fd.status();
  ::close(*fd);
  return Status::Ok();
}

Expected<int> OpenPrivateDir(const std::string& path, mode_t mode) {
  if (path.empty() || path[0] != '/') return Status::InvalidArgument("'" + path + "': not an absolute path");
  int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open /");
  std::string cur;
  size_t i = 1;
  Status s;
  uid_t me = ::geteuid();
  while (s.ok() && i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string name = path.substr(i, j - i);
    i = j + 1;
    if (name.empty() || name == ".") continue;
    if (name == "..") { s = Status::InvalidArgument(path + ": '..' in a private directory path"); break; }
    cur += "/" + name;
    bool last = i > path.size() || path.find_first_not_of('/', j) == std::string::npos;
    if (::mkdirat(fd, name.c_str(), mode) != 0 && errno != EEXIST) { s = Status::FromErrno(errno, "mkdir " + cur); break; }
    int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      int e = errno;
      s = e == ELOOP || e == ENOTDIR ? Status::Permission(cur + ": a symlink or not a directory; refused (it must be a real directory owned by root)")
                                     : Status::FromErrno(e, "open " + cur);
      break;
    }
    ::close(fd);
    fd = next;
    struct stat st;
    if (::fstat(fd, &st) != 0) { s = Status::FromErrno(errno, "stat " + cur); break; }
    char mode_text[8];
    std::snprintf(mode_text, sizeof mode_text, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    if (st.st_uid != 0 && st.st_uid != me) {
      s = Status::Permission(cur + ": owned by uid " + std::to_string(st.st_uid) +
                             ", not root; refused (a user could change what root writes there)");
    } else if (last && (st.st_mode & 022)) {
      s = Status::Permission(cur + ": mode " + mode_text + " lets others write in it; refused (make it root-owned, 0755 or stricter)");
    } else if ((st.st_mode & 002) && !(st.st_mode & S_ISVTX)) {
      s = Status::Permission(cur + ": mode " + mode_text + " lets anyone rename what is in it; refused");
    }
  }
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  return fd;
}

Status WriteFileAtomic(const std::string& path, const std::string& data, mode_t mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
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

}  // namespace preflight
