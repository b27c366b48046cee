// Pure topology logic: distance classes, pairing, environment (see topo.h);
// the table and JSON views of it are in topo_show.cc.
#include "preflight/topo.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "preflight/job.h"
#include "preflight/json.h"
#include "preflight/strings.h"

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

const std::vector<std::string>& EnvVarNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v = CoreEnvVarNames();
    v.insert(v.end(), {"NCCL_NET", "NCCL_CROSS_NIC", "FI_CXI_DISABLE_HOST_REGISTER", "FI_MR_CACHE_MONITOR",
                       "FI_CXI_DEFAULT_CQ_SIZE"});
    return v;
  }();
  return kNames;
}

const std::vector<std::string>& CoreEnvVarNames() {
  static const std::vector<std::string> kNames = {"NCCL_IB_HCA",       "NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES",
                                                  "NCCL_NET_GDR_LEVEL", "NCCL_IB_GID_INDEX", "NCCL_TOPO_FILE",
                                                  "FI_PROVIDER"};
  return kNames;
}

namespace {

const TopoNic* FindNic(const Topology& t, const std::string& name) {
  for (const auto& n : t.nics)
    if (n.name == name) return &n;
  return nullptr;
}

const TopoGpu* FindGpu(const Topology& t, int index) {
  for (const auto& g : t.gpus)
    if (g.index == index) return &g;
  return nullptr;
}

}  // namespace

namespace {

// The NICs paired with `gpus`, in first-seen order, and the worst class.
struct NicSet {
  std::vector<const TopoNic*> nics;
  std::vector<std::string> unknown;                  // GPUs not in the topology
  std::vector<std::pair<int, std::string>> gpu_nics; // per GPU: "mlx5_0 PIX"
  PathClass worst = PathClass::kPIX;
};

NicSet NicsFor(const Topology& topo, const std::vector<GpuPairing>& pairing, const std::vector<int>& gpus) {
  NicSet s;
  for (int g : gpus) {
    const GpuPairing* p = nullptr;
    for (const auto& q : pairing)
      if (q.gpu == g) p = &q;
    if (p == nullptr || FindGpu(topo, g) == nullptr) {
      s.unknown.push_back(std::to_string(g));
      s.gpu_nics.push_back({g, "not in the topology"});
      continue;
    }
    if (p->nics.empty()) {
      s.gpu_nics.push_back({g, "none"});
      continue;
    }
    std::string desc;
    for (const auto& name : p->nics) {
      const TopoNic* n = FindNic(topo, name);
      if (n == nullptr) continue;
      if (std::find(s.nics.begin(), s.nics.end(), n) == s.nics.end()) s.nics.push_back(n);
      desc += (desc.empty() ? "" : ",") + name;
    }
    s.gpu_nics.push_back({g, desc + " " + PathClassName(p->cls)});
    if (p->cls > s.worst) s.worst = p->cls;
  }
  // Name order, so the list does not depend on which GPU came first.
  std::sort(s.nics.begin(), s.nics.end(), [](const TopoNic* a, const TopoNic* b) { return NaturalLess(a->name, b->name); });
  return s;
}

// "mlx5_0:1" for every usable port of the verbs NICs in `nics`; a NIC
// without port records is named whole ("mlx5_0": NCCL then uses all its
// ports) unless `ports_only` (UCX needs a port number; none is guessed).
std::vector<std::string> VerbsPorts(const std::vector<const TopoNic*>& nics, std::vector<const TopoPort*>* ports,
                                    bool ports_only = false) {
  std::vector<std::string> out;
  for (const TopoNic* n : nics) {
    if (n->kind != "ib") continue;
    if (n->ports.empty() && !ports_only) out.push_back(n->name);
    for (const auto& p : n->ports) {
      if (!p.usable()) continue;
      out.push_back(n->name + ":" + std::to_string(p.num));
      if (ports) ports->push_back(&p);
    }
  }
  return out;
}

std::string IdList(const std::vector<int>& v) {
  std::string s;
  for (int g : v) s += (s.empty() ? "" : ",") + std::to_string(g);
  return s;
}

}  // namespace

NodeGpuSet JobGpusOnNode(const NodeGpuInputs& in, const std::vector<int>& task_gpus) {
  NodeGpuSet out;
  std::vector<int> base;
  if (in.have_prolog) {
    base = in.prolog_gpus;
    out.source = "prolog";
  } else if (auto j = in.batch_step && !in.job_gpus.empty() ? ParseIdList(in.job_gpus)
                                                             : Expected<std::vector<int>>(Status::NotFound("")); j) {
    base = *j;
    out.source = "SLURM_JOB_GPUS";
  } else if (auto st = !in.step_gpus.empty() ? ParseIdList(in.step_gpus)
                                             : Expected<std::vector<int>>(Status::NotFound("")); st) {
    base = *st;
    out.source = "SLURM_STEP_GPUS";
  } else {
    out.source = "task";
  }
  base.insert(base.end(), task_gpus.begin(), task_gpus.end());
  std::sort(base.begin(), base.end());
  base.erase(std::unique(base.begin(), base.end()), base.end());
  out.gpus = std::move(base);
  return out;
}

namespace {

// The NCCL/RCCL-over-libfabric settings HPE publishes for Slingshot 11
// (cxi), on top of FI_PROVIDER=cxi and the distance-derived
// NCCL_NET_GDR_LEVEL / NCCL_SOCKET_IFNAME above. Sources (read, not copied):
// HPE's "Slingshot Host Software ... NCCL/RCCL" guidance (HPE support doc
// dp00004855en_us, as cited by argonne-lcf/alcf-nccl-tests
// pytests/aws_2025.01.15pp.sh), and the same set in the sites that run it:
// CSCS Alps (eth-cscs/cscs-reframe-tests checks/apps/pytorch/src/activate_ofi.sh),
// NERSC Perlmutter (NERSC/nccl-ofi-plugin env_nccl.sh), NCAR Derecho.
// Not emitted: FI_CXI_RDZV_* / FI_CXI_RX_MATCH_MODE / TX sizes, which the
// sites tune differently (alt_read, hybrid vs software, 1024..131072) and
// HPE marks workload-dependent; srun's --network=disable_rdzv_get, which is a
// launch option (SLURM_NETWORK), not a task variable.
void AddSlingshotEnv(EnvPlan& plan, const EnvPolicy& policy) {
  // NCCL_NET names the network plugin NCCL must use: with the OFI plugin
  // loaded, "AWS Libfabric" fails loudly instead of falling back to sockets.
  // Only for a job on several nodes: NCCL_NET forces the network transport,
  // and a single-node job must keep NCCL's P2P/SHM paths (HPE's caveat).
  if (policy.job_nodes > 1)
    plan.vars.push_back({"NCCL_NET", "AWS Libfabric"});
  else
    plan.unset.push_back({"NCCL_NET", policy.job_nodes == 1
                                          ? "single-node job: NCCL_NET would force the network transport"
                                          : "job node count unknown (SLURM_JOB_NUM_NODES): set only for jobs on several nodes"});
  // Slingshot is one fabric (every NIC reaches every other): cross-rail
  // traffic works. NCCL cannot detect that; NCCL_CROSS_NIC only tells it
  // whether "connecting across different rails ... will cause a connection
  // error, or will work" (maintainer, NVIDIA/nccl#2193; also #1933). HPE sets 1.
  plan.vars.push_back({"NCCL_CROSS_NIC", "1"});
  // cxi: registering host memory through the NIC deadlocks with CUDA/ROCm
  // host allocations (HPE: "FI_CXI_DISABLE_HOST_REGISTER=1").
  plan.vars.push_back({"FI_CXI_DISABLE_HOST_REGISTER", "1"});
  // The MR cache's default monitor (memhooks) misses GPU runtime frees on
  // Slingshot; HPE gives userfaultfd.
  plan.vars.push_back({"FI_MR_CACHE_MONITOR", "userfaultfd"});
  // Completion queues large enough for NCCL's outstanding operations at
  // scale (HPE: 131072; libfabric's default overflows, "cxi_cq_eq_overflow").
  plan.vars.push_back({"FI_CXI_DEFAULT_CQ_SIZE", "131072"});
}

}  // namespace

EnvPlan ComputeEnv(const Topology& topo, const std::vector<GpuPairing>& pairing, const std::vector<int>& node_gpus,
                   const std::vector<int>& task_gpus, const EnvPolicy& policy) {
  EnvPlan plan;
  plan.gpus = task_gpus;
  auto unset_all = [&](const std::string& why) {
    for (const auto& n : CoreEnvVarNames()) plan.unset.push_back({n, why});
  };
  if (task_gpus.empty()) {
    unset_all("task has no GPU");
    return plan;
  }
  std::vector<int> node = node_gpus;
  node.insert(node.end(), task_gpus.begin(), task_gpus.end());
  std::sort(node.begin(), node.end());
  node.erase(std::unique(node.begin(), node.end()), node.end());
  plan.node_gpus = node;

  NicSet ns = NicsFor(topo, pairing, node);
  plan.gpu_nics = ns.gpu_nics;
  if (!ns.unknown.empty() && ns.nics.empty()) {
    unset_all("GPU " + Join(ns.unknown, ",") + " not in the node's topology");
    return plan;
  }
  if (ns.nics.empty()) {
    std::vector<std::string> storage;
    for (const auto& n : topo.nics)
      if (n.usable() && n.role == NicRole::kStorage) storage.push_back(n.name);
    if (!storage.empty() && std::none_of(topo.nics.begin(), topo.nics.end(), [](const TopoNic& n) {
          return n.usable() && n.role == NicRole::kRail;
        }))
      unset_all("no compute rail: " + Join(storage, ",") +
                (storage.size() == 1 ? " is a storage/front-end NIC" : " are storage/front-end NICs") +
                " (NODE/SYS to every GPU, or not in topo_rails); name the rails in topo_rails");
    else
      unset_all("no usable RDMA NIC for GPU " + IdList(node));
    return plan;
  }
  // The whole node: every usable rail, also one no GPU was paired with
  // (e.g. a second rail behind a GPU's host bridge when the GPU has one on
  // its switch): NCCL picks the closest per GPU itself.
  bool whole_node = !topo.gpus.empty() && std::all_of(topo.gpus.begin(), topo.gpus.end(), [&](const TopoGpu& g) {
    return std::binary_search(node.begin(), node.end(), g.index);
  });
  if (whole_node) {
    for (const auto& n : topo.nics)
      if (n.usable() && n.role == NicRole::kRail && std::find(ns.nics.begin(), ns.nics.end(), &n) == ns.nics.end())
        ns.nics.push_back(&n);
    std::sort(ns.nics.begin(), ns.nics.end(), [](const TopoNic* a, const TopoNic* b) { return NaturalLess(a->name, b->name); });
  }
  const std::vector<const TopoNic*>& nics = ns.nics;
  PathClass worst = ns.worst;

  std::vector<const TopoPort*> ports;
  std::vector<std::string> hca = VerbsPorts(nics, &ports), ifnames;
  bool efa = false, cxi = false;
  for (const TopoNic* n : nics) {
    if (n->kind == "efa") efa = true;
    if (n->kind == "cxi") cxi = true;
    if (n->kind != "ib" && n->kind != "cxi") continue;
    for (const auto& i : n->netdevs_up)
      if (std::find(ifnames.begin(), ifnames.end(), i) == ifnames.end()) ifnames.push_back(i);
  }

  if (!hca.empty()) {
    // "=" asks NCCL for exact names: without it "mlx5_1" also matches mlx5_10.
    plan.vars.push_back({"NCCL_IB_HCA", "=" + Join(hca, ",")});
  } else {
    plan.unset.push_back({"NCCL_IB_HCA", efa ? "EFA: aws-ofi-nccl pairs GPUs and EFA devices itself"
                                         : cxi ? "Slingshot (cxi): NCCL reaches it through libfabric (aws-ofi-nccl), "
                                                 "not verbs; see FI_PROVIDER"
                                               : "no usable port on the paired NICs"});
  }
  if (!ifnames.empty())
    plan.vars.push_back({"NCCL_SOCKET_IFNAME", "=" + Join(ifnames, ",")});
  else
    plan.unset.push_back({"NCCL_SOCKET_IFNAME", topo.state_from == "xml"
                                                    ? "netdev operstate unknown (the XML does not record it)"
                                                    : "no netdev with operstate up on the paired NICs"});
  // UCX_NET_DEVICES: the task's own GPUs' NICs (UCX picks per process).
  std::vector<std::string> ucx = VerbsPorts(NicsFor(topo, pairing, task_gpus).nics, nullptr, true);
  if (!ucx.empty())
    plan.vars.push_back({"UCX_NET_DEVICES", Join(ucx, ",")});
  else
    plan.unset.push_back({"UCX_NET_DEVICES", efa ? "EFA: left to UCX"
                                             : cxi && hca.empty() ? "Slingshot (cxi): UCX has no cxi transport; left to UCX"
                                             : hca.empty() ? "no usable port on the task's NICs"
                                                           : "port numbers of the task's NICs unknown"});

  // NCCL's default GDR level is PXB: GPUDirect RDMA is already on for PIX and
  // PXB pairs. A pair behind one host bridge (VMs, NVLink-to-CPU hosts) needs
  // PHB to get it; beyond the host bridge it would cross the CPU
  // interconnect, where NCCL's choice (off) is the right one.
  if (worst == PathClass::kPHB)
    plan.vars.push_back({"NCCL_NET_GDR_LEVEL", "PHB"});
  else
    plan.unset.push_back({"NCCL_NET_GDR_LEVEL", std::string("distance ") + PathClassName(worst) +
                                                   (worst <= PathClass::kPXB ? ": NCCL's default already uses GPUDirect RDMA"
                                                                             : ": GPUDirect RDMA would cross the CPU; NCCL's default")});

  // NCCL_IB_GID_INDEX: only when every port is RoCE and all agree on one
  // validated RoCE v2 index; otherwise NCCL's own choice stands.
  std::string gid_why;
  int gid = -2;
  if (!policy.gid_index) gid_why = "disabled by site config (nccl_gid_index)";
  for (const TopoPort* p : ports) {
    if (!gid_why.empty()) break;
    if (p->link_layer != "Ethernet") {
      gid_why = p->link_layer.empty() ? "link layer unknown" : p->link_layer + " link layer needs no GID index";
    } else if (p->gid_index < 0) {
      gid_why = "no validated RoCE v2 GID";
    } else if (gid != -2 && gid != p->gid_index) {
      gid_why = "RoCE v2 GID index differs between ports";
    } else {
      gid = p->gid_index;
    }
  }
  for (const TopoNic* n : nics)
    if (gid_why.empty() && n->kind == "ib" && n->ports.empty()) gid_why = "link layer unknown (" + n->name + " has no port records)";
  if (ports.empty() && gid_why.empty()) gid_why = "no verbs port";
  if (gid_why.empty())
    plan.vars.push_back({"NCCL_IB_GID_INDEX", std::to_string(gid)});
  else
    plan.unset.push_back({"NCCL_IB_GID_INDEX", gid_why});

  // Slingshot: libfabric must pick the cxi provider (aws-ofi-nccl/RCCL's
  // OFI plugin otherwise may settle for tcp or sockets).
  if (cxi)
    plan.vars.push_back({"FI_PROVIDER", "cxi"});
  else
    plan.unset.push_back({"FI_PROVIDER", "no Slingshot (cxi) NIC paired"});
  if (cxi) AddSlingshotEnv(plan, policy);

  if (policy.nccl_topo_file.empty())
    plan.unset.push_back({"NCCL_TOPO_FILE", "the site config does not ask for it (nccl_topo_file)"});
  else if (!policy.nccl_topo_file_exists)
    plan.unset.push_back({"NCCL_TOPO_FILE", "site file " + policy.nccl_topo_file + " missing"});
  else
    plan.vars.push_back({"NCCL_TOPO_FILE", policy.nccl_topo_file});
  return plan;
}

std::string GpuGresWarning(const Topology& topo, const std::string& job_gpus, const std::string& step_gpus) {
  const std::string& text = !job_gpus.empty() ? job_gpus : step_gpus;
  const char* name = !job_gpus.empty() ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS";
  if (text.empty() || !topo.gpus.empty()) return "";
  auto ids = ParseIdList(text);
  if (ids && ids->empty()) return "";
  return std::string("Slurm gave this node GPUs (") + name + "=" + text +
         ") but the topology shows none (no NVIDIA or AMD GPU in " + topo.source +
         "): GPU-NIC pairing and the NCCL environment are empty; check the driver and hwloc's PCI view "
         "(`lstopo --whole-io`)";
}

Expected<std::vector<int>> TaskGpus(const std::string& step_gpus, const std::string& job_gpus,
                                    const std::string& cuda_visible, const std::string& visible_name) {
  std::string base_text = !step_gpus.empty() ? step_gpus : job_gpus;
  const char* base_name = !step_gpus.empty() ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS";
  auto cvd = cuda_visible.empty() ? Expected<std::vector<int>>(std::vector<int>{}) : ParseIdList(cuda_visible);
  if (base_text.empty()) {
    // No Slurm GPU variables: trust CUDA_VISIBLE_DEVICES only if numeric
    // (UUIDs and MIG names cannot be placed without NVML).
    if (!cvd) return Status::InvalidArgument(visible_name + "='" + cuda_visible + "': " + cvd.status().message());
    return *cvd;
  }
  auto base = ParseIdList(base_text);
  if (!base) return Status::InvalidArgument(std::string(base_name) + "='" + base_text + "': " + base.status().message());
  if (!cvd || cvd->empty() || cvd->size() >= base->size()) return *base;
  bool global = true;
  for (int c : *cvd)
    if (std::find(base->begin(), base->end(), c) == base->end()) global = false;
  if (global) return *cvd;
  std::vector<int> out;
  for (int c : *cvd) {
    if (c < 0 || static_cast<size_t>(c) >= base->size())
      return Status::InvalidArgument(visible_name + "='" + cuda_visible + "': entry " + std::to_string(c) +
                                     " is outside " + base_name + "='" + base_text + "'");
    out.push_back((*base)[static_cast<size_t>(c)]);
  }
  return out;
}

}  // namespace preflight
