#include "preflight/rails.h"

#include <map>

#include <nlohmann/json.hpp>

#include "preflight/fileutil.h"
#include "preflight/placement.h"
#include "preflight/topo_load.h"
#include "preflight/state_paths.h"

namespace preflight {

using nlohmann::json;

bool RailInfo::operator==(const RailInfo& o) const {
  return name == o.name && kind == o.kind && link_layer == o.link_layer && rate == o.rate && state == o.state;
}

std::string NodeRails::Key() const {
  std::string k;
  for (const auto& r : rails) k += r.name + "|" + r.kind + "|" + r.link_layer + "|" + r.rate + "|" + r.state + ";";
  return k + "#" + gpu_map;
}

std::string NodeRails::Summary() const {
  std::map<std::string, int> kinds;  // "InfiniBand 100 Gb/sec" -> count
  int down = 0;
  for (const auto& r : rails) {
    std::string d = (r.link_layer.empty() ? r.kind : r.link_layer) + (r.rate.empty() ? "" : " " + r.rate);
    ++kinds[d];
    down += r.state == "down";
  }
  std::string s = std::to_string(rails.size()) + " rail" + (rails.size() == 1 ? "" : "s");
  if (!kinds.empty()) {
    s += " (";
    bool first = true;
    for (const auto& k : kinds) {
      s += (first ? "" : ", ") + std::to_string(k.second) + " x " + k.first;
      first = false;
    }
    s += ")";
  }
  if (down) s += ", " + std::to_string(down) + " down";
  return s + ", GPU map " + (gpu_map.empty() ? std::string("(none)") : gpu_map);
}

NodeRails RailsOf(const std::string& node, const Topology& topo) {
  NodeRails out;
  out.node = node;
  for (const auto& n : topo.nics) {
    if (n.role != NicRole::kRail) continue;
    RailInfo r;
    r.name = n.name;
    r.kind = n.kind;
    if (!n.ports.empty()) {
      r.link_layer = n.ports[0].link_layer;
      r.rate = n.ports[0].rate;
    }
    r.state = n.state();
    out.rails.push_back(r);
  }
  // Placement (every port taken as up): a down port shows in `state`, not
  // as a moved GPU.
  out.gpu_map = ExpectedPairingText(PlacementPairing(topo));
  return out;
}

std::string RailsJson(const NodeRails& r) {
  json j;
  j["node"] = r.node;
  j["gpu_map"] = r.gpu_map;
  j["rails"] = json::array();
  for (const auto& x : r.rails)
    j["rails"].push_back({{"name", x.name}, {"kind", x.kind}, {"link_layer", x.link_layer}, {"rate", x.rate}, {"state", x.state}});
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Expected<NodeRails> ParseRailsJson(const std::string& line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("not a rails record: " + line.substr(0, 120));
  NodeRails r;
  try {
    r.node = j.at("node").get<std::string>();
    r.gpu_map = j.value("gpu_map", "");
    for (const auto& x : j.at("rails")) {
      RailInfo i;
      i.name = x.at("name").get<std::string>();
      i.kind = x.value("kind", "");
      i.link_layer = x.value("link_layer", "");
      i.rate = x.value("rate", "");
      i.state = x.value("state", "");
      r.rails.push_back(i);
    }
  } catch (const json::exception& e) {
    return Status::InvalidArgument("rails record: " + std::string(e.what()));
  }
  if (r.node.empty()) return Status::InvalidArgument("rails record without a node");
  return r;
}

std::string RailsPath(const Config& cfg, const std::string& node) {
  return state::NodeFile(cfg, node, state::kRails);
}

Status WriteRailsRecord(const Config& cfg, const NodeRails& r) {
  std::string path = RailsPath(cfg, r.node);
  Status s = MakeDirs(path.substr(0, path.rfind('/')), 0755);
  if (!s.ok()) return s;
  return WriteFileAtomic(path, RailsJson(r) + "\n", 0644);
}

namespace {

// What `odd` has that `ref` does not, rail by rail.
RailsDiff Diff(const NodeRails& odd, const NodeRails& ref) {
  RailsDiff d;
  d.node = odd.node;
  std::map<std::string, const RailInfo*> mine, theirs;
  for (const auto& r : odd.rails) mine[r.name] = &r;
  for (const auto& r : ref.rails) theirs[r.name] = &r;
  auto add = [&](const std::string& s) { d.what += (d.what.empty() ? "" : "; ") + s; };
  for (const auto& t : theirs) {
    auto m = mine.find(t.first);
    if (m == mine.end()) {
      add(t.first + " missing");
      d.missing_or_down = true;
      continue;
    }
    const RailInfo& a = *m->second;
    const RailInfo& b = *t.second;
    if (a.state != b.state) {
      add(a.name + " " + a.state + " (others: " + b.state + ")");
      d.missing_or_down |= a.state == "down";
    }
    if (a.link_layer != b.link_layer) add(a.name + " link layer " + a.link_layer + " (others: " + b.link_layer + ")");
    if (a.rate != b.rate) add(a.name + " rate " + (a.rate.empty() ? "unknown" : a.rate) + " (others: " + b.rate + ")");
    if (a.kind != b.kind) add(a.name + " is " + a.kind + " (others: " + b.kind + ")");
  }
  for (const auto& m : mine)
    if (!theirs.count(m.first)) add(m.first + " extra (not a rail on the others)");
  if (odd.gpu_map != ref.gpu_map) add("GPU map " + odd.gpu_map + " (others: " + ref.gpu_map + ")");
  return d;
}

}  // namespace

RailsComparison CompareRails(const std::vector<NodeRails>& nodes) {
  RailsComparison c;
  std::map<std::string, std::vector<const NodeRails*>> groups;
  for (const auto& n : nodes) groups[n.Key()].push_back(&n);
  if (groups.size() <= 1) {
    if (!nodes.empty()) {
      c.reference = nodes[0].Summary();
      c.majority = nodes.size();
      c.text = "same rails on all " + std::to_string(nodes.size()) + " node(s): " + c.reference + "\n";
    }
    return c;
  }
  c.consistent = false;
  const std::vector<const NodeRails*>* best = nullptr;
  for (const auto& g : groups)
    if (!best || g.second.size() > best->size()) best = &g.second;
  if (best->size() * 2 > nodes.size()) {
    const NodeRails& ref = *best->front();
    c.reference = ref.Summary();
    c.majority = best->size();
    for (const auto& n : nodes) {
      if (n.Key() == ref.Key()) continue;
      RailsDiff d = Diff(n, ref);
      c.text += n.node + " differs from the other " + std::to_string(c.majority) + " node(s): " + d.what + "\n";
      c.odd.push_back(d);
    }
    return c;
  }
  c.text = "no majority among " + std::to_string(nodes.size()) + " nodes; nobody singled out:\n";
  for (const auto& g : groups) {
    std::string names;
    for (const auto* n : g.second) names += (names.empty() ? "" : ",") + n->node;
    c.text += "  " + names + ": " + g.second.front()->Summary() + "\n";
  }
  return c;
}

}  // namespace preflight
