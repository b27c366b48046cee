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

namespace preflight {

namespace {

constexpr unsigned kCassiniVendor = 0x17db;  // HPE (Cray) Slingshot Cassini NICs

std::string Hex(unsigned v, int width) {
  char b[16];
  std::snprintf(b, sizeof b, "%0*x", width, v);
  return b;
}

std::string BusId(hwloc_obj_t o) {
  char b[32];
  std::snprintf(b, sizeof b, "%04x:%02x:%02x.%x", o->attr->pcidev.domain, o->attr->pcidev.bus, o->attr->pcidev.dev,
                o->attr->pcidev.func);
  return b;
}

// Collapsed PCIe path (topo.h): host bridge, then one entry per switch.
// hwloc shows a switch as an upstream-port bridge whose children are its
// downstream-port bridges; below a host bridge the first PCI bridge is a root
// port. So from the top: [host] root, up, down, up, down, ... and only the
// host bridge and the upstream ports name a hop.
std::vector<std::string> PciPath(hwloc_obj_t dev) {
  std::vector<hwloc_obj_t> bridges;
  for (hwloc_obj_t o = dev->parent; o != nullptr && o->type == HWLOC_OBJ_BRIDGE; o = o->parent) bridges.push_back(o);
  std::reverse(bridges.begin(), bridges.end());
  std::vector<std::string> path;
  size_t first = 0;
  if (!bridges.empty() && bridges[0]->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
    const auto& d = bridges[0]->attr->bridge.downstream.pci;
    path.push_back("hb:" + Hex(d.domain, 4) + ":[" + Hex(d.secondary_bus, 2) + "-" + Hex(d.subordinate_bus, 2) + "]");
    first = 1;
  } else if (!bridges.empty()) {
    path.push_back("pci:" + BusId(bridges[0]));  // no host bridge object: the top bridge stands for it
    first = 1;
  }
  for (size_t i = first; i < bridges.size(); ++i) {
    size_t k = i - first;  // 0 root port, odd upstream port, even downstream port
    if (k % 2 == 1) path.push_back(BusId(bridges[i]));
  }
  return path;
}

void Locality(hwloc_topology_t t, hwloc_obj_t dev, int* numa, int* package) {
  *numa = -1;
  *package = -1;
  hwloc_obj_t nonio = hwloc_get_non_io_ancestor_obj(t, dev);
  if (nonio == nullptr) return;
  if (nonio->nodeset != nullptr && !hwloc_bitmap_iszero(nonio->nodeset)) *numa = hwloc_bitmap_first(nonio->nodeset);
  hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, nonio);
  if (pkg == nullptr && nonio->type == HWLOC_OBJ_PACKAGE) pkg = nonio;
  if (pkg == nullptr && nonio->cpuset != nullptr) {
    for (hwloc_obj_t p = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, nullptr); p != nullptr;
         p = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, p))
      if (hwloc_bitmap_isincluded(nonio->cpuset, p->cpuset)) pkg = p;
  }
  if (pkg != nullptr) *package = static_cast<int>(pkg->os_index);
}

hwloc_obj_t PciParent(hwloc_obj_t o) {
  for (hwloc_obj_t p = o->parent; p != nullptr; p = p->parent)
    if (p->type == HWLOC_OBJ_PCI_DEVICE) return p;
  return nullptr;
}

std::string PortStateName(const std::string& num) {
  // ib_port_state numbering, as in sysfs "4: ACTIVE".
  static const char* kNames[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  char* end = nullptr;
  long v = std::strtol(num.c_str(), &end, 10);
  if (end == num.c_str() || v < 0 || v > 5) return "";
  return kNames[v];
}

int TrailingNumber(const std::string& s, const char* prefix) {
  size_t n = std::strlen(prefix);
  if (s.compare(0, n, prefix) != 0 || s.size() == n) return -1;
  for (size_t i = n; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return -1;
  return std::atoi(s.c_str() + n);
}


}  // namespace

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
  std::map<hwloc_obj_t, size_t> gpu_of;
  std::map<int, int> nvml_index;  // position -> nvmlN
  for (hwloc_obj_t o = hwloc_get_next_pcidev(t, nullptr); o != nullptr; o = hwloc_get_next_pcidev(t, o)) {
    unsigned cls = o->attr->pcidev.class_id;
    unsigned vendor = o->attr->pcidev.vendor_id;
    // Which PCI functions are GPUs, and whose: gpu_vendor.h.
    bool amd_osdev = false;
    std::vector<int> rsmi;  // ROCm SMI indexes on this function (CPX/TPX: several)
    for (hwloc_obj_t c = o->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
      if (TrailingNumber(c->name, "rsmi") >= 0) rsmi.push_back(TrailingNumber(c->name, "rsmi"));
      if (TrailingNumber(c->name, "rsmi") >= 0 || std::strncmp(c->name, "opencl", 6) == 0) amd_osdev = true;
    }
    GpuVendor gv = GpuVendorOf(vendor, o->attr->pcidev.device_id, cls, amd_osdev);
    if (gv == GpuVendor::kNone) continue;
    bool nvidia = gv == GpuVendor::kNvidia;
    TopoGpu g;
    g.vendor = GpuVendorName(gv);
    g.busid = BusId(o);
    g.path = PciPath(o);
    Locality(t, o, &g.numa, &g.package);
    // MI300A/X in CPX or TPX mode: one PCI function carries several ROCm
    // devices (6 or 3 per APU on Tuolumne, rsmi0..5 under 0000:02:00.0).
    // Each is a GPU of its own for Slurm (gres.conf/ROCR_VISIBLE_DEVICES
    // number them by ROCm index), all with the function's place in the tree.
    if (!nvidia && rsmi.size() > 1) {
      std::sort(rsmi.begin(), rsmi.end());
      for (int r : rsmi) {
        TopoGpu part = g;
        part.osdev = "rsmi" + std::to_string(r);
        nvml_index[static_cast<int>(topo.gpus.size())] = r;
        gpu_of[o] = topo.gpus.size();
        topo.gpus.push_back(std::move(part));
      }
      continue;
    }
    // Prefer the management library's name (NVML's index is PCI order, like
    // the device minors; ROCm SMI's is the order ROCR_VISIBLE_DEVICES and
    // HIP number), then CUDA's, then DRM's: whatever this hwloc build found.
    const char* lib = ManagementOsdevPrefix(gv);
    int rank = 99;
    for (hwloc_obj_t c = o->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
      std::string n = c->name;
      int r = TrailingNumber(n, lib) >= 0 ? 0 : TrailingNumber(n, "cuda") >= 0 ? 1 : TrailingNumber(n, "card") >= 0 ? 2 : 99;
      if (r < rank) {
        rank = r;
        g.osdev = n;
      }
      if (r == 0) nvml_index[static_cast<int>(topo.gpus.size())] = TrailingNumber(n, lib);
    }
    gpu_of[o] = topo.gpus.size();
    topo.gpus.push_back(std::move(g));
  }

  for (hwloc_obj_t o = hwloc_get_next_osdev(t, nullptr); o != nullptr; o = hwloc_get_next_osdev(t, o)) {
    if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || o->name == nullptr) continue;
    TopoNic n;
    n.name = o->name;
    hwloc_obj_t pci = PciParent(o);
    bool efa = n.name.rfind("rdmap", 0) == 0 || (pci != nullptr && pci->attr->pcidev.vendor_id == 0x1d0f);
    bool cxi = n.name.rfind("cxi", 0) == 0 || (pci != nullptr && pci->attr->pcidev.vendor_id == kCassiniVendor);
    n.kind = efa ? "efa" : cxi ? "cxi" : "ib";
    if (pci != nullptr) {
      n.busid = BusId(pci);
      n.path = PciPath(pci);
      Locality(t, pci, &n.numa, &n.package);
      for (hwloc_obj_t c = pci->io_first_child; c != nullptr; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && c->name != nullptr)
          n.netdevs.push_back(c->name);
    } else {
      Locality(t, o, &n.numa, &n.package);
    }
    // Port states as hwloc recorded them; sysfs (RefreshSysfsState) wins.
    for (unsigned i = 0; i < o->infos_count; ++i) {
      int port = 0;
      char tail[16] = {0};
      if (std::sscanf(o->infos[i].name, "Port%dStat%15s", &port, tail) == 2 && std::strcmp(tail, "e") == 0) {
        TopoPort p;
        p.num = port;
        p.state = PortStateName(o->infos[i].value);
        n.ports.push_back(p);
      }
    }
    std::sort(n.ports.begin(), n.ports.end(), [](const TopoPort& a, const TopoPort& b) { return a.num < b.num; });
    std::sort(n.netdevs.begin(), n.netdevs.end());
    topo.nics.push_back(std::move(n));
  }
  // HPE Slingshot: hwloc shows a Cassini NIC (PCI vendor 17db) as a network
  // OS device (hsiN; subtype "Slingshot" in hwloc >= 2.5) and, without the
  // cxi provider's sysfs, no OpenFabrics device. Such a NIC is named by its
  // netdev and has no verbs ports: NCCL reaches it through libfabric.
  for (hwloc_obj_t o = hwloc_get_next_osdev(t, nullptr); o != nullptr; o = hwloc_get_next_osdev(t, o)) {
    if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK || o->name == nullptr) continue;
    hwloc_obj_t pci = PciParent(o);
    bool sling = (o->subtype != nullptr && std::strcmp(o->subtype, "Slingshot") == 0) ||
                 (pci != nullptr && pci->attr->pcidev.vendor_id == kCassiniVendor);
    if (!sling) continue;
    std::string busid = pci != nullptr ? BusId(pci) : "";
    bool known = false;  // an OpenFabrics cxiN on the same function already stands for it
    for (auto& n : topo.nics)
      if (!busid.empty() && n.busid == busid) {
        n.kind = "cxi";
        known = true;
      }
    if (known) continue;
    TopoNic n;
    n.name = o->name;
    n.kind = "cxi";
    n.busid = busid;
    n.netdevs = {o->name};
    if (pci != nullptr) {
      n.path = PciPath(pci);
      Locality(t, pci, &n.numa, &n.package);
    } else {
      Locality(t, o, &n.numa, &n.package);
    }
    topo.nics.push_back(std::move(n));
  }
  std::sort(topo.nics.begin(), topo.nics.end(), [](const TopoNic& a, const TopoNic& b) { return NaturalLess(a.name, b.name); });

  // GPU indexes: PCI order, or NVML's when every GPU has one (the same order
  // on real nodes); device minors from /proc replace both in RefreshSysfsState.
  std::vector<size_t> order(topo.gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Stable: the logical GPUs of one CPX/TPX function keep their ROCm order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return topo.gpus[a].busid < topo.gpus[b].busid; });
  for (size_t pos = 0; pos < order.size(); ++pos) topo.gpus[order[pos]].index = static_cast<int>(pos);
  if (nvml_index.size() == topo.gpus.size()) {
    std::vector<int> seen;
    for (const auto& kv : nvml_index) seen.push_back(kv.second);
    std::sort(seen.begin(), seen.end());
    if (std::adjacent_find(seen.begin(), seen.end()) == seen.end())
      for (const auto& kv : nvml_index) topo.gpus[static_cast<size_t>(kv.first)].index = kv.second;
  }
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
