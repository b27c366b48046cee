// One injectable root for every /sys, /proc and /dev read (as hwloc's
// HWLOC_FSROOT). Production uses "/", tests a fixture tree. Paths given to
// the methods are absolute-looking ("/sys/class/infiniband") and resolved
// under the root with openat(2), so a fixture cannot leak to the real tree.
#pragma once

#include <string>
#include <vector>

#include "preflight/status.h"

namespace preflight {

class FsRoot {
 public:
  explicit FsRoot(std::string root = "/");
  FsRoot(const FsRoot&) = delete;
  FsRoot& operator=(const FsRoot&) = delete;
  ~FsRoot();

  const std::string& root() const { return root_; }
  bool is_real() const { return root_ == "/"; }
  // Whole file; trailing newline stripped. Errors name the full path.
  Expected<std::string> ReadFile(const std::string& path) const;
  // Entries of a directory, sorted, without "." and "..".
  Expected<std::vector<std::string>> ListDir(const std::string& path) const;
  // The host path, for APIs that need one (statvfs).
  std::string HostPath(const std::string& path) const;

 private:
  std::string Rel(const std::string& path) const;
  std::string root_;
  int fd_ = -1;
};

}  // namespace preflight
