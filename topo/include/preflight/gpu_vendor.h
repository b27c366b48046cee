// The GPU vendors preflight knows, in one place: how a PCI function is
// recognised as a GPU (vendor and class; AMD's Instinct device ids), the
// name a vendor goes by in records ("nvidia", "amd": TopoGpu::vendor), the
// hwloc OS device its management library names (nvmlN, rsmiN), how its
// GPUs are numbered for Slurm (NVIDIA: /proc/driver/nvidia device minors;
// AMD: the ROCm SMI index), and the variables that carry a task's GPUs.
// A new vendor is added here; topo_load.cc and topo_env_merge.cc ask.
#pragma once

namespace preflight {

enum class GpuVendor { kNone, kNvidia, kAmd };

// Whether a PCI function is a GPU, and whose. `runtime_osdev`: hwloc shows
// a ROCm SMI (rsmiN) or OpenCL OS device under it, which makes an AMD VGA
// (class 0300) a GPU; otherwise only a known Instinct part is one there
// (a BMC's AMD ES1000 VGA is not).
GpuVendor GpuVendorOf(unsigned pci_vendor, unsigned pci_device, unsigned pci_class, bool runtime_osdev);

// "nvidia", "amd" ("" for kNone); the inverse reads a record's name.
const char* GpuVendorName(GpuVendor v);
GpuVendor GpuVendorNamed(const char* name);

// The prefix of the hwloc OS device of the vendor's management library,
// whose number is that library's index: "nvml", "rsmi".
const char* ManagementOsdevPrefix(GpuVendor v);

// Whether Slurm numbers the vendor's GPUs by driver device minor
// (/dev/nvidiaN, gres.conf), read from /proc/driver/nvidia; else by the
// management library's index, kept from the topology load.
bool NumberedByDeviceMinor(GpuVendor v);

// The variables that carry a task's visible GPUs, the first set winning:
// CUDA's, ROCm's (Slurm sets ROCR_VISIBLE_DEVICES), HIP's (where a site
// sets that instead).
constexpr const char* kGpuVisibleVars[] = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"};

// AMD Instinct (compute) PCI device ids (see gpu_vendor.cc).
bool IsAmdInstinct(unsigned device);

}  // namespace preflight
