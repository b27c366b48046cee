// Check results, and the per-job/per-node report built from them: one JSON
// file per job and node under state_dir, one Prometheus textfile per node.
#pragma once

#include <string>
#include <vector>

#include "preflight/clock.h"
#include "preflight/config.h"
#include "preflight/drain_reason.h"
#include "preflight/fault.h"
#include "preflight/status.h"

namespace preflight {

// skip means "could not run here" (no driver, no HCA on a CPU node): it is
// never reported as pass.
enum class Verdict { kPass, kWarn, kSkip, kFail };
const char* VerdictName(Verdict v);

struct CheckResult {
  std::string check;      // e.g. "scratch", "gpu.ecc", "ib.port_state"
  std::string device;     // e.g. "GPU1 0000:1b:00.0", "mlx5_0 port 1", "/scratch"
  std::string value;      // the measured figure, as text with unit
  std::string threshold;  // the bound it was held against, e.g. ">= 1G"
  Verdict verdict = Verdict::kPass;
  std::string message;    // one line a person can act on
  double seconds = 0;     // time the check took
  FaultOwner owner = FaultOwner::kNode;  // whose problem (fault.h): a user-owned finding never drains
};

// "1.5G" style (binary units), for values and thresholds in results.
std::string HumanBytes(double bytes);

// "<check> <device>: <message>" -- the text that goes to sinfo -R and job output.
std::string Describe(const CheckResult& r);

struct Report {
  std::string tool;       // "prolog", "epilog", "health"
  std::string node;
  std::string job_id;     // empty for health checks
  std::string level;      // "quick", "full", "off"
  double started_unix = 0;
  double seconds = 0;
  std::vector<CheckResult> checks;
  std::vector<std::pair<std::string, std::string>> notes;  // extra key/values
  Verdict Overall() const;  // worst verdict, skip counting as pass
};

std::string ReportJson(const Report& r);
// node_exporter textfile format; labels escaped per the exposition format.
std::string ReportPrometheus(const Report& r);

// The drain reason for a failed report (drain_reason.h grammar): the first
// failed check with its device, message and figure; the others in `more`.
// At most `max` characters.
std::string DrainReasonFor(const Report& r, size_t max = kReasonMax);
// The drain reason for a site config the node's prolog or epilog cannot
// load: "preflight[config] config: FILE:LINE: key 'K': CAUSE" (the config
// owner's fault, named where `sinfo -R` shows it), at most `max` characters.
std::string ConfigDrainReason(const std::string& config_error, size_t max = kReasonMax);

// The warn findings (severity.h) as one line for the node's Comment,
// prefixed "preflight warn: ", each tagged with its owner; "" when none.
inline constexpr const char* kWarnPrefix = "preflight warn: ";
std::string WarnComment(const Report& r, size_t max = 200);

// A Prometheus label value escaped for the text format (\\, \", \n), and
// a sample value ("%.6g"): shared by every .prom preflight writes.
std::string PromLabel(const std::string& v);
std::string PromNumber(double v);

// JSON to <state_dir>/jobs/<job>/<node>.<tool>.json (or
// <state_dir>/nodes/<node>.<tool>.json with no job), Prometheus to
// <textfile_dir>/preflight_<node>_<tool>.prom, both written atomically.
// Returns the JSON path written.
Expected<std::string> WriteReport(const Config& cfg, const Report& r);


}  // namespace preflight
