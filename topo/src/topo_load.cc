// hwloc + sysfs -> Topology (see topo_load.h); the per-node cache is in
// topo_cache.cc.
#include "preflight/topo_load.h"

#include <hwloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "preflight/fileutil.h"
#include "preflight/gpu_vendor.h"
#include "preflight/job.h"
#include "preflight/state_paths.h"
#include "topo_hwloc_objects.h"

namespace preflight {

using topo_internal::NumberGpus;
using topo_internal::PortStateName;
using topo_internal::ReadGpus;
using topo_internal::ReadNics;
using topo_internal::TrailingNumber;


std::string HwlocRuntimeVersion() {
  // The library fills the root's "hwlocVersion" info with its own
  // HWLOC_VERSION on every load; a one-PU synthetic topology costs nothing.
  static const std::string v = [] {
    std::string out = "unknown";
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) < 0) return out;
    if (hwloc_topology_set_synthetic(t, "pu:1") == 0 && hwloc_topology_load(t) == 0) {
      const char* s = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "hwlocVersion");
      if (s != nullptr) out = s;
    }
    hwloc_topology_destroy(t);
    return out;
  }();
  return v;
}

Status DiagnoseTopologyXml(const std::string& path, const std::string& text, const std::string& hwloc_version) {
  auto bad = [&](const std::string& why) { return Status::InvalidArgument(path + ": " + why); };
  size_t i = text.find_first_not_of(" \t\r\n");
  if (i == std::string::npos) return bad("empty file");
  // Skip the XML declaration, comments and the DOCTYPE to the root element.
  for (;;) {
    if (text.compare(i, 2, "<?") == 0) {
      i = text.find("?>", i);
      if (i == std::string::npos) break;
      i += 2;
    } else if (text.compare(i, 4, "<!--") == 0) {
      i = text.find("-->", i);
      if (i == std::string::npos) break;
      i += 3;
    } else if (text.compare(i, 2, "<!") == 0) {
      i = text.find('>', i);
      if (i == std::string::npos) break;
      i += 1;
    } else {
      break;
    }
    i = text.find_first_not_of(" \t\r\n", i);
    if (i == std::string::npos) break;
  }
  auto lines = [&] { return std::to_string(std::count(text.begin(), text.end(), '\n') + (text.back() == '\n' ? 0 : 1)); };
  if (i == std::string::npos) return bad("truncated at line " + lines() + ": no root element");
  if (text[i] != '<') return bad("not XML (no root element)");
  size_t e = text.find_first_of(" \t\r\n/>", i + 1);
  std::string root = text.substr(i + 1, e == std::string::npos ? std::string::npos : e - i - 1);
  if (root == "system")
    return bad("an NCCL topology file, not hwloc XML: export with `lstopo --of xml`");
  if (root != "topology") return bad("not hwloc XML (root element <" + root + ">): export with `lstopo --of xml`");
  size_t tag_end = text.find('>', i);
  std::string tag = text.substr(i, tag_end == std::string::npos ? std::string::npos : tag_end - i);
  size_t v = tag.find("version=\"");
  if (v != std::string::npos) {
    std::string ver = tag.substr(v + 9, tag.find('"', v + 9) - (v + 9));
    int major = std::atoi(ver.c_str());
    int have = std::atoi(hwloc_version.c_str());
    if (major > have) {
      std::string mm = hwloc_version.substr(0, hwloc_version.find('.', hwloc_version.find('.') + 1));
      return bad("hwloc XML version " + ver + " needs hwloc >= " + std::to_string(major) + " (this is " + mm +
                 "): export it with an hwloc " + std::to_string(have) + ".x lstopo (`lstopo --of xml`)");
    }
  }
  if (text.find("</topology>") == std::string::npos) return bad("truncated at line " + lines() + ": no closing </topology>");
  return Status::Ok();
}

namespace {
Expected<Topology> LoadHwloc(const std::string& xml, const FsRoot* fsp);
}  // namespace

Expected<Topology> LoadTopologyHwloc(const std::string& xml, const FsRoot& fs) { return LoadHwloc(xml, &fs); }

Expected<Topology> LoadTopologyXmlOnly(const std::string& xml) {
  if (xml.empty()) return Status::InvalidArgument("no XML file given");
  return LoadHwloc(xml, nullptr);
}

namespace {

// `fsp` null: the XML alone (LoadTopologyXmlOnly).
Expected<Topology> LoadHwloc(const std::string& xml, const FsRoot* fsp) {
  if (xml.empty() && !fsp->is_real())
    return Status::Unavailable("fsroot is " + fsp->root() + " but topology_xml is empty: hwloc cannot probe a fixture root");
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) < 0) return Status::FromErrno(errno, "hwloc_topology_init");
  struct Guard {
    hwloc_topology_t t;
    ~Guard() { hwloc_topology_destroy(t); }
  } guard{t};
  // Without KEEP_ALL hwloc drops PCI and OS devices: no GPUs, no HCAs.
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (xml.empty()) {
    // Probing runs in the prolog and in slurmstepd: keep hwloc's GPU-runtime
    // backends out (CUDA/OpenCL would create a context, NVML/RSMI/Level Zero
    // open the driver). GPUs are found by PCI class and vendor, numbered by
    // /proc/driver/nvidia device minors.
    for (const char* c : {"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl"})
      hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
  } else {
    struct stat st;
    if (::stat(xml.c_str(), &st) != 0) return Status::FromErrno(errno, "topology_xml " + xml);
    auto text = ReadWholeFile(xml);
    if (!text) return text.status();
    Status d = DiagnoseTopologyXml(xml, *text, HwlocRuntimeVersion());
    if (!d.ok()) return d;
    if (hwloc_topology_set_xml(t, xml.c_str()) < 0) return Status::FromErrno(errno, "hwloc cannot use XML " + xml);
  }
  if (hwloc_topology_load(t) < 0)
    return Status::FromErrno(errno, xml.empty() ? std::string("hwloc probe") : "hwloc cannot load XML " + xml);
  // An XML exported without I/O objects has no GPU and no NIC: say so
  // instead of a generic "no GPU" (lstopo's default keeps only "important"
  // PCI devices; hwloc-gather-topology and --whole-io keep all).
  if (!xml.empty() && hwloc_get_next_pcidev(t, nullptr) == nullptr)
    return Status::InvalidArgument(xml + ": no PCI objects: exported without I/O (`lstopo --whole-io --of xml`)");

  Topology topo;
  topo.source = xml.empty() ? "probe" : "xml:" + xml;
  // What hwloc found (topo_hwloc_objects.h), then the GPUs numbered.
  std::map<int, int> nvml_index = ReadGpus(t, &topo);
  ReadNics(t, &topo);
  NumberGpus(nvml_index, &topo);
  if (fsp != nullptr) {
    RefreshSysfsState(topo, *fsp);
    topo.state_from = "sysfs:" + fsp->root();
  } else {
    topo.state_from = "xml";
    std::sort(topo.gpus.begin(), topo.gpus.end(), [](const TopoGpu& a, const TopoGpu& b) { return a.index < b.index; });
  }
  return topo;
}

}  // namespace

void RefreshSysfsState(Topology& topo, const FsRoot& fs) {
  for (auto& n : topo.nics) {
    std::string base = "/sys/class/infiniband/" + n.name + "/ports";
    auto ports = fs.ListDir(base);
    if (ports) {
      std::vector<TopoPort> fresh;
      for (const auto& pn : *ports) {
        int num = TrailingNumber(pn, "");
        if (num <= 0) continue;
        TopoPort p;
        p.num = num;
        std::string dir = base + "/" + pn;
        if (auto s = fs.ReadFile(dir + "/state")) {
          size_t colon = s->find(": ");
          p.state = colon == std::string::npos ? PortStateName(*s) : s->substr(colon + 2);
        }
        if (auto l = fs.ReadFile(dir + "/link_layer")) p.link_layer = *l;
        if (auto r = fs.ReadFile(dir + "/rate")) p.rate = *r;
        if (p.link_layer == "Ethernet") {
          // The lowest RoCE v2 GID carrying an IPv4-mapped address is the one
          // NCCL should use; a GID table without one is not "validated".
          auto gids = fs.ListDir(dir + "/gids");
          std::vector<int> idx;
          if (gids)
            for (const auto& g : *gids)
              if (TrailingNumber(g, "") >= 0) idx.push_back(TrailingNumber(g, ""));
          std::sort(idx.begin(), idx.end());
          for (int i : idx) {
            auto gid = fs.ReadFile(dir + "/gids/" + std::to_string(i));
            if (!gid || gid->rfind("0000:0000:0000:0000:0000:ffff:", 0) != 0 ||
                *gid == "0000:0000:0000:0000:0000:ffff:0000:0000")
              continue;
            auto type = fs.ReadFile(dir + "/gid_attrs/types/" + std::to_string(i));
            if (!type || *type != "RoCE v2") continue;
            p.gid_index = i;
            break;
          }
        }
        fresh.push_back(p);
      }
      std::sort(fresh.begin(), fresh.end(), [](const TopoPort& a, const TopoPort& b) { return a.num < b.num; });
      if (!fresh.empty()) n.ports = std::move(fresh);
    }
    n.netdevs_up.clear();
    for (const auto& d : n.netdevs) {
      auto st = fs.ReadFile("/sys/class/net/" + d + "/operstate");
      if (st && *st == "up") n.netdevs_up.push_back(d);
    }
  }
  // Device minors: what /dev/nvidiaN, gres.conf and SLURM_STEP_GPUS number.
  std::vector<int> minors;
  for (const auto& g : topo.gpus) {
    int minor = -1;
    if (!NumberedByDeviceMinor(GpuVendorNamed(g.vendor.c_str()))) {
      // AMD: Slurm's GRES index and ROCR_VISIBLE_DEVICES follow ROCm SMI's
      // order (hwloc's rsmiN), kept from the load.
      minors.push_back(-1);
      continue;
    }
    if (auto info = fs.ReadFile("/proc/driver/nvidia/gpus/" + g.busid + "/information")) {
      std::istringstream in(*info);
      std::string line;
      while (std::getline(in, line))
        if (line.rfind("Device Minor:", 0) == 0) minor = std::atoi(line.c_str() + 13);
    }
    minors.push_back(minor);
  }
  std::vector<int> sorted = minors;
  std::sort(sorted.begin(), sorted.end());
  bool all = !sorted.empty() && sorted.front() >= 0 && std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  if (all)
    for (size_t i = 0; i < topo.gpus.size(); ++i) topo.gpus[i].index = minors[i];
  std::sort(topo.gpus.begin(), topo.gpus.end(), [](const TopoGpu& a, const TopoGpu& b) { return a.index < b.index; });
}

EnvPolicy PolicyFromConfig(const Config& cfg) {
  EnvPolicy p;
  p.gid_index = cfg.nccl_gid_index;
  p.nccl_topo_file = cfg.nccl_topo_file;
  struct stat st;
  p.nccl_topo_file_exists = !p.nccl_topo_file.empty() && ::stat(p.nccl_topo_file.c_str(), &st) == 0;
  return p;
}

std::string JobGpusPath(const Config& cfg, const std::string& job, const std::string& node) {
  return state::JobNodeFile(cfg, job, node, state::kJobGpus);
}

namespace {
constexpr const char* kJobGpusPrefix = "SLURM_JOB_GPUS=";
}  // namespace

Status WriteJobGpusRecord(const Config& cfg, const std::string& job, const std::string& node,
                          const std::string& slurm_job_gpus) {
  if (!slurm_job_gpus.empty()) {
    auto ids = ParseIdList(slurm_job_gpus);
    if (!ids) return ids.status().Context("SLURM_JOB_GPUS='" + slurm_job_gpus + "'");
  }
  std::string path = JobGpusPath(cfg, job, node);
  Status s = MakeDirs(path.substr(0, path.rfind('/')), 0755);
  if (!s.ok()) return s;
  return WriteFileAtomic(path, std::string(kJobGpusPrefix) + slurm_job_gpus + "\n", 0644);
}

Expected<std::vector<int>> ReadJobGpusRecord(const Config& cfg, const std::string& job, const std::string& node) {
  std::string path = JobGpusPath(cfg, job, node);
  auto text = ReadWholeFile(path);
  if (!text) return text.status();
  std::string line = text->substr(0, text->find('\n'));
  if (line.rfind(kJobGpusPrefix, 0) != 0) return Status::InvalidArgument(path + ": not a job GPU record");
  std::string list = line.substr(std::strlen(kJobGpusPrefix));
  if (list.empty()) return std::vector<int>{};
  auto ids = ParseIdList(list);
  if (!ids) return ids.status().Context(path);
  return *ids;
}

}  // namespace preflight
