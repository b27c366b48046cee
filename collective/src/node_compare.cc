// The nodes' own records compared across the allocation (rails, versions,
// and at the full level gpu.gemm): from what the collective step carried,
// else read with a user step of their own (collective_run.h: RailsAcross,
// VersionsAcross, GemmAcrossText).
#include <algorithm>

#include "allocation_steps.h"
#include "preflight/collective_run.h"
#include "preflight/gemm_record.h"
#include "preflight/process.h"
#include "preflight/rails.h"
#include "preflight/state_paths.h"
#include "preflight/strings.h"

namespace preflight::collective {

using allocation_internal::Prefixed;
using allocation_internal::Srun;

namespace {

// Each node's record <state_dir>/nodes/<node><suffix>, read on its node by
// one user task (node-local state_dir): a user step, so what it says
// decides nothing about a node. Only when the collective step did not
// carry the records (collective_node_records.h): it failed to start.
Expected<NodeRecordSet> GatherNodeRecords(const Config& cfg, const Allocation& a, const char* suffix) {
  auto argv = Srun(cfg, a.nodes, 1, false);
  argv.insert(argv.end(), {"/bin/sh", "-c",
                           std::string("cat \"$0/$SLURMD_NODENAME") + suffix +
                               "\" 2>/dev/null || echo \"no-record $SLURMD_NODENAME\"",
                           state::NodesDir(cfg)});
  auto r = RunAs(argv, LaunchEnv(a.env, false), a.uid, a.gid, a.groups, cfg.probe_timeout_ms);
  if (!r) return r.status();
  NodeRecordSet out;
  size_t b = 0;
  const std::string& text = r->second;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(b, e - b);
    b = e + 1;
    if (line.rfind("no-record ", 0) == 0) out.missing += (out.missing.empty() ? "" : ",") + line.substr(10);
    if (!line.empty() && line[0] == '{') out.lines.push_back(std::move(line));
  }
  return out;
}

// Parse the nodes' records, sort by node, compare: the shape shared by the
// rails and the versions comparisons.
template <class Outcome, class Record, class Parse, class Compare>
Outcome Across(const Expected<NodeRecordSet>& recs, const std::string& head, const char* what, const char* why_missing,
               Parse parse, Compare compare) {
  Outcome o;
  if (!recs) {
    o.text = head + "cannot read the nodes' " + what + ": " + recs.status().message() + "\n";
    return o;
  }
  std::vector<Record> nodes;
  for (const auto& line : recs->lines)
    if (auto n = parse(line)) nodes.push_back(*n);
  std::sort(nodes.begin(), nodes.end(), [](const Record& x, const Record& y) { return x.node < y.node; });
  if (!recs->missing.empty()) o.text += head + "no " + what + " record on " + recs->missing + " (" + why_missing + ")\n";
  if (nodes.size() < 2) return o;
  o.comparison = compare(nodes);
  o.text += Prefixed(head, o.comparison.text);
  return o;
}

RailsOutcome RailsOf(const Expected<NodeRecordSet>& recs) {
  return Across<RailsOutcome, NodeRails>(recs, "preflight: rails: ", "rails", "its prolog has not recorded one",
                                         ParseRailsJson, CompareRails);
}
VersionsOutcome VersionsOf(const Expected<NodeRecordSet>& recs) {
  return Across<VersionsOutcome, NodeVersions>(recs, "preflight: versions: ", "versions",
                                               "its node checks have not run", ParseVersionsJson, CompareVersions);
}

}  // namespace

namespace allocation_internal {

// Every line of `text`, prefixed with `head`.
std::string Prefixed(const std::string& head, const std::string& text) {
  std::string out;
  size_t p = 0;
  while (p < text.size()) {
    size_t e = text.find('\n', p);
    out += head + text.substr(p, e - p) + "\n";
    p = e == std::string::npos ? text.size() : e + 1;
  }
  return out;
}

// The comparisons' text from the records the step carried; a kind it did
// not carry is read with its own step.
// The gemm records only at the full level, the one whose prolog soaked.
std::string NodeComparisons(const Config& cfg, const Allocation& a, const ParsedOutput* carried, Level level) {
  auto set = [&](const char* kind, const char* suffix) -> Expected<NodeRecordSet> {
    if (carried != nullptr) {
      auto it = carried->node_records.find(kind);
      if (it != carried->node_records.end()) return it->second;
    }
    return GatherNodeRecords(cfg, a, suffix);
  };
  std::string text = RailsOf(set("rails", state::kRails)).text + VersionsOf(set("versions", state::kVersions)).text;
  if (level >= Level::kFull)
    if (auto gemm = set("gemm", kGemmRecordSuffix)) text += GemmAcrossText(*gemm, a.job_id);
  return text;
}

}  // namespace allocation_internal

std::string GemmAcrossText(const NodeRecordSet& recs, const std::string& job) {
  std::vector<NodeGemm> nodes;
  std::string without;
  for (const auto& line : recs.lines)
    if (auto n = ParseGemmRecordJson(line)) nodes.push_back(*n);
  // Only this job's soaks count: a node's record from an earlier job's soak,
  // or none (a job below the full level runs no soak), is said only when
  // some node did record this job's.
  GemmAcross c = CompareGemm(nodes, job);
  if (c.nodes == 0) return "";
  for (const auto& n : nodes)
    if (n.job != job) without += (without.empty() ? "" : ",") + n.node;
  if (!recs.missing.empty()) without += (without.empty() ? "" : ",") + recs.missing;
  std::string out = Prefixed("preflight: gemm: ", c.text);
  if (!without.empty()) out += "preflight: gemm: no soak of this job recorded on " + without + "\n";
  return out;
}

RailsOutcome RailsAcross(const Config& cfg, const Allocation& a) { return RailsOf(GatherNodeRecords(cfg, a, state::kRails)); }

VersionsOutcome VersionsAcross(const Config& cfg, const Allocation& a) {
  return VersionsOf(GatherNodeRecords(cfg, a, state::kVersions));
}

}  // namespace preflight::collective
