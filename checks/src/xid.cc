#include "preflight/xid.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <map>
#include <sstream>

#include "preflight/fileutil.h"
#include "preflight/state_paths.h"
#include "result_sink.h"

namespace preflight {

// Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (Ampere and
// newer; https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
// column "Resolution Bucket (Immediate Action)". Buckets map to actions:
//   RESTART_BM (reboot the node), RESET_GPU          -> drain_reset
//   CONTACT_SUPPORT, CHECK_MECHANICALS               -> drain
//   RESTART_APP (the application's own fault)        -> user
//   IGNORE                                           -> ignore
// Only the codes below are transcribed (the ones data-centre GPUs log in
// practice, and those NHC, Meta GCM and azurehpc-health-checks act on); every
// other Xid is `drain`. Sites whose driver's catalogue differs, or who read
// a code differently, override it with xid_actions. 94 (contained ECC) is
// bucketed RESTART_APP there but leaves a row remap pending, which needs a
// GPU reset, so it is drain_reset here, as the node-fault list has it.
const std::vector<XidClass>& XidCatalogue() {
  static const std::vector<XidClass> kCatalogue = {
      {8, XidAction::kUser, "RESTART_APP", "GPU stopped processing (channel idle timeout)"},
      {13, XidAction::kUser, "RESTART_APP", "graphics engine exception"},
      {31, XidAction::kUser, "RESTART_APP", "GPU memory page fault"},
      {43, XidAction::kUser, "RESTART_APP", "GPU stopped processing"},
      {45, XidAction::kIgnore, "IGNORE", "preemptive cleanup after earlier errors"},
      {48, XidAction::kDrainReset, "RESET_GPU", "double-bit ECC error"},
      {61, XidAction::kDrainReset, "RESET_GPU", "internal micro-controller breakpoint"},
      {62, XidAction::kDrainReset, "RESET_GPU", "internal micro-controller halt"},
      {63, XidAction::kDrainReset, "RESET_GPU", "row remapping / page retirement recorded"},
      {64, XidAction::kDrainReset, "RESET_GPU", "row remapping / page retirement failure"},
      {74, XidAction::kDrainReset, "RESET_GPU", "NVLink error"},
      {79, XidAction::kDrainReset, "RESTART_BM", "GPU has fallen off the bus"},
      {92, XidAction::kDrain, "CONTACT_SUPPORT", "high single-bit ECC error rate"},
      {94, XidAction::kDrainReset, "RESTART_APP", "contained ECC error (row remap pending)"},
      {95, XidAction::kDrainReset, "RESET_GPU", "uncontained ECC error"},
      {119, XidAction::kDrainReset, "RESET_GPU", "GSP RPC timeout"},
      {120, XidAction::kDrainReset, "RESET_GPU", "GSP error"},
      {140, XidAction::kDrainReset, "RESET_GPU", "unrecovered ECC error"},
      {154, XidAction::kDrainReset, "RESET_GPU", "GPU recovery action changed (reset or reboot required)"},
  };
  return kCatalogue;
}

const XidClass* FindXidClass(int xid) {
  for (const auto& c : XidCatalogue())
    if (c.xid == xid) return &c;
  return nullptr;
}

XidAction XidActionFor(const Config& cfg, int xid) {
  std::string x = std::to_string(xid);
  for (const auto& kv : cfg.xid_actions)
    if (kv.first == xid) return kv.second;
  if (std::find(cfg.xid_ignore.begin(), cfg.xid_ignore.end(), x) != cfg.xid_ignore.end()) return XidAction::kIgnore;
  const XidClass* c = FindXidClass(xid);
  return c != nullptr ? c->action : XidAction::kDrain;
}

std::vector<XidEvent> ParseKmsgXids(const std::string& records, uint64_t after, uint64_t* last_seq) {
  std::vector<XidEvent> out;
  std::istringstream in(records);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == ' ') continue;  // continuation (KEY=value) lines
    size_t semi = line.find(';');
    size_t c1 = line.find(',');
    if (semi == std::string::npos || c1 == std::string::npos || c1 > semi) continue;
    char* end = nullptr;
    uint64_t seq = std::strtoull(line.c_str() + c1 + 1, &end, 10);
    if (end == line.c_str() + c1 + 1) continue;
    uint64_t usec = *end == ',' ? std::strtoull(end + 1, nullptr, 10) : 0;
    if (last_seq != nullptr && seq > *last_seq) *last_seq = seq;
    if (seq <= after) continue;
    std::string msg = line.substr(semi + 1);
    size_t x = msg.find("NVRM: Xid (PCI:");
    if (x == std::string::npos) continue;
    size_t close = msg.find(')', x);
    if (close == std::string::npos) continue;
    XidEvent e;
    e.seq = seq;
    e.usec = usec;
    e.pci = msg.substr(x + 15, close - (x + 15));
    size_t num = msg.find_first_of("0123456789", close);
    if (num == std::string::npos) continue;
    e.xid = std::atoi(msg.c_str() + num);
    e.text = msg.substr(x);
    out.push_back(e);
  }
  return out;
}

namespace {

// /dev/kmsg hands out one record per read(2) and EAGAIN at the end when
// non-blocking; a fixture's regular file gives lines and then EOF.
Expected<std::string> ReadKmsg(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, path);
  std::string all;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      all.append(buf, static_cast<size_t>(n));
      if (all.back() != '\n') all += '\n';
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;  // EPIPE: records overwritten
    if (n < 0 && errno != EAGAIN) {
      int e = errno;
      ::close(fd);
      return Status::FromErrno(e, "read " + path);
    }
    break;
  }
  ::close(fd);
  return all;
}

// One open finding. usec "-": unknown (a v1 state file), never expires.
struct Open {
  uint64_t seq = 0;
  int xid = 0;
  std::string pci;
  bool have_usec = false;
  uint64_t usec = 0;
  XidAction action = XidAction::kDrain;
  std::string text;
};

struct XidState {
  std::string boot;
  bool have_seq = false;
  uint64_t seq = 0;
  std::vector<Open> open;
};

// v2 lines: "open2 SEQ XID PCI USEC ACTION TEXT"; v1: "open SEQ XID PCI TEXT".
XidState LoadXidState(const std::string& path, const Config& cfg) {
  XidState s;
  auto t = ReadWholeFile(path);
  if (!t) return s;
  std::istringstream in(*t);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("boot ", 0) == 0) {
      s.boot = line.substr(5);
    } else if (line.rfind("seq ", 0) == 0) {
      s.seq = std::strtoull(line.c_str() + 4, nullptr, 10);
      s.have_seq = true;
    } else if (line.rfind("open2 ", 0) == 0 || line.rfind("open ", 0) == 0) {
      bool v2 = line[4] == '2';
      std::istringstream f(line.substr(v2 ? 6 : 5));
      Open o;
      std::string usec, action;
      f >> o.seq >> o.xid >> o.pci;
      if (v2) {
        f >> usec >> action;
        o.have_usec = usec != "-";
        o.usec = std::strtoull(usec.c_str(), nullptr, 10);
        if (!ParseXidAction(action, &o.action)) o.action = XidAction::kDrain;
      } else {
        o.action = XidActionFor(cfg, o.xid);
      }
      std::getline(f >> std::ws, o.text);
      s.open.push_back(o);
    }
  }
  return s;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "0000:2a:00" -> "GPU1 0000:2a:00.0" from the driver's
// /proc/driver/nvidia/gpus/<bus id>/information ("Device Minor: 1", the N of
// /dev/nvidiaN, which Slurm's GRES indices use); "PCI 0000:2a:00" when the
// driver's proc tree does not say.
std::string GpuName(const FsRoot& fs, const std::string& pci) {
  const std::string dir = "/proc/driver/nvidia/gpus";
  auto ents = fs.ListDir(dir);
  if (ents) {
    for (const auto& e : *ents) {
      if (Lower(e).rfind(Lower(pci), 0) != 0) continue;
      auto info = fs.ReadFile(dir + "/" + e + "/information");
      if (!info) break;
      size_t m = info->find("Device Minor:");
      if (m == std::string::npos) break;
      return "GPU" + std::to_string(std::atoi(info->c_str() + m + 13)) + " " + Lower(e);
    }
  }
  return "PCI " + pci;
}

int Rank(XidAction a) {
  switch (a) {
    case XidAction::kDrainReset: return 4;
    case XidAction::kDrain: return 3;
    case XidAction::kWarn: return 2;
    case XidAction::kUser: return 1;
    case XidAction::kIgnore: return 0;
  }
  return 3;
}

std::string Hours(uint32_t ms) {
  char b[32];
  if (ms % 3600000 == 0) std::snprintf(b, sizeof b, "%uh", ms / 3600000);
  else std::snprintf(b, sizeof b, "%um", ms / 60000);
  return b;
}

}  // namespace

namespace {

// The state file: "boot ID", "seq N", then one "open2 SEQ XID PCI USEC|- ACTION TEXT" per open event.
std::string XidStateText(const XidState& st, uint64_t seq) {
  std::string out = "boot " + st.boot + "\nseq " + std::to_string(seq) + "\n";
  for (const auto& o : st.open)
    out += "open2 " + std::to_string(o.seq) + " " + std::to_string(o.xid) + " " + o.pci + " " +
           (o.have_usec ? std::to_string(o.usec) : std::string("-")) + " " + XidActionName(o.action) + " " + o.text + "\n";
  return out;
}

// Close what the window has passed (never drain_reset: only a reboot or
// the admin clears that); how many closed.
int CloseExpired(XidState* st, bool have_now, uint64_t now_usec, uint64_t window_usec) {
  if (!have_now || window_usec == 0) return 0;
  auto gone = [&](const Open& o) {
    return o.action != XidAction::kDrainReset && o.have_usec && now_usec > o.usec && now_usec - o.usec > window_usec;
  };
  int expired = static_cast<int>(std::count_if(st->open.begin(), st->open.end(), gone));
  st->open.erase(std::remove_if(st->open.begin(), st->open.end(), gone), st->open.end());
  return expired;
}

// One GPU's result from its open events, worst action first:
// "Xid 79 (GPU has fallen off the bus; NVIDIA: RESTART_BM) x2: drain".
CheckResult GpuXidResult(const CheckEnv& env, const std::string& pci, std::vector<const Open*> list,
                         const std::string& state_path) {
  const Config& cfg = env.cfg;
  std::stable_sort(list.begin(), list.end(), [](const Open* a, const Open* b) { return Rank(a->action) > Rank(b->action); });
  XidAction worst = list.front()->action;
  CheckResult g;
  g.check = "gpu.xid";
  g.device = GpuName(env.fs, pci);
  g.threshold = "no Xid with action drain or drain_reset (xid_actions, catalogue)";
  std::map<int, int> count;
  for (const Open* o : list) ++count[o->xid];
  std::string msg, val;
  std::map<int, bool> said;
  for (const Open* o : list) {
    if (said[o->xid]) continue;
    said[o->xid] = true;
    const XidClass* c = FindXidClass(o->xid);
    msg += (msg.empty() ? "" : "; ") + std::string("Xid ") + std::to_string(o->xid) + " (" +
           (c ? std::string(c->what) + ", NVIDIA: " + c->bucket : std::string("not in the catalogue")) + ")" +
           (count[o->xid] > 1 ? " x" + std::to_string(count[o->xid]) : "") + ": " + XidActionName(o->action);
    val += (val.empty() ? "" : ", ") + std::string("Xid ") + std::to_string(o->xid) + " x" + std::to_string(count[o->xid]);
  }
  g.value = val;
  switch (worst) {
    case XidAction::kDrainReset:
      g.verdict = Verdict::kFail;
      msg += " (clear: reset the GPU or reboot, then remove " + state_path + ")";
      break;
    case XidAction::kDrain:
      g.verdict = Verdict::kFail;
      msg += cfg.xid_window_ms != 0
                 ? " (clears " + Hours(cfg.xid_window_ms) + " after the event, or remove " + state_path + ")"
                 : " (clear: remove " + state_path + ")";
      break;
    case XidAction::kWarn:
      g.verdict = Verdict::kWarn;
      break;
    case XidAction::kUser:
      g.verdict = Verdict::kWarn;
      g.owner = FaultOwner::kUser;
      msg += " (the job's own fault: no drain)";
      break;
    case XidAction::kIgnore:
      break;
  }
  g.message = msg;
  return g;
}

}  // namespace

std::vector<CheckResult> CheckXid(const CheckEnv& env) {
  using checks_internal::Skip;
  CheckResult r = checks_internal::Make("gpu.xid", "node");
  auto skip = [&](const std::string& why) { return std::vector<CheckResult>{Skip(r, why)}; };
  if (env.job.node.empty()) return skip("no node name to keep Xid state under");
  std::string kmsg = env.fs.HostPath("/dev/kmsg");
  ProbeStep("gpu.xid", "node", "read " + kmsg);
  auto text = ReadKmsg(kmsg);
  if (!text) return skip("no kernel log: " + text.status().message());
  auto boot = env.fs.ReadFile("/proc/sys/kernel/random/boot_id");
  std::string boot_id = boot ? *boot : "unknown";
  // Now, on the kernel log's clock (seconds since boot).
  auto up = env.fs.ReadFile("/proc/uptime");
  bool have_now = up.ok();
  uint64_t now_usec = have_now ? static_cast<uint64_t>(std::strtod(up->c_str(), nullptr) * 1e6) : 0;

  const Config& cfg = env.cfg;
  std::string state_path = state::NodeFile(cfg, env.job.node, state::kXid);
  XidState st = LoadXidState(state_path, cfg);
  bool baseline = st.boot != boot_id || !st.have_seq;
  if (baseline) st = XidState{boot_id, false, 0, {}};
  uint64_t last = st.seq;
  auto events = ParseKmsgXids(*text, baseline ? UINT64_MAX : st.seq, &last);
  int ignored = 0;
  for (const auto& e : events) {
    XidAction a = XidActionFor(cfg, e.xid);
    if (a == XidAction::kIgnore) { ++ignored; continue; }
    Open o;
    o.seq = e.seq;
    o.xid = e.xid;
    o.pci = e.pci;
    o.have_usec = true;
    o.usec = e.usec;
    o.action = a;
    o.text = e.text;
    std::replace(o.text.begin(), o.text.end(), '\n', ' ');
    st.open.push_back(o);
  }
  int expired = CloseExpired(&st, have_now, now_usec, static_cast<uint64_t>(cfg.xid_window_ms) * 1000);
  Status w = MakeDirs(state::NodesDir(cfg), 0755);
  if (w.ok()) w = WriteFileAtomic(state_path, XidStateText(st, last), 0644);

  std::vector<CheckResult> results;
  if (!w.ok()) {
    r.verdict = Verdict::kFail;
    r.message = "cannot keep Xid state: " + w.message();
    results.push_back(r);
  }
  if (st.open.empty()) {
    r.value = "0 Xid";
    r.threshold = "no Xid with action drain or drain_reset (xid_actions, catalogue)";
    std::string extra;
    if (ignored) extra += ", " + std::to_string(ignored) + " ignored";
    if (expired) extra += ", " + std::to_string(expired) + " past xid_window " + Hours(cfg.xid_window_ms);
    r.message = baseline ? "first check this boot: kernel log baseline at seq " + std::to_string(last)
                         : "no open Xid" + (extra.empty() ? std::string() : " (" + extra.substr(2) + ")");
    if (w.ok()) results.push_back(r);
    return results;
  }

  // One result per GPU, in the order their first event came.
  std::map<std::string, std::vector<const Open*>> by_gpu;
  std::vector<std::string> order;
  for (const auto& o : st.open) {
    if (!by_gpu.count(o.pci)) order.push_back(o.pci);
    by_gpu[o.pci].push_back(&o);
  }
  for (const auto& pci : order) results.push_back(GpuXidResult(env, pci, by_gpu[pci], state_path));
  return results;
}

}  // namespace preflight
