// gpu.gemm's node record and its comparison across an allocation (gemm_record.h).
#include "preflight/gemm_record.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "preflight/fileutil.h"
#include "preflight/gemm.h"
#include "preflight/state_paths.h"
#include "preflight/stats.h"

namespace preflight {

using nlohmann::json;

std::string GemmRecordJson(const NodeGemm& g) {
  json gpus = json::array();
  for (const auto& x : g.gpus) gpus.push_back({{"gpu", x.gpu}, {"tflops", x.tflops}, {"hash", x.hash}});
  json j = {{"node", g.node}, {"job", g.job},   {"at", g.at},
            {"gpu_model", g.gpu_model}, {"size", g.size}, {"gpus", gpus}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Expected<NodeGemm> ParseGemmRecordJson(const std::string& line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("not a gemm record: " + line.substr(0, 120));
  NodeGemm g;
  try {
    g.node = j.at("node").get<std::string>();
    g.job = j.value("job", "");
    g.at = j.value("at", 0.0);
    g.gpu_model = j.value("gpu_model", "");
    g.size = j.value("size", uint64_t{0});
    for (const auto& x : j.at("gpus")) g.gpus.push_back({x.at("gpu").get<int>(), x.at("tflops").get<double>(), x.value("hash", "")});
  } catch (const json::exception& e) {
    return Status::InvalidArgument("gemm record: " + std::string(e.what()));
  }
  if (g.node.empty()) return Status::InvalidArgument("gemm record without a node");
  return g;
}

Status WriteGemmRecord(const Config& cfg, const NodeGemm& g) {
  Status w = MakeDirs(state::NodesDir(cfg), 0755);
  if (w.ok()) w = WriteFileAtomic(state::NodeFile(cfg, g.node, kGemmRecordSuffix), GemmRecordJson(g) + "\n", 0644);
  return w;
}

namespace {

// One group's findings into `c`; returns the group's median TFLOPS and
// adds its GPUs to *gpus_out.
double Compare(const std::vector<const NodeGemm*>& group, GemmAcross& c, size_t* gpus_out) {
  std::vector<double> rates;
  std::vector<std::string> hashes;
  for (const NodeGemm* n : group)
    for (const auto& x : n->gpus) {
      rates.push_back(x.tflops);
      hashes.push_back(x.hash);
    }
  const size_t gpus = hashes.size();
  *gpus_out += gpus;
  const double median = Median(rates);
  const Majority<std::string> m = MajorityOf(hashes);
  const std::string& major = m.value;
  const size_t most = m.count;
  const bool strict = m.strict;
  auto odd = [&](const std::string& who) {
    c.consistent = false;
    if (std::find(c.odd.begin(), c.odd.end(), who) == c.odd.end()) c.odd.push_back(who);
  };
  for (const NodeGemm* n : group)
    for (const auto& x : n->gpus) {
      const std::string who = n->node + " GPU" + std::to_string(x.gpu);
      if (x.tflops < kGemmStragglerFraction * median) {
        char b[48];
        std::snprintf(b, sizeof b, " < %.0f%% of the allocation's median ", 100 * kGemmStragglerFraction);
        c.text += who + ": " + TflopsText(x.tflops) + b + TflopsText(median) + "\n";
        odd(who);
      }
      if (strict && x.hash != major) {
        c.text += who + ": GEMM result hash " + x.hash + ", " + std::to_string(most) + " of the allocation's " +
                  std::to_string(gpus) + " GPUs have " + major + "\n";
        odd(who);
      }
    }
  if (!strict && gpus > 1) {
    c.consistent = false;
    std::string all;
    for (const NodeGemm* n : group)
      for (const auto& x : n->gpus) all += (all.empty() ? "" : ", ") + n->node + " GPU" + std::to_string(x.gpu) + " " + x.hash;
    c.text += "GEMM results differ with no majority: " + all + "\n";
  }
  return median;
}

}  // namespace

GemmAcross CompareGemm(const std::vector<NodeGemm>& nodes, const std::string& job) {
  GemmAcross c;
  std::map<std::pair<std::string, uint64_t>, std::vector<const NodeGemm*>> groups;
  for (const auto& n : nodes)
    if (n.job == job && !n.gpus.empty()) groups[{n.gpu_model, n.size}].push_back(&n);
  double median = 0;
  size_t gpus = 0, compared = 0;
  for (auto& [key, group] : groups) {
    if (group.size() < 2) continue;
    ++compared;
    std::sort(group.begin(), group.end(), [](const NodeGemm* a, const NodeGemm* b) { return a->node < b->node; });
    c.nodes += group.size();
    median = Compare(group, c, &gpus);
  }
  if (c.nodes > 0 && c.consistent)
    c.text = std::to_string(c.nodes) + " nodes' " + std::to_string(gpus) + " GPUs agree on the GEMM result, all within " +
             std::to_string(static_cast<int>(100 * kGemmStragglerFraction)) + "% of the allocation's median" +
             (compared == 1 ? " " + TflopsText(median) : std::string()) + "\n";
  return c;
}

}  // namespace preflight
