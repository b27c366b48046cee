// GPU-NIC topology and the NCCL/RDMA environment derived from it.
//
// Two halves:
//  * Pure functions over the plain `Topology` struct (this header): the PCIe
//    distance class of a GPU-NIC pair, the pairing of every GPU with its
//    closest NIC(s), and the environment for the GPUs a task got. No hwloc,
//    no file access: unit tests build a Topology by hand.
//  * Loaders (topo_load.h): hwloc (XML or probe) plus sysfs through FsRoot
//    into a Topology, and the per-node cache that tasks read instead.
//
// Distance classes are NCCL's and `nvidia-smi topo -m`'s names:
//   PIX  through at most one PCIe switch (both below the same switch)
//   PXB  through several PCIe switches, without a host bridge
//   PHB  through a PCIe host bridge (same root complex)
//   NODE between host bridges within one NUMA node
//   SYS  across the SMP interconnect between NUMA nodes (same package or not;
//        the pairing prefers the same package, nvidia-smi does not tell)
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "preflight/status.h"

namespace preflight {

enum class PathClass { kPIX = 0, kPXB = 1, kPHB = 2, kNODE = 3, kSYS = 4 };
const char* PathClassName(PathClass c);

struct TopoPort {
  int num = 1;
  std::string state;       // "ACTIVE", "DOWN", "INIT", ...; "" when unknown
  std::string link_layer;  // "InfiniBand", "Ethernet" (RoCE), "" when unknown
  std::string rate;        // as sysfs prints it, e.g. "200 Gb/sec (4X HDR)"
  // Lowest GID index validated as RoCE v2 with an IPv4-mapped address; -1 if
  // none (or not RoCE). Only a validated index is ever exported.
  int gid_index = -1;
  // Usable for traffic: ACTIVE, or state unknown (no sysfs, no hwloc attr).
  bool usable() const { return state == "ACTIVE" || state.empty(); }
};

// What a NIC is for (ClassifyRails). Down/unusable is TopoNic::usable().
enum class NicRole {
  kRail,     // compute rail: NCCL traffic between GPUs of different nodes
  kStorage,  // storage / front-end: never in NCCL_IB_HCA, never paired
};

struct TopoNic {
  std::string name;   // RDMA device: mlx5_0, rdmap16s27
  // "ib" (verbs HCA: IB or RoCE), "efa", or "cxi" (HPE Slingshot, named by
  // its netdev hsiN, no verbs ports: reached through libfabric)
  std::string kind;
  std::string busid;  // PCI function, "0000:4d:00.0"
  int numa = -1;      // OS index of the closest NUMA node, -1 unknown
  int package = -1;   // OS index of the package, -1 unknown
  // PCIe path from the top: path[0] names the host bridge, each further entry
  // a PCIe switch (its upstream port). Root ports and switch downstream ports
  // are folded into their host bridge / switch, as NCCL and nvidia-smi do.
  std::vector<std::string> path;
  std::vector<std::string> netdevs;     // netdevs on the same PCI function
  std::vector<std::string> netdevs_up;  // those with operstate "up"
  std::vector<TopoPort> ports;  // empty: no port records (state unknown)
  // Some port usable, or no port records at all: an unknown state counts as
  // usable, like TopoPort's (an XML exported without OpenFabrics port
  // attributes must not leave every GPU without a NIC).
  bool usable() const;
  // "usable", "down" (every recorded port down) or "unknown" (no port records).
  const char* state() const;
  NicRole role = NicRole::kRail;  // unclassified NICs count as rails
  std::string role_why;           // "PIX to GPU0", "named in topo_rails", ...
  // "rail", "storage" or "down" (not usable, whatever its role).
  const char* role_name() const;
};

struct TopoGpu {
  // The index Slurm's GRES, SLURM_STEP_GPUS and /dev/nvidiaN use: for NVIDIA
  // the device minor when known (/proc/driver/nvidia), else the NVML index;
  // for AMD the ROCm SMI index (ROCR_VISIBLE_DEVICES numbering); else the
  // position in PCI bus order.
  int index = -1;
  std::string vendor = "nvidia";  // "nvidia" (PCI 10de) or "amd" (1002)
  std::string busid;
  std::string osdev;  // "nvml0", "rsmi0", "cuda0", "card0" or "" (matched by PCI only)
  int numa = -1;
  int package = -1;
  std::vector<std::string> path;  // as TopoNic::path
};

struct Topology {
  std::vector<TopoGpu> gpus;  // sorted by index
  std::vector<TopoNic> nics;  // sorted by name (natural order: mlx5_2 < mlx5_10)
  std::string source;         // "xml:/path", "probe", "cache:/path" (for reports)
  // Where port state, link layer, netdev operstate and GPU minors came from:
  // "sysfs:<fsroot>", or "xml" when nothing was read beyond the XML (a
  // foreign machine's file, topo_load.h).
  std::string state_from = "sysfs:/";
};

// The distance between a GPU and a NIC, with the refinements used to rank
// NICs of the same class.
struct PairDistance {
  PathClass cls = PathClass::kSYS;
  int switches = 0;           // PCIe switches traversed (PIX 1, PXB >= 2)
  bool same_package = false;  // only meaningful for SYS
  // Total order: lower is closer.
  bool operator<(const PairDistance& o) const;
  bool operator==(const PairDistance& o) const;
};
PairDistance Distance(const TopoGpu& gpu, const TopoNic& nic);

struct GpuPairing {
  int gpu = -1;                    // TopoGpu::index
  std::vector<std::string> nics;   // paired NIC names, closest first; empty: no usable NIC
  PathClass cls = PathClass::kSYS; // class of the first paired NIC
};

// Sort the NICs into compute rails and storage/front-end NICs:
//  * `site_rails` non-empty (site config topo_rails): exactly those are
//    rails, the others storage. A name the node has no NIC of is refused
//    (InvalidArgument naming it and listing the node's NICs): a typo must
//    not silently drop a rail.
//  * otherwise a NIC is a rail when it is PIX, PXB or PHB to some GPU, and
//    storage/front-end when it is only NODE or SYS to every GPU (the PCIe
//    tree puts rails next to GPUs). A node without GPUs keeps every NIC a
//    rail. Where the tree does not tell (e.g. IBM AC922: GPUs on NVLink to
//    the CPU, every HCA NODE/SYS), the site names the rails.
// Down NICs keep their role; usable() excludes them everywhere.
Status ClassifyRails(Topology& topo, const std::vector<std::string>& site_rails);

// Pair every GPU with its closest usable rail NIC(s) (storage NICs never
// pair). Deterministic:
//  1. each GPU's candidates are the usable NICs at its minimal distance;
//  2. GPUs are served in order (distance, candidate count, index), each taking
//     the candidate used by the fewest GPUs so far (ties: NIC name order), so
//     GPUs sharing a switch spread over its NICs;
//  3. candidates no GPU took go, in name order, to the candidate GPU that has
//     the fewest NICs (ties: lowest index): a GPU next to a dual-port pair of
//     functions gets both.
std::vector<GpuPairing> PairGpus(const Topology& topo);

// What the site lets the environment contain (from Config).
struct EnvPolicy {
  bool gid_index = true;        // export a validated RoCE GID index
  std::string nccl_topo_file;   // set NCCL_TOPO_FILE to this when non-empty
  bool nccl_topo_file_exists = false;  // caller checked the file exists
  // Nodes in the job (SLURM_JOB_NUM_NODES); 0 unknown. Slingshot's NCCL_NET
  // is set only for a job on several nodes. Not site policy, but the one
  // per-job fact the environment depends on besides its GPUs.
  int job_nodes = 0;
};

struct EnvVar {
  std::string name;
  std::string value;
};

// The environment for a task, and why the other variables were left out.
// Only NCCL/UCX system-configuration variables: never NCCL_DEBUG*.
struct EnvPlan {
  std::vector<int> gpus;                                   // the task's GPUs
  std::vector<int> node_gpus;                              // the job's GPUs on this node (NCCL_* from these)
  std::vector<std::pair<int, std::string>> gpu_nics;       // per node GPU: "mlx5_0 PIX"
  std::vector<EnvVar> vars;                                // to set, in order
  std::vector<std::pair<std::string, std::string>> unset;  // name -> why not set
};

// The environment for one task of a job on this node.
//  * `node_gpus`: the union of the GPUs the job holds on this node. Every
//    NCCL_* value (NCCL_IB_HCA, NCCL_SOCKET_IFNAME, NCCL_NET_GDR_LEVEL,
//    NCCL_IB_GID_INDEX) comes from these alone, so all tasks of the job on
//    the node get the same values whatever GPUs each holds: NCCL requires
//    one NCCL_IB_HCA on every rank of a node (NVIDIA/nccl#1478, maintainer:
//    "You should not set NCCL_IB_HCA differently on each rank"; legate
//    PR #528) and pairs each GPU with its closest listed NIC itself.
//  * `task_gpus`: the task's own GPUs. Only UCX_NET_DEVICES comes from them
//    (UCX and MPI choose their device per process).
// A task without GPUs gets nothing. `node_gpus` is widened by `task_gpus`
// (a task's GPUs are always the job's). GPU ids are TopoGpu indexes;
// unknown ones are reported in `unset` reasons.
EnvPlan ComputeEnv(const Topology& topo, const std::vector<GpuPairing>& pairing, const std::vector<int>& node_gpus,
                   const std::vector<int>& task_gpus, const EnvPolicy& policy);
// The same with one GPU set for both (a job whose only task holds them).
inline EnvPlan ComputeEnv(const Topology& topo, const std::vector<GpuPairing>& pairing, const std::vector<int>& gpus,
                          const EnvPolicy& policy) {
  return ComputeEnv(topo, pairing, gpus, gpus, policy);
}

// Where the job's GPUs on this node come from, most trusted first:
//  1. the prolog's record (topo_load.h: WriteJobGpusRecord): the root
//     prolog's SLURM_JOB_GPUS, which slurmd sets to the job's GPUs on the
//     node being prologued; read as root in slurmstepd before any task;
//  2. in the batch step, SLURM_JOB_GPUS (slurmstepd sets it for the batch
//     node). Not in other steps: srun propagates the batch script's copy,
//     which names the batch node's GPUs, to every node;
//  3. SLURM_STEP_GPUS as the step's environment has it in init_post_opt:
//     the step's GPUs on this node, all tasks (Slurm 22.05 narrows each
//     task's copy to its own GPUs later). Same for every task of the step,
//     not of the job;
//  4. the task's own GPUs (then tasks may differ; `source` says "task").
// The result always includes `task_gpus`, sorted and unique. A malformed
// variable is skipped for the next source.
struct NodeGpuSet {
  std::vector<int> gpus;
  std::string source;  // "prolog", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "task"
};
struct NodeGpuInputs {
  bool have_prolog = false;         // the prolog's record was read
  std::vector<int> prolog_gpus;     // its GPUs
  bool batch_step = false;
  std::string job_gpus;             // SLURM_JOB_GPUS in init_post_opt
  std::string step_gpus;            // SLURM_STEP_GPUS in init_post_opt
};
NodeGpuSet JobGpusOnNode(const NodeGpuInputs& in, const std::vector<int>& task_gpus);

// Names ComputeEnv may set (for --preflight-env=show, the merge and the docs).
const std::vector<std::string>& EnvVarNames();
// The names every plan reports (set, or unset with a reason); the Slingshot
// (cxi) ones beyond them are reported only when a cxi NIC is paired, and
// FI_PROVIDER's reason stands for them otherwise.
const std::vector<std::string>& CoreEnvVarNames();

// The GPUs a task got, in Slurm's global numbering, from its environment:
// SLURM_STEP_GPUS (step), else SLURM_JOB_GPUS (batch step); narrowed by a
// shorter CUDA_VISIBLE_DEVICES (--gpu-bind): its entries are global ids when
// all of them are in the step's set, else positions into it (ConstrainDevices
// renumbers from 0). Without Slurm's variables, a numeric CUDA_VISIBLE_DEVICES.
// Empty when the task has no GPU.
// AMD GPUs: `cuda_visible` is whichever of CUDA_VISIBLE_DEVICES,
// ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES the task has (first set wins),
// named by `visible_name` in errors.
Expected<std::vector<int>> TaskGpus(const std::string& step_gpus, const std::string& job_gpus,
                                    const std::string& cuda_visible,
                                    const std::string& visible_name = "CUDA_VISIBLE_DEVICES");

// Natural order for device names: "mlx5_2" < "mlx5_10".
bool NaturalLess(const std::string& a, const std::string& b);

// Human table (GPU x NIC distance classes, pairing) and JSON of a topology
// plus, when `plan` is given, the environment.
std::string TopologyTable(const Topology& topo, const std::vector<GpuPairing>& pairing);
std::string EnvPlanText(const EnvPlan& plan);
// `warnings` (GpuGresWarning's) become a "warnings" array when non-empty.
std::string TopologyJson(const Topology& topo, const std::vector<GpuPairing>& pairing, const EnvPlan* plan,
                         const std::vector<std::string>& warnings = {});

// A node Slurm gave GPUs (SLURM_JOB_GPUS, else SLURM_STEP_GPUS: the GRES
// indexes on this node) whose topology shows none: hwloc missed them (an
// unknown PCI id, an XML exported without I/O, a driver not bound), and every
// GPU-NIC decision would silently be empty. "" when consistent or when Slurm
// says nothing; else the warning text, naming the variable and its value.
std::string GpuGresWarning(const Topology& topo, const std::string& job_gpus, const std::string& step_gpus);

}  // namespace preflight
