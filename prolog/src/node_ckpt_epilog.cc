// The epilog's finishing copy (node_ckpt.h): the child that becomes the
// job's user and persists and clears the job's checkpoint folder
// (CkptFinishAsUser), and the root parent that bounds it, records what it
// says and removes the empty folder (FinishCkptForJob).
#include "preflight/node_ckpt.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <cstring>
#include <ctime>

#include "preflight/ckpt_tier.h"
#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/job_liveness.h"
#include "preflight/log.h"
#include "preflight/stage_copy.h"
#include "preflight/state_paths.h"

namespace preflight {
namespace {

void SleepUntil(double deadline, double at_most) {
  double left = std::min(at_most, deadline - MonotonicSeconds());
  if (left <= 0) return;
  struct timespec ts = {static_cast<time_t>(left), static_cast<long>((left - static_cast<time_t>(left)) * 1e9)};
  ::nanosleep(&ts, nullptr);
}

// Every entry of `dir` removed (not `dir` itself: its parent is root's),
// following nothing.
Status ClearFolder(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, dir);
  std::vector<std::string> names;
  if (DIR* d = ::fdopendir(::dup(fd))) {
    while (struct dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    ::closedir(d);
  }
  Status first;
  for (const auto& n : names) {
    Status s = RemoveTreeAt(fd, n, dir + "/" + n);
    if (!s.ok() && first.ok()) first = s;
  }
  ::close(fd);
  return first;
}

// For good: groups, gid, uid (real, effective, saved), no_new_privs;
// getting root back must fail. The child may be signalled by the user (it
// is theirs): that only ends the user's own copy.
bool DropFully(uid_t uid, gid_t gid, const std::string& user, std::string* error) {
  std::vector<gid_t> groups(256);
  int n = static_cast<int>(groups.size());
  if (user.empty() || ::getgrouplist(user.c_str(), gid, groups.data(), &n) < 0) n = 0;
  if (n <= 0) { groups = {gid}; n = 1; }
  groups.resize(static_cast<size_t>(n));
  auto failed = [&](const char* call) { *error = std::string(call) + ": " + std::strerror(errno); return false; };
  if (::setgroups(groups.size(), groups.data()) != 0) return failed("setgroups");
  if (::setresgid(gid, gid, gid) != 0) return failed("setresgid");
  if (::setresuid(uid, uid, uid) != 0) return failed("setresuid");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return failed("PR_SET_NO_NEW_PRIVS");
  if (uid != 0 && (::setresuid(0, 0, 0) == 0 || ::geteuid() != uid)) { *error = "privileges could not be dropped"; return false; }
  return true;
}

// A child that drops fully to the user (when `drop`) and runs `work`,
// whose result (at most kCkptChildReportMax bytes) comes back over a
// pipe; its process group is killed at `kill_at` (MonotonicSeconds).
struct UserChild {
  std::string text;   // what `work` returned
  std::string error;  // the child could not run it, died or said nothing
  bool killed = false;
};
UserChild RunAsUserChild(bool drop, uid_t uid, gid_t gid, const std::string& user, double kill_at,
                         const std::function<std::string()>& work) {
  UserChild c;
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC) != 0) { c.error = std::string("pipe: ") + std::strerror(errno); return c; }
  pid_t pid = ::fork();
  if (pid < 0) {
    c.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return c;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 3);
    ::syscall(SYS_close_range, 4u, ~0u, 0u);
    std::string error;
    if (drop && !DropFully(uid, gid, user, &error)) {
      WriteAll(3, "E cannot become uid " + std::to_string(uid) + ": " + error);
      ::_exit(2);
    }
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);  // after the uid change, which clears it
    if (::getppid() == 1) ::_exit(1);
    WriteAll(3, "R" + work());
    ::_exit(0);
  }
  ::setpgid(pid, pid);
  ::close(fds[1]);
  std::string text;
  char buf[65536];
  bool too_big = false;
  for (;;) {
    double left = kill_at - MonotonicSeconds();
    if (left <= 0) { c.killed = true; break; }
    struct pollfd p = {fds[0], POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (pr <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (text.size() + static_cast<size_t>(n) > kCkptChildReportMax + 1) { too_big = true; break; }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (c.killed || too_big) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  int ws = 0;
  // The result is in; the child only exits now. Bounded all the same.
  for (int i = 0; i < 500 && ::waitpid(pid, &ws, WNOHANG) == 0; ++i) SleepUntil(MonotonicSeconds() + 1, 0.01);
  if (::waitpid(pid, &ws, WNOHANG) == 0) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
  }
  if (c.killed) return c;
  if (too_big) c.error = "its report was larger than 1 MiB";
  else if (!text.empty() && text[0] == 'E') c.error = text.substr(2);
  else if (!text.empty() && text[0] == 'R' && !(WIFSIGNALED(ws))) c.text = text.substr(1);
  else if (WIFSIGNALED(ws))
    c.error = "killed by signal " + std::to_string(WTERMSIG(ws)) + " (the job's user, root or the OOM killer)";
  else c.error = "it ended without a report";
  return c;
}

}  // namespace

CkptChildReport CkptFinishAsUser(const std::string& dir, const std::string& node, double deadline) {
  CkptChildReport r;
  auto plan = ReadCkptPlan(dir);
  if (!plan && plan.status().code() != Status::Code::kNotFound) {
    r.plan_error = "the persist plan " + dir + "/" + kCkptPlanFile + " could not be read: " + plan.status().message();
  } else if (plan) {
    r.had_plan = true;
    r.tier = plan->tier;
    CkptRoundOptions o;
    o.deadline = deadline;
    // No local retention here: the folder is cleared once all is durable,
    // and a round that no longer sees the durable newest one locally would
    // take an older one for the newest still to persist.
    o.local_gc = false;
    // Again while this node's part waits for the others' (their epilogs
    // run at the same time): whichever node completes the set commits.
    for (;;) {
      auto res = PersistRound(dir, *plan, node, o);
      if (!res) { r.round_error = res.status().message(); break; }
      bool waiting = false;
      for (const auto& rec : res->records) {
        waiting = waiting || rec.state == CkptState::kPersisting;
        bool replaced = false;
        for (auto& old : r.round.records)
          if (old.name == rec.name) { old = rec; replaced = true; }
        if (!replaced) r.round.records.push_back(rec);
      }
      r.round.newest_durable = res->newest_durable;
      r.round.bytes_not_durable = res->bytes_not_durable;
      r.round.timed_out = res->timed_out;
      for (const auto& n : res->notes) r.round.notes.push_back(n);
      if (!waiting || res->timed_out || MonotonicSeconds() >= deadline) break;
      SleepUntil(deadline, 1.0);
      if (MonotonicSeconds() >= deadline) { r.round.timed_out = true; break; }
    }
    // A part that waited and that another node's commit made durable.
    for (auto& rec : r.round.records)
      if (rec.state == CkptState::kPersisting && rec.name == r.round.newest_durable) {
        rec.state = CkptState::kDurable;
        rec.missing.clear();
        rec.persist_end = NowUnix();
      }
    if (!r.round.newest_durable.empty()) {
      struct stat st;
      std::string marker = plan->tier + "/" + r.round.newest_durable + "/" + kCkptDurableMarker;
      if (::lstat(marker.c_str(), &st) == 0) r.newest_durable_time = static_cast<double>(st.st_mtime);
    }
  }
  if (!r.plan_error.empty()) r.kept_reason = "its persist plan could not be read";
  else if (!r.round_error.empty()) r.kept_reason = "the finishing copy failed";
  else if (r.round.bytes_not_durable > 0) r.kept_reason = "its newest complete checkpoint is not durable";
  if (!r.kept_reason.empty()) return r;
  Status c = ClearFolder(dir);
  r.cleared = c.ok();
  if (!c.ok()) r.clear_error = c.message();
  return r;
}

CkptEpilogResult FinishCkptForJob(const Config& cfg, const JobContext& job) {
  CkptEpilogResult r;
  r.dir = CkptJobDir(cfg.ckpt, job.job_id);
  if (r.dir.empty()) return r;
  int pfd = ::open(cfg.ckpt.dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (pfd < 0) return r;
  struct stat st;
  if (::fstatat(pfd, job.job_id.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
    ::close(pfd);
    return r;
  }
  r.requested = true;
  double budget = cfg.ckpt.epilog_budget_ms / 1000.0;
  bool root = ::geteuid() == 0;
  // The folder's owner is the job's user (the prolog handed it over).
  uid_t uid = root ? st.st_uid : ::geteuid();
  gid_t gid = root ? st.st_gid : ::getegid();
  std::string user = job.uid == uid ? job.user : "";
  if (root && uid == 0) r.child_error = "the folder is root's (the prolog did not hand it over); nothing read";
  double deadline = MonotonicSeconds() + budget;
  if (r.child_error.empty()) {
    std::string dir = r.dir, node = job.node;
    UserChild c = RunAsUserChild(root, uid, gid, user, deadline + kCkptEpilogSlack, [&] {
      std::string out = CkptChildReportJson(CkptFinishAsUser(dir, node, deadline));
      if (out.size() <= kCkptChildReportMax) return out;
      CkptChildReport small;
      small.plan_error = "the report was too large";
      return CkptChildReportJson(small);
    });
    if (c.killed)
      r.child_error = "killed after the budget (" + std::to_string(static_cast<long long>(budget)) + " s) and " +
                      std::to_string(static_cast<long long>(kCkptEpilogSlack)) + " s more";
    else if (!c.error.empty()) r.child_error = c.error;
    else {
      auto rep = ParseCkptChildReport(c.text);
      if (rep) r.report = *rep;
      else r.child_error = rep.status().message();
    }
  }
  // Root removes only the job folder itself, and only empty (rmdir never
  // follows a link; a folder that is not empty stays, named in the log).
  if (r.child_error.empty() && r.report.cleared) {
    if (::unlinkat(pfd, job.job_id.c_str(), AT_REMOVEDIR) == 0) r.removed = true;
    else r.report.kept_reason = std::string("cannot remove the folder: ") + std::strerror(errno);
  }
  ::close(pfd);
  r.lines = CkptOutcomeLines(r.report, r.child_error, budget);
  if (r.removed) r.lines.push_back("checkpoint: " + r.dir + " removed");
  else if (r.child_error.empty() && r.report.cleared)
    r.lines.push_back("checkpoint: " + r.dir + " left in place: " + r.report.kept_reason);

  bool ok = r.child_error.empty() && r.report.plan_error.empty() && r.report.round_error.empty() &&
            r.report.round.bytes_not_durable == 0;
  r.check.check = "ckpt";
  r.check.device = r.dir;
  r.check.value = r.report.round.newest_durable.empty() ? "no durable checkpoint" : "newest durable " + r.report.round.newest_durable;
  r.check.verdict = ok ? Verdict::kPass : Verdict::kWarn;
  r.check.owner = FaultOwner::kUser;  // the job's outcome: never the node's
  r.check.message = r.lines.empty() ? "" : r.lines.front();
  for (const auto& l : r.lines)
    if (l.find("not durable") != std::string::npos || l.find("kept") != std::string::npos) { r.check.message = l; break; }

  // What became of each checkpoint, for on-call and `preflight` tools.
  std::string sdir = state::JobDir(cfg, job.job_id);
  Status w = MakeDirs(sdir, 0755);
  if (w.ok()) w = WriteFileAtomic(state::JobNodeFile(cfg, job.job_id, job.node, state::kCkptJson), CkptStateJson(job.job_id, job.node, r), 0644);
  if (!w.ok()) Log(LogLevel::kError, "epilog", "checkpoint record", w.message());
  if (!cfg.textfile_dir.empty()) {
    Status m = MakeDirs(cfg.textfile_dir, 0755);
    if (m.ok())
      m = WriteFileAtomic(cfg.textfile_dir + "/preflight_" + job.node + "_ckpt.prom",
                          CkptPrometheus(job.node, r.report, r.child_error, NowUnix()), 0644);
    if (!m.ok()) Log(LogLevel::kError, "epilog", "checkpoint metrics", m.message());
  }
  return r;
}

namespace {

// "77" of "77" and of "77.set-aside.1001.20261205-101500"; "" for a name
// that is neither.
std::string JobOfEntry(const std::string& name) {
  std::string job = name.substr(0, name.find('.'));
  if (job.empty() || job.size() > 64) return "";
  for (char ch : job)
    if (!((ch >= '0' && ch <= '9') || ch == '_')) return "";
  return job;
}

// The entries of ckpt_dir older than state_keep, other than running_job's.
std::vector<std::pair<std::string, std::string>> StaleEntries(const Config& cfg, const std::string& running_job,
                                                              double now_epoch) {
  std::vector<std::pair<std::string, std::string>> out;  // entry, job
  if (cfg.ckpt.dir.empty()) return out;
  int fd = ::open(cfg.ckpt.dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return out;
  if (DIR* d = ::fdopendir(::dup(fd))) {
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name, job = JobOfEntry(name);
      struct stat st;
      if (job.empty() || job == running_job) continue;
      if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
      if (static_cast<double>(st.st_mtime) > now_epoch - cfg.state_keep_ms / 1000.0) continue;
      out.push_back({name, job});
    }
    ::closedir(d);
  }
  ::close(fd);
  return out;
}

}  // namespace

std::set<std::string> StaleCkptJobs(const Config& cfg, const std::string& running_job, double now_epoch) {
  std::set<std::string> jobs;
  for (const auto& e : StaleEntries(cfg, running_job, now_epoch)) jobs.insert(e.second);
  return jobs;
}

std::vector<std::string> GcCkptJobs(const Config& cfg, const std::string& running_job, double now_epoch,
                                    const SlurmJobs& slurm) {
  std::vector<std::string> lines;
  size_t done = 0;
  for (const auto& [name, job] : StaleEntries(cfg, running_job, now_epoch)) {
    std::string path = cfg.ckpt.dir + "/" + name;
    std::string why = KeptBecause(slurm, job, /*records=*/true);
    if (!MayRemoveRecords(slurm, job)) { lines.push_back(path + ": older than state_keep, but kept: " + why); continue; }
    if (++done > kCkptGcPerRun) break;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    bool root = ::geteuid() == 0;
    std::string error;
    if (!(root && st.st_uid == 0)) {  // a root-owned folder holds nothing of a user's: rmdir only
      UserChild c = RunAsUserChild(root, st.st_uid, st.st_gid, "", MonotonicSeconds() + kCkptGcSeconds, [&] {
        Status s = ClearFolder(path);
        return s.ok() ? std::string() : s.message();
      });
      error = c.killed ? "removing as its owner took longer than " + std::to_string(static_cast<int>(kCkptGcSeconds)) + " s"
                       : !c.error.empty() ? c.error : c.text;
    }
    if (error.empty() && ::rmdir(path.c_str()) != 0) error = std::string("rmdir: ") + std::strerror(errno);
    lines.push_back(error.empty() ? path + ": removed (job " + job + " ended, older than state_keep)"
                                  : path + ": cannot remove: " + error);
  }
  return lines;
}

}  // namespace preflight
