#include "preflight/fleet.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "preflight/fileutil.h"
#include "preflight/fsroot.h"
#include "preflight/nvml.h"
#include "preflight/state_paths.h"
#include "preflight/strings.h"

namespace preflight {

using nlohmann::json;

std::map<std::string, std::string> NodeVersions::Fields() const {
  return {{"driver", driver}, {"vbios", vbios}, {"inforom", inforom}, {"hca_fw", hca_fw}, {"kernel", kernel}};
}

std::string VersionsJson(const NodeVersions& v) {
  json j = {{"node", v.node},       {"at", v.at},         {"driver", v.driver}, {"gpu_model", v.gpu_model},
            {"vbios", v.vbios},     {"inforom", v.inforom},   {"hca_model", v.hca_model}, {"hca_fw", v.hca_fw}, {"kernel", v.kernel}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Expected<NodeVersions> ParseVersionsJson(const std::string& line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("not a versions record: " + line.substr(0, 120));
  NodeVersions v;
  try {
    v.node = j.at("node").get<std::string>();
    v.at = j.value("at", 0.0);
    v.driver = j.value("driver", "");
    v.gpu_model = j.value("gpu_model", "");
    v.vbios = j.value("vbios", "");
    v.inforom = j.value("inforom", "");
    v.hca_model = j.value("hca_model", "");
    v.hca_fw = j.value("hca_fw", "");
    v.kernel = j.value("kernel", "");
  } catch (const json::exception& e) {
    return Status::InvalidArgument("versions record: " + std::string(e.what()));
  }
  if (v.node.empty()) return Status::InvalidArgument("versions record without a node");
  return v;
}

std::string VersionsPath(const Config& cfg, const std::string& node) {
  return state::NodeFile(cfg, node, state::kVersions);
}

namespace {

std::string Join(const std::set<std::string>& s) {
  std::string o;
  for (const auto& x : s) o += (o.empty() ? "" : ",") + x;
  return o;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string ShowValue(const std::string& v) { return v.empty() ? "(none)" : v; }

}  // namespace

FleetComparison CompareVersions(const std::vector<NodeVersions>& nodes) {
  FleetComparison c;
  std::map<std::string, std::vector<const NodeVersions*>> classes;
  for (const auto& n : nodes) classes[n.HardwareClass()].push_back(&n);
  for (const auto& kv : classes) {
    const auto& group = kv.second;
    if (group.size() < 2) continue;
    for (const auto& field : kFleetFields) {
      std::map<std::string, std::vector<std::string>> by_value;
      for (const NodeVersions* n : group) by_value[n->Fields().at(field)].push_back(n->node);
      if (by_value.size() < 2) continue;
      const std::string* ref = nullptr;
      size_t most = 0;
      for (const auto& bv : by_value)
        if (bv.second.size() > most) { most = bv.second.size(); ref = &bv.first; }
      if (most * 2 <= group.size()) {
        c.consistent = false;
        std::string groups;
        for (const auto& bv : by_value) {
          std::string ns;
          for (const auto& n : bv.second) ns += (ns.empty() ? "" : ",") + n;
          groups += (groups.empty() ? "" : "; ") + ShowValue(bv.first) + " on " + ns;
        }
        c.text += field + " differs with no majority: " + groups + "\n";
        c.no_majority.push_back(field);
        continue;
      }
      for (const auto& bv : by_value) {
        if (&bv.first == ref) continue;
        for (const auto& n : bv.second) {
          c.consistent = false;
          c.odd.push_back({n, field, bv.first, *ref, most});
          c.text += n + ": " + field + " " + ShowValue(bv.first) + ", the other " + std::to_string(most) +
                    " nodes have " + ShowValue(*ref) + "\n";
        }
      }
    }
  }
  if (c.consistent) c.text = std::to_string(nodes.size()) + " nodes agree on driver, VBIOS, InfoROM, HCA firmware and kernel\n";
  return c;
}

namespace {

// The GPUs' driver, model, VBIOS and InfoROM through NVML, as the gpu checks
// load it; "" or why a node records none ("; no GPU versions (...)").
std::string ReadGpuVersions(const Config& cfg, NodeVersions* v) {
  ProbeStep("fleet.versions", cfg.nvml_library, "dlopen");
  auto api_or = LoadNvmlFor(cfg);
  if (!api_or) return "; no GPU versions (" + api_or.status().message() + ")";
  const NvmlApi& api = **api_or;
  ProbeStep("fleet.versions", cfg.nvml_library, "nvmlInit_v2");
  if (api.Init() != NVML_SUCCESS) return "; no GPU versions (nvmlInit_v2 failed)";
  char buf[96] = "";
  if (api.SystemGetDriverVersion != nullptr && api.SystemGetDriverVersion(buf, sizeof buf) == NVML_SUCCESS) v->driver = buf;
  unsigned n = 0;
  std::set<std::string> names, vbios, inforom;
  if (api.DeviceGetCount(&n) == NVML_SUCCESS) {
    for (unsigned i = 0; i < n; ++i) {
      nvmlDevice_t d = nullptr;
      if (api.DeviceGetHandleByIndex(i, &d) != NVML_SUCCESS) continue;  // gpu.present reports it
      ProbeStep("fleet.versions", "GPU" + std::to_string(i), "nvmlDeviceGetVbiosVersion");
      if (api.DeviceGetName != nullptr && api.DeviceGetName(d, buf, sizeof buf) == NVML_SUCCESS) names.insert(buf);
      if (api.DeviceGetVbiosVersion != nullptr && api.DeviceGetVbiosVersion(d, buf, sizeof buf) == NVML_SUCCESS)
        vbios.insert(buf);
      if (api.DeviceGetInforomImageVersion != nullptr && api.DeviceGetInforomImageVersion(d, buf, sizeof buf) == NVML_SUCCESS)
        inforom.insert(buf);
    }
  }
  v->gpu_model = Join(names);
  v->vbios = Join(vbios);
  v->inforom = Join(inforom);
  api.Shutdown();
  return "";
}

// The HCAs' firmware and board from sysfs, and the kernel release.
void ReadHostVersions(const FsRoot& fs, NodeVersions* v) {
  ProbeStep("fleet.versions", "", "read /sys/class/infiniband/*/fw_ver");
  std::set<std::string> fw, board;
  if (auto hcas = fs.ListDir("/sys/class/infiniband")) {
    for (const auto& h : *hcas) {
      if (auto f = fs.ReadFile("/sys/class/infiniband/" + h + "/fw_ver")) fw.insert(Trim(*f));
      if (auto b = fs.ReadFile("/sys/class/infiniband/" + h + "/board_id")) board.insert(Trim(*b));
    }
  }
  v->hca_fw = Join(fw);
  v->hca_model = Join(board);
  if (auto k = fs.ReadFile("/proc/sys/kernel/osrelease")) v->kernel = Trim(*k);
}

// `v` and the other fresh records of its hardware in state_dir.
std::vector<NodeVersions> FreshPeers(const Config& cfg, const NodeVersions& v) {
  std::vector<NodeVersions> peers = {v};
  double oldest = v.at - cfg.fleet_max_age_ms / 1000.0;
  if (auto ents = FsRoot("/").ListDir(state::NodesDir(cfg))) {
    for (const auto& e : *ents) {
      const std::string suffix = state::kVersions;
      if (e.size() <= suffix.size() || e.compare(e.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
      if (e == v.node + suffix) continue;
      auto t = ReadWholeFile(state::NodesDir(cfg) + "/" + e);
      if (!t) continue;
      auto p = ParseVersionsJson(Trim(*t));
      if (!p || p->HardwareClass() != v.HardwareClass() || (cfg.fleet_max_age_ms != 0 && p->at < oldest)) continue;
      peers.push_back(*p);
    }
  }
  return peers;
}

// The verdict on `node` from the comparison of `peers`: fail for a field the
// site lists in fleet_fail_fields, warn for the others, warn when nobody
// can be singled out.
void JudgeNode(const Config& cfg, const std::string& node, const std::vector<NodeVersions>& peers,
               const std::string& nvml_note, CheckResult* r) {
  FleetComparison c = CompareVersions(peers);
  std::string fails, warns;
  for (const auto& d : c.odd) {
    if (d.node != node) continue;
    std::string what = d.field + " " + ShowValue(d.value) + " differs from the other " + std::to_string(d.others) +
                       " nodes' " + ShowValue(d.majority);
    bool fail = std::find(cfg.fleet_fail_fields.begin(), cfg.fleet_fail_fields.end(), d.field) != cfg.fleet_fail_fields.end();
    (fail ? fails : warns) += ((fail ? fails : warns).empty() ? "" : "; ") + what;
  }
  if (!fails.empty()) {
    r->verdict = Verdict::kFail;
    r->message = fails + (warns.empty() ? "" : "; " + warns);
  } else if (!warns.empty()) {
    r->verdict = Verdict::kWarn;
    r->message = warns;
  } else if (!c.no_majority.empty()) {
    // Nobody to single out (e.g. two nodes that differ): say so, drain nobody.
    r->verdict = Verdict::kWarn;
    r->message = c.text.substr(0, c.text.find('\n'));
  } else {
    r->message = "same versions as the majority of " + std::to_string(peers.size()) + " nodes of this hardware" + nvml_note;
  }
}

}  // namespace

std::vector<CheckResult> CheckFleetVersions(const CheckEnv& env) {
  const Config& cfg = env.cfg;
  CheckResult r;
  r.check = "fleet.versions";
  r.device = "node";
  if (env.job.node.empty()) {
    r.verdict = Verdict::kSkip;
    r.message = "skipped: no node name to record versions under";
    return {r};
  }
  NodeVersions v;
  v.node = env.job.node;
  v.at = static_cast<double>(std::time(nullptr));
  const std::string nvml_note = ReadGpuVersions(cfg, &v);
  ReadHostVersions(env.fs, &v);

  std::string path = VersionsPath(cfg, v.node);
  Status w = MakeDirs(state::NodesDir(cfg), 0755);
  if (w.ok()) w = WriteFileAtomic(path, VersionsJson(v) + "\n", 0644);
  r.value = "driver " + ShowValue(v.driver) + ", VBIOS " + ShowValue(v.vbios) + ", InfoROM " + ShowValue(v.inforom) +
            ", HCA fw " + ShowValue(v.hca_fw) + ", kernel " + ShowValue(v.kernel);
  if (!w.ok()) {
    r.verdict = Verdict::kFail;
    r.message = "cannot record versions: " + w.message();
    return {r};
  }
  // Prolog and epilog only record (a shared state_dir may hold thousands of
  // records; reading them all would slow every job start); the health
  // check's idle sweep compares.
  if (env.phase != Phase::kHealth) {
    r.message = "recorded in " + path + " (compared by the health check, preflight fleet and --nccl-check)" + nvml_note;
    return {r};
  }
  std::vector<NodeVersions> peers = FreshPeers(cfg, v);
  r.threshold = "same as the majority of " + std::to_string(peers.size()) + " nodes of this hardware (fail: " +
                (cfg.fleet_fail_fields.empty() ? std::string("none") : Join(cfg.fleet_fail_fields, ",")) + ")";
  if (peers.size() < 2) {
    r.message = "recorded in " + path + "; no other node's record of this hardware to compare with" + nvml_note;
    return {r};
  }
  JudgeNode(cfg, v.node, peers, nvml_note, &r);
  return {r};
}

}  // namespace preflight
