// Helpers the three stage test files share (stage_test, stage_manifest_test,
// stage_peer_test): writing a file, a byte pattern, and the `nobody` reader
// the root-run tests drop to.
#pragma once

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "preflight/stage_copy.h"

namespace preflight_test {

inline void Write(const std::string& path, const std::string& data, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << data;
  ::chmod(path.c_str(), mode);
}

// `n` bytes of a pattern that differs with `seed` and along the data.
inline std::string Blob(size_t n, char seed) {
  std::string s(n, 0);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 31 + (i >> 12));
  return s;
}

// The reader as `nobody`, as the prolog reads as the job user; false (the
// test skips) unless we are root and the user exists.
inline bool NobodyReader(preflight::StageIdentity* who) {
  if (::geteuid() != 0) return false;
  struct passwd* pw = ::getpwnam("nobody");
  if (!pw) return false;
  *who = {true, pw->pw_uid, pw->pw_gid, "nobody"};
  return true;
}
constexpr const char* kNoNobody = "skipped: needs root and a user 'nobody' to drop to";

}  // namespace preflight_test
