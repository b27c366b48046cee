// The topo subcommand of `preflight` and its options (topo_cmd.h).
#include "topo_cmd.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <unistd.h>

#include "preflight/fileutil.h"
#include "preflight/fsroot.h"
#include "preflight/hostlist.h"
#include "preflight/job.h"
#include "preflight/log.h"
#include "preflight/placement.h"
#include "preflight/rails.h"
#include "preflight/state_paths.h"
#include "preflight/strings.h"
#include "preflight/topo.h"
#include "preflight/topo_load.h"

namespace preflight {

namespace {

// Options of `preflight topo` (parsed with the common ones).
struct TopoCli {
  std::string xml;
  std::string fsroot;
  std::string gpus;
  bool gpus_given = false;  // --gpus '' is refused, not "all"
  bool json = false;
  bool compare = false;
  int nodes = 0;  // --nodes: the job's node count (Slingshot's NCCL_NET); 0 from SLURM_JOB_NUM_NODES
} g_topo;

// preflight topo --compare [HOSTLIST|FILE]...: rail records (prolog's
// <state_dir>/nodes/<node>.rails.json, one JSON line each) compared; the odd
// node named. An argument with a '/' is a record file (gathered from the
// nodes); any other a hostlist whose records are read from state_dir
// (shared, or --set state_dir=DIR), as `preflight fleet` reads versions. A
// node of a hostlist without a record is named ("no rails record on ...")
// and the others are compared. Exit 1 when they differ, 2 on errors or when
// no record was found.
int TopoCompare(const std::vector<std::string>& args, const CommonCli& cli) {
  if (args.empty()) {
    Log(LogLevel::kError, "topo", "--compare", "give the nodes (HOSTLIST) or their rails records (STATE_DIR/nodes/NODE.rails.json)");
    return 2;
  }
  std::optional<Config> cfg;
  std::vector<std::string> files, missing;
  for (const auto& a : args) {
    if (a.find('/') != std::string::npos) { files.push_back(a); continue; }
    auto hosts = ExpandHostlist(a);
    if (!hosts) {
      Log(LogLevel::kError, "topo", a, hosts.status().message());
      return 2;
    }
    if (!cfg) {
      auto c = LoadCliConfig(cli, "");
      if (!c) {
        Log(LogLevel::kError, "topo", "site config", c.status().message());
        return 2;
      }
      cfg = *c;
    }
    for (const auto& h : *hosts) {
      std::string path = RailsPath(*cfg, h);
      if (::access(path.c_str(), F_OK) == 0) files.push_back(path);
      else missing.push_back(h);
    }
  }
  std::vector<NodeRails> nodes;
  for (const auto& f : files) {
    auto text = ReadWholeFile(f);
    if (!text) {
      Log(LogLevel::kError, "topo", f, text.status().message());
      return 2;
    }
    for (const auto& line : SplitNonEmpty(*text, '\n')) {
      auto n = ParseRailsJson(line);
      if (!n) {
        Log(LogLevel::kError, "topo", f, n.status().message());
        return 2;
      }
      nodes.push_back(*n);
    }
  }
  if (!missing.empty())
    std::printf("no rails record on %s (its prolog has not recorded one)\n", CompressHostlist(missing).c_str());
  if (nodes.empty()) {
    Log(LogLevel::kError, "topo", "no rails records",
        cfg ? "under " + state::NodesDir(*cfg) + " (the prolog writes them with topo_env on)" : "in the files given");
    return 2;
  }
  RailsComparison c = CompareRails(nodes);
  std::fputs(c.text.c_str(), stdout);
  return c.consistent ? 0 : 1;
}

// The GPUs --gpus names, all of the topology's without it; refused (logged,
// nullopt) when the list is empty, names a GPU twice or one the topology lacks.
std::optional<std::vector<int>> TopoGpus(const Topology& topo) {
  std::vector<int> gpus;
  if (!g_topo.gpus_given) {
    for (const auto& g : topo.gpus) gpus.push_back(g.index);
    return gpus;
  }
  auto ids = g_topo.gpus.empty() ? Expected<std::vector<int>>(Status::InvalidArgument("empty list (omit --gpus for all GPUs)"))
                                 : ParseIdList(g_topo.gpus);
  if (ids) {
    std::vector<int> sorted = *ids;
    std::sort(sorted.begin(), sorted.end());
    auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end()) ids = Status::InvalidArgument("GPU " + std::to_string(*dup) + " given twice");
  }
  if (!ids) {
    Log(LogLevel::kError, "topo", "--gpus '" + g_topo.gpus + "'", ids.status().message());
    return std::nullopt;
  }
  for (int g : *ids) {
    bool known = false;
    for (const auto& tg : topo.gpus) known = known || tg.index == g;
    if (!known) {
      Log(LogLevel::kError, "topo", "--gpus: no GPU " + std::to_string(g),
          "this topology has " + std::to_string(topo.gpus.size()) + " GPU(s)");
      return std::nullopt;
    }
  }
  return *ids;
}

}  // namespace

void AddTopoOptions(po::options_description& desc) {
  desc.add_options()
      ("xml", po::value<std::string>(&g_topo.xml)->value_name("FILE"), "hwloc XML to load instead of topology_xml / probing; nothing else is read from this machine")
      ("fsroot", po::value<std::string>(&g_topo.fsroot)->value_name("DIR"),
       "read port/netdev state and GPU minors under DIR (with --xml: default none, the XML alone)")
      ("gpus", po::value<std::string>(&g_topo.gpus)->value_name("LIST"), "GPU indexes a job holds on the node, e.g. 0,1 (default all)")
      ("json", po::bool_switch(&g_topo.json), "print JSON instead of the table")
      ("nodes", po::value<int>(&g_topo.nodes)->value_name("N"),
       "nodes in the job (default SLURM_JOB_NUM_NODES, else unknown): Slingshot's NCCL_NET is set only for N > 1")
      ("compare", po::bool_switch(&g_topo.compare), "compare the rails records FILE... of several nodes; name the odd one");
}

bool TopoOptionsParsed(const po::variables_map& vm) {
  g_topo.gpus_given = vm.count("gpus") > 0;
  if (g_topo.nodes < 0 || g_topo.nodes > 1000000) {
    Log(LogLevel::kError, "admin", "--nodes " + std::to_string(g_topo.nodes), "out of range 1..1000000");
    return false;
  }
  return true;
}

// preflight topo: the GPU-NIC table and the environment a task would get.
// Always loads hwloc afresh (never the cache): this is what an admin runs to
// see what the node looks like now. With --xml (often another node's file,
// on an admin host with NICs of its own) nothing is read from this machine
// unless --fsroot names a root to read port and netdev state from.
int TopoCmd(const std::vector<std::string>& args, const CommonCli& cli) {
  if (g_topo.compare) return TopoCompare(args, cli);
  if (!args.empty()) {
    Log(LogLevel::kError, "topo", "unexpected argument '" + args[0] + "'", "see preflight --help");
    return 2;
  }
  std::string node = ShortHostname();
  auto cfg = LoadCliConfig(cli, node);
  if (!cfg) {
    Log(LogLevel::kError, "topo", "site config", cfg.status().message());
    return 1;
  }
  if (!g_topo.fsroot.empty()) cfg->fsroot = g_topo.fsroot;
  Expected<Topology> topo = Status::Unavailable("");
  if (!g_topo.xml.empty() && g_topo.fsroot.empty()) {
    topo = LoadTopologyXmlOnly(g_topo.xml);
  } else {
    if (!g_topo.xml.empty()) cfg->topology_xml = g_topo.xml;
    topo = LoadTopologyHwloc(cfg->topology_xml, FsRoot(cfg->fsroot));
  }
  if (!topo) {
    Log(LogLevel::kError, "topo", "cannot load the topology", topo.status().message());
    return 1;
  }
  Status rails = ClassifyRails(*topo, cfg->topo_rails);
  if (!rails.ok()) {
    Log(LogLevel::kError, "topo", "site config", rails.message());
    return 1;
  }
  auto pairing = PairGpus(*topo);
  std::optional<std::vector<int>> chosen = TopoGpus(*topo);
  if (!chosen) return 2;
  const std::vector<int>& gpus = *chosen;
  EnvPolicy policy = PolicyFromConfig(*cfg);
  std::vector<std::string> warnings;
  // Inside a job, what Slurm gave this node: a node Slurm says has GPUs but
  // whose topology shows none is worth a loud line (exit status unchanged).
  // Not for a foreign --xml (another node's file, nothing read from here).
  if (g_topo.xml.empty() || !g_topo.fsroot.empty()) {
    auto getenv_s = [](const char* n) { const char* v = std::getenv(n); return std::string(v != nullptr ? v : ""); };
    std::string w = GpuGresWarning(*topo, getenv_s("SLURM_JOB_GPUS"), getenv_s("SLURM_STEP_GPUS"));
    if (!w.empty()) {
      warnings.push_back(w);
      std::fprintf(stderr, "preflight: topo: warning: %s\n", w.c_str());
    }
    long nodes = std::strtol(getenv_s("SLURM_JOB_NUM_NODES").c_str(), nullptr, 10);
    if (nodes > 0 && nodes < 1000000) policy.job_nodes = static_cast<int>(nodes);
  }
  if (g_topo.nodes > 0) policy.job_nodes = g_topo.nodes;
  EnvPlan plan = ComputeEnv(*topo, pairing, gpus, policy);
  if (g_topo.json) {
    std::fputs(TopologyJson(*topo, pairing, &plan, warnings).c_str(), stdout);
    return 0;
  }
  std::printf("Topology: %s\n", topo->source.c_str());
  if (topo->state_from == "xml")
    std::printf("Port state: from the XML (nothing read from this machine; --fsroot DIR reads a root's sysfs)\n\n");
  else
    std::printf("Port state: from %s\n\n", topo->state_from.substr(std::strlen("sysfs:")).c_str());
  std::fputs(TopologyTable(*topo, pairing).c_str(), stdout);
  std::string which;
  for (int g : gpus) which += (which.empty() ? "" : ",") + std::to_string(g);
  std::printf("\nEnvironment for the tasks of a job with GPU(s) %s on this node (NCCL_* the same for all):\n",
              which.empty() ? "(none)" : which.c_str());
  std::fputs(EnvPlanText(plan).c_str(), stdout);
  std::string expect = ExpectedPairingText(PlacementPairing(*topo));
  if (expect.empty())
    std::printf("\nNo placement to pin (topo_expect): no GPU has an RDMA NIC here.\n");
  else
    std::printf("\nPin this placement (site config; the prolog then checks it):\n  topo_expect = %s\n", expect.c_str());
  std::printf("\nLegend: PIX one PCIe switch, PXB several switches, PHB host bridge, NODE same NUMA node, SYS across NUMA nodes;\n"
              "rail: a compute rail (NCCL_IB_HCA), storage: storage/front-end NIC (never in NCCL_IB_HCA), down: no usable port\n");
  return 0;
}

}  // namespace preflight
