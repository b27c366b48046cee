// The fleet, reasons and slurm subcommands of `preflight` (fleet_cmd.h).
#include "fleet_cmd.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>

#include "preflight/drain_reason.h"
#include "preflight/fault.h"
#include "preflight/fileutil.h"
#include "preflight/fleet.h"
#include "preflight/fsroot.h"
#include "preflight/hostlist.h"
#include "preflight/json.h"
#include "preflight/log.h"
#include "preflight/slurmctl.h"
#include "preflight/state_paths.h"
#include "slurm_records.h"

namespace preflight {

// preflight fleet [HOSTLIST|FILE]...: the nodes' version records
// (fleet.versions: <state_dir>/nodes/<node>.versions.json) side by side, and
// each node that differs from the majority of its hardware named. An
// argument with a '/' is a record file; any other a hostlist (n[1-4]) whose
// records are read from state_dir (shared, or gathered); none: every record
// there. Exit 1 when they differ, 2 on errors.
int FleetCmd(const std::vector<std::string>& args, const CommonCli& cli) {
  auto cfg = LoadCliConfig(cli, "");
  if (!cfg) {
    Log(LogLevel::kError, "fleet", "site config", cfg.status().message());
    return 2;
  }
  std::vector<std::string> files, missing;
  for (const auto& a : args) {
    if (a.find('/') != std::string::npos) { files.push_back(a); continue; }
    auto hosts = ExpandHostlist(a);
    if (!hosts) {
      Log(LogLevel::kError, "fleet", a, hosts.status().message());
      return 2;
    }
    for (const auto& h : *hosts) files.push_back(VersionsPath(*cfg, h));
  }
  if (args.empty()) {
    auto ents = FsRoot("/").ListDir(state::NodesDir(*cfg));
    if (ents)
      for (const auto& e : *ents)
        if (e.size() > 14 && e.compare(e.size() - 14, 14, state::kVersions) == 0) files.push_back(state::NodesDir(*cfg) + "/" + e);
    std::sort(files.begin(), files.end());
  }
  std::vector<NodeVersions> nodes;
  for (const auto& f : files) {
    auto t = ReadWholeFile(f);
    if (!t) { missing.push_back(f); continue; }
    std::string line = t->substr(0, t->find('\n'));
    auto v = ParseVersionsJson(line);
    if (!v) {
      Log(LogLevel::kError, "fleet", f, v.status().message());
      return 2;
    }
    nodes.push_back(*v);
  }
  if (nodes.empty()) {
    Log(LogLevel::kError, "fleet", "no version records", "under " + state::NodesDir(*cfg) + " (the node checks write them)");
    return 2;
  }
  std::printf("%-12s %-18s %-18s %-18s %-14s %-22s %s\n", "NODE", "DRIVER", "VBIOS", "INFOROM", "HCA_FW", "KERNEL", "GPU");
  for (const auto& v : nodes)
    std::printf("%-12s %-18s %-18s %-18s %-14s %-22s %s\n", v.node.c_str(), v.driver.c_str(), v.vbios.c_str(),
                v.inforom.c_str(), v.hca_fw.c_str(), v.kernel.c_str(), v.gpu_model.c_str());
  for (const auto& m : missing) std::printf("no record: %s\n", m.c_str());
  FleetComparison c = CompareVersions(nodes);
  std::fputs(c.text.c_str(), stdout);
  return c.consistent ? 0 : 1;
}

// preflight reasons [HOSTLIST]: the drains preflight set (any version's
// reason, drain_reason.h) among HOSTLIST (default: every node), one JSON
// object, parsed into their parts. Other drains are left out. Exit 2 on a
// bad hostlist or config, 1 when slurmctld cannot be asked.
int ReasonsCmd(const std::vector<std::string>& args, const CommonCli& cli) {
  if (args.size() > 1) {
    Log(LogLevel::kError, "reasons", "bad command line", "expected at most one HOSTLIST");
    return 2;
  }
  if (!args.empty()) {
    auto hosts = ExpandHostlist(args[0]);
    if (!hosts) {
      Log(LogLevel::kError, "reasons", args[0], hosts.status().message());
      return 2;
    }
  }
  auto cfg = LoadCliConfig(cli, "");
  if (!cfg) {
    Log(LogLevel::kError, "reasons", "site config", cfg.status().message());
    return 2;
  }
  auto nodes = LoadNodes(*cfg, args.empty() ? std::string(admin::kAllNodes) : args[0]);
  if (!nodes) {
    Log(LogLevel::kError, "reasons", "slurmctld's node records", nodes.status().message());
    return 1;
  }
  JsonWriter w(false);  // one line, like `preflight slurm`
  w.BeginObject().Key("drains").BeginArray();
  for (const auto& n : *nodes) {
    auto r = n.drained() ? ParseReason(n.reason) : std::nullopt;
    if (!r) continue;
    w.BeginObject().Field("node", n.name).Field("state", n.state).Field("owner", FaultOwnerName(r->owner));
    w.Field("check", r->check).Field("device", r->device).Field("finding", r->finding);
    w.Field("figure", r->figure).Field("threshold", r->threshold).Field("more", r->more);
    w.Field("legacy", r->legacy).Field("reason", n.reason);
    if (n.reason_time > 0) w.Field("reason_time", static_cast<int64_t>(n.reason_time));
    else w.Key("reason_time").Null();
    w.EndObject();
  }
  w.EndArray().EndObject();
  std::printf("%s\n", w.str().c_str());
  return 0;
}

// preflight slurm job|steps|nodes ARG: slurmctld's records as JSON (slurmapi/).
int SlurmRecordsCmd(const std::vector<std::string>& args, const CommonCli&) { return admin::SlurmCmd(args); }

}  // namespace preflight
