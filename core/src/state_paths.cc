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
#include "preflight/text.h"

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
  bool left = false;  // picked, and could not be removed
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

// Why `name` (statx'd as `sx`) is no entry gc may unlink, compared with the
// jobs folder `jobs` it should share a mount with: "" when nothing is in
// the way. Checked for the folder and each of its entries before anything
// goes, so that a folder gc cannot empty keeps every record (its epilog's
// too, or the next run would count it as unfinished), and so that gc never
// unlinks inside another file system mounted over a job folder.
std::string InTheWay(const struct statx& sx, const struct statx& jobs, bool entry) {
  bool mnt_known = (sx.stx_mask & STATX_MNT_ID) && (jobs.stx_mask & STATX_MNT_ID);
  bool root_known = sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT;
  if ((mnt_known && sx.stx_mnt_id != jobs.stx_mnt_id) || (root_known && (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) ||
      sx.stx_dev_major != jobs.stx_dev_major || sx.stx_dev_minor != jobs.stx_dev_minor)
    return "a mount point (gc never removes across a mount)";
  if (sx.stx_attributes & STATX_ATTR_IMMUTABLE) return "immutable (chattr +i)";
  if (sx.stx_attributes & STATX_ATTR_APPEND) return "append-only (chattr +a)";
  if (entry && S_ISDIR(sx.stx_mode)) return "a folder (a job folder holds only files; gc removes no folder inside it)";
  return "";
}

constexpr unsigned kStatxMask = STATX_TYPE | STATX_MNT_ID;

// Remove the job folder `name` (in `jobs_fd`, shown as `shown`) and its
// files, or nothing where InTheWay finds an entry that cannot go. The error
// is one "cannot remove PATH: REASON", PATH as PrintableText.
Status RemoveFlatFolder(int jobs_fd, const struct statx& jobs_sx, const std::string& shown, const std::string& name) {
  auto refuse = [&](const std::string& entry, const std::string& why) {
    return Status::IOError("cannot remove " + shown + "/" + PrintableText(name) +
                           (entry.empty() ? "" : "/" + PrintableText(entry)) + ": " + why);
  };
  struct statx sx;
  if (::statx(jobs_fd, name.c_str(), AT_SYMLINK_NOFOLLOW, kStatxMask, &sx) != 0) {
    int e = errno;
    return e == ENOENT ? Status::Ok() : refuse("", std::strerror(e));
  }
  std::string why = InTheWay(sx, jobs_sx, false);
  if (!why.empty()) return refuse("", why + "; left as it is");
  int fd = ::openat(jobs_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return refuse("", std::strerror(errno));
  DIR* d = ::fdopendir(fd);
  if (!d) { int e = errno; ::close(fd); return refuse("", std::strerror(e)); }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    const char* n = e->d_name;
    if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
    names.push_back(n);
    struct statx esx;
    if (::statx(::dirfd(d), n, AT_SYMLINK_NOFOLLOW, kStatxMask, &esx) == 0) why = InTheWay(esx, jobs_sx, true);
    if (!why.empty()) {
      ::closedir(d);
      return refuse(n, why + "; the folder is left as it is");
    }
  }
  for (const auto& n : names)
    if (::unlinkat(::dirfd(d), n.c_str(), 0) != 0 && errno != ENOENT) {
      int e = errno;
      ::closedir(d);
      return refuse(n, std::string(std::strerror(e)) + "; the rest of the folder is left");
    }
  ::closedir(d);
  if (::unlinkat(jobs_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return refuse("", std::strerror(errno));
  return Status::Ok();
}

// The pruning rules; `slurm` null: every folder the rules pick may go
// (JobsToPrune's dry run), else only those job_liveness.h lets go.
StateGcResult Prune(const Config& cfg, const std::string& running_job, double now, bool dry_run, const SlurmJobs* slurm,
                    std::set<std::string>* picked) {
  StateGcResult r;
  std::string jobs = cfg.state_dir + "/jobs";
  std::string shown = PrintableText(jobs);
  int jfd = ::open(jobs.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (jfd < 0) {
    if (errno != ENOENT) r.errors.push_back("cannot read " + shown + ": " + std::strerror(errno));
    return r;
  }
  struct statx jobs_sx;
  if (::statx(jfd, "", AT_EMPTY_PATH, kStatxMask, &jobs_sx) != 0) {
    r.errors.push_back("cannot read " + shown + ": " + std::strerror(errno));
    ::close(jfd);
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
  auto remove = [&](JobFolder& f, const std::string& why) {
    if (picked) picked->insert(f.job);
    if (slurm && !MayRemoveRecords(*slurm, f.job)) {
      r.kept_live.push_back(PrintableText(f.job) + " " + why + ", but kept: " + KeptBecause(*slurm, f.job, true));
      return false;
    }
    Status s = dry_run ? Status::Ok() : RemoveFlatFolder(jfd, jobs_sx, shown, f.job);
    if (!s.ok()) {
      f.left = true;  // reported once, never tried again this run
      r.left.push_back(s.message());
      return false;
    }
    r.removed.push_back(PrintableText(f.job) + " " + std::to_string(f.bytes) + " " + why);
    r.removed_bytes += f.bytes;
    return true;
  };
  std::vector<JobFolder> kept;
  for (auto& f : folders) {
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
    for (auto& f : kept) {
      if (total > cfg.state_keep_bytes && f.finished && !f.left && remove(f, "finished, over state_keep_size")) {
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
