#include "preflight/stage_job.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "preflight/report.h"
#include "preflight/fileutil.h"
#include "preflight/log.h"
#include "preflight/node_addresses.h"
#include "preflight/json.h"
#include "preflight/hostlist.h"
#include "preflight/slurmctl.h"
#include "preflight/stage_peer.h"
#include "preflight/stage_spec.h"
#include "preflight/state_paths.h"
#include "preflight/strings.h"

namespace preflight {

Expected<StageRecord> ReadStageRecord(const Config& cfg, const std::string& job_id, const std::string& node) {
  std::string path = state::JobNodeFile(cfg, job_id, node, state::kStageJson);
  auto text = ReadWholeFile(path);
  if (!text) return text.status();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::InvalidArgument(path + ": not a JSON object");
  StageRecord r;
  r.ok = j.value("ok", false);
  r.bytes = j.value("bytes", uint64_t{0});
  r.files = j.value("files", uint64_t{0});
  r.seconds = j.value("seconds", 0.0);
  auto ds = j.find("datasets");
  if (ds != j.end() && ds->is_array()) {
    for (const auto& d : *ds) {
      if (!d.is_object()) continue;
      r.datasets.push_back(d.value("name", std::string()));
      (d.value("cache", std::string()) == "hit" ? r.hits : r.misses) += 1;
    }
  }
  return r;
}

std::string StageViewDir(const Config& cfg, const std::string& job_id) { return cfg.stage.dir + "/jobs/" + job_id; }
std::string StageErrorFile(const Config& cfg, const std::string& job_id, const std::string& node) {
  return state::JobNodeFile(cfg, job_id, node, state::kStageError);
}

StageCacheOptions CacheOptionsFor(const Config& cfg) {
  StageCacheOptions o;
  o.dir = cfg.stage.dir + "/cache";
  o.quota = cfg.stage.cache_quota == 0 ? UINT64_MAX : cfg.stage.cache_quota;  // config 0: no limit
  unsigned n = cfg.stage.workers ? static_cast<unsigned>(cfg.stage.workers) : std::thread::hardware_concurrency();
  o.workers = std::max(2u, std::min(n, 64u));
  o.remote_workers = static_cast<unsigned>(cfg.stage.remote_workers);
  o.max_entries = cfg.stage.max_entries;
  o.verify_dirs_only = cfg.stage.verify == StageVerify::kDirs;
  return o;
}

namespace {

// Unmount what we mounted in the view and remove it (the user may have
// added files; nothing is followed).
Status CleanView(const std::string& view) {
  struct stat st;
  if (::lstat(view.c_str(), &st) != 0) return errno == ENOENT ? Status::Ok() : Status::FromErrno(errno, view);
  int fd = ::open(view.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    std::vector<std::string> names;
    if (DIR* d = ::fdopendir(::dup(fd))) {
      while (struct dirent* e = ::readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
      ::closedir(d);
    }
    for (const auto& n : names) {
      struct statx sx;
      if (::statx(fd, n.c_str(), AT_SYMLINK_NOFOLLOW, STATX_TYPE, &sx) == 0 &&
          (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
        std::string p = view + "/" + n;
        if (::umount2(p.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL)
          { int e = errno; ::close(fd); return Status::FromErrno(e, "umount " + p); }
      }
    }
    ::close(fd);
  }
  return RemoveTree(view);
}

Status BindReadOnly(const std::string& from, const std::string& to) {
  if (::mount(from.c_str(), to.c_str(), nullptr, MS_BIND, nullptr) != 0) return Status::FromErrno(errno, "bind mount " + from + " on " + to);
  if (::mount(nullptr, to.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
    int e = errno;
    ::umount2(to.c_str(), MNT_DETACH);
    return Status::FromErrno(e, "read-only remount of " + to);
  }
  return Status::Ok();
}

std::string Human(uint64_t b) { return HumanBytes(static_cast<double>(b)); }

// "uid 1001 (alice)", or "uid 1001" where the name can't be found.
std::string UserName(uid_t uid) {
  struct passwd pw, *res = nullptr;
  char buf[1024];
  std::string out = "uid " + std::to_string(uid);
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) out += std::string(" (") + res->pw_name + ")";
  return out;
}

void WriteStageRecord(const Config& cfg, const JobContext& job, const StageJobResult& r) {
  std::string dir = state::JobDir(cfg, job.job_id);
  if (!MakeDirs(dir, 0755).ok()) return;
  uint64_t bytes = 0, files = 0;
  for (const auto& d : r.datasets) { bytes += d.second.bytes; files += d.second.files; }
  // The names the tasks may point at (spank_task.cc trusts only this
  // root-written record, never the job's environment): ReadStageRecord.
  JsonWriter w;
  w.BeginObject().Field("node", job.node).Field("job_id", job.job_id).Field("ok", r.ok);
  if (!r.ok) w.Field("error", r.message);
  w.Field("seconds", r.seconds).Field("bytes", static_cast<int64_t>(bytes)).Field("files", static_cast<int64_t>(files));
  w.Key("datasets").BeginArray();
  for (const auto& d : r.datasets) {
    w.BeginObject().Field("name", d.first).Field("source", d.second.source).Field("key", d.second.key)
        .Field("cache", d.second.hit ? "hit" : "miss").Field("bytes", static_cast<int64_t>(d.second.bytes))
        .Field("files", static_cast<int64_t>(d.second.files)).Field("seconds", d.second.seconds)
        .Field("source_bytes", static_cast<int64_t>(d.second.source_bytes))
        .Field("peer_bytes", static_cast<int64_t>(d.second.peer_bytes));
    if (!d.second.note.empty()) w.Field("note", d.second.note);
    w.EndObject();
  }
  w.EndArray().EndObject();
  WriteFileAtomic(state::JobNodeFile(cfg, job.job_id, job.node, state::kStageJson), w.str() + "\n", 0644);
}

}  // namespace

namespace {

// Root writes users' datasets under stage_dir: the whole chain must be
// folders no user can change (a 1777 scratch disk lets anyone pre-create
// or link stage_dir/cache). What a user placed in a sticky world-writable
// folder of the chain is set aside (their doing must not drain the
// node), each said in `summary`; a bad chain otherwise is the site's to
// fix (kPermission); a user who keeps racing the set-aside fails this job
// only (kUnavailable).
Status MakeStageDirs(const Config& cfg, const std::string& cache_dir, const std::string& node, std::string* summary) {
  std::vector<SetAside> aside;
  Status s = MakePrivateDirs(cfg.stage.dir, 0711, &aside);
  if (s.ok()) s = MakePrivateDirs(cfg.stage.dir + "/jobs", 0711, &aside);
  if (s.ok()) s = MakePrivateDirs(cache_dir, 0700, &aside);
  for (const auto& a : aside) {
    std::string what = "set aside " + a.path + " (owned by " + UserName(a.owner) +
                       ", not root, in a sticky world-writable folder) as " + a.moved_to + ", untouched";
    Log(LogLevel::kInfo, "stage", "warning: " + what, "a fresh private folder is used; the node stays in service");
    *summary += "preflight: stage on " + node + ": warning: " + what + "\n";
  }
  return s;
}

// Who reads the sources: as root, the job's user (never root for a user);
// otherwise this process as it is.
StageIdentity ReaderFor(const JobContext& job) {
  StageIdentity who;
  if (::geteuid() != 0) return who;
  who.drop = job.uid != 0;
  who.uid = job.uid;
  who.gid = job.gid == static_cast<gid_t>(-1) ? job.uid : job.gid;
  who.user = job.user;
  return who;
}

// "preflight: stage on NODE: NAME <- PATH: N files, SIZE, cache hit|miss (S s)[, note]"
std::string SummaryLine(const std::string& node, const StageSource& src, const StagedDataset& d) {
  char line[512];
  std::snprintf(line, sizeof line, "preflight: stage on %s: %s <- %s: %llu files, %s, cache %s (%.2f s)", node.c_str(),
                src.name.c_str(), src.path.c_str(), static_cast<unsigned long long>(d.files), Human(d.bytes).c_str(),
                d.hit ? "hit" : "miss", d.seconds);
  return line + (d.note.empty() ? std::string() : ", " + d.note) + "\n";
}

// The job's view of its datasets, handed to the job's user, mode 0700.
Status HandViewTo(const std::string& view, const JobContext& job) {
  if (::chown(view.c_str(), job.uid == static_cast<uid_t>(-1) ? ::geteuid() : job.uid,
              job.gid == static_cast<gid_t>(-1) ? ::getegid() : job.gid) != 0 ||
      ::chmod(view.c_str(), 0700) != 0)
    return Status::FromErrno(errno, "chown " + view);
  return Status::Ok();
}

// The stage failed, and whose fault it is (fault.h): said in the summary;
// the user's is also the error file that makes the plugin refuse the
// job's tasks with the reason.
void Failed(const Config& cfg, const JobContext& job, const std::string& err_file, const std::string& msg,
            FaultOwner owner, StageJobResult* r) {
  r->ok = false;
  r->owner = owner;
  r->drain = ActionFor(owner).drain;
  r->message = msg;
  r->summary += "preflight: stage on " + job.node + " FAILED (" + FaultOwnerName(owner) + "): " + msg + "\n";
  if (ActionFor(owner).fail_job) {
    MakeDirs(state::JobDir(cfg, job.job_id), 0755);
    WriteFileAtomic(err_file, "preflight: stage on " + job.node + ": " + msg + "\n", 0644);
  }
}

// The fan-out plan: every node of the job with its address and port, and
// this node's place (*use_peers when it is one of two or more). An error
// is the site config's (node_addresses).
Status PeerPlan(const Config& cfg, const JobContext& job, PeerOptions* peer, bool* use_peers) {
  // slurmd's prolog gets no SLURM_JOB_NODELIST (slurm.conf(5)): ask
  // slurmctld for the job's nodes, in its order, when it is missing.
  Expected<std::vector<std::string>> names = std::vector<std::string>();
  if (!job.nodelist.empty()) {
    names = ExpandHostlist(job.nodelist);
  } else if (auto rec = LoadJob(cfg, job.job_id)) {
    names = rec->nodes;
  }
  auto addrs = cfg.node_addresses.empty() ? Expected<std::map<std::string, std::string>>(std::map<std::string, std::string>())
                                          : LoadNodeAddresses(cfg.node_addresses);
  if (!addrs) return addrs.status();
  if (!names || names->size() <= 1) return Status::Ok();
  for (size_t i = 0; i < names->size(); ++i) {
    // The node's own address (node_addresses) if the site names one,
    // else stage_peer_host with %n as the node's name.
    auto it = addrs->find((*names)[i]);
    std::string host = it != addrs->end() ? it->second : cfg.stage.peer_host;
    for (size_t at; (at = host.find("%n")) != std::string::npos;) host.replace(at, 2, (*names)[i]);
    peer->nodes.push_back({host, StagePeerPortFor(cfg.stage.peer_port, i)});
    if ((*names)[i] == job.node) {
      peer->self = i;
      *use_peers = true;
      if (it != addrs->end()) peer->bind_host = it->second;
    }
  }
  peer->job_id = job.job_id;
  peer->munge_socket = cfg.stage.munge_socket;
  return Status::Ok();
}

}  // namespace

StageJobResult StageForJob(const Config& cfg, const JobContext& job) {
  StageJobResult r;
  if (!StageRequested(job)) return r;
  r.requested = true;
  double t0 = MonotonicSeconds();
  std::string err_file = StageErrorFile(cfg, job.job_id, job.node);
  ::unlink(err_file.c_str());
  auto fail = [&](const std::string& msg, FaultOwner owner) { Failed(cfg, job, err_file, msg, owner, &r); };
  // --stage as JobContextFromEnv parsed it (the option table's one parse).
  if (!job.stage_error.ok()) { fail(job.stage_error.message(), FaultOwner::kUser); return r; }
  const std::vector<StageSource>& sources = job.options.stage;
  if (cfg.stage.dir.empty()) { fail("--stage is not enabled on " + job.node + " (no stage_dir in the site config)", FaultOwner::kUser); return r; }
  if (::geteuid() == 0 && job.uid == static_cast<uid_t>(-1)) {
    fail("job user unknown (no SLURM_JOB_UID); refusing to read sources as root", FaultOwner::kUser);
    return r;
  }
  const StageIdentity who = ReaderFor(job);
  std::string view = StageViewDir(cfg, job.job_id);
  StageCacheOptions co = CacheOptionsFor(cfg);
  co.deadline = t0 + cfg.stage.timeout_ms / 1000.0;
  // The stage_dir chain (MakeStageDirs): a bad one is the site's to fix,
  // drained once, named, never used.
  Status s = MakeStageDirs(cfg, co.dir, job.node, &r.summary);
  if (!s.ok()) {
    FaultOwner owner = s.code() == Status::Code::kPermission    ? FaultOwner::kConfig
                       : s.code() == Status::Code::kUnavailable ? FaultOwner::kUser
                                                                : FaultOwner::kNode;
    fail("stage_dir " + s.message(), owner);
    return r;
  }
  s = CleanView(view);  // a requeued job's leftovers
  if (s.ok() && ::mkdir(view.c_str(), 0700) != 0) s = Status::FromErrno(errno, "mkdir " + view);
  if (!s.ok()) { fail(s.message(), FaultOwner::kNode); return r; }

  // Peer fan-out: this node's place in the job's node list.
  PeerOptions peer;
  bool use_peers = false;
  if (cfg.stage.peers) {
    Status ps = PeerPlan(cfg, job, &peer, &use_peers);
    if (!ps.ok()) {
      fail("site config " + ps.message(), FaultOwner::kConfig);
      return r;
    }
  }
  auto stage_one = [&](const std::string& path, StagedDataset* d, FaultSide* side) {
    if (!use_peers) return StageDataset(co, path, who, job.job_id, d, side);
    PeerReport rep;
    return StageWithPeers(co, path, who, peer, d, side, &rep);
  };

  for (const auto& src : sources) {
    if (src.list || src.path.empty() || src.path[0] != '/') {
      fail("'" + src.path + "': not an absolute path (the submit side resolves paths; was --stage checked?)", FaultOwner::kUser);
      break;
    }
    StagedDataset d;
    FaultSide side;
    s = stage_one(src.path, &d, &side);
    if (!s.ok() && side == FaultSide::kDestSpace) {
      // Make room from datasets no job uses, then try once more.
      TrimCache(co, 0, nullptr);
      s = stage_one(src.path, &d, &side);
      if (!s.ok() && side == FaultSide::kDestSpace)
        s = s.Context("dataset does not fit in " + cfg.stage.dir + " on " + job.node);
    }
    if (!s.ok()) {
      std::string as = who.drop ? " (read as user " + (who.user.empty() ? std::to_string(who.uid) : who.user) + ")" : "";
      fail(s.message() + (side == FaultSide::kSource ? as : ""), side == FaultSide::kNode ? FaultOwner::kNode : FaultOwner::kUser);
      break;
    }
    std::string mp = view + "/" + src.name;
    int rc = d.is_dir ? ::mkdir(mp.c_str(), 0755) : ::close(::open(mp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
    if (rc != 0) s = Status::FromErrno(errno, "create " + mp);
    if (s.ok()) s = BindReadOnly(d.data_path, mp);
    if (!s.ok()) { fail(s.message(), FaultOwner::kNode); break; }
    r.datasets.push_back({src.name, d});
    r.summary += SummaryLine(job.node, src, d);
  }
  if (r.ok) {
    Status h = HandViewTo(view, job);
    if (!h.ok()) fail(h.message(), FaultOwner::kNode);
  }
  r.seconds = MonotonicSeconds() - t0;
  if (!r.ok) {
    CleanView(view);
    ReleaseJob(co, job.job_id);
  }
  TrimCache(co, co.quota, nullptr);
  WriteStageRecord(cfg, job, r);
  return r;
}

std::set<std::string> LiveSlurmJobs(const std::string& proc) {
  std::set<std::string> live;
  DIR* d = ::opendir(proc.c_str());
  if (!d) return live;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    auto cmd = ReadWholeFile(proc + "/" + e->d_name + "/cmdline");
    if (!cmd || cmd->compare(0, 13, "slurmstepd: [") != 0) continue;
    size_t end = cmd->find_first_of(".]", 13);
    if (end != std::string::npos && end > 13) live.insert(cmd->substr(13, end - 13));
  }
  ::closedir(d);
  return live;
}

std::set<std::string> StaleStageJobs(const Config& cfg, const std::set<std::string>& live, double now) {
  std::set<std::string> stale;
  if (cfg.stage.dir.empty()) return stale;
  double grace = cfg.stage.timeout_ms / 1000.0 + 600;
  StageCacheOptions co = CacheOptionsFor(cfg);
  auto old_enough = [&](const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 && now - st.st_mtim.tv_sec > grace;
  };
  if (DIR* d = ::opendir((cfg.stage.dir + "/jobs").c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      std::string j = e->d_name;
      if (j == "." || j == ".." || live.count(j)) continue;
      if (old_enough(cfg.stage.dir + "/jobs/" + j)) stale.insert(j);
    }
    ::closedir(d);
  }
  if (DIR* d = ::opendir(co.dir.c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      std::string key = e->d_name;
      if (key.size() != 16) continue;
      if (DIR* r = ::opendir((co.dir + "/" + key + "/refs").c_str())) {
        while (struct dirent* f = ::readdir(r)) {
          std::string j = f->d_name;
          if (j == "." || j == ".." || live.count(j)) continue;
          if (old_enough(co.dir + "/" + key + "/refs/" + j)) stale.insert(j);
        }
        ::closedir(r);
      }
    }
    ::closedir(d);
  }
  return stale;
}

std::vector<std::string> ReleaseStaleJobs(const Config& cfg, const std::set<std::string>& live, const SlurmJobs& slurm,
                                          double now) {
  std::vector<std::string> out;
  StageCacheOptions co = CacheOptionsFor(cfg);
  for (const auto& j : StaleStageJobs(cfg, live, now)) {
    if (!MayReleaseStage(slurm, j)) {
      out.push_back("job " + j + ": no slurmstepd on this host; view and cache hold kept: " + KeptBecause(slurm, j, false));
      continue;
    }
    Status s = CleanView(StageViewDir(cfg, j));
    Status r = ReleaseJob(co, j);
    if (s.ok()) s = r;
    out.push_back("job " + j + ": no slurmstepd on this host and slurmctld lists it as not running here; view and cache hold released" +
                  (s.ok() ? std::string() : " (" + s.message() + ")"));
  }
  return out;
}

std::string StagePrometheus(const std::string& node, const std::vector<std::pair<std::string, std::string>>& notes) {
  std::string o;
  auto get = [&](const std::string& k) {
    for (const auto& n : notes)
      if (n.first == k) return n.second;
    return std::string("0");
  };
  std::string l = "{node=\"" + node + "\"}";
  struct M { const char* name; const char* key; const char* help; };
  static const M kMetrics[] = {
      {"preflight_stage_last_bytes", "stage.bytes", "Bytes the last job on this node staged (copied or reused)."},
      {"preflight_stage_last_files", "stage.files", "Files the last job on this node staged."},
      {"preflight_stage_last_seconds", "stage.seconds", "Seconds the last job's staging took."},
      {"preflight_stage_last_cache_hits", "stage.cache_hits", "Datasets of the last job served from the cache."},
      {"preflight_stage_last_cache_misses", "stage.cache_misses", "Datasets of the last job copied."},
      {"preflight_stage_cache_bytes", "stage.cache_bytes", "Bytes in this node's dataset cache after trimming."},
      {"preflight_stage_cache_datasets", "stage.cache_datasets", "Datasets in this node's cache after trimming."},
  };
  for (const auto& m : kMetrics)
    o += std::string("# HELP ") + m.name + " " + m.help + "\n# TYPE " + m.name + " gauge\n" + m.name + l + " " + get(m.key) + "\n";
  return o;
}

UnstageResult UnstageForJob(const Config& cfg, const JobContext& job) {
  UnstageResult r;
  if (cfg.stage.dir.empty() || job.job_id.empty()) return r;
  std::string view = StageViewDir(cfg, job.job_id);
  struct stat st;
  bool had_view = ::lstat(view.c_str(), &st) == 0;
  auto rec = ReadStageRecord(cfg, job.job_id, job.node);
  if (!had_view && !rec) return r;
  r.requested = true;
  StageCacheOptions co = CacheOptionsFor(cfg);
  Status s = CleanView(view);
  Status rel = ReleaseJob(co, job.job_id);
  if (s.ok()) s = rel;
  std::vector<std::string> removed;
  Status t = TrimCache(co, co.quota, &removed);
  if (s.ok()) s = t;

  StageRecord sr = rec ? *rec : StageRecord();
  auto list = ListCache(co);
  uint64_t cache_bytes = list ? CacheBytes(*list) : 0;
  r.notes = {{"stage.bytes", std::to_string(sr.bytes)},
             {"stage.files", std::to_string(sr.files)},
             {"stage.seconds", rec ? std::to_string(sr.seconds) : "0"},
             {"stage.cache_hits", std::to_string(sr.hits)},
             {"stage.cache_misses", std::to_string(sr.misses)},
             {"stage.cache_bytes", std::to_string(cache_bytes)},
             {"stage.cache_datasets", std::to_string(list ? list->size() : 0)},
             {"stage.evicted", std::to_string(removed.size())}};
  CheckResult c;
  c.check = "stage";
  c.device = view;
  c.value = std::to_string(sr.files) + " files, " + Human(sr.bytes) + ", " + std::to_string(sr.hits) + " hit(s), " +
            std::to_string(sr.misses) + " miss(es)";
  c.verdict = s.ok() ? Verdict::kPass : Verdict::kWarn;
  c.message = s.ok() ? "view removed, cache at " + Human(cache_bytes) : "cleanup: " + s.message();
  r.checks.push_back(c);
  if (!cfg.textfile_dir.empty() && MakeDirs(cfg.textfile_dir, 0755).ok())
    WriteFileAtomic(cfg.textfile_dir + "/preflight_" + job.node + "_stage.prom", StagePrometheus(job.node, r.notes), 0644);
  return r;
}

}  // namespace preflight
