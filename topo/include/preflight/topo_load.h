// Building a Topology from the machine, and the per-node cache tasks read.
//
// hwloc is loaded once per node (prolog, or the first task after a reboot or
// config change); every task then reads the small text cache and computes
// its environment from it (well under a millisecond; see bench/topo_env.sh).
//
// Which source is real and which is a seam:
//  * hwloc: the real library; in tests it loads a captured real machine's XML
//    (`topology_xml`), in production it probes (only with fsroot "/": hwloc's
//    own probe cannot be pointed at a fixture root).
//  * sysfs/procfs (port state, link layer, rate, RoCE GIDs, netdev operstate,
//    GPU device minors): always through FsRoot, so fixture trees stand in.
//    Where a fixture has no /sys/class/infiniband/<dev>, the port state falls
//    back to the OpenFabrics attributes hwloc recorded (Port<N>State).
#pragma once

#include <string>

#include "preflight/config.h"
#include "preflight/fsroot.h"
#include "preflight/topo.h"

namespace preflight {

// hwloc (XML file when `xml` is non-empty, else probe) plus FsRoot state.
// Errors name the XML file and the cause (DiagnoseTopologyXml; an XML
// without any PCI object: "exported without I/O"), or say why probing is
// refused.
Expected<Topology> LoadTopologyHwloc(const std::string& xml, const FsRoot& fs);
// Foreign XML: the file alone, nothing read from this machine (no port
// state, link layer, netdev operstate or GPU minors from sysfs/procfs).
// Port states are the ones hwloc recorded; NICs without port records are
// "unknown" and count as usable. Topology::state_from is "xml".
Expected<Topology> LoadTopologyXmlOnly(const std::string& xml);

// Why `text` (the contents of the XML file `path`) cannot be an hwloc
// topology that this hwloc (`hwloc_version`, e.g. "2.9.0") loads, before
// hwloc is asked (whose only answer is EINVAL). InvalidArgument naming the
// file and the cause: empty; an NCCL topology file (<system> root); an hwloc
// XML version newer than this hwloc; another root element; truncated (no
// closing </topology>: "truncated at line N", the last line). Ok otherwise.
Status DiagnoseTopologyXml(const std::string& path, const std::string& text, const std::string& hwloc_version);
// The runtime hwloc's version ("2.9.0"), not the one built against.
std::string HwlocRuntimeVersion();

// Re-read the volatile part (port state/link layer/rate/GIDs, netdev
// operstate, GPU minors) from FsRoot into `topo`. Missing files leave what
// hwloc said.
void RefreshSysfsState(Topology& topo, const FsRoot& fs);

// What makes a cached topology stale: boot id, hwloc runtime version, the
// XML file (path, size, mtime), the fsroot, and the cache format version.
std::string TopoCacheKey(const Config& cfg, const FsRoot& fs);
std::string TopoCachePath(const Config& cfg, const std::string& node);

// Cache text: one record per line, tab-separated (format in topo_load.cc).
std::string SerializeTopology(const Topology& topo, const std::string& key);
// Parse a cache; NotFound when its key differs from `key` (stale), an
// InvalidArgument naming the line when it is malformed.
Expected<Topology> ParseTopologyCache(const std::string& text, const std::string& key, const std::string& where);

struct TopoLoadOptions {
  bool write_cache = true;    // write/refresh the cache file (root only)
  bool refresh_sysfs = false; // on a cache hit, re-read port/netdev state
};

// The topology for this node: the cache when fresh, else hwloc (then the
// cache is written when `write_cache`). *from_cache says which happened.
Expected<Topology> LoadTopologyCached(const Config& cfg, const std::string& node, const TopoLoadOptions& opts,
                                      bool* from_cache = nullptr);

EnvPolicy PolicyFromConfig(const Config& cfg);

// The job's GPUs on a node, recorded by the root prolog for the plugin
// (topo.h: JobGpusOnNode): <state_dir>/jobs/<job>/<node>.gpus, one line
// "SLURM_JOB_GPUS=<list>" (empty list: the job holds no GPU there). The
// prolog's environment comes from slurmd, not from the user, and the file
// is root's in a root-owned directory, so slurmstepd can trust it for every
// step of the job (batch, srun, --gpus-per-task, --gpu-bind alike).
std::string JobGpusPath(const Config& cfg, const std::string& job, const std::string& node);
// `slurm_job_gpus` as the prolog got it; InvalidArgument when malformed.
Status WriteJobGpusRecord(const Config& cfg, const std::string& job, const std::string& node,
                          const std::string& slurm_job_gpus);
// NotFound when there is no record (no preflight prolog ran), InvalidArgument
// naming the file when it is malformed.
Expected<std::vector<int>> ReadJobGpusRecord(const Config& cfg, const std::string& job, const std::string& node);

}  // namespace preflight
