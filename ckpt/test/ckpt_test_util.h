// What the ckpt tests share: files from strings, mtimes, a node's local
// checkpoint made in one call, and a fork that runs a step in a child.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

namespace preflight_test {

inline void Write(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

inline std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

inline void SetMtime(const std::string& path, time_t t) {
  struct timespec ts[2] = {{t, 0}, {t, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// A checkpoint folder `dir/name` holding `files` (relative path -> bytes),
// then, when `marker` is not empty, the marker file with mtime `t`.
inline void MakeCkpt(const std::string& dir, const std::string& name, const std::map<std::string, std::string>& files,
                     const std::string& marker = "COMPLETE", time_t t = 1700000000) {
  std::filesystem::create_directories(dir + "/" + name);
  for (const auto& [rel, data] : files) Write(dir + "/" + name + "/" + rel, data);
  if (!marker.empty()) {
    Write(dir + "/" + name + "/" + marker, "done " + name);
    SetMtime(dir + "/" + name + "/" + marker, t);
  }
}

// Runs `fn` in a forked child and returns its exit status (-1 for a
// signal). The child never returns into the test.
inline int InChild(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid) return -2;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace preflight_test
