// stage_bench: dataset staging (preflight's copy engine + cache, exactly
// what the prolog runs) against what a user would otherwise do (`cp -a`,
// `rsync -a`), side by side in one run, on tmpfs so the disk is not the
// noise. Prints each time (median of --reps) and the ratios against the
// goals of issue 6:
//   100k x 8 KiB cold:  rsync -a / preflight >= 3,  cp -a / preflight >= 1.5
//   4 x 1 GiB cold:     cp / preflight >= 0.95
//   warm (cache hit):   warm / cold <= 2%
// and, for the warm check, two floors: a bare `find SRC -printf` walk as
// the same user (what a user would script), and the kernel's own floor of
// any check that looks at every file: one getdents64 pass per directory
// and one statx per entry, as the reader, with the same threads as the
// warm check, nothing stored or compared (SyscallFloor). Warm / cold <= 2%
// is out of reach wherever the syscall floor alone is above it.
// Run as root (it mounts a tmpfs and reads as `nobody`, as the prolog reads
// as the job user). No ctest: timings are not assertions.
//
//   stage_bench [--dir D] [--files N] [--file-size B] [--large N] [--large-size B]
//               [--reps R] [--workers W] [--tmpfs-size S] [--verify files|dirs] [--each 1]
//               [--peers 1,3,8 [--peer-files N] [--peer-file-size B]]
//               [--netfs-us L [--netfs-inflight N] [--netfs-bandwidth B] [--remote-workers W]]
//
// --netfs-us: the source is served through preflight-netfs (the test
// harness's emulated network file system: L microseconds per operation,
// at most N in flight, default 64, no caching), as NFS or Lustre would
// serve it. Adds `fpsync -n 8` (Debian's fpart package, when installed)
// and the floor: files x operations per file x latency / in-flight. The
// engine then keeps --remote-workers (stage_remote_workers, default 32)
// operations in flight. --netfs-bandwidth caps the mount (preflight-netfs
// --bandwidth, e.g. 400M); the large files' rate is then set against it.
//
// --peers: peer fan-out (stage_peer.h) on emulated nodes in this process
// (a cache folder each, TCP on 127.0.0.1, a private munged): bytes read
// from the source and wall time for each node count, fan-out against every
// node copying alone. On one host the source is local tmpfs, so the wall
// time shows the protocol's cost, not a shared filesystem's relief.
#include <fcntl.h>
#include <pwd.h>
#include <sys/mount.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "preflight/config.h"
#include "preflight/fileutil.h"
#include "preflight/process.h"
#include "preflight/report.h"
#include "preflight/stage_cache.h"
#include "preflight/stage_peer.h"
#include "stage_bench.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <atomic>

using namespace preflight;

namespace stage_bench {

std::string g_mounted;  // unmounted at exit, whatever the exit path
void Unmount() {
  if (!g_mounted.empty()) ::umount2(g_mounted.c_str(), MNT_DETACH);
}


bool Fill(const std::string& path, uint64_t size, uint64_t seed) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  std::vector<uint64_t> buf(std::min<uint64_t>(size, 1 << 20) / 8 + 1);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& w : buf) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; w = x; }
  uint64_t done = 0;
  while (done < size) {
    // The whole buffer (it holds at least `size` bytes below 1 MiB): with
    // (size - 1) words a file under 8 bytes wrote nothing, forever.
    size_t n = std::min<uint64_t>(size - done, buf.size() * 8);
    if (::write(fd, buf.data(), n) != static_cast<ssize_t>(n)) { ::close(fd); return false; }
    buf[0] ^= done;
    done += n;
  }
  return ::close(fd) == 0;
}

double Shell(const std::string& cmd) {
  double t0 = MonotonicSeconds();
  auto r = RunCommand({"/bin/sh", "-c", cmd}, {}, 3600 * 1000);
  double t = MonotonicSeconds() - t0;
  if (!r || r->exit_code != 0) {
    std::fprintf(stderr, "stage_bench: '%s' failed: %s\n", cmd.c_str(), r ? r->output.c_str() : r.status().message().c_str());
    std::exit(1);
  }
  return t;
}

void Clean(const std::string& p) { RemoveTree(p); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Who reads the source: `nobody` when we are root (as the prolog reads as
// the job user), else ourselves.
StageIdentity Reader() {
  StageIdentity who;
  if (::geteuid() == 0)
    if (struct passwd* pw = ::getpwnam("nobody")) who = {true, pw->pw_uid, pw->pw_gid, "nobody"};
  return who;
}

// The copy (and warm check) threads: --workers, else one per CPU, at least 2.
unsigned CopyWorkers(const Args& a) { return a.workers ? a.workers : std::max(2u, std::thread::hardware_concurrency()); }

// The kernel's cost of listing and statting every entry of `src` as `who`
// with `threads` threads: what any per-file check pays at least. Forks a
// reader (as the warm check does) and times it from fork to exit.
double SyscallFloor(const std::string& src, const StageIdentity& who, unsigned threads) {
  double t0 = MonotonicSeconds();
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string error;
    if (who.drop && !DropToStageUser(who, &error)) ::_exit(2);
    // Directories to list, and how many are being listed: a thread with
    // nothing to take sleeps until another pushes one or the last ends.
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> todo{src};
    int busy = 0;
    std::atomic<bool> bad{false};
    auto work = [&] {
      std::vector<char> buf(1 << 16);
      for (;;) {
        std::string dir;
        {
          std::unique_lock<std::mutex> l(mu);
          cv.wait(l, [&] { return !todo.empty() || busy == 0; });
          if (todo.empty()) return;
          dir = std::move(todo.back());
          todo.pop_back();
          ++busy;
        }
        int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) bad = true;
        long n;
        while (fd >= 0 && (n = ::syscall(SYS_getdents64, fd, buf.data(), buf.size())) > 0) {
          for (long o = 0; o < n;) {
            auto* e = reinterpret_cast<struct dirent64*>(buf.data() + o);
            o += e->d_reclen;
            const char* nm = e->d_name;
            if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0))) continue;
            struct statx sx;
            if (::statx(fd, nm, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) != 0) bad = true;
            else if (S_ISDIR(sx.stx_mode)) {
              std::lock_guard<std::mutex> l(mu);
              todo.push_back(dir + "/" + nm);
              cv.notify_one();
            }
          }
        }
        if (fd >= 0) ::close(fd);
        std::lock_guard<std::mutex> l(mu);
        if (--busy == 0 && todo.empty()) cv.notify_all();
      }
    };
    std::vector<std::thread> ts;
    for (unsigned i = 1; i < threads; ++i) ts.emplace_back(work);
    work();
    for (auto& t : ts) t.join();
    ::_exit(bad ? 1 : 0);
  }
  int st = 0;
  while (pid > 0 && ::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "stage_bench: syscall floor walk failed\n");
    std::exit(1);
  }
  return MonotonicSeconds() - t0;
}

// Writes and removes `bytes` of scratch data in the bench's tmpfs right
// before a timed copy. On a VM with free page reporting (virtio_balloon)
// pages freed a few seconds ago go back to the host, and whoever allocates
// them next pays the host's faults: here 1 GiB copied 0.4 s back to back
// and 1.5-2.4 s after a 5 s pause. Every contender gets freshly touched
// pages this way, so the times compare the copies, not the host.
void Prefault(const std::string& dir, uint64_t bytes) {
  std::string p = dir + "/.prefault";
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  std::vector<char> buf(1 << 20, 1);
  for (uint64_t done = 0; done < bytes; done += buf.size())
    if (::write(fd, buf.data(), buf.size()) <= 0) break;
  ::close(fd);
  ::unlink(p.c_str());
}

struct Result { double cp, rsync, cold, warm, floor, sys_floor, fpsync; };

bool HaveFpsync() { return ::access("/usr/bin/fpsync", X_OK) == 0; }

// Mounts `src` at `mnt` through preflight-netfs; unmounted by Unmount()
// at exit (a lazy unmount; the daemon ends with it).
std::vector<std::string> g_netfs;
void UnmountNetfs() {
  for (const auto& m : g_netfs)
    RunCommand({PF_SOURCE_DIR "/tests/harness/netfs.sh", "umount", m}, {"PREFLIGHT_NETFS=" PF_NETFS_BIN}, 60000);
}
std::string MountNetfs(const Args& a, const std::string& src) {
  std::string mnt = src + ".net";
  MakeDirs(mnt, 0755);
  std::vector<std::string> argv = {PF_SOURCE_DIR "/tests/harness/netfs.sh", "mount", src, mnt, "--allow-other",
                                   "--latency-us", std::to_string(a.netfs_us), "--max-inflight",
                                   std::to_string(a.netfs_inflight)};
  if (!a.netfs_bandwidth.empty()) argv.insert(argv.end(), {"--bandwidth", a.netfs_bandwidth});
  auto r = RunCommand(argv, {"PREFLIGHT_NETFS=" PF_NETFS_BIN}, 60000);
  if (!r || r->exit_code != 0) {
    std::fprintf(stderr, "stage_bench: mounting %s through preflight-netfs: %s\n", src.c_str(),
                 r ? r->output.c_str() : r.status().message().c_str());
    std::exit(1);
  }
  if (g_netfs.empty()) std::atexit(UnmountNetfs);
  g_netfs.push_back(mnt);
  return mnt;
}

Result Run(const Args& a, const std::string& src, uint64_t bytes, bool with_rsync, const char* cp_cmd) {
  StageIdentity who = Reader();
  StageCacheOptions o;
  o.dir = a.dir + "/cache";
  o.workers = CopyWorkers(a);
  o.remote_workers = a.remote_workers;
  o.verify_dirs_only = a.verify_dirs;
  std::vector<double> cp, rs, cold, warm, floor_t, sys_t, fp;
  const bool with_fpsync = with_rsync && a.netfs_us >= 0 && HaveFpsync();
  // The floor of a warm check: every entry statted once as the reader.
  std::string as_user = who.drop ? "setpriv --reuid=" + std::to_string(who.uid) + " --regid=" + std::to_string(who.gid) +
                                       " --init-groups "
                                 : "";
  auto run_floor = [&] {
    floor_t.push_back(Shell(as_user + "find '" + src + "' -printf '%y %m %s %T@ %C@ %i %U %G\\n' >/dev/null"));
    sys_t.push_back(SyscallFloor(src, who, o.workers));
  };
  for (int r = 0; r < a.reps; ++r) {
    // Alternate who goes first so page-cache and allocator effects even out.
    auto run_cp = [&] {
      Clean(a.dir + "/cp");
      Prefault(a.dir, bytes);
      cp.push_back(Shell(std::string(cp_cmd) + " '" + src + "' '" + a.dir + "/cp'"));
      Clean(a.dir + "/cp");
    };
    auto run_rsync = [&] {
      if (!with_rsync) return;
      Clean(a.dir + "/rsync");
      Prefault(a.dir, bytes);
      rs.push_back(Shell("rsync -a '" + src + "/' '" + a.dir + "/rsync/'"));
      Clean(a.dir + "/rsync");
      if (!with_fpsync) return;
      Clean(a.dir + "/fpsync");
      MakeDirs(a.dir + "/fpsync", 0755);
      fp.push_back(Shell("fpsync -n 8 -t '" + a.dir + "/fpsync.tmp' '" + src + "/' '" + a.dir + "/fpsync/' >/dev/null"));
      Clean(a.dir + "/fpsync");
    };
    auto run_pf = [&] {
      Clean(o.dir);
      Prefault(a.dir, bytes);
      StagedDataset d;
      FaultSide side;
      double t0 = MonotonicSeconds();
      Status s = StageDataset(o, src, who, "bench", &d, &side);
      cold.push_back(MonotonicSeconds() - t0);
      if (!s.ok() || d.hit) { std::fprintf(stderr, "stage_bench: cold stage: %s\n", s.message().c_str()); std::exit(1); }
      t0 = MonotonicSeconds();
      s = StageDataset(o, src, who, "bench2", &d, &side);
      warm.push_back(MonotonicSeconds() - t0);
      if (!s.ok() || !d.hit) { std::fprintf(stderr, "stage_bench: warm stage missed: %s\n", s.message().c_str()); std::exit(1); }
      Clean(o.dir);
    };
    if (a.only_pf) {
      run_pf();
      cp.push_back(0), rs.push_back(0), floor_t.push_back(0), sys_t.push_back(0);
      if (with_fpsync) fp.push_back(0);
    } else if (r % 2 == 0) { run_pf(); run_cp(); run_rsync(); run_floor(); }
    else { run_floor(); run_rsync(); run_cp(); run_pf(); }
    if (a.each) {
      char rsync_text[64] = "";
      if (with_rsync) std::snprintf(rsync_text, sizeof rsync_text, "  rsync -a %.3f s", rs.back());
      std::printf("  rep %d: preflight %.3f s (warm %.4f s)  %s %.3f s%s  syscall floor %.4f s\n", r, cold.back(),
                  warm.back(), cp_cmd, cp.back(), rsync_text, sys_t.back());
    }
  }
  return {Median(cp), with_rsync ? Median(rs) : 0, Median(cold), Median(warm), Median(floor_t), Median(sys_t),
          with_fpsync ? Median(fp) : 0};
}

const char* GoalText(bool ok) { return ok ? "OK" : "BELOW GOAL"; }

}  // namespace stage_bench

using namespace stage_bench;

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--dir") a.dir = v;
    else if (k == "--files") a.files = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--file-size") a.file_size = *ParseSize(v);
    else if (k == "--large") a.large = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--large-size") a.large_size = *ParseSize(v);
    else if (k == "--reps") a.reps = std::atoi(v.c_str());
    else if (k == "--workers") a.workers = static_cast<unsigned>(std::atoi(v.c_str()));
    else if (k == "--tmpfs-size") a.tmpfs_size = v;
    else if (k == "--verify") a.verify_dirs = v == "dirs";
    else if (k == "--each") a.each = v == "1";
    else if (k == "--preflight-only") a.only_pf = v == "1";
    else if (k == "--one-dir") a.one_dir = v == "1";
    else if (k == "--peers") a.peers = v;
    else if (k == "--netfs-us") a.netfs_us = std::atoi(v.c_str());
    else if (k == "--netfs-inflight") a.netfs_inflight = static_cast<unsigned>(std::atoi(v.c_str()));
    else if (k == "--netfs-bandwidth") a.netfs_bandwidth = v;
    else if (k == "--remote-workers") a.remote_workers = static_cast<unsigned>(std::atoi(v.c_str()));
    else if (k == "--peer-files") a.peer_files = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--peer-file-size") a.peer_file_size = *ParseSize(v);
    else { std::fprintf(stderr, "stage_bench: unknown option %s\n", k.c_str()); return 2; }
  }
  MakeDirs(a.dir, 0755);
  bool mounted = false;
  if (::geteuid() == 0) {
    if (::mount("tmpfs", a.dir.c_str(), "tmpfs", 0, ("size=" + a.tmpfs_size + ",mode=755").c_str()) == 0) {
      mounted = true;
      g_mounted = a.dir;
      std::atexit(Unmount);
    }
    else std::perror("stage_bench: mount tmpfs (continuing on the underlying filesystem)");
  }
  double load[1] = {0};
  ::getloadavg(load, 1);  // other work on the machine moves the ratios: say how much there was
  std::printf("stage_bench: %s on %s, %u CPUs (load %.2f), %d reps (median), workers %u, stage_verify %s, source read as %s\n", a.dir.c_str(),
              mounted ? "tmpfs" : "the existing filesystem", std::thread::hardware_concurrency(), load[0], a.reps,
              CopyWorkers(a), a.verify_dirs ? "dirs" : "files", ::geteuid() == 0 ? "nobody" : "self");

  if (!a.peers.empty()) return PeerBench(a);

  std::string small = a.dir + "/small";
  if (a.files > 0) {
  for (uint64_t i = 0; i < a.files; ++i) {
    std::string d = small + "/d" + std::to_string(a.one_dir ? 0 : i / 1000);
    if (i % 1000 == 0) MakeDirs(d, 0755);
    if (!Fill(d + "/f" + std::to_string(i), a.file_size, i)) { std::perror("stage_bench: fill"); return 1; }
  }
  std::string small_src = a.netfs_us >= 0 ? MountNetfs(a, small) : small;
  if (a.netfs_us >= 0)
    std::printf("\nsource through preflight-netfs: %d us per operation, at most %u in flight; stage_remote_workers %u\n",
                a.netfs_us, a.netfs_inflight, a.remote_workers);
  Result s = Run(a, small_src, a.files * a.file_size, true, "cp -a");
  if (a.netfs_us >= 0) {
    // The floor of any copy: per file a lookup, an open, a getattr and a
    // read (4 operations), every one a round trip, at most N at once.
    double floor = a.files * 4.0 * a.netfs_us * 1e-6 / a.netfs_inflight;
    std::printf("\n%llu files x %llu B from the network source (cold): preflight %.3f s   cp -a %.3f s   rsync -a %.3f s",
                static_cast<unsigned long long>(a.files), static_cast<unsigned long long>(a.file_size), s.cold, s.cp,
                s.rsync);
    if (s.fpsync > 0) std::printf("   fpsync -n 8 %.3f s", s.fpsync);
    std::printf("\n  floor (files x 4 ops x latency / in-flight) %.3f s;  preflight / floor = %.1fx\n", floor,
                s.cold / floor);
    if (!a.only_pf) {
      std::printf("  cp -a / preflight    = %.2fx  (goal >= 20x)   %s\n", s.cp / s.cold, GoalText(s.cp / s.cold >= 20));
      if (s.fpsync > 0)
        std::printf("  fpsync / preflight   = %.2fx  (goal >= 2x)    %s\n", s.fpsync / s.cold, GoalText(s.fpsync / s.cold >= 2));
      std::printf("  rsync -a / preflight = %.2fx\n", s.rsync / s.cold);
    }
    std::printf("  warm (cache hit) %.3f s  (goal at 100k files: <= 10 s, here %.2f s per 100k)\n", s.warm,
                s.warm * 100000.0 / a.files);
    Clean(small);
  } else {
    Clean(small);
  std::printf("\n%llu files x %llu B (cold):  preflight %.3f s   cp -a %.3f s   rsync -a %.3f s\n",
              static_cast<unsigned long long>(a.files), static_cast<unsigned long long>(a.file_size), s.cold, s.cp, s.rsync);
  std::printf("  rsync -a / preflight = %.2fx  (goal >= 3x)    %s\n", s.rsync / s.cold, GoalText(s.rsync / s.cold >= 3));
  std::printf("  cp -a / preflight    = %.2fx  (goal >= 1.5x)  %s\n", s.cp / s.cold, GoalText(s.cp / s.cold >= 1.5));
  std::printf("  warm (cache hit) %.3f s = %.1f%% of cold  (goal <= 2%%)  %s\n", s.warm, 100 * s.warm / s.cold,
              GoalText(s.warm / s.cold <= 0.02));
  std::printf("  floor (find -printf as the reader) %.3f s;  warm / floor = %.2fx\n", s.floor, s.warm / s.floor);
  std::printf("  syscall floor (getdents64 + statx per entry, %u threads, as the reader) %.3f s = %.1f%% of cold;"
              "  warm / syscall floor = %.2fx\n",
              CopyWorkers(a), s.sys_floor,
              100 * s.sys_floor / s.cold, s.warm / s.sys_floor);
  }
  }

  std::string large = a.dir + "/large";
  if (a.large > 0) {
  MakeDirs(large, 0755);
  for (uint64_t i = 0; i < a.large; ++i)
    if (!Fill(large + "/big" + std::to_string(i), a.large_size, 1000 + i)) { std::perror("stage_bench: fill"); return 1; }
  std::string large_src = a.netfs_us >= 0 ? MountNetfs(a, large) : large;
  Result l = Run(a, large_src, a.large * a.large_size, false, "cp -r");
  Clean(large);
  if (a.netfs_us >= 0) {
    double mb = a.large * a.large_size / 1048576.0;
    std::printf("\n%llu files x %llu B from the network source (cold, bandwidth cap %s): preflight %.3f s (%.0f MiB/s)"
                "   cp %.3f s (%.0f MiB/s)\n",
                static_cast<unsigned long long>(a.large), static_cast<unsigned long long>(a.large_size),
                a.netfs_bandwidth.empty() ? "none" : a.netfs_bandwidth.c_str(), l.cold, mb / l.cold, l.cp, mb / l.cp);
    if (!a.netfs_bandwidth.empty()) {
      auto cap = ParseSize(a.netfs_bandwidth);
      if (cap.ok() && *cap > 0)
        std::printf("  preflight / cap      = %.2fx  (goal >= 0.9x)  %s\n", mb * 1048576.0 / l.cold / *cap,
                    GoalText(mb * 1048576.0 / l.cold / *cap >= 0.9));
    }
    if (!a.only_pf) std::printf("  cp / preflight       = %.2fx\n", l.cp / l.cold);
    return 0;
  }
  std::printf("\n%llu files x %llu B (cold):  preflight %.3f s   cp %.3f s\n", static_cast<unsigned long long>(a.large),
              static_cast<unsigned long long>(a.large_size), l.cold, l.cp);
  std::printf("  cp / preflight       = %.2fx  (goal >= 0.95x) %s\n", l.cp / l.cold, GoalText(l.cp / l.cold >= 0.95));
  std::printf("  warm (cache hit) %.4f s = %.2f%% of cold  (goal <= 2%%)  %s\n", l.warm, 100 * l.warm / l.cold,
              GoalText(l.warm / l.cold <= 0.02));
  }
  return 0;
}
