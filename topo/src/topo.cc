// Pure topology logic: distance classes, rail roles and GPU-NIC pairing
// (see topo.h). The environment built on the pairing is in topo_env.cc,
// the GPUs Slurm gave in topo_gpus.cc, the table and JSON views in
// topo_show.cc.
#include "preflight/topo.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace preflight {

const char* PathClassName(PathClass c) {
  switch (c) {
    case PathClass::kPIX: return "PIX";
    case PathClass::kPXB: return "PXB";
    case PathClass::kPHB: return "PHB";
    case PathClass::kNODE: return "NODE";
    case PathClass::kSYS: return "SYS";
  }
  return "SYS";
}

bool TopoNic::usable() const {
  if (ports.empty()) return true;
  for (const auto& p : ports)
    if (p.usable()) return true;
  return false;
}

const char* TopoNic::role_name() const {
  if (!usable()) return "down";
  return role == NicRole::kRail ? "rail" : "storage";
}

const char* TopoNic::state() const {
  if (ports.empty()) return "unknown";
  return usable() ? "usable" : "down";
}

bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      na.erase(0, std::min(na.find_first_not_of('0'), na.size()));
      nb.erase(0, std::min(nb.find_first_not_of('0'), nb.size()));
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

bool PairDistance::operator<(const PairDistance& o) const {
  if (cls != o.cls) return cls < o.cls;
  if (cls == PathClass::kSYS && same_package != o.same_package) return same_package;
  return switches < o.switches;
}

bool PairDistance::operator==(const PairDistance& o) const { return !(*this < o) && !(o < *this); }

PairDistance Distance(const TopoGpu& gpu, const TopoNic& nic) {
  PairDistance d;
  size_t common = 0;
  while (common < gpu.path.size() && common < nic.path.size() && gpu.path[common] == nic.path[common]) ++common;
  if (common == 0) {
    // Different host bridges: the CPU side decides. Unknown NUMA never counts
    // as "same".
    d.same_package = gpu.package >= 0 && gpu.package == nic.package;
    d.cls = gpu.numa >= 0 && gpu.numa == nic.numa ? PathClass::kNODE : PathClass::kSYS;
    return d;
  }
  if (common == 1) {
    d.cls = PathClass::kPHB;
    d.same_package = true;
    return d;
  }
  // Below a common switch: that switch plus every switch on either side of it.
  d.switches = static_cast<int>((gpu.path.size() - common) + (nic.path.size() - common) + 1);
  d.cls = d.switches == 1 ? PathClass::kPIX : PathClass::kPXB;
  d.same_package = true;
  return d;
}

Status ClassifyRails(Topology& topo, const std::vector<std::string>& site_rails) {
  if (!site_rails.empty()) {
    for (const auto& r : site_rails) {
      bool found = false;
      for (const auto& n : topo.nics) found = found || n.name == r;
      if (!found) {
        std::string have;
        for (const auto& n : topo.nics) have += (have.empty() ? "" : ", ") + n.name;
        return Status::InvalidArgument("topo_rails names NIC '" + r + "', which this node does not have (its NICs: " +
                                       (have.empty() ? std::string("none") : have) + ")");
      }
    }
    for (auto& n : topo.nics) {
      bool named = std::find(site_rails.begin(), site_rails.end(), n.name) != site_rails.end();
      n.role = named ? NicRole::kRail : NicRole::kStorage;
      n.role_why = named ? "named in topo_rails" : "not in topo_rails";
    }
    return Status::Ok();
  }
  // Each NIC's closest GPU. A NIC only NODE/SYS to every GPU is storage only
  // when the node has a better-placed one (PIX/PXB/PHB to some GPU): a lone
  // RDMA NIC, or a set all equally far (g4dn.metal's one EFA, Corona's
  // 4-GPU layout, the AC922's HCAs on the CPU's PCIe), is the compute
  // network; calling it storage would drop NCCL_IB_HCA and the rails check.
  std::vector<std::pair<const TopoGpu*, PairDistance>> best(topo.nics.size(), {nullptr, PairDistance()});
  bool any_close = false;
  for (size_t i = 0; i < topo.nics.size(); ++i) {
    for (const auto& g : topo.gpus) {
      PairDistance d = Distance(g, topo.nics[i]);
      if (best[i].first == nullptr || d < best[i].second) best[i] = {&g, d};
    }
    if (best[i].first != nullptr && best[i].second.cls <= PathClass::kPHB) any_close = true;
  }
  for (size_t i = 0; i < topo.nics.size(); ++i) {
    TopoNic& n = topo.nics[i];
    if (topo.gpus.empty()) {
      n.role = NicRole::kRail;
      n.role_why = "no GPU on the node";
      continue;
    }
    const PairDistance& bd = best[i].second;
    if (bd.cls <= PathClass::kPHB) {
      n.role = NicRole::kRail;
      n.role_why = std::string(PathClassName(bd.cls)) + " to GPU" + std::to_string(best[i].first->index);
    } else if (!any_close) {
      n.role = NicRole::kRail;
      n.role_why = std::string(topo.nics.size() == 1 ? "the only RDMA NIC" : "no NIC closer to a GPU") + " (" +
                   PathClassName(bd.cls) + " to GPU" + std::to_string(best[i].first->index) +
                   "): the compute network unless topo_rails says otherwise";
    } else {
      n.role = NicRole::kStorage;
      n.role_why = "NODE/SYS to every GPU, another NIC is closer";
    }
  }
  return Status::Ok();
}

std::vector<GpuPairing> PairGpus(const Topology& topo) {
  struct Work {
    size_t g;                       // position in topo.gpus
    PairDistance best;
    std::vector<size_t> candidates; // positions in topo.nics, name order
  };
  std::vector<Work> work;
  for (size_t g = 0; g < topo.gpus.size(); ++g) {
    Work w{g, {}, {}};
    bool any = false;
    for (size_t n = 0; n < topo.nics.size(); ++n) {
      if (!topo.nics[n].usable() || topo.nics[n].role != NicRole::kRail) continue;
      PairDistance d = Distance(topo.gpus[g], topo.nics[n]);
      if (!any || d < w.best) {
        w.best = d;
        w.candidates.clear();
        any = true;
      }
      if (d == w.best) w.candidates.push_back(n);
    }
    std::sort(w.candidates.begin(), w.candidates.end(),
              [&](size_t a, size_t b) { return NaturalLess(topo.nics[a].name, topo.nics[b].name); });
    work.push_back(std::move(w));
  }

  std::vector<Work*> order;
  for (auto& w : work) order.push_back(&w);
  std::stable_sort(order.begin(), order.end(), [&](const Work* a, const Work* b) {
    if (a->candidates.empty() != b->candidates.empty()) return !a->candidates.empty();
    if (!(a->best == b->best)) return a->best < b->best;
    if (a->candidates.size() != b->candidates.size()) return a->candidates.size() < b->candidates.size();
    return topo.gpus[a->g].index < topo.gpus[b->g].index;
  });

  std::vector<int> load(topo.nics.size(), 0);
  std::vector<std::vector<size_t>> chosen(topo.gpus.size());
  for (Work* w : order) {
    if (w->candidates.empty()) continue;
    size_t pick = w->candidates[0];
    for (size_t n : w->candidates)
      if (load[n] < load[pick]) pick = n;  // candidates are in name order: first minimum wins
    chosen[w->g].push_back(pick);
    ++load[pick];
  }
  // Leftover candidates: a NIC nobody took goes to the closest GPU that has it
  // as a candidate and the fewest NICs so far.
  std::vector<size_t> nic_order;
  for (size_t n = 0; n < topo.nics.size(); ++n) nic_order.push_back(n);
  std::sort(nic_order.begin(), nic_order.end(),
            [&](size_t a, size_t b) { return NaturalLess(topo.nics[a].name, topo.nics[b].name); });
  for (size_t n : nic_order) {
    if (load[n] != 0) continue;
    Work* best = nullptr;
    for (Work* w : order) {
      if (std::find(w->candidates.begin(), w->candidates.end(), n) == w->candidates.end()) continue;
      if (best == nullptr || chosen[w->g].size() < chosen[best->g].size() ||
          (chosen[w->g].size() == chosen[best->g].size() && topo.gpus[w->g].index < topo.gpus[best->g].index))
        best = w;
    }
    if (best == nullptr) continue;
    chosen[best->g].push_back(n);
    ++load[n];
  }

  std::vector<GpuPairing> out;
  for (const auto& w : work) {
    GpuPairing p;
    p.gpu = topo.gpus[w.g].index;
    p.cls = w.best.cls;
    auto& c = chosen[w.g];
    std::sort(c.begin(), c.end(), [&](size_t a, size_t b) { return NaturalLess(topo.nics[a].name, topo.nics[b].name); });
    for (size_t n : c) p.nics.push_back(topo.nics[n].name);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace preflight
