// The NCCL/UCX environment for a task (ComputeEnv, see topo.h): the NICs
// its GPUs were paired with, and why each variable is set or left out.
#include "preflight/topo.h"

#include <algorithm>
#include <string>
#include <vector>

#include "preflight/strings.h"

namespace preflight {

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

// Why the job's GPUs `node` have no NIC: only storage NICs on the node, or
// no usable one.
std::string NoNicWhy(const Topology& topo, const std::vector<int>& node) {
  std::vector<std::string> storage;
  for (const auto& n : topo.nics)
    if (n.usable() && n.role == NicRole::kStorage) storage.push_back(n.name);
  if (!storage.empty() && std::none_of(topo.nics.begin(), topo.nics.end(), [](const TopoNic& n) {
        return n.usable() && n.role == NicRole::kRail;
      }))
    return "no compute rail: " + Join(storage, ",") +
           (storage.size() == 1 ? " is a storage/front-end NIC" : " are storage/front-end NICs") +
           " (NODE/SYS to every GPU, or not in topo_rails); name the rails in topo_rails";
  return "no usable RDMA NIC for GPU " + IdList(node);
}

// NCCL_NET_GDR_LEVEL from the worst class among the job's GPU-NIC pairs.
void AddGdrLevel(EnvPlan& plan, PathClass worst) {
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
}

// NCCL_IB_GID_INDEX from the verbs ports of the job's NICs (`ports`).
void AddGidIndex(EnvPlan& plan, const std::vector<const TopoPort*>& ports, const std::vector<const TopoNic*>& nics,
                 const EnvPolicy& policy) {
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
}

// FI_PROVIDER (and the Slingshot set with it) and NCCL_TOPO_FILE.
void AddProviderAndTopoFile(EnvPlan& plan, const EnvPolicy& policy, bool cxi) {
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
    unset_all(NoNicWhy(topo, node));
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

  AddGdrLevel(plan, worst);
  AddGidIndex(plan, ports, nics, policy);
  AddProviderAndTopoFile(plan, policy, cxi);
  return plan;
}

}  // namespace preflight
