// The hwloc object walk behind LoadHwloc (topo_hwloc_objects.h).
#include "topo_hwloc_objects.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "preflight/gpu_vendor.h"
#include "preflight/strings.h"

namespace preflight::topo_internal {

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

std::map<int, int> ReadGpus(hwloc_topology_t t, Topology* topo) {
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
        nvml_index[static_cast<int>(topo->gpus.size())] = r;
        topo->gpus.push_back(std::move(part));
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
      if (r == 0) nvml_index[static_cast<int>(topo->gpus.size())] = TrailingNumber(n, lib);
    }
    topo->gpus.push_back(std::move(g));
  }
  return nvml_index;
}

void ReadNics(hwloc_topology_t t, Topology* topo) {
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
    topo->nics.push_back(std::move(n));
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
    for (auto& n : topo->nics)
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
    topo->nics.push_back(std::move(n));
  }
  std::sort(topo->nics.begin(), topo->nics.end(), [](const TopoNic& a, const TopoNic& b) { return NaturalLess(a.name, b.name); });
}

void NumberGpus(const std::map<int, int>& nvml_index, Topology* topo) {
  // GPU indexes: PCI order, or NVML's when every GPU has one (the same order
  // on real nodes); device minors from /proc replace both in RefreshSysfsState.
  std::vector<size_t> order(topo->gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Stable: the logical GPUs of one CPX/TPX function keep their ROCm order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return topo->gpus[a].busid < topo->gpus[b].busid; });
  for (size_t pos = 0; pos < order.size(); ++pos) topo->gpus[order[pos]].index = static_cast<int>(pos);
  if (nvml_index.size() == topo->gpus.size()) {
    std::vector<int> seen;
    for (const auto& kv : nvml_index) seen.push_back(kv.second);
    std::sort(seen.begin(), seen.end());
    if (std::adjacent_find(seen.begin(), seen.end()) == seen.end())
      for (const auto& kv : nvml_index) topo->gpus[static_cast<size_t>(kv.first)].index = kv.second;
  }
}

}  // namespace preflight::topo_internal
