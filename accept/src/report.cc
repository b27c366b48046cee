#include "preflight/accept_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "preflight/config.h"
#include "preflight/json.h"

#include "preflight/straggler.h"

namespace preflight::accept {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kWarn: return "warn";
    case Verdict::kFail: return "fail";
    case Verdict::kSkip: return "skip";
  }
  return "skip";
}

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

std::string Fmt(const char* f, double a) {
  char b[64];
  std::snprintf(b, sizeof b, f, a);
  return b;
}

std::string CountWords(double v, const std::string& unit) {
  char b[64];
  if (v >= 1e6) std::snprintf(b, sizeof b, "%.2fM %s", v / 1e6, unit.c_str());
  else if (v >= 1e3) std::snprintf(b, sizeof b, "%.1fk %s", v / 1e3, unit.c_str());
  else std::snprintf(b, sizeof b, "%.0f %s", v, unit.c_str());
  return b;
}

std::string ValueWords(double v, const std::string& unit) {
  if (unit == "B/s") return RateWords(v);
  if (unit == "ratio") return Fmt("%.2f", v);
  return CountWords(v, unit);
}

NodeRow& RowOf(Report* r, const std::string& node) {
  for (auto& row : r->node_rows)
    if (row.node == node) return row;
  r->node_rows.push_back({node, Verdict::kPass, {}});
  return r->node_rows.back();
}

void Blame(Report* r, const std::string& node, Verdict v, const std::string& why) {
  NodeRow& row = RowOf(r, node);
  row.verdict = Worse(row.verdict, v);
  row.reasons.push_back(why);
}

Stage* StageOf(Report* r, const std::string& name) {
  for (auto& s : r->stages)
    if (s.name == name) return &s;
  return nullptr;
}

void StageVerdict(Report* r, const std::string& name, Verdict v) {
  if (Stage* s = StageOf(r, name)) s->verdict = Worse(s->verdict, v);
}

std::string SizeWords(uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

void JudgeCollective(Report* r) {
  const Thresholds& t = r->thresholds;
  const Curve* two = nullptr;
  for (const auto& c : r->curves) {
    if (c.nodes == 2 && c.error.empty() && c.Busbw() > 0) two = &c;
  }
  // Data first: any wrong element fails, whatever the bandwidth.
  for (const auto& c : r->curves) {
    std::string label = c.nodes == 1 ? "intra-node" : std::to_string(c.nodes) + " nodes";
    Figure f;
    f.stage = "collective";
    f.name = "busbw " + label;
    f.node = c.nodes == 1 && !c.node_names.empty() ? c.node_names[0] : "";
    f.unit = "B/s";
    f.value = c.Busbw();
    f.reproduce = c.reproduce;
    f.threshold = c.profile_threshold;
    f.threshold_source = c.profile_threshold > 0 ? c.threshold_source
                                                 : "none: no profile applies" +
                                                       (c.threshold_source.empty() ? std::string() : " (" + c.threshold_source + ")");
    uint64_t wrong = 0, wrong_at = 0;
    for (const auto& s : c.sizes)
      if (s.wrong) { wrong += s.wrong; if (!wrong_at) wrong_at = s.bytes; }
    if (!c.error.empty()) {
      f.verdict = Verdict::kFail;
      f.reason = label + ": " + c.error;
    } else if (wrong) {
      f.verdict = Verdict::kFail;
      f.reason = label + ": " + std::to_string(wrong) + " wrong elements (first at " + SizeWords(wrong_at) +
                 "): data corrupted, whatever the bandwidth";
    } else if (c.profile_threshold > 0 && f.value < c.profile_threshold) {
      f.verdict = Verdict::kFail;
      f.reason = label + ": busbw " + RateWords(f.value) + " < " + RateWords(c.profile_threshold) + " (" +
                 c.threshold_source + ")";
    } else {
      f.verdict = Verdict::kPass;
      f.reason = label + ": busbw " + RateWords(f.value) + ", data verified";
    }
    if (f.verdict == Verdict::kFail && c.nodes == 1 && !f.node.empty()) Blame(r, f.node, Verdict::kFail, f.reason);
    r->figures.push_back(f);
    StageVerdict(r, "collective", f.verdict);
  }
  // Scaling against the 2-node figure.
  r->scaling_text.clear();
  bool any_multi = false;
  for (const auto& c : r->curves) any_multi = any_multi || c.nodes >= 2;
  if (!any_multi) {
    r->scaling_text = "one node: the curve is intra-node only, no scaling measured";
  } else if (!two) {
    r->scaling_text = "no 2-node figure: scaling not judged";
  } else {
    double ref = two->Busbw();
    const Curve* prev = two;
    std::string broke;
    for (const auto& c : r->curves) {
      if (c.nodes <= 2 || !c.error.empty() || c.Busbw() <= 0) continue;
      double eff = c.Busbw() / ref;
      Figure f;
      f.stage = "collective";
      f.name = "scaling " + std::to_string(c.nodes) + " nodes";
      f.unit = "ratio";
      f.value = eff;
      f.reference = ref;
      f.threshold = t.scaling_fail;
      f.threshold_source = "busbw at " + std::to_string(c.nodes) + " nodes / 2-node figure " + RateWords(ref) +
                           ", fail < " + Fmt("%.2f", t.scaling_fail) + ", warn < " + Fmt("%.2f", t.scaling_warn);
      f.reproduce = c.reproduce;
      f.verdict = eff < t.scaling_fail ? Verdict::kFail : eff < t.scaling_warn ? Verdict::kWarn : Verdict::kPass;
      f.reason = std::to_string(c.nodes) + " nodes: busbw " + RateWords(c.Busbw()) + " = " + Fmt("%.0f", eff * 100) +
                 "% of the 2-node figure";
      if (f.verdict != Verdict::kPass && broke.empty()) {
        broke = "the curve broke between " + std::to_string(prev->nodes) + " and " + std::to_string(c.nodes) +
                " nodes: busbw " + RateWords(prev->Busbw()) + " -> " + RateWords(c.Busbw()) + " (" +
                Fmt("%.0f", eff * 100) + "% of the 2-node figure " + RateWords(ref) + ")";
        f.reason = broke;
      }
      r->figures.push_back(f);
      StageVerdict(r, "collective", f.verdict);
      prev = &c;
    }
    r->scaling_text = broke.empty() ? "busbw held from 2 to " + std::to_string(prev->nodes) + " nodes (each at least " +
                                          Fmt("%.2f", t.scaling_warn) + " x the 2-node figure " + RateWords(ref) + ")"
                                    : broke;
  }
  // Ring pairs: the straggler rule.
  r->stragglers.clear();
  r->straggler_text.clear();
  if (!r->pairs.empty()) {
    std::vector<collective::PairFigure> pf;
    for (const auto& p : r->pairs) pf.push_back({p.a, p.b, p.busbw, p.worse});
    std::map<std::string, double> intra, intra_low;
    for (const auto& c : r->curves)
      if (c.nodes == 1 && c.error.empty() && !c.node_names.empty()) {
        intra[c.node_names[0]] = c.Busbw();
        if (c.worse_busbw > 0) intra_low[c.node_names[0]] = c.worse_busbw;
      }
    double reference = 0;  // a profile's inter-node figure, when one applied
    for (const auto& c : r->curves)
      if (c.nodes == 2 && c.profile_threshold > 0) reference = c.profile_threshold;
    auto v = collective::FindStragglers(r->nodes, pf, intra, t.straggler_fraction, reference, intra_low);
    r->straggler_text = v.text;
    for (const auto& s : v.stragglers) {
      r->stragglers.push_back(s.node);
      Figure f;
      f.stage = "collective";
      f.name = "straggler";
      f.node = s.node;
      f.unit = "B/s";
      f.value = s.figure;
      f.reference = s.median;
      f.threshold = s.fraction * s.median;
      f.threshold_source = Fmt("%.2f", s.fraction) + " x median of the " + s.basis + " " + RateWords(s.median);
      f.verdict = Verdict::kFail;
      f.reason = "straggler " + s.node + ": " + s.basis + " busbw " + RateWords(s.figure) + " < " + Fmt("%.2f", s.fraction) +
                 " x median " + RateWords(s.median);
      f.reproduce = "srun --mpi=pmix -N" + std::to_string(r->nodes.size()) + " --ntasks-per-node=1 preflight-nccl --scope pairs --records";
      Blame(r, s.node, Verdict::kFail, f.reason);
      r->figures.push_back(f);
      StageVerdict(r, "collective", Verdict::kFail);
    }
    if (v.fabric_wide || !v.slow_link.empty()) StageVerdict(r, "collective", Verdict::kWarn);
  }
}

struct StorageMetric {
  const char* name;
  double StorageFigures::*field;
  const char* unit;
  double Thresholds::*threshold;  // nullptr: none
  // Compared node against node on one path: only the throughput figures. The
  // rates of 4 KiB operations from files the page cache may hold are, at the
  // quick level's sizes, milliseconds of work: one scheduling hiccup makes a
  // node look 10x slower (seen on the emulated cluster).
  bool node_compare;
};
const StorageMetric kStorageMetrics[] = {
    {"seq_write", &StorageFigures::seq_write, "B/s", &Thresholds::seq_write, true},
    {"seq_read", &StorageFigures::seq_read, "B/s", &Thresholds::seq_read, true},
    {"rand_read_4k", &StorageFigures::rand_read_iops, "IOPS", &Thresholds::rand_read_iops, false},
    {"ckpt_write", &StorageFigures::ckpt_write, "B/s", &Thresholds::ckpt_write, true},
    {"create", &StorageFigures::create_per_s, "files/s", &Thresholds::create_per_s, false},
    {"read_files", &StorageFigures::read_files_per_s, "files/s", nullptr, false},
    {"stat", &StorageFigures::stat_per_s, "ops/s", nullptr, false},
};

// The median over the nodes' figures for `path` when they all ran at once.
double NodeMedian(const Report& r, const std::string& path, double StorageFigures::*field) {
  std::vector<double> v;
  for (const auto& s : r.storage)
    if (s.path == path && s.scope == "all nodes" && !s.node.empty() && s.error.empty()) v.push_back(s.*field);
  if (v.size() < 3) return 0;  // two nodes cannot tell which one is slow
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void JudgeStorage(Report* r) {
  const Thresholds& t = r->thresholds;
  // The best one-node figure over the paths, per metric: a tier far below the
  // others is named even where no threshold is set.
  std::map<std::string, double> best;
  for (const auto& s : r->storage)
    if (s.scope == "one node" && s.error.empty())
      for (const auto& m : kStorageMetrics) best[m.name] = std::max(best[m.name], s.*(m.field));
  int one_node_paths = 0;
  for (const auto& s : r->storage) one_node_paths += s.scope == "one node" && s.error.empty();
  for (const auto& s : r->storage) {
    std::string where = s.path + " (" + s.scope + (s.node.empty() ? "" : ", " + s.node) + ")";
    if (!s.error.empty()) {
      Figure f;
      f.stage = "storage";
      f.name = "storage";
      f.node = s.node;
      f.path = s.path;
      f.unit = "B/s";
      f.verdict = Verdict::kFail;
      f.reason = where + ": " + s.error;
      r->figures.push_back(f);
      StageVerdict(r, "storage", Verdict::kFail);
      continue;
    }
    for (const auto& m : kStorageMetrics) {
      Figure f;
      f.stage = "storage";
      f.name = m.name;
      f.node = s.node;
      f.path = s.path;
      f.unit = m.unit;
      f.value = s.*(m.field);
      for (const auto& cmd : s.reproduce)
        if (cmd.find(std::string("--name=") + m.name) != std::string::npos) f.reproduce = cmd;
      if (f.reproduce.empty() && !s.reproduce.empty()) f.reproduce = s.reproduce.back();
      double th = m.threshold ? t.*(m.threshold) : 0;
      // Per-node figures are judged per node; the all-nodes row sums the nodes.
      double per_node_value = f.value;
      if (s.scope == "all nodes" && s.node.empty() && !r->nodes.empty()) per_node_value = f.value / r->nodes.size();
      f.verdict = Verdict::kPass;
      if (th > 0) {
        f.threshold = th;
        f.threshold_source = std::string("--threshold ") + m.name + " (per node)";
        if (per_node_value < th) {
          f.verdict = Verdict::kFail;
          f.reason = where + ": " + m.name + " " + ValueWords(per_node_value, m.unit) + " per node < " + ValueWords(th, m.unit);
        }
      } else {
        f.threshold_source = "none set";
      }
      if (f.verdict == Verdict::kPass && s.scope == "one node" && one_node_paths > 1 && best[m.name] > 0 &&
          f.value < t.storage_fraction * best[m.name]) {
        f.verdict = Verdict::kWarn;
        f.reference = best[m.name];
        f.reason = where + ": " + m.name + " " + ValueWords(f.value, m.unit) + " < " + Fmt("%.2f", t.storage_fraction) +
                   " x the best path's " + ValueWords(best[m.name], m.unit);
      }
      if (f.reason.empty()) f.reason = where + ": " + m.name + " " + ValueWords(f.value, m.unit);
      // A node is blamed only for being slow against the other nodes on the
      // same path at the same time; a path slow for everyone is the path's.
      if (m.node_compare && s.scope == "all nodes" && !s.node.empty()) {
        double med = NodeMedian(*r, s.path, m.field);
        if (med > 0 && f.value < t.storage_fraction * med) {
          std::string why = where + ": " + m.name + " " + ValueWords(f.value, m.unit) + " < " +
                            Fmt("%.2f", t.storage_fraction) + " x the nodes' median " + ValueWords(med, m.unit);
          Blame(r, s.node, Verdict::kWarn, why);
          if (f.verdict == Verdict::kPass) { f.verdict = Verdict::kWarn; f.reason = why; f.reference = med; }
        }
      }
      StageVerdict(r, "storage", f.verdict);
      r->figures.push_back(f);
    }
  }
}

void JudgeNodes(Report* r) {
  for (const auto& [node, why] : r->node_checks) {
    Figure f;
    f.stage = "nodes";
    f.name = "node checks";
    f.node = node;
    f.unit = "ratio";
    f.verdict = why.empty() ? Verdict::kPass : Verdict::kFail;
    f.reason = why.empty() ? "node checks passed" : why;
    f.reproduce = "srun -N1 -w " + node + " preflight-prolog --level " + r->level + " --set set_drain_reason=no";
    if (!why.empty()) Blame(r, node, Verdict::kFail, "node checks: " + why);
    r->figures.push_back(f);
    StageVerdict(r, "nodes", f.verdict);
  }
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
      {"straggler_fraction", "ratio", "a node whose ring pairs fall below this fraction of the median is named (default 0.5)"},
      {"seq_write", "rate", "sequential 1 MiB write per node, e.g. 1G (default none)"},
      {"seq_read", "rate", "sequential 1 MiB read per node (default none)"},
      {"rand_read_iops", "count", "random 4 KiB reads per second per node (default none)"},
      {"ckpt_write", "rate", "checkpoint write per node, all nodes at once (default none)"},
      {"create_per_s", "count", "small files created per second per node (default none)"},
      {"storage_fraction", "ratio", "a path's one-node figure below this fraction of the best path's warns (default 0.5)"},
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
      {"storage_fraction", &Thresholds::storage_fraction}};
  t->*(fields.at(key)) = v;
  return Status::Ok();
}

Status CheckThresholds(const Thresholds& t) {
  if (t.scaling_fail > t.scaling_warn)
    return Status::InvalidArgument("scaling_fail " + Fmt("%.2f", t.scaling_fail) + " is above scaling_warn " +
                                   Fmt("%.2f", t.scaling_warn));
  return Status::Ok();
}

void Judge(Report* r) {
  r->figures.clear();
  r->node_rows.clear();
  r->reasons.clear();
  for (auto& s : r->stages) s.verdict = Verdict::kSkip;
  for (const auto& n : r->nodes) RowOf(r, n);
  JudgeNodes(r);
  JudgeCollective(r);
  JudgeStorage(r);
  for (const auto& [node, what] : r->lost_nodes) Blame(r, node, Verdict::kFail, "lost mid-run: " + what);
  for (auto& s : r->stages)
    if (s.verdict == Verdict::kSkip && !s.notes.empty()) s.verdict = Verdict::kWarn;
  r->verdict = Verdict::kSkip;
  for (const auto& s : r->stages) r->verdict = Worse(r->verdict, s.verdict);
  for (const auto& row : r->node_rows) r->verdict = Worse(r->verdict, row.verdict);
  for (Verdict v : {Verdict::kFail, Verdict::kWarn})
    for (const auto& f : r->figures)
      if (f.verdict == v) r->reasons.push_back(std::string(VerdictName(v)) + ": " + f.reason);
  for (const auto& [node, what] : r->lost_nodes) r->reasons.push_back("fail: " + node + " lost mid-run: " + what);
}

namespace {
void WriteStrings(JsonWriter& w, const std::string& key, const std::vector<std::string>& v) {
  w.Key(key).BeginArray();
  for (const auto& s : v) w.String(s);
  w.EndArray();
}
}  // namespace

std::string ReportJson(const Report& r) {
  JsonWriter w;
  w.BeginObject();
  w.Field("schema", "preflight-accept-report/1");
  w.Field("tool", "preflight accept");
  w.Field("version", r.tool_version);
  w.Field("created", r.created);
  w.Field("job_id", r.job_id);
  w.Field("level", r.level);
  w.Field("verdict", VerdictName(r.verdict));
  WriteStrings(w, "reasons", r.reasons);
  WriteStrings(w, "notes", r.notes);
  WriteStrings(w, "nodes", r.nodes);
  WriteStrings(w, "storage_paths", r.storage_paths);
  w.Key("thresholds").BeginObject();
  const Thresholds& t = r.thresholds;
  w.Field("scaling_warn", t.scaling_warn).Field("scaling_fail", t.scaling_fail);
  w.Field("straggler_fraction", t.straggler_fraction).Field("seq_write_Bps", t.seq_write);
  w.Field("seq_read_Bps", t.seq_read).Field("rand_read_iops", t.rand_read_iops);
  w.Field("ckpt_write_Bps", t.ckpt_write).Field("create_per_s", t.create_per_s);
  w.Field("storage_fraction", t.storage_fraction);
  w.EndObject();
  w.Key("stages").BeginArray();
  for (const auto& s : r.stages) {
    w.BeginObject().Field("name", s.name).Field("verdict", VerdictName(s.verdict)).Field("seconds", s.seconds);
    w.Field("budget_seconds", s.budget_seconds);
    WriteStrings(w, "notes", s.notes);
    w.EndObject();
  }
  w.EndArray();
  w.Key("collective").BeginObject();
  w.Field("scaling", r.scaling_text);
  w.Key("curves").BeginArray();
  for (const auto& c : r.curves) {
    w.BeginObject().Field("nodes", c.nodes);
    WriteStrings(w, "node_names", c.node_names);
    w.Field("ranks", c.ranks).Field("backend", c.backend).Field("profile", c.profile);
    w.Field("profile_threshold_Bps", c.profile_threshold).Field("threshold_source", c.threshold_source);
    w.Field("busbw_Bps", c.Busbw()).Field("worse_busbw_Bps", c.worse_busbw).Field("error", c.error)
        .Field("reproduce", c.reproduce);
    w.Key("sizes").BeginArray();
    for (const auto& s : c.sizes)
      w.BeginObject().Field("bytes", static_cast<int64_t>(s.bytes)).Field("busbw_Bps", s.busbw)
          .Field("wrong", static_cast<int64_t>(s.wrong)).EndObject();
    w.EndArray().EndObject();
  }
  w.EndArray();
  w.Key("pairs").BeginArray();
  for (const auto& p : r.pairs)
    w.BeginObject().Field("a", p.a).Field("b", p.b).Field("busbw_Bps", p.busbw).Field("worse_busbw_Bps", p.worse)
        .Field("pass", p.pass)
        .Field("message", p.message).EndObject();
  w.EndArray();
  WriteStrings(w, "stragglers", r.stragglers);
  w.Field("straggler_text", r.straggler_text);
  w.EndObject();
  w.Key("storage").BeginArray();
  for (const auto& s : r.storage) {
    w.BeginObject().Field("path", s.path).Field("scope", s.scope).Field("node", s.node);
    w.Field("seq_write_Bps", s.seq_write).Field("seq_read_Bps", s.seq_read).Field("rand_read_iops", s.rand_read_iops);
    w.Field("ckpt_write_Bps", s.ckpt_write).Field("create_per_s", s.create_per_s);
    w.Field("read_files_per_s", s.read_files_per_s).Field("stat_per_s", s.stat_per_s).Field("error", s.error);
    WriteStrings(w, "reproduce", s.reproduce);
    w.EndObject();
  }
  w.EndArray();
  w.Key("node_rows").BeginArray();
  for (const auto& n : r.node_rows) {
    w.BeginObject().Field("node", n.node).Field("verdict", VerdictName(n.verdict));
    WriteStrings(w, "reasons", n.reasons);
    w.EndObject();
  }
  w.EndArray();
  w.Key("figures").BeginArray();
  for (const auto& f : r.figures) {
    w.BeginObject().Field("stage", f.stage).Field("name", f.name).Field("node", f.node).Field("path", f.path);
    w.Field("unit", f.unit).Field("value", f.value).Field("threshold", f.threshold);
    w.Field("threshold_source", f.threshold_source).Field("reference", f.reference);
    w.Field("verdict", VerdictName(f.verdict)).Field("reason", f.reason).Field("reproduce", f.reproduce);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.str() + "\n";
}

std::string SummaryText(const Report& r) {
  std::string o = "preflight accept: " + std::string(VerdictName(r.verdict)) + " (" + std::to_string(r.nodes.size()) +
                  " nodes, level " + r.level + ")\n";
  for (const auto& s : r.stages) {
    o += "  " + s.name + ": " + VerdictName(s.verdict) + " in " + Fmt("%.1f", s.seconds) + " s (budget " +
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
