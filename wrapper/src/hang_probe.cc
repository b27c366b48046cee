#include "preflight/hang_probe.h"

#include <sys/stat.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <thread>

#include "preflight/clock.h"
#include "preflight/node_addresses.h"
#include "preflight/slurmctl.h"
#include "preflight/strings.h"

namespace preflight {

HangProbe::HangProbe(HangProbeOptions o) : o_(std::move(o)) {}

HangProbe::~HangProbe() {
  if (t_.joinable()) t_.join();
}

double HangProbe::Bound() const {
  return o_.polls * (o_.interval_s + 3 * o_.query.connect_s + o_.query.reply_s) + 1;
}

bool HangProbe::Start() {
  if (running_) return false;
  if (t_.joinable()) t_.join();
  if (!o_.enabled) {
    std::lock_guard<std::mutex> l(mu_);
    done_ = HangFinding{HangCause::kNoReport, {}, "NCCL RAS not asked (run_ras = no)"};
    return false;
  }
  if (!o_.nccl_version.empty() && RasVersionLess(o_.nccl_version, o_.min_nccl)) {
    std::lock_guard<std::mutex> l(mu_);
    done_ = HangFinding{HangCause::kNoReport, {},
                        "NCCL RAS not asked: the job's NCCL " + o_.nccl_version + " is older than run_ras_min_nccl " +
                            o_.min_nccl + " (asking RAS crashed jobs of older releases)"};
    return false;
  }
  running_ = true;
  t_ = std::thread([this] { Run(); });
  return true;
}

std::optional<HangFinding> HangProbe::Take() {
  std::lock_guard<std::mutex> l(mu_);
  auto f = std::move(done_);
  done_.reset();
  return f;
}

void HangProbe::Run() {
  std::vector<RasSnapshot> polls;
  std::string trouble, version = o_.nccl_version;
  // The gate before the first query: the version the user's processes
  // mapped (read here, on the probe's thread, only once a stall fired).
  if (version.empty()) version = NcclVersionOfUser(FsRoot("/"), o_.query.uid);
  if (!version.empty() && RasVersionLess(version, o_.min_nccl)) {
    std::lock_guard<std::mutex> l(mu_);
    done_ = HangFinding{HangCause::kNoReport, {},
                        "NCCL RAS not asked: the job's NCCL " + version + " is older than run_ras_min_nccl " +
                            o_.min_nccl + " (asking RAS crashed jobs of older releases)"};
    running_ = false;
    return;
  }
  for (unsigned i = 0; i < o_.polls; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(o_.interval_s * 1000)));
    auto r = QueryRas(o_.query);
    if (!r) {  // not there, not this user's, or an answer that is no report: asking again gives the same
      trouble = r.status().message();
      break;
    }
    auto s = ParseRasStatus(r->text);
    if (!s) {
      trouble = r->address + ": " + s.status().message();
      break;
    }
    if (version.empty()) version = s->nccl_version;
    polls.push_back(std::move(*s));
    if (RasNamesAtOnce(polls.back())) break;
    if (!version.empty() && RasVersionLess(version, o_.min_nccl)) {
      trouble = "the report says NCCL " + version + ", older than run_ras_min_nccl " + o_.min_nccl + ": not asked again";
      break;
    }
  }
  HangFinding f = AttributeHang(polls, o_.node_of);
  if (polls.empty()) f.line = "NCCL RAS not reached: " + trouble + "; no node named";
  else if (!trouble.empty()) f.line += " (" + trouble + ")";
  {
    std::lock_guard<std::mutex> l(mu_);
    done_ = std::move(f);
  }
  running_ = false;
}

HostNodeMap BuildHostNodeMap(const Config& cfg, const std::vector<std::string>& nodes) {
  HostNodeMap m;
  std::map<std::string, int> uses;
  auto add = [&](const std::string& host, const std::string& node) {
    if (host.empty()) return;
    auto it = m.find(host);
    if (it != m.end() && it->second != node) ++uses[host];  // two nodes, one address: named by neither
    m[host] = node;
  };
  for (const auto& n : nodes) {
    add(n, n);
    auto a = NodeAddress(cfg, n);
    if (a) add(*a, n);
  }
  if (!nodes.empty()) {
    auto recs = LoadNodes(cfg, Join(nodes, ","));
    if (recs)
      for (const auto& r : *recs)
        if (r.addr != r.name) add(r.addr, r.name);
  }
  for (const auto& [host, n] : uses) m.erase(host);
  return m;
}

std::string NcclVersionOfUser(const FsRoot& fs, uid_t uid) {
  auto pids = fs.ListDir("/proc");
  if (!pids) return "";
  size_t looked = 0;
  for (const auto& pid : *pids) {
    if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0]))) continue;
    if (++looked > 4096) break;
    struct stat st;
    if (::stat(fs.HostPath("/proc/" + pid).c_str(), &st) != 0 || st.st_uid != uid) continue;
    auto maps = fs.ReadFile("/proc/" + pid + "/maps");
    if (!maps) continue;
    size_t k = maps->find("libnccl.so.2.");
    if (k == std::string::npos) continue;
    size_t b = k + 11, e = b;
    while (e < maps->size() && (std::isdigit(static_cast<unsigned char>((*maps)[e])) || (*maps)[e] == '.')) ++e;
    std::string v = maps->substr(b, e - b);
    while (!v.empty() && v.back() == '.') v.pop_back();
    if (ValidRasVersion(v) && v.find('.') != std::string::npos) return v;
  }
  return "";
}

}  // namespace preflight
