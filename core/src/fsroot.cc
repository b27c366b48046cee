#include "preflight/fsroot.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace preflight {

FsRoot::FsRoot(std::string root) : root_(root.empty() ? "/" : std::move(root)) {
  fd_ = ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

FsRoot::~FsRoot() {
  if (fd_ >= 0) ::close(fd_);
}

std::string FsRoot::Rel(const std::string& path) const {
  size_t i = path.find_first_not_of('/');
  return i == std::string::npos ? "." : path.substr(i);
}

std::string FsRoot::HostPath(const std::string& path) const {
  if (is_real()) return path;
  std::string r = root_;
  if (!r.empty() && r.back() == '/') r.pop_back();
  return r + "/" + Rel(path);
}

Expected<std::string> FsRoot::ReadFile(const std::string& path) const {
  if (fd_ < 0) return Status::FromErrno(ENOENT, "fsroot " + root_);
  int f = ::openat(fd_, Rel(path).c_str(), O_RDONLY | O_CLOEXEC);
  if (f < 0) return Status::FromErrno(errno, HostPath(path));
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(f, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(f);
      return Status::FromErrno(e, HostPath(path));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(f);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

Expected<std::vector<std::string>> FsRoot::ListDir(const std::string& path) const {
  if (fd_ < 0) return Status::FromErrno(ENOENT, "fsroot " + root_);
  int f = ::openat(fd_, Rel(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (f < 0) return Status::FromErrno(errno, HostPath(path));
  DIR* d = ::fdopendir(f);
  if (d == nullptr) {
    int e = errno;
    ::close(f);
    return Status::FromErrno(e, HostPath(path));
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace preflight
