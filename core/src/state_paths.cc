#include "preflight/state_paths.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "preflight/status.h"

namespace preflight::state {
namespace {
std::string Node(const std::string& node) { return node.empty() ? std::string("localhost") : node; }
}  // namespace

std::string NodesDir(const Config& cfg) { return cfg.state_dir + "/nodes"; }
std::string JobDir(const Config& cfg, const std::string& job) { return cfg.state_dir + "/jobs/" + job; }
std::string NodeFile(const Config& cfg, const std::string& node, const std::string& suffix) {
  return NodesDir(cfg) + "/" + Node(node) + suffix;
}
std::string JobNodeFile(const Config& cfg, const std::string& job, const std::string& node, const std::string& suffix) {
  return JobDir(cfg, job) + "/" + Node(node) + suffix;
}

namespace {

struct JobFolder {
  std::string job;
  uint64_t bytes = 0;
  double newest = 0;
  bool finished = false;
};

// The files of one job folder (flat: state_paths writes no subfolders).
bool Describe(int jobs_fd, const std::string& name, JobFolder* f) {
  int fd = ::openat(jobs_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (!d) { ::close(fd); return false; }
  struct stat st;
  if (::fstat(::dirfd(d), &st) == 0) f->newest = st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
  while (struct dirent* e = ::readdir(d)) {
    const char* n = e->d_name;
    if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
    if (::fstatat(::dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    f->bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    f->newest = std::max(f->newest, st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9);
    size_t len = std::strlen(n);
    static const char kDone[] = ".epilog.json";
    if (len > sizeof kDone - 1 && std::strcmp(n + len - (sizeof kDone - 1), kDone) == 0) f->finished = true;
  }
  ::closedir(d);
  return true;
}

Status RemoveFlatFolder(int jobs_fd, const std::string& name) {
  int fd = ::openat(jobs_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + name);
  DIR* d = ::fdopendir(fd);
  if (!d) { int e = errno; ::close(fd); return Status::FromErrno(e, "open " + name); }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    const char* n = e->d_name;
    if (!(n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0)))) names.push_back(n);
  }
  Status first;
  for (const auto& n : names)
    if (::unlinkat(::dirfd(d), n.c_str(), 0) != 0 && errno != ENOENT && first.ok())
      first = Status::FromErrno(errno, "unlink " + name + "/" + n);
  ::closedir(d);
  if (first.ok() && ::unlinkat(jobs_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    first = Status::FromErrno(errno, "rmdir " + name);
  return first;
}

// The pruning rules; `slurm` null: every folder the rules pick may go
// (JobsToPrune's dry run), else only those job_liveness.h lets go.
StateGcResult Prune(const Config& cfg, const std::string& running_job, double now, bool dry_run, const SlurmJobs* slurm,
                    std::set<std::string>* picked) {
  StateGcResult r;
  std::string jobs = cfg.state_dir + "/jobs";
  int jfd = ::open(jobs.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (jfd < 0) {
    if (errno != ENOENT) r.errors.push_back(Status::FromErrno(errno, jobs).message());
    return r;
  }
  std::vector<JobFolder> folders;
  if (DIR* d = ::fdopendir(::dup(jfd))) {
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == ".." || n == running_job) continue;
      JobFolder f;
      f.job = n;
      if (Describe(jfd, n, &f)) folders.push_back(f);
    }
    ::closedir(d);
  }
  double keep = cfg.state_keep_ms / 1000.0;
  auto remove = [&](const JobFolder& f, const std::string& why) {
    if (picked) picked->insert(f.job);
    if (slurm && !MayRemoveRecords(*slurm, f.job)) {
      r.kept_live.push_back(f.job + " " + why + ", but kept: " + KeptBecause(*slurm, f.job, true));
      return false;
    }
    Status s = dry_run ? Status::Ok() : RemoveFlatFolder(jfd, f.job);
    if (!s.ok()) { r.errors.push_back(jobs + "/" + s.message()); return false; }
    r.removed.push_back(f.job + " " + std::to_string(f.bytes) + " " + why);
    r.removed_bytes += f.bytes;
    return true;
  };
  std::vector<JobFolder> kept;
  for (const auto& f : folders) {
    double age = now - f.newest;
    if (keep > 0 && f.finished && age > keep) { if (remove(f, "finished, older than state_keep")) continue; }
    else if (keep > 0 && !f.finished && age > 4 * keep) { if (remove(f, "no epilog, older than 4 x state_keep")) continue; }
    kept.push_back(f);
  }
  uint64_t total = 0;
  for (const auto& f : kept) total += f.bytes;
  if (cfg.state_keep_bytes > 0 && total > cfg.state_keep_bytes) {
    std::sort(kept.begin(), kept.end(), [](const JobFolder& a, const JobFolder& b) { return a.newest < b.newest; });
    std::vector<JobFolder> still;
    for (const auto& f : kept) {
      if (total > cfg.state_keep_bytes && f.finished && remove(f, "finished, over state_keep_size")) {
        total -= f.bytes;
        continue;
      }
      still.push_back(f);
    }
    kept.swap(still);
  }
  ::close(jfd);
  r.kept = kept.size();
  r.kept_bytes = total;
  return r;
}

}  // namespace

std::set<std::string> JobsToPrune(const Config& cfg, const std::string& running_job, double now) {
  std::set<std::string> picked;
  Prune(cfg, running_job, now, /*dry_run=*/true, nullptr, &picked);
  return picked;
}

StateGcResult PruneJobState(const Config& cfg, const std::string& running_job, double now, const SlurmJobs& slurm,
                            bool dry_run) {
  return Prune(cfg, running_job, now, dry_run, &slurm, nullptr);
}

}  // namespace preflight::state
