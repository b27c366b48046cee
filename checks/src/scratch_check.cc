// The node-local scratch check (checks.h: CheckScratch): mounted, free
// space and inodes against the site's minimums, writable.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "preflight/checks.h"
#include "preflight/fileutil.h"

namespace preflight {

std::vector<CheckResult> CheckScratch(const CheckEnv& env) {
  const Config& c = env.cfg;
  CheckResult r;
  r.check = "scratch";
  r.device = c.scratch_dir;
  if (c.scratch_dir.empty()) {
    r.verdict = Verdict::kSkip;
    r.message = "skipped: no scratch_dir configured";
    return {r};
  }
  struct statvfs st;
  if (::statvfs(c.scratch_dir.c_str(), &st) != 0) {
    r.verdict = Verdict::kFail;
    r.value = "missing";
    r.threshold = "mounted";
    r.message = Status::FromErrno(errno, "not usable").message();
    return {r};
  }
  std::vector<CheckResult> out;
  double free_bytes = static_cast<double>(st.f_bavail) * st.f_frsize;
  r.check = "scratch.free";
  r.value = HumanBytes(free_bytes);
  r.threshold = ">= " + HumanBytes(static_cast<double>(c.scratch_min_free_bytes));
  if (free_bytes < static_cast<double>(c.scratch_min_free_bytes)) {
    r.verdict = Verdict::kFail;
    r.message = "free " + r.value + " < " + HumanBytes(static_cast<double>(c.scratch_min_free_bytes));
  } else {
    r.message = "free " + r.value;
  }
  out.push_back(r);

  CheckResult in = r;
  in.check = "scratch.inodes";
  in.value = std::to_string(st.f_favail);
  in.threshold = ">= " + std::to_string(c.scratch_min_free_inodes);
  // Filesystems without inode accounting (f_files == 0) can't run out.
  if (st.f_files != 0 && st.f_favail < c.scratch_min_free_inodes) {
    in.verdict = Verdict::kFail;
    in.message = "free inodes " + in.value + " < " + std::to_string(c.scratch_min_free_inodes);
  } else {
    in.verdict = Verdict::kPass;
    in.message = st.f_files == 0 ? "no inode accounting" : "free inodes " + in.value;
  }
  out.push_back(in);

  CheckResult w = r;
  w.check = "scratch.writable";
  w.value = "";
  w.threshold = "writable";
  std::string probe = c.scratch_dir + "/.preflight-probe." + std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, "x", 1) != 1 || ::fsync(fd) != 0) {
    w.verdict = Verdict::kFail;
    w.value = "read-only";
    w.message = Status::FromErrno(errno, "cannot write").message();
  } else {
    w.verdict = Verdict::kPass;
    w.value = "writable";
    w.message = "writable";
  }
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  out.push_back(w);
  return out;
}

}  // namespace preflight
