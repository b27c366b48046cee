// What topo_load.cc's LoadHwloc reads from a loaded hwloc topology: the
// GPUs (whose, by gpu_vendor.h), the NICs (OpenFabrics devices and
// Slingshot's Cassini), their PCI paths and locality. Private to topo/src.
#pragma once

#include <hwloc.h>

#include <map>
#include <string>
#include <vector>

#include "preflight/topo.h"

namespace preflight::topo_internal {

// "0000:17:00.0"
std::string BusId(hwloc_obj_t o);
// The collapsed PCIe path above `dev` (topo.h): the host bridge, then one
// entry per switch.
std::vector<std::string> PciPath(hwloc_obj_t dev);
// The NUMA node and package `dev` hangs under (-1 when hwloc does not say).
void Locality(hwloc_topology_t t, hwloc_obj_t dev, int* numa, int* package);
// The PCI device an OS device hangs under, or null.
hwloc_obj_t PciParent(hwloc_obj_t o);
// N of "prefixN", or -1.
int TrailingNumber(const std::string& s, const char* prefix);
// An IB port state's number as sysfs and hwloc give it ("4") -> "ACTIVE".
std::string PortStateName(const std::string& num);

// The GPUs in PCI order; returns position -> the management library's
// index (NVML or ROCm SMI) for those that have one.
std::map<int, int> ReadGpus(hwloc_topology_t t, Topology* topo);
// The NICs, sorted by name (natural order).
void ReadNics(hwloc_topology_t t, Topology* topo);
// GPU indexes: PCI order, or the management library's when every GPU has
// a distinct one (the same order on real nodes).
void NumberGpus(const std::map<int, int>& nvml_index, Topology* topo);

}  // namespace preflight::topo_internal
