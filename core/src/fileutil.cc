#include "preflight/fileutil.h"

#include <fcntl.h>
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

Status WriteFileAtomic(const std::string& path, const std::string& data, mode_t mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Status::FromErrno(errno, "create " + tmp);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::FromErrno(e, "write " + tmp);
    }
    off += static_cast<size_t>(n);
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

Expected<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno(errno, "read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace preflight
