// Becoming the job user: DropToStageUser (stage_user.h) and the forked
// child's BecomeStageUser (stage_user_child.h).
#include "preflight/stage_user.h"

#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "stage_user_child.h"

namespace preflight {

bool DropToStageUser(const StageIdentity& who, std::string* error) {
  std::vector<gid_t> groups(64);
  int n = static_cast<int>(groups.size());
  if (!who.user.empty()) {
    if (::getgrouplist(who.user.c_str(), who.gid, groups.data(), &n) < 0) {
      groups.resize(static_cast<size_t>(n));
      if (::getgrouplist(who.user.c_str(), who.gid, groups.data(), &n) < 0) n = 0;
    }
  } else {
    n = 0;
  }
  if (n <= 0) { groups.assign(1, who.gid); n = 1; }
  if (::setgroups(static_cast<size_t>(n), groups.data()) != 0) { *error = std::string("setgroups: ") + std::strerror(errno); return false; }
  if (::setregid(who.gid, who.gid) != 0) { *error = std::string("setregid: ") + std::strerror(errno); return false; }
  if (::setreuid(who.uid, who.uid) != 0) { *error = std::string("setreuid: ") + std::strerror(errno); return false; }
  if (who.uid != 0 && (::setreuid(0, 0) == 0 || ::geteuid() != who.uid)) { *error = "privileges could not be dropped"; errno = 0; return false; }
  return true;
}

namespace stage_internal {

std::string BecomeStageUser(int fd, const StageIdentity& who, int* err) {
  if (fd != 3) ::dup2(fd, 3);
  ::syscall(SYS_close_range, 4u, ~0u, 0u);
  std::string error;
  if (who.drop && !DropToStageUser(who, &error)) {
    if (err) *err = errno;
    return "cannot read as user " + std::to_string(who.uid) + ": " + error;
  }
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  return "";
}

}  // namespace stage_internal
}  // namespace preflight
