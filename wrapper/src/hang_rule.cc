#include "preflight/hang_rule.h"

#include <map>
#include <set>
#include <tuple>

#include "preflight/strings.h"
#include "preflight/text.h"

namespace preflight {
namespace {

// "rank 3 (pid 4242, GPU 1) on n2", or "... on 10.0.0.9 (no node of this job)".
std::string Who(const RasProcess& p, long rank, const std::function<std::string(const std::string&)>& node_of,
                std::set<std::string>* nodes, std::set<std::string>* strangers) {
  std::string node = p.host.empty() ? "" : node_of(p.host);
  std::string s = rank >= 0 ? "rank " + std::to_string(rank) + " " : "";
  std::string detail;
  if (p.pid >= 0) detail = "pid " + std::to_string(p.pid);
  if (!p.gpu.empty()) detail += std::string(detail.empty() ? "" : ", ") + "GPU " + PrintableText(p.gpu);
  if (!detail.empty()) s += "(" + detail + ") ";
  if (!node.empty()) {
    nodes->insert(node);
    return s + "on " + node;
  }
  std::string host = p.host.empty() ? "an unknown host" : PrintableText(p.host);
  strangers->insert(host);
  return s + "on " + host + " (no node of this job)";
}

std::string List(const std::vector<std::string>& v, size_t max) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < max; ++i) s += (i ? "; " : "") + v[i];
  if (v.size() > max) s += "; and " + std::to_string(v.size() - max) + " more";
  return s;
}

HangFinding Named(HangCause c, const std::set<std::string>& nodes, const std::string& line) {
  HangFinding f;
  f.cause = c;
  f.nodes.assign(nodes.begin(), nodes.end());
  f.line = line;
  return f;
}

}  // namespace

const char* HangCauseName(HangCause c) {
  switch (c) {
    case HangCause::kNoReport: return "no-report";
    case HangCause::kDead: return "dead";
    case HangCause::kUnresponsive: return "unresponsive";
    case HangCause::kBehind: return "behind";
    case HangCause::kProgressing: return "progressing";
    case HangCause::kEqualCounts: return "equal-counts";
    case HangCause::kUnlisted: return "unlisted";
  }
  return "?";
}

bool RasNamesAtOnce(const RasSnapshot& s) {
  if (!s.dead.empty() || !s.unresponsive.empty()) return true;
  for (const auto& c : s.comms)
    if (!c.missing.empty()) return true;
  return false;
}

HangFinding AttributeHang(const std::vector<RasSnapshot>& polls,
                          const std::function<std::string(const std::string& host)>& node_of) {
  if (polls.empty()) return Named(HangCause::kNoReport, {}, "no RAS report: no node named");
  std::set<std::string> nodes, strangers;
  // Rule 1, from the first report that has it.
  for (const auto& s : polls) {
    if (!RasNamesAtOnce(s)) continue;
    std::vector<std::string> dead, gone;
    for (const auto& p : s.dead) dead.push_back(Who(p, -1, node_of, &nodes, &strangers));
    for (const auto& p : s.unresponsive) gone.push_back(Who(p, -1, node_of, &nodes, &strangers));
    std::set<std::string> seen;
    for (const auto& c : s.comms)
      for (const auto& m : c.missing) {
        std::string w = Who(m.proc, m.rank, node_of, &nodes, &strangers);
        if (m.proc.host.empty() || !seen.insert(m.proc.host + "/" + std::to_string(m.proc.pid)).second) continue;
        bool listed = false;
        for (const auto& p : s.dead) listed |= p.host == m.proc.host && p.pid == m.proc.pid;
        for (const auto& p : s.unresponsive) listed |= p.host == m.proc.host && p.pid == m.proc.pid;
        if (!listed) gone.push_back(w);
      }
    std::string line;
    if (!dead.empty()) line = "NCCL RAS considers dead: " + List(dead, 8);
    if (!gone.empty()) line += std::string(line.empty() ? "" : "; ") + "no data from: " + List(gone, 8);
    if (line.empty()) line = "NCCL RAS has no data from some ranks and does not say where they run";
    return Named(dead.empty() ? HangCause::kUnresponsive : HangCause::kDead, nodes, line);
  }
  // Rule 2: the same laggards with the same counts in the first and last report.
  const RasSnapshot& first = polls.front();
  const RasSnapshot& last = polls.back();
  using Key = std::tuple<std::string, std::string, long>;  // comm, collective, rank
  std::map<Key, std::pair<uint64_t, uint64_t>> before;     // -> launched, ahead
  for (const auto& c : first.comms)
    for (const auto& l : c.lags) before[Key(c.id, l.collective, l.rank.rank)] = {l.launched, l.ahead};
  bool mismatch = false, moved = polls.size() < 2;
  std::vector<std::string> behind;
  for (const auto& c : last.comms) {
    mismatch |= c.mismatch;
    for (const auto& l : c.lags) {
      auto it = before.find(Key(c.id, l.collective, l.rank.rank));
      if (it == before.end() || it->second != std::make_pair(l.launched, l.ahead) || polls.size() < 2) {
        moved = true;
        continue;
      }
      std::string what = l.collective.empty() ? "collectives" : l.collective;
      std::string w = Who(l.rank.proc, l.rank.rank, node_of, &nodes, &strangers) + " of " + PrintableText(c.id) + ": " +
                      (l.none ? std::string("launched no ") + what : std::to_string(l.launched) + " " + what) +
                      " launched, others " + std::to_string(l.ahead);
      behind.push_back(w);
    }
  }
  if (!behind.empty())
    return Named(HangCause::kBehind, nodes,
                 "behind in NCCL collectives with no progress over " + std::to_string(polls.size()) + " RAS reports: " +
                     List(behind, 8));
  if (mismatch && polls.size() < 2)
    return Named(HangCause::kProgressing, {},
                 "NCCL RAS: one report only, so whether the differing collective counts move is unknown: no node named");
  if (mismatch && moved)
    return Named(HangCause::kProgressing, {}, "NCCL RAS: collective counts still moving between reports: no node named");
  if (mismatch)
    return Named(HangCause::kUnlisted, {},
                 "NCCL RAS: ranks launched different collective counts, but the report lists none of them (more than "
                 "10 or a quarter of a communicator): no node named");
  return Named(HangCause::kEqualCounts, {},
               "NCCL RAS: every rank launched the same collectives (a collective stuck on the GPU looks healthy to "
               "RAS): no node named by RAS");
}

}  // namespace preflight
