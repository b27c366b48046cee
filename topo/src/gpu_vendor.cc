// The GPU vendors (gpu_vendor.h).
#include "preflight/gpu_vendor.h"

#include <cstring>

namespace preflight {

namespace {
constexpr unsigned kPciNvidia = 0x10de;
constexpr unsigned kPciAmd = 0x1002;
}  // namespace

// AMD Instinct (compute) PCI device ids, from the Linux amdgpu driver's
// PCI table and the pci.ids database: MI25 (Vega 10), MI50/MI60 (Vega 20),
// MI100 (Arcturus), MI200 (Aldebaran), MI300/MI325 (Aqua Vanjaram). Only
// consulted for class 0300, where an Instinct part and a BMC's VGA share a
// class; the other classes AMD gives its compute parts count by class.
bool IsAmdInstinct(unsigned device) {
  static const unsigned kIds[] = {0x6860, 0x6861, 0x6862, 0x6863, 0x6864, 0x6867, 0x6868, 0x686c,  // MI25
                                  0x66a0, 0x66a1, 0x66a2, 0x66a3, 0x66a4, 0x66a7, 0x66af,          // MI50/MI60
                                  0x738c, 0x738e,                                                  // MI100
                                  0x7408, 0x740c, 0x740f, 0x7410,                                  // MI200
                                  0x74a0, 0x74a1, 0x74a2, 0x74a5, 0x74a9, 0x74b5, 0x74b9, 0x74bd}; // MI300
  for (unsigned id : kIds)
    if (id == device) return true;
  return false;
}

GpuVendor GpuVendorOf(unsigned pci_vendor, unsigned pci_device, unsigned cls, bool runtime_osdev) {
  // NVIDIA: 3D (0302) or VGA (0300) class. AMD Instinct: display
  // controller (0380: MI50/MI100/MI250X), processing accelerator (1200:
  // MI300A/X) or co-processor (0b40). An AMD VGA (0300) is a GPU when it
  // is a known Instinct part (hwloc 1.x on LLNL Corona shows the MI50 as
  // 0300 with DRM devices only, and a probe here blocks rsmi/opencl) or
  // has a ROCm SMI/OpenCL OS device; so a BMC's ES1000 (1002:515e) is not.
  if (pci_vendor == kPciNvidia && (cls == 0x0302 || cls == 0x0300)) return GpuVendor::kNvidia;
  if (pci_vendor == kPciAmd && (cls == 0x0380 || cls == 0x1200 || cls == 0x0b40 || cls == 0x0302 ||
                                (cls == 0x0300 && (runtime_osdev || IsAmdInstinct(pci_device)))))
    return GpuVendor::kAmd;
  return GpuVendor::kNone;
}

const char* GpuVendorName(GpuVendor v) {
  switch (v) {
    case GpuVendor::kNvidia: return "nvidia";
    case GpuVendor::kAmd: return "amd";
    case GpuVendor::kNone: break;
  }
  return "";
}

GpuVendor GpuVendorNamed(const char* name) {
  if (std::strcmp(name, "nvidia") == 0) return GpuVendor::kNvidia;
  if (std::strcmp(name, "amd") == 0) return GpuVendor::kAmd;
  return GpuVendor::kNone;
}

const char* ManagementOsdevPrefix(GpuVendor v) { return v == GpuVendor::kAmd ? "rsmi" : "nvml"; }

bool NumberedByDeviceMinor(GpuVendor v) { return v == GpuVendor::kNvidia; }

}  // namespace preflight
