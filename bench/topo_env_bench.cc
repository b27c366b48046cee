// Per-task cost of the topology environment: what a task does (read the
// node's cache, pair, compute the env) against what it would cost to load
// hwloc per task instead (the XML of a captured machine; probing a real
// node is slower still). Prints microseconds per call and the ratio.
//   topo_env_bench XML [ITERATIONS]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <unistd.h>

#include "preflight/fileutil.h"
#include "preflight/report.h"
#include "preflight/topo.h"
#include "preflight/topo_load.h"

using namespace preflight;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: topo_env_bench XML [ITERATIONS]\n");
    return 2;
  }
  int iters = argc > 2 ? std::atoi(argv[2]) : 2000;
  char tmpl[] = "/tmp/preflight-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  Config cfg;
  cfg.state_dir = std::string(tmpl) + "/state";
  cfg.fsroot = std::string(tmpl) + "/root";
  cfg.topology_xml = argv[1];
  if (!MakeDirs(cfg.fsroot).ok()) return 1;
  auto first = LoadTopologyCached(cfg, "bench", TopoLoadOptions());  // writes the cache
  if (!first) {
    std::fprintf(stderr, "topo_env_bench: %s\n", first.status().message().c_str());
    return 1;
  }
  // One task of a job holding the whole node: NCCL_* from all its GPUs
  // (one NIC set per job and node), UCX_NET_DEVICES from the task's last one.
  std::vector<int> gpus, node_gpus;
  for (const auto& g : first->gpus) node_gpus.push_back(g.index);
  if (!first->gpus.empty()) gpus.push_back(first->gpus.back().index);
  EnvPolicy pol = PolicyFromConfig(cfg);

  std::vector<double> cached, hwloc;
  size_t sink = 0;
  TopoLoadOptions ro;
  ro.write_cache = false;
  for (int i = 0; i < iters; ++i) {
    double t0 = MonotonicSeconds();
    bool hit = false;
    auto t = LoadTopologyCached(cfg, "bench", ro, &hit);
    (void)ClassifyRails(*t, cfg.topo_rails);
    EnvPlan p = ComputeEnv(*t, PairGpus(*t), node_gpus, gpus, pol);
    cached.push_back(MonotonicSeconds() - t0);
    sink += p.vars.size() + (hit ? 0 : 1000);
  }
  FsRoot fs(cfg.fsroot);
  for (int i = 0; i < std::max(1, iters / 50); ++i) {
    double t0 = MonotonicSeconds();
    auto t = LoadTopologyHwloc(cfg.topology_xml, fs);
    (void)ClassifyRails(*t, cfg.topo_rails);
    EnvPlan p = ComputeEnv(*t, PairGpus(*t), node_gpus, gpus, pol);
    hwloc.push_back(MonotonicSeconds() - t0);
    sink += p.vars.size();
  }
  double c = Median(cached) * 1e6, h = Median(hwloc) * 1e6;
  std::string base = argv[1];
  base = base.substr(base.rfind('/') + 1);
  std::printf("%-44s per task: cache+env %8.1f us (median of %d) | hwloc load+env %9.1f us | ratio %.0fx%s\n",
              base.c_str(), c, iters, h, h / c, sink >= 1000u * static_cast<size_t>(iters) ? " (CACHE MISSED)" : "");
  std::string cmd = std::string("rm -rf ") + tmpl;
  return std::system(cmd.c_str()) == 0 ? 0 : 1;
}
