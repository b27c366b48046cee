// The acceptance report's model (accept_report.h): verdict names and
// order, rates in words, the thresholds a site may set, and the summary
// text. Judge() is in report_judge.cc, ReportJson() in report_json.cc,
// ReportHtml() in html.cc.
#include "preflight/accept_report.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "preflight/config.h"
#include "report_fmt.h"

namespace preflight::accept {

const char* ReportWord(Verdict v) { return v == Verdict::kSkip ? "skip" : VerdictName(v); }

namespace {

int Rank(Verdict v) {
  switch (v) {
    case Verdict::kSkip: return 0;
    case Verdict::kPass: return 1;
    case Verdict::kWarn: return 2;
    case Verdict::kFail: return 3;
  }
  return 0;
}

}  // namespace

Verdict Worse(Verdict a, Verdict b) { return Rank(a) >= Rank(b) ? a : b; }

std::string RateWords(double v) {
  char b[64];
  if (v >= 1e9) std::snprintf(b, sizeof b, "%.2f GB/s", v / 1e9);
  else if (v >= 1e6) std::snprintf(b, sizeof b, "%.2f MB/s", v / 1e6);
  else if (v >= 1e3) std::snprintf(b, sizeof b, "%.2f kB/s", v / 1e3);
  else std::snprintf(b, sizeof b, "%.0f B/s", v);
  return b;
}

double Curve::Busbw() const {
  if (sizes.empty()) return 0;
  const SizePoint* big = &sizes[0];
  for (const auto& s : sizes)
    if (s.bytes >= big->bytes) big = &s;
  return big->busbw;
}

const std::vector<ThresholdKey>& ThresholdKeys() {
  static const std::vector<ThresholdKey> keys = {
      {"scaling_warn", "ratio", "busbw at k nodes / the 2-node figure below this warns (default 0.90)"},
      {"scaling_fail", "ratio", "below this fails: the network is unfit (default 0.70)"},
      {"straggler_fraction", "ratio", "a node whose ring pairs fall below this fraction of the median is named (default: the site's nccl_straggler_fraction, 0.5)"},
      {"seq_write", "rate", "sequential 1 MiB write per node, e.g. 1G (default none)"},
      {"seq_read", "rate", "sequential 1 MiB read per node (default none)"},
      {"rand_read_iops", "count", "random 4 KiB reads per second per node (default none)"},
      {"ckpt_write", "rate", "checkpoint write per node, all nodes at once (default none)"},
      {"create_per_s", "count", "small files created per second per node (default none)"},
      {"storage_fraction", "ratio", "a path's one-node figure below this fraction of the best path's warns (default 0.5)"},
      {"train_fraction", "ratio", "a node whose median step rate in the training run is below this fraction of the allocation's median fails (default 0.8)"},
      {"train_dip", "ratio", "a step-rate sample below this fraction of the node's own median (the first sample aside) warns: not steady (default 0.5)"},
      {"train_gpu_util", "ratio", "a node whose GPUs' mean utilisation in the training run is below this warns: starved GPUs (default 0.5)"},
  };
  return keys;
}

Status SetThreshold(Thresholds* t, const std::string& kv) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos) return Status::InvalidArgument("'" + kv + "': expected KEY=VALUE");
  std::string key = kv.substr(0, eq), val = kv.substr(eq + 1);
  const ThresholdKey* k = nullptr;
  for (const auto& tk : ThresholdKeys())
    if (key == tk.name) k = &tk;
  if (!k) return Status::InvalidArgument("unknown threshold '" + key + "' (see preflight accept --help)");
  double v = 0;
  if (std::string(k->unit) == "rate") {
    auto r = ParseRate(val);
    if (!r) return Status::InvalidArgument(key + ": " + r.status().message());
    v = *r;
  } else {
    char* end = nullptr;
    v = std::strtod(val.c_str(), &end);
    if (val.empty() || *end || !std::isfinite(v) || v < 0)
      return Status::InvalidArgument(key + ": '" + val + "' is not a non-negative number");
    if (std::string(k->unit) == "ratio" && (v <= 0 || v >= 1))
      return Status::InvalidArgument(key + ": " + val + " is outside (0, 1)");
  }
  std::map<std::string, double Thresholds::*> fields = {
      {"scaling_warn", &Thresholds::scaling_warn},     {"scaling_fail", &Thresholds::scaling_fail},
      {"straggler_fraction", &Thresholds::straggler_fraction}, {"seq_write", &Thresholds::seq_write},
      {"seq_read", &Thresholds::seq_read},             {"rand_read_iops", &Thresholds::rand_read_iops},
      {"ckpt_write", &Thresholds::ckpt_write},         {"create_per_s", &Thresholds::create_per_s},
      {"storage_fraction", &Thresholds::storage_fraction}, {"train_fraction", &Thresholds::train_fraction},
      {"train_dip", &Thresholds::train_dip}, {"train_gpu_util", &Thresholds::train_gpu_util}};
  t->*(fields.at(key)) = v;
  return Status::Ok();
}

Status CheckThresholds(const Thresholds& t) {
  if (t.scaling_fail > t.scaling_warn)
    return Status::InvalidArgument("scaling_fail " + Fmt("%.2f", t.scaling_fail) + " is above scaling_warn " +
                                   Fmt("%.2f", t.scaling_warn));
  return Status::Ok();
}

std::string SummaryText(const Report& r) {
  std::string o = "preflight accept: " + std::string(ReportWord(r.verdict)) + " (" + std::to_string(r.nodes.size()) +
                  " nodes, level " + r.level + ")\n";
  for (const auto& s : r.stages) {
    o += "  " + s.name + ": " + ReportWord(s.verdict) + " in " + Fmt("%.1f", s.seconds) + " s (budget " +
         Fmt("%.0f", s.budget_seconds) + " s)\n";
    for (const auto& n : s.notes) o += "    " + n + "\n";
  }
  if (!r.scaling_text.empty()) o += "  collective: " + r.scaling_text + "\n";
  for (const auto& n : r.notes) o += "  note: " + n + "\n";
  size_t shown = 0;
  for (const auto& why : r.reasons) {
    if (++shown > 12) { o += "  ... " + std::to_string(r.reasons.size() - 12) + " more in report.json\n"; break; }
    o += "  " + why + "\n";
  }
  return o;
}

}  // namespace preflight::accept
