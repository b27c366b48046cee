#include "preflight/report.h"

#include <sys/time.h>
#include <time.h>

#include <cstdio>

#include "preflight/fileutil.h"
#include "preflight/json.h"
#include "preflight/state_paths.h"

namespace preflight {

std::string HumanBytes(double b) {
  static const char* kUnits[] = {"B", "K", "M", "G", "T", "P"};
  int u = 0;
  while (b >= 1024 && u < 5) { b /= 1024; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.1f%s", b, kUnits[u]);
  return buf;
}


const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kWarn: return "warn";
    case Verdict::kSkip: return "skipped";
    case Verdict::kFail: return "fail";
  }
  return "fail";
}

std::string Describe(const CheckResult& r) {
  std::string s = r.check;
  if (!r.device.empty()) s += " " + r.device;
  if (!r.message.empty()) s += ": " + r.message;
  return s;
}

Verdict Report::Overall() const {
  Verdict worst = Verdict::kPass;
  for (const auto& c : checks) {
    if (c.verdict == Verdict::kFail) return Verdict::kFail;
    if (c.verdict == Verdict::kWarn) worst = Verdict::kWarn;
  }
  return worst;
}

std::string ReportJson(const Report& r) {
  JsonWriter w;
  w.BeginObject();
  w.Field("tool", r.tool).Field("node", r.node);
  if (!r.job_id.empty()) w.Field("job_id", r.job_id);
  w.Field("level", r.level).Field("started_unix", r.started_unix).Field("seconds", r.seconds);
  w.Field("verdict", VerdictName(r.Overall()));
  w.Key("checks").BeginArray();
  for (const auto& c : r.checks) {
    w.BeginObject()
        .Field("check", c.check)
        .Field("device", c.device)
        .Field("value", c.value)
        .Field("threshold", c.threshold)
        .Field("verdict", VerdictName(c.verdict))
        .Field("owner", FaultOwnerName(c.owner))
        .Field("message", c.message)
        .Field("seconds", c.seconds)
        .EndObject();
  }
  w.EndArray();
  if (!r.notes.empty()) {
    w.Key("notes").BeginObject();
    for (const auto& n : r.notes) w.Field(n.first, n.second);
    w.EndObject();
  }
  w.EndObject();
  return w.str() + "\n";
}

std::string PromLabel(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

std::string PromNumber(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

namespace {
std::string Num(double v) { return PromNumber(v); }
}  // namespace

std::string ReportPrometheus(const Report& r) {
  std::string base = "node=\"" + PromLabel(r.node) + "\",tool=\"" + PromLabel(r.tool) + "\"";
  std::string o;
  o += "# HELP preflight_check_ok 1 if the check passed or was skipped, 0 if it failed.\n";
  o += "# TYPE preflight_check_ok gauge\n";
  for (const auto& c : r.checks) {
    o += "preflight_check_ok{" + base + ",check=\"" + PromLabel(c.check) + "\",device=\"" +
         PromLabel(c.device) + "\",verdict=\"" + VerdictName(c.verdict) + "\",value=\"" +
         PromLabel(c.value) + "\",threshold=\"" + PromLabel(c.threshold) + "\",owner=\"" + FaultOwnerName(c.owner) + "\"} " +
         (c.verdict == Verdict::kFail ? "0" : "1") + "\n";
  }
  // warn: reported, never drained (severity.h); one series per node and tool.
  int warns = 0, user = 0;
  for (const auto& c : r.checks) {
    warns += c.verdict == Verdict::kWarn;
    user += c.verdict == Verdict::kWarn && c.owner == FaultOwner::kUser;
  }
  o += "# HELP preflight_warnings Findings of the last run that warn (no drain), by owner.\n";
  o += "# TYPE preflight_warnings gauge\n";
  o += "preflight_warnings{" + base + ",owner=\"node\"} " + std::to_string(warns - user) + "\n";
  o += "preflight_warnings{" + base + ",owner=\"user\"} " + std::to_string(user) + "\n";
  o += "# HELP preflight_check_seconds Time each check took.\n";
  o += "# TYPE preflight_check_seconds gauge\n";
  for (const auto& c : r.checks) {
    o += "preflight_check_seconds{" + base + ",check=\"" + PromLabel(c.check) + "\",device=\"" +
         PromLabel(c.device) + "\"} " + Num(c.seconds) + "\n";
  }
  o += "# HELP preflight_run_ok 1 if the last run on this node passed.\n# TYPE preflight_run_ok gauge\n";
  o += "preflight_run_ok{" + base + "} " + (r.Overall() == Verdict::kFail ? "0" : "1") + "\n";
  o += "# HELP preflight_run_timestamp_seconds When the last run started.\n# TYPE preflight_run_timestamp_seconds gauge\n";
  char ts[32];
  std::snprintf(ts, sizeof ts, "%.0f", r.started_unix);  // whole seconds: "%.6g" rounds today's epoch by up to 5000 s
  o += "preflight_run_timestamp_seconds{" + base + "} " + ts + "\n";
  o += "# HELP preflight_run_duration_seconds How long the last run took.\n# TYPE preflight_run_duration_seconds gauge\n";
  o += "preflight_run_duration_seconds{" + base + "} " + Num(r.seconds) + "\n";
  return o;
}

std::string DrainReasonFor(const Report& r, size_t max) {
  DrainReason d;
  std::string more;
  for (const auto& c : r.checks) {
    if (c.verdict != Verdict::kFail) continue;
    if (d.check.empty()) {
      d.owner = c.owner == FaultOwner::kNone ? FaultOwner::kNode : c.owner;
      d.check = c.check;
      d.device = c.device;
      d.finding = c.message;
      d.figure = c.value;
      d.threshold = c.threshold;
    } else {
      d.more += (d.more.empty() ? "" : "; ") + Describe(c);
    }
  }
  if (d.check.empty()) {
    d.check = r.tool;
    d.finding = "failed";
  }
  return FormatReason(d, max);
}

std::string ConfigDrainReason(const std::string& config_error, size_t max) {
  DrainReason d;
  d.owner = FaultOwner::kConfig;
  d.check = reason_check::kConfig;
  d.finding = config_error;
  return FormatReason(d, max);
}

std::string WarnComment(const Report& r, size_t max) {
  std::string s;
  for (const auto& c : r.checks) {
    if (c.verdict != Verdict::kWarn) continue;
    s += (s.empty() ? kWarnPrefix : "; ") + std::string("[") + FaultOwnerName(c.owner) + "] " + Describe(c);
  }
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

Expected<std::string> WriteReport(const Config& cfg, const Report& r) {
  std::string dir = r.job_id.empty() ? state::NodesDir(cfg) : state::JobDir(cfg, r.job_id);
  Status s = MakeDirs(dir, 0755);
  if (!s.ok()) return s;
  std::string path = dir + "/" + r.node + "." + r.tool + ".json";
  s = WriteFileAtomic(path, ReportJson(r));
  if (!s.ok()) return s;
  if (!cfg.textfile_dir.empty()) {
    s = MakeDirs(cfg.textfile_dir, 0755);
    if (s.ok()) s = WriteFileAtomic(cfg.textfile_dir + "/preflight_" + r.node + "_" + r.tool + ".prom", ReportPrometheus(r));
    if (!s.ok()) return s.Context("metrics");
  }
  return path;
}

}  // namespace preflight
