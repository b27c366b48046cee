#include "preflight/stage_cache.h"

#include <xxhash.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "preflight/fileutil.h"
#include "preflight/json.h"
#include "preflight/report.h"
#include "preflight/stage_manifest.h"
#include "preflight/stage_warm.h"
#include "preflight/strings.h"

namespace preflight {

std::string StageCacheKey(const std::string& source) {
  std::string s = source;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  uint64_t h = XXH3_64bits(s.data(), s.size());
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

namespace {

// An exclusive flock on <key>/lock. Re-checks after locking that the file
// is still the one linked there (an evictor may have removed the key).
class EntryLock {
 public:
  ~EntryLock() { Release(); }
  Status Acquire(const std::string& path, double deadline, bool wait) {
    for (;;) {
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd < 0) return Status::FromErrno(errno, "open lock " + path);
      for (;;) {
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
        if (errno != EWOULDBLOCK && errno != EINTR) { int e = errno; ::close(fd); return Status::FromErrno(e, "lock " + path); }
        if (!wait) { ::close(fd); return Status::Unavailable(path + ": in use by another stager"); }
        if (deadline > 0 && MonotonicSeconds() > deadline) {
          ::close(fd);
          return Status::Timeout("timed out waiting for " + path + " (another job is staging the same dataset)");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      struct stat a, b;
      if (::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
        fd_ = fd;
        return Status::Ok();
      }
      ::close(fd);  // removed under us: lock the new one
    }
  }
  void Release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (!d) return out;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadTrim(const std::string& path) {
  auto t = ReadWholeFile(path);
  if (!t) return "";
  std::string s = *t;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}


constexpr const char* kInfoJson = "info.json";
constexpr const char* kInfoLegacy = "info";  // key=value, older releases

uint64_t InfoNum(const std::map<std::string, std::string>& m, const char* k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

void Touch(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    ::futimens(fd, nullptr);
    ::close(fd);
  }
}

std::string NewGen() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char b[64];
  std::snprintf(b, sizeof b, "%llx%09ld-%d", static_cast<unsigned long long>(ts.tv_sec), ts.tv_nsec, ::getpid());
  return b;
}

std::vector<std::string> RefsFor(const std::string& keydir, std::map<std::string, std::string>* by_job = nullptr) {
  std::vector<std::string> versions;
  for (const auto& j : ListDir(keydir + "/refs")) {
    std::string v = ReadTrim(keydir + "/refs/" + j);
    versions.push_back(v);
    if (by_job) (*by_job)[j] = v;
  }
  return versions;
}

// Under the key's lock: remove crashed builds and versions neither current
// nor referenced.
void Tidy(const std::string& keydir) {
  std::string cur = ReadTrim(keydir + "/current");
  std::vector<std::string> used = RefsFor(keydir);
  for (const auto& n : ListDir(keydir)) {
    bool tmp = n.rfind("tmp-", 0) == 0;
    bool old = n.rfind("v-", 0) == 0 && n != cur && std::find(used.begin(), used.end(), n) == used.end();
    if (tmp || old) RemoveTree(keydir + "/" + n);
  }
}

}  // namespace

Status CopySourceInto(const std::string& source, const CopyOptions& co, int dst_dir_fd, BuiltCopy* out,
                      FaultSide* side) {
  std::vector<std::string> light;
  CheckManifestBuilder check;
  Status s = CopyTree(source, dst_dir_fd, "data", co, &out->stats, &out->manifest, side, &light, &check);
  if (!s.ok()) return s;
  out->source_bytes = out->stats.bytes;
  if (!out->stats.source_fs.empty() && out->note.empty())
    out->note = "read from a " + out->stats.source_fs + " file system, " + std::to_string(out->stats.in_flight) +
                " operations in flight";
  std::string dirs;  // the light check's list: "d MODE CTIME PATH" -> PATH
  for (const auto& l : light)
    if (l[0] == 'd') dirs += (dirs.empty() ? "" : "\n") + l.substr(l.find(' ', l.find(' ', 2) + 1) + 1);
  out->dirs_text = dirs;
  out->digest_light = DigestOf(light);
  bool is_dir = ManifestRootType(out->manifest) == 'd';
  out->check = is_dir ? check.Serialize() : "";
  return Status::Ok();
}

namespace {

// Whether the cached version at `vdir` still matches the source: by the
// per-directory check manifest when the copy recorded one, else by
// rescanning (the light scan of directories only, with stage_verify = dirs
// and a reader who built it). `info`: the version's info.json (read once).
Status SameAsCached(const StageCacheOptions& o, const std::string& source, const StageIdentity& who,
                    const std::string& vdir, std::map<std::string, std::string>& info, uid_t reader, CopyOptions co,
                    bool* same, FaultSide* side) {
  *same = false;
  bool light = o.verify_dirs_only && info["type"] == "d" && info["uid"] == std::to_string(reader);
  std::vector<std::string> dirs;
  if (light) {
    auto text = ReadWholeFile(vdir + "/dirs");
    light = text.ok();
    if (light) {
      std::istringstream in(*text);
      std::string l;
      while (std::getline(in, l)) dirs.push_back(l);
    }
  }
  std::shared_ptr<CheckManifest> check;
  if (!light && info["check"] == "1" && info["type"] == "d") {
    auto m = CheckManifest::Load(vdir + "/check");
    if (m) check = *m;
  }
  std::string stored = info[light ? "digest_light" : "digest"];
  if (check) {
    // The per-directory check (stage_manifest.h): one listing and one
    // statx per entry as the reader, directories and large directories'
    // entries in parallel.
    WarmCheckResult wr;
    Status s = CheckUnchanged(source, *check, who, o.workers, o.remote_workers, o.deadline, &wr, side);
    if (!s.ok()) return s;
    *same = wr.same;
  } else if (!stored.empty()) {
    std::string now;
    co.dirs_only = light;
    co.light_dirs = &dirs;
    Status s = ScanSource(source, co, nullptr, side, &now);
    if (!s.ok()) return s;
    *same = now == stored;
  }
  return Status::Ok();
}

// A built copy's record beside its data, before it is published: the
// manifest, the light check's directories, the check manifest and info.json.
Status WriteVersionFiles(const std::string& tmp, const std::string& source, const BuiltCopy& built, uid_t reader) {
  const CopyStats& st = built.stats;
  const std::vector<std::string>& manifest = built.manifest;
  std::string text;
  text.reserve(manifest.size() * 48);
  for (const auto& l : manifest) text += l + "\n";
  if (!text.empty()) text.pop_back();
  Status s = WriteFileAtomic(tmp + "/manifest", text, 0600);
  if (s.ok()) s = WriteFileAtomic(tmp + "/dirs", built.dirs_text, 0600);
  if (s.ok() && !built.check.empty()) s = WriteFileAtomic(tmp + "/check", built.check, 0600);
  if (!s.ok()) return s;
  JsonWriter info;
  info.BeginObject()
      .Field("source", source)
      .Field("real", ManifestRootPath(manifest))
      .Field("bytes", static_cast<int64_t>(st.bytes))
      .Field("files", static_cast<int64_t>(st.files))
      .Field("dirs", static_cast<int64_t>(st.dirs))
      .Field("seconds", st.seconds)
      .Field("uid", static_cast<int64_t>(reader))
      .Field("digest", DigestOf(manifest))
      .Field("digest_light", built.digest_light)
      .Field("check", !built.check.empty())
      .Field("type", ManifestRootType(manifest) == 'f' ? "f" : "d")
      .EndObject();
  return WriteFileAtomic(tmp + "/" + kInfoJson, info.str() + "\n", 0600);
}

// The published version made the key's current one and this job's
// reference, each a durable replace (the folder synced after each rename).
Status MakeCurrent(const std::string& keydir, const std::string& ver, const std::string& job_id) {
  Status s = WriteFileAtomic(keydir + "/current", ver + "\n", 0600);
  if (s.ok()) s = WriteFileAtomic(keydir + "/refs/" + job_id, ver + "\n", 0600);
  return s;
}

// A cache hit's figures, from the version's info.json.
void FillHit(const std::string& keydir, const std::string& cur, std::map<std::string, std::string>& info,
             StagedDataset* out) {
  out->hit = true;
  out->version = cur;
  out->bytes = InfoNum(info, "bytes");
  out->files = InfoNum(info, "files");
  out->real_source = info["real"];
  out->is_dir = info["type"] != "f";
  out->data_path = keydir + "/" + cur + "/data";
}

}  // namespace

Status StageDataset(const StageCacheOptions& o, const std::string& source, const StageIdentity& who,
                    const std::string& job_id, StagedDataset* out, FaultSide* side) {
  *side = FaultSide::kNode;
  double t0 = MonotonicSeconds();
  *out = StagedDataset();
  out->source = source;
  out->key = StageCacheKey(source);
  std::string keydir = o.dir + "/" + out->key;
  EntryLock lock;
  Status s;
  // A trim may remove an unused key between our mkdir and our lock: retry.
  for (int attempt = 0; attempt < 5; ++attempt) {
    s = MakeDirs(keydir, 0700);
    if (!s.ok()) return s.Context("stage cache");
    s = lock.Acquire(keydir + "/lock", o.deadline, true);
    if (s.code() != Status::Code::kNotFound) break;
  }
  if (s.ok()) s = MakeDirs(keydir + "/refs", 0700);
  if (!s.ok()) {
    if (s.code() == Status::Code::kTimeout) *side = FaultSide::kSource;
    return s;
  }
  Tidy(keydir);  // we hold the lock: any tmp-* is a crashed build

  CopyOptions co;
  co.workers = o.workers;
  co.remote_workers = o.remote_workers;
  co.max_entries = o.max_entries;
  co.deadline = o.deadline;
  co.fs = o.fs;
  co.who = who;

  uid_t reader = who.drop ? who.uid : ::geteuid();
  std::string cur = ReadTrim(keydir + "/current");
  if (!cur.empty()) {
    bool same = false;
    auto info = ReadCacheInfo(keydir + "/" + cur);
    s = SameAsCached(o, source, who, keydir + "/" + cur, info, reader, co, &same, side);
    if (!s.ok()) return s;
    if (same) {
      FillHit(keydir, cur, info, out);
      s = WriteFileAtomic(keydir + "/refs/" + job_id, cur + "\n", 0600);
      if (!s.ok()) { *side = FaultSide::kNode; return s; }
      Touch(keydir + "/last_used");
      out->seconds = MonotonicSeconds() - t0;
      *side = FaultSide::kNone;
      return Status::Ok();
    }
  }

  std::string gen = NewGen();
  std::string tmp = keydir + "/tmp-" + gen;
  if (::mkdir(tmp.c_str(), 0700) != 0) return Status::FromErrno(errno, "mkdir " + tmp);
  int tfd = ::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (tfd < 0) { int e = errno; RemoveTree(tmp); return Status::FromErrno(e, "open " + tmp); }
  // Refuse a dataset larger than the free space, or with more entries
  // than the free inodes, before writing it out.
  LimitToFreeRoom(tfd, &co);
  BuiltCopy built;
  if (o.copier) {
    s = o.copier(tfd, &built, side);
  } else {
    s = CopySourceInto(source, co, tfd, &built, side);
  }
  const CopyStats& st = built.stats;
  const std::vector<std::string>& manifest = built.manifest;
  if (s.ok() && ::syncfs(tfd) != 0) { int e = errno; *side = e == ENOSPC || e == EDQUOT ? FaultSide::kDestSpace : FaultSide::kNode; s = Status::FromErrno(e, "syncfs " + tmp); }
  ::close(tfd);
  if (s.ok()) {
    s = WriteVersionFiles(tmp, source, built, reader);
    if (!s.ok()) *side = s.sys_errno() == ENOSPC || s.sys_errno() == EDQUOT ? FaultSide::kDestSpace : FaultSide::kNode;
  }
  std::string ver = "v-" + gen;
  if (s.ok() && ::rename(tmp.c_str(), (keydir + "/" + ver).c_str()) != 0) s = Status::FromErrno(errno, "publish " + tmp);
  if (!s.ok()) {
    RemoveTree(tmp);
    return s;
  }
  s = MakeCurrent(keydir, ver, job_id);
  if (!s.ok()) { *side = FaultSide::kNode; return s; }
  Touch(keydir + "/last_used");
  Tidy(keydir);
  out->version = ver;
  out->hit = false;
  out->source_bytes = built.source_bytes;
  out->peer_bytes = built.peer_bytes;
  out->note = built.note;
  out->bytes = st.bytes;
  out->files = st.files;
  out->real_source = ManifestRootPath(manifest);
  out->is_dir = ManifestRootType(manifest) == 'd';
  out->data_path = keydir + "/" + ver + "/data";
  out->seconds = MonotonicSeconds() - t0;
  *side = FaultSide::kNone;
  return Status::Ok();
}

Status ReleaseJob(const StageCacheOptions& o, const std::string& job_id) {
  Status first;
  for (const auto& key : ListDir(o.dir)) {
    std::string keydir = o.dir + "/" + key;
    std::string ref = keydir + "/refs/" + job_id;
    struct stat st;
    if (::lstat(ref.c_str(), &st) != 0) continue;
    EntryLock lock;
    Status s = lock.Acquire(keydir + "/lock", MonotonicSeconds() + 60, true);
    if (!s.ok()) { if (first.ok()) first = s; continue; }
    if (::unlink(ref.c_str()) != 0 && errno != ENOENT && first.ok()) first = Status::FromErrno(errno, "unlink " + ref);
    Tidy(keydir);
  }
  return first;
}

std::map<std::string, std::string> ReadCacheInfo(const std::string& version_dir) {
  std::map<std::string, std::string> m;
  if (auto text = ReadWholeFile(version_dir + "/" + kInfoJson)) {
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return m;
    for (const auto& [k, v] : j.items()) {
      if (v.is_string()) m[k] = v.get<std::string>();
      else if (v.is_boolean()) m[k] = v.get<bool>() ? "1" : "0";
      else if (v.is_number_unsigned()) m[k] = std::to_string(v.get<uint64_t>());
      else if (v.is_number_integer()) m[k] = std::to_string(v.get<int64_t>());
      else if (v.is_number_float()) m[k] = std::to_string(v.get<double>());
    }
    return m;
  }
  auto legacy = ReadWholeFile(version_dir + "/" + kInfoLegacy);
  return legacy ? ParseKeyValueLines(*legacy) : m;
}

namespace {

CacheEntryInfo Describe(const std::string& dir, const std::string& key) {
  CacheEntryInfo e;
  e.key = key;
  std::string keydir = dir + "/" + key;
  e.version = ReadTrim(keydir + "/current");
  auto info = ReadCacheInfo(keydir + "/" + e.version);
  e.source = info.count("source") ? info["source"] : "";
  e.bytes = InfoNum(info, "bytes");
  e.files = InfoNum(info, "files");
  struct stat st;
  if (::stat((keydir + "/last_used").c_str(), &st) == 0) e.last_used = st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
  std::map<std::string, std::string> by_job;
  RefsFor(keydir, &by_job);
  for (const auto& kv : by_job) e.jobs.push_back(kv.first);
  return e;
}

}  // namespace

Expected<std::vector<CacheEntryInfo>> ListCache(const StageCacheOptions& o) {
  std::vector<CacheEntryInfo> out;
  struct stat st;
  if (::stat(o.dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return out;
    return Status::FromErrno(errno, "stage cache " + o.dir);
  }
  for (const auto& key : ListDir(o.dir)) {
    if (key.size() != 16) continue;
    CacheEntryInfo e = Describe(o.dir, key);
    EntryLock lock;
    e.busy = !lock.Acquire(o.dir + "/" + key + "/lock", 0, false).ok();
    out.push_back(e);
  }
  return out;
}

uint64_t CacheBytes(const std::vector<CacheEntryInfo>& entries) {
  uint64_t b = 0;
  for (const auto& e : entries) b += e.bytes;
  return b;
}

Status TrimCache(const StageCacheOptions& o, uint64_t quota, std::vector<std::string>* removed) {
  auto list = ListCache(o);
  if (!list) return list.status();
  std::vector<CacheEntryInfo> entries = *list;
  // Tidy everything we can lock; a key with no published version and no
  // users (a failed or crashed first build) goes entirely.
  Status first;
  for (auto it = entries.begin(); it != entries.end();) {
    std::string keydir = o.dir + "/" + it->key;
    EntryLock lock;
    if (!lock.Acquire(keydir + "/lock", 0, false).ok()) { ++it; continue; }
    Tidy(keydir);
    if (it->version.empty() && RefsFor(keydir).empty()) {
      Status s = RemoveTree(keydir);
      if (!s.ok() && first.ok()) first = s;
      it = entries.erase(it);
      continue;
    }
    ++it;
  }
  uint64_t total = CacheBytes(entries);
  std::sort(entries.begin(), entries.end(), [](const CacheEntryInfo& a, const CacheEntryInfo& b) { return a.last_used < b.last_used; });
  for (const auto& e : entries) {
    if (quota != 0 && total <= quota) break;
    if (!e.jobs.empty() || e.busy) continue;
    std::string keydir = o.dir + "/" + e.key;
    EntryLock lock;
    if (!lock.Acquire(keydir + "/lock", 0, false).ok()) continue;
    if (!RefsFor(keydir).empty()) continue;  // a job took it since we listed
    // Unpublish first (a crash here leaves a key without `current`: a miss).
    ::unlink((keydir + "/current").c_str());
    Tidy(keydir);
    Status s = RemoveTree(keydir);
    if (!s.ok()) { if (first.ok()) first = s; continue; }
    total -= std::min(total, e.bytes);
    if (removed) removed->push_back(e.key + " " + e.source);
  }
  return first;
}

Status RemoveCacheEntry(const StageCacheOptions& o, const std::string& key_or_source) {
  std::string key = key_or_source;
  if (key.find('/') != std::string::npos) key = StageCacheKey(key_or_source);
  std::string keydir = o.dir + "/" + key;
  struct stat st;
  if (key.size() != 16 || ::stat(keydir.c_str(), &st) != 0) return Status::NotFound("no cached dataset '" + key_or_source + "' in " + o.dir);
  EntryLock lock;
  Status s = lock.Acquire(keydir + "/lock", 0, false);
  if (!s.ok()) return Status::Unavailable(key + " is being staged right now; try again");
  std::map<std::string, std::string> by_job;
  RefsFor(keydir, &by_job);
  if (!by_job.empty()) {
    std::string jobs;
    for (const auto& kv : by_job) jobs += (jobs.empty() ? "" : ",") + kv.first;
    return Status::Unavailable(key + " is in use by job(s) " + jobs);
  }
  ::unlink((keydir + "/current").c_str());
  return RemoveTree(keydir);
}

}  // namespace preflight
