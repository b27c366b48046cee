// gpu.xid: Xid events from the kernel log, each mapped to an action.
//
// Mechanism (unchanged from v1): /dev/kmsg under fsroot. The driver logs every
// Xid as "NVRM: Xid (PCI:0000:1b:00): 79, ..." and each kmsg record has a
// sequence number that only grows within a boot; the last one seen and the
// boot id are kept in <state_dir>/nodes/<node>.xid. The first check of a
// boot is a baseline. NVML's event API only reports events while a process
// listens, so a short prolog would miss those between jobs; the log keeps them.
//
// v2: each Xid gets an action (XidAction) from NVIDIA's published Xid
// catalogue (xid.cc: kCatalogue, with the source), which the site overrides
// per Xid (xid_actions = 79:drain_reset,13:ignore; xid_ignore still means
// ignore). A finding names the GPU (index from /proc/driver/nvidia/gpus/
// <pci>/information, "Device Minor") and stays open:
//   drain_reset  until a reboot (new boot id) or the admin removes the state
//                file (after resetting the GPU): fail, node-owned;
//   drain        for xid_window after the event, then closes: fail;
//   warn         for xid_window: warn (no drain), node-owned;
//   user         for xid_window: warn owned by the user (the job's own fault,
//                e.g. a page fault in the application): never drains;
//   ignore       never recorded.
// An Xid the catalogue does not list is `drain` (as every non-ignored Xid
// was before v2). The window is measured on the kernel log's clock (the
// record's microseconds since boot against /proc/uptime).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/checks.h"

namespace preflight {

// XidAction, XidActionName, ParseXidAction: config.h (the xid_actions key).

struct XidClass {
  int xid;
  XidAction action;
  const char* bucket;  // the catalogue's immediate-action resolution bucket
  const char* what;    // short description for drain reasons
};
// The catalogue entry for `xid`, or nullptr.
const XidClass* FindXidClass(int xid);
const std::vector<XidClass>& XidCatalogue();
// The action for `xid` under this config: xid_actions, then xid_ignore, then
// the catalogue, else drain.
XidAction XidActionFor(const Config& cfg, int xid);

// One Xid record parsed from a kernel log line, e.g.
// "NVRM: Xid (PCI:0000:1b:00): 79, pid=..., GPU has fallen off the bus."
struct XidEvent {
  uint64_t seq = 0;
  uint64_t usec = 0;  // kmsg timestamp, microseconds since boot
  std::string pci;    // "0000:1b:00"
  int xid = 0;
  std::string text;   // the whole message
};
// Parse /dev/kmsg-format records ("PRI,SEQ,USEC,FLAGS;MESSAGE"); lines that
// are not Xid records, and continuation lines, are ignored. Records with
// seq <= after are skipped. *last_seq gets the highest seq seen.
std::vector<XidEvent> ParseKmsgXids(const std::string& records, uint64_t after, uint64_t* last_seq);

// gpu.xid results: one per GPU with open findings (worst action first in
// its message), or one pass for the node.
std::vector<CheckResult> CheckXid(const CheckEnv& env);

}  // namespace preflight
