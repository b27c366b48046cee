// The one scratch directory of the unit tests: made under /tmp (or
// $TMPDIR) on construction, removed with everything in it on destruction.
// Every subsystem's tests use it instead of a private mkdtemp fixture.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace preflight_test {

class TempDir {
 public:
  // `mode`: 0755 where a test reads the tree as another user (nobody).
  explicit TempDir(const std::string& tag = "test", mode_t mode = 0700) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/preflight-" + tag + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      std::perror(("mkdtemp " + tmpl).c_str());
      std::abort();  // no directory, no meaningful test
    }
    path_ = buf.data();
    if (mode != 0700) ::chmod(path_.c_str(), mode);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  operator const std::string&() const { return path_; }  // NOLINT: a path where a path is wanted
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

}  // namespace preflight_test
