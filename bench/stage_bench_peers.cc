// stage_bench --peers: the peer fan-out (stage_peer.h) on emulated nodes
// in this process: bytes read from the source and wall time for each node
// count, fan-out against every node copying alone.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/report.h"
#include "preflight/stage_cache.h"
#include "preflight/stage_copy.h"
#include "preflight/stage_peer.h"
#include "stage_bench.h"

using namespace preflight;

namespace stage_bench {

using CountingFs = CountingStageFs;  // stage_copy.h

int PeerBench(const Args& a) {
  if (::geteuid() != 0) { std::fprintf(stderr, "stage_bench: --peers needs root (munged, reading as nobody)\n"); return 1; }
  std::string src = a.dir + "/peer-src", mdir = a.dir + "/munge";
  MakeDirs(src, 0755);
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < a.peer_files; ++i) {
    if (!Fill(src + "/p" + std::to_string(i), a.peer_file_size, 5000 + i)) { std::perror("stage_bench: fill"); return 1; }
    bytes += a.peer_file_size;
  }
  std::string fill_src = src;
  if (a.netfs_us >= 0) src = MountNetfs(a, src);  // the nodes read it through preflight-netfs
  MakeDirs(mdir, 0755);
  { int fd = ::open((mdir + "/munge.key").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0400); std::string k(1024, 'b'); for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<char>(i * 131 + 7); if (fd < 0 || ::write(fd, k.data(), k.size()) != 1024) return 1; ::close(fd); }
  std::string sock = mdir + "/munge.sock";
  Shell("munged --force --socket=" + sock + " --key-file=" + mdir + "/munge.key --pid-file=" + mdir + "/munged.pid --log-file=" +
        mdir + "/munged.log --seed-file=" + mdir + "/munged.seed");
  StageIdentity who = Reader();
  std::printf("\npeer fan-out: %llu files x %llu B = %s per node, emulated nodes on this host, fanout 2, source read as %s%s\n",
              static_cast<unsigned long long>(a.peer_files), static_cast<unsigned long long>(a.peer_file_size),
              HumanBytes(static_cast<double>(bytes)).c_str(), who.drop ? "nobody" : "self",
              a.netfs_us >= 0 ? (", through preflight-netfs at " + std::to_string(a.netfs_us) + " us per operation" +
                                 (a.netfs_bandwidth.empty() ? "" : ", capped at " + a.netfs_bandwidth + "/s")).c_str()
                              : "");
  size_t i = 0;
  int job = 1000;
  while (i < a.peers.size()) {
    size_t j = a.peers.find(',', i);
    if (j == std::string::npos) j = a.peers.size();
    size_t n = std::strtoull(a.peers.substr(i, j - i).c_str(), nullptr, 10);
    i = j + 1;
    if (n == 0) continue;
    std::vector<std::unique_ptr<CountingFs>> fs;
    std::vector<StageCacheOptions> caches(n);
    for (size_t k = 0; k < n; ++k) {
      fs.push_back(std::make_unique<CountingFs>());
      caches[k].dir = a.dir + "/peer-node" + std::to_string(k);
      caches[k].workers = a.workers ? a.workers : 2;
      caches[k].remote_workers = a.remote_workers;
      caches[k].fs = fs.back().get();
    }
    auto clean = [&] { for (auto& c : caches) Clean(c.dir); for (auto& f : fs) f->read = 0; };
    // Every node alone.
    clean();
    std::atomic<int> failed{0};
    double t0 = MonotonicSeconds();
    {
      std::vector<std::thread> ts;
      for (size_t k = 0; k < n; ++k)
        ts.emplace_back([&, k] {
          StagedDataset d;
          FaultSide side;
          if (!StageDataset(caches[k], src, who, std::to_string(job), &d, &side).ok()) ++failed;
        });
      for (auto& t : ts) t.join();
    }
    double alone = MonotonicSeconds() - t0;
    uint64_t alone_read = 0;
    for (auto& f : fs) alone_read += f->read;
    // Fan-out.
    clean();
    ++job;
    std::vector<PeerEndpoint> eps;
    std::vector<int> lfds;
    for (size_t k = 0; k < n; ++k) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      struct sockaddr_in sa {};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof sa;
      if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 16) != 0 ||
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) { std::perror("stage_bench: listen"); return 1; }
      lfds.push_back(fd);
      eps.push_back({"127.0.0.1", ntohs(sa.sin_port)});
    }
    std::vector<PeerReport> reps(n);
    unsigned fell_back = 0;
    t0 = MonotonicSeconds();
    {
      std::vector<std::thread> ts;
      for (size_t k = 0; k < n; ++k)
        ts.emplace_back([&, k] {
          PeerOptions p;
          p.job_id = std::to_string(job);
          p.nodes = eps;
          p.self = k;
          p.munge_socket = sock;
          p.listen_fd = lfds[k];
          StagedDataset d;
          FaultSide side;
          if (!StageWithPeers(caches[k], src, who, p, &d, &side, &reps[k]).ok()) ++failed;
        });
      for (auto& t : ts) t.join();
    }
    double fan = MonotonicSeconds() - t0;
    for (int fd : lfds) ::close(fd);
    uint64_t fan_read = 0;
    for (auto& f : fs) fan_read += f->read;
    for (auto& r : reps) fell_back += r.fell_back;
    clean();
    ++job;
    std::printf("  %zu node(s): source read alone %s (%.2fx dataset) in %.3f s;  fan-out %s (%.2fx) in %.3f s%s%s\n", n,
                HumanBytes(static_cast<double>(alone_read)).c_str(), static_cast<double>(alone_read) / bytes, alone,
                HumanBytes(static_cast<double>(fan_read)).c_str(), static_cast<double>(fan_read) / bytes, fan,
                fell_back ? "  (some nodes fell back)" : "", failed ? "  FAILED" : "");
  }
  Clean(fill_src);
  if (auto pid = ReadWholeFile(mdir + "/munged.pid")) ::kill(std::atoi(pid->c_str()), SIGTERM);
  return 0;
}

}  // namespace stage_bench
