// Becoming the job user: DropToStageUser and ReadAsStageUser (stage_user.h);
// the forked child's side is stage_user_child.cc.
#include "preflight/stage_user.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

namespace preflight {

namespace {

// `who`'s supplementary groups (getgrouplist; just the primary group if the
// name is unknown or empty).
std::vector<gid_t> Groups(const StageIdentity& who) {
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
  if (n <= 0) return {who.gid};
  groups.resize(static_cast<size_t>(n));
  return groups;
}

std::string Failed(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// Capabilities through the raw system calls (no libcap): glibc has no
// wrapper, and only this file needs them.
bool ClearCapabilities() {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2] = {};
  return ::syscall(SYS_capset, &h, d) == 0;
}

bool HasCapabilities() {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2] = {};
  if (::syscall(SYS_capget, &h, d) != 0) return true;  // cannot tell: say so
  return d[0].effective || d[1].effective || d[0].permitted || d[1].permitted;
}

}  // namespace

bool DropToStageUser(const StageIdentity& who, std::string* error) {
  std::vector<gid_t> groups = Groups(who);
  if (::setgroups(groups.size(), groups.data()) != 0) { *error = Failed("setgroups"); return false; }
  if (::setregid(who.gid, who.gid) != 0) { *error = Failed("setregid"); return false; }
  if (::setreuid(who.uid, who.uid) != 0) { *error = Failed("setreuid"); return false; }
  if (who.uid != 0 && (::setreuid(0, 0) == 0 || ::geteuid() != who.uid)) { *error = "privileges could not be dropped"; errno = 0; return false; }
  return true;
}

bool ReadAsStageUser(const StageIdentity& who, std::string* error) {
  std::vector<gid_t> groups = Groups(who);
  if (::setgroups(groups.size(), groups.data()) != 0) { *error = Failed("setgroups"); return false; }
  if (::setresgid(who.gid, who.gid, who.gid) != 0) { *error = Failed("setresgid"); return false; }
  if (::setresuid(::getuid(), who.uid, ::getuid()) != 0) { *error = Failed("setresuid"); return false; }
  if (!ClearCapabilities()) { *error = Failed("capset"); return false; }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) { *error = Failed("PR_SET_NO_NEW_PRIVS"); return false; }
  if (::geteuid() != who.uid || (who.uid != 0 && HasCapabilities())) {
    *error = "the user's identity could not be taken";
    errno = 0;
    return false;
  }
  return true;
}

}  // namespace preflight
