#include "preflight/stage_copy.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "preflight/clock.h"
#include "preflight/report.h"
#include "preflight/stage_manifest.h"
#include "stage_copy_pool.h"
#include "stage_walk.h"

namespace preflight {

using namespace stage_internal;

Status ScanSource(const std::string& src, const CopyOptions& o, std::vector<std::string>* manifest, FaultSide* side,
                  std::string* digest) {
  *side = FaultSide::kNone;
  if (manifest) manifest->clear();
  ManifestDigest dg;
  Child c;
  bool local = manifest == nullptr;  // digest only: the walker computes it
  bool light = o.dirs_only && o.light_dirs != nullptr && local;
  Status s = StartChild(src, o.who, light ? WalkMode::kLight : WalkMode::kScan, &c, local, o.light_dirs);
  if (!s.ok()) { *side = FaultSide::kNode; return s; }
  std::string end;
  s = Receive(
      &c, o.deadline, src, side,
      [&](Record& r) {
        std::string line = r.kind == kRoot ? ManifestRootLine(r.type, r.path) : ManifestLine(r);
        dg.Add(line);
        if (manifest) manifest->push_back(std::move(line));
        return Status::Ok();
      },
      &end);
  StopChild(&c, !s.ok());
  if (digest) *digest = local ? end : dg.str();
  return s;
}

namespace {

// What the walker announces, turned into the copy: the root (a folder
// made, or one file queued), then each entry (a folder or symlink made
// here, a file queued for the pool), every one into the manifest and the
// space check first.
struct TreeCopy {
  const CopyOptions& o;
  StageFs& fs;
  CopyPool& pool;
  int dst_dir_fd;
  const std::string& dst_name;
  CopyStats* stats;
  std::vector<std::string>* manifest;
  FaultSide* side;
  std::vector<std::string>* light;
  CheckManifestBuilder* check;
  unsigned local_workers;
  int droot = -1;
  uint64_t expect_files = 0;
  uint64_t apparent = 0;  // bytes of the files announced so far
  uint64_t entries = 0;   // files, folders and symlinks announced so far
  bool aborted = false;   // a worker failed first; its status is the one to report
  std::string src_root;   // the resolved source, for the source's errors

  Status OverSpace(const Record& r) {
    if (r.type == 'f') apparent += r.size;
    ++entries;
    if (Status many = TooManyEntries(o, entries); !many.ok()) {
      if (r.fd >= 0) ::close(r.fd);
      *side = FaultSide::kSource;
      return Status::Failed(src_root + ": " + many.message());
    }
    Status room = RoomFor(o, apparent, entries);
    if (room.ok()) return room;
    if (r.fd >= 0) ::close(r.fd);
    *side = FaultSide::kDestSpace;
    return room;
  }

  Status On(Record& r) {
    if (pool.failed()) {
      if (r.fd >= 0) ::close(r.fd);
      aborted = true;
      return Status::Failed("aborted");
    }
    return r.kind == kRoot ? Root(r) : Entry(r);
  }

  Status Root(Record& r) {
    // On a network source the copies wait on round trips: more in flight.
    if (r.remote) {
      stats->source_fs = r.link;
      stats->in_flight = std::max(local_workers, o.remote_workers);
      if (o.remote_workers > local_workers) pool.Start(o.remote_workers - local_workers);
      pool.SplitLargeFiles();
    }
    manifest->push_back(ManifestRootLine(r.type, r.path));
    src_root = r.path;
    if (light && r.type == 'd') light->push_back(LightLine(r));
    Status sp = OverSpace(r);
    if (!sp.ok()) return sp;
    if (r.type == 'f') {
      ++expect_files;
      Task t{r.fd, dst_dir_fd, dst_name, dst_name, r.size, r.mode, r.mtime_sec, r.mtime_nsec, 0, 0, UINT32_MAX, r.ino,
             r.path, nullptr, 0, 0};
      pool.Push(std::move(t));
      return Status::Ok();
    }
    if (check) check->Root(r.path, r.mode, r.ino, r.ctime_sec, r.ctime_nsec);
    if (fs.MkdirAt(dst_dir_fd, dst_name.c_str(), 0755) != 0) {
      int e = errno;
      *side = DestSide(e);
      return DestFailure(e, "mkdir " + dst_name, dst_dir_fd);
    }
    droot = ::openat(dst_dir_fd, dst_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (droot < 0) { int e = errno; *side = DestSide(e); return Status::FromErrno(e, "open " + dst_name); }
    ++stats->dirs;
    return Status::Ok();
  }

  Status Entry(Record& r) {
    manifest->push_back(ManifestLine(r));
    if (light && r.type == 'd') light->push_back(LightLine(r));
    if (droot < 0) { if (r.fd >= 0) ::close(r.fd); *side = FaultSide::kNode; return Status::IOError("source walker: entry before root"); }
    std::string shown = dst_name + "/" + r.path;
    Status sp = OverSpace(r);
    if (!sp.ok()) return sp;
    uint32_t ci = check ? check->Add(r.type, r.path, r.mode, r.size, r.ino, r.mtime_sec, r.mtime_nsec, r.ctime_sec,
                                     r.ctime_nsec, r.link)
                        : UINT32_MAX;
    if (r.type == 'd') {
      if (fs.MkdirAt(droot, r.path.c_str(), 0755) != 0) { int e = errno; *side = DestSide(e); return DestFailure(e, "mkdir " + shown, droot); }
      ++stats->dirs;
    } else if (r.type == 'l') {
      if (fs.SymlinkAt(r.link.c_str(), droot, r.path.c_str()) != 0) { int e = errno; *side = DestSide(e); return DestFailure(e, "symlink " + shown, droot); }
      ++stats->symlinks;
    } else {
      ++expect_files;
      pool.Push({r.fd, droot, r.path, shown, r.size, r.mode, r.mtime_sec, r.mtime_nsec, r.ctime_sec, r.ctime_nsec, ci, r.ino,
                 src_root + "/" + r.path, nullptr, 0, 0});
    }
    return Status::Ok();
  }
};

}  // namespace

Status CopyTree(const std::string& src, int dst_dir_fd, const std::string& dst_name, const CopyOptions& o,
                CopyStats* stats, std::vector<std::string>* manifest, FaultSide* side,
                std::vector<std::string>* light, CheckManifestBuilder* check) {
  *side = FaultSide::kNone;
  if (light) light->clear();
  *stats = CopyStats();
  manifest->clear();
  StageFs& fs = o.fs ? *o.fs : DefaultStageFs();
  double t0 = MonotonicSeconds();
  RaiseFdLimit();
  Child c;
  Status s = StartChild(src, o.who, WalkMode::kCopy, &c, false, nullptr, o.remote_workers);
  if (!s.ok()) { *side = FaultSide::kNode; return s; }

  // On the heap: a pool that gave up on workers stuck in a source that
  // stopped answering is left to them (CopyPool::Finish), not destroyed.
  auto owned = std::make_unique<CopyPool>(o, fs, check);
  CopyPool& pool = *owned;
  const unsigned local_workers = std::max(1u, o.workers);
  pool.Start(local_workers);
  TreeCopy tc{o, fs, pool, dst_dir_fd, dst_name, stats, manifest, side, light, check, local_workers, -1, 0, 0, 0, false, {}};
  s = Receive(&c, o.deadline, src, side, [&](Record& r) -> Status { return tc.On(r); });
  StopChild(&c, !s.ok());
  if (!s.ok() && !tc.aborted) pool.Fail(s, *side);  // workers skip what is queued
  pool.Finish();
  if (pool.abandoned()) (void)owned.release();  // leaked on purpose: its stuck workers still use it
  if (tc.droot >= 0) ::close(tc.droot);
  if (pool.failed()) {
    *side = pool.side();
    return pool.status();
  }
  if (!s.ok() && !tc.aborted) return s;
  if (pool.files.load() != tc.expect_files) {
    *side = FaultSide::kNode;
    return Status::IOError("staging " + src + ": copied " + std::to_string(pool.files.load()) + " of " +
                           std::to_string(tc.expect_files) + " files");
  }
  stats->bytes = pool.bytes.load();
  stats->files = pool.files.load();
  stats->seconds = MonotonicSeconds() - t0;
  return Status::Ok();
}

}  // namespace preflight
