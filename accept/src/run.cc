#include "preflight/accept_run.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "preflight/accept_storage.h"
#include "preflight/collective_records.h"
#include "preflight/fileutil.h"
#include "preflight/straggler.h"

namespace preflight::accept {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string o;
  for (const auto& s : v) o += (o.empty() ? "" : sep) + s;
  return o;
}

std::string F(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

std::string Quote(const std::string& a) {
  if (!a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+") ==
                        std::string::npos)
    return a;
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string Cmdline(const std::vector<std::string>& argv) {
  std::string o;
  for (const auto& a : argv) o += (o.empty() ? "" : " ") + Quote(a);
  return o;
}

// srun --label output: "K: line" (K padded) -> task K's lines.
std::map<int, std::string> SplitLabelled(const std::string& out) {
  std::map<int, std::string> by;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    std::string line = out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? out.size() : nl + 1;
    size_t i = line.find_first_not_of(' ');
    size_t colon = line.find(": ");
    if (i == std::string::npos || colon == std::string::npos || colon <= i) continue;
    std::string id = line.substr(i, colon - i);
    if (id.find_first_not_of("0123456789") != std::string::npos) continue;
    by[std::stoi(id)] += line.substr(colon + 2) + "\n";
  }
  return by;
}

std::string LastLine(const std::string& out) {
  size_t end = out.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  size_t start = out.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  std::string l = out.substr(start, end - start + 1);
  return l.size() > 240 ? l.substr(0, 240) + "..." : l;
}

class Runner_ {
 public:
  Runner_(const RunOptions& o, const Runner& run, const Progress& progress, Report* r)
      : o_(o), run_(run), progress_(progress), r_(r) {}

  void Go() {
    for (const auto& n : o_.nodes) live_.push_back(n);
    r_->stages = {{"nodes", Verdict::kSkip, 0, o_.budget_nodes, {}},
                  {"collective", Verdict::kSkip, 0, o_.budget_collective, {}},
                  {"storage", Verdict::kSkip, 0, o_.budget_storage, {}}};
    Timed(0, [this] { Nodes(); });
    Timed(1, [this] { Collective(); });
    Timed(2, [this] { Storage(); });
  }

 private:
  template <class Fn>
  void Timed(size_t i, Fn fn) {
    stage_ = &r_->stages[i];
    deadline_ = Now() + stage_->budget_seconds;
    double t0 = Now();
    Say(stage_->name + ": start (budget " + F("%.0f", stage_->budget_seconds) + " s, " +
        std::to_string(live_.size()) + " nodes)");
    fn();
    stage_->seconds = Now() - t0;
    Say(stage_->name + ": done in " + F("%.1f", stage_->seconds) + " s");
  }

  void Say(const std::string& line) {
    if (progress_) progress_("preflight accept: " + line);
  }
  void Note(const std::string& line) {
    stage_->notes.push_back(line);
    Say(stage_->name + ": " + line);
  }

  // Time left in this stage's budget, in ms (0: spent).
  unsigned Left() const {
    double s = deadline_ - Now();
    return s <= 1 ? 0 : static_cast<unsigned>(s * 1000);
  }

  bool Budget(const std::string& what) {
    if (Left() > 0) return true;
    Note("budget of " + F("%.0f", stage_->budget_seconds) + " s spent: " + what + " not run");
    return false;
  }

  std::vector<std::string> Srun(const std::vector<std::string>& nodes, bool pmix, int per_node, bool label) {
    std::vector<std::string> a = {o_.srun, "--nodes=" + std::to_string(nodes.size()), "--nodelist=" + Join(nodes),
                                  "--ntasks-per-node=" + std::to_string(per_node),
                                  "--ntasks=" + std::to_string(per_node * static_cast<int>(nodes.size())),
                                  "--kill-on-bad-exit=0"};
    if (pmix) a.push_back("--mpi=pmix");
    if (label) a.push_back("--label");
    return a;
  }

  std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }

  // After a failed step: which of `nodes` does Slurm no longer reach? They
  // are named and dropped from the later steps.
  void FindLost(const std::vector<std::string>& nodes, const std::string& step) {
    ProcessResult p = run_({o_.sinfo, "--noheader", "--Node", "--nodes=" + Join(nodes), "--format=%N %T"}, 15000);
    if (p.exit_code != 0) return;
    size_t pos = 0;
    while (pos < p.output.size()) {
      size_t nl = p.output.find('\n', pos);
      std::string line = p.output.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      pos = nl == std::string::npos ? p.output.size() : nl + 1;
      size_t sp = line.find(' ');
      if (sp == std::string::npos) continue;
      std::string node = line.substr(0, sp), state = line.substr(sp + 1);
      std::transform(state.begin(), state.end(), state.begin(), ::tolower);
      bool lost = state.find("down") != std::string::npos || state.find("not_responding") != std::string::npos ||
                  state.find("fail") != std::string::npos || (!state.empty() && state.back() == '*');
      if (!lost || r_->lost_nodes.count(node)) continue;
      r_->lost_nodes[node] = "during " + step + " (Slurm: " + state + ")";
      live_.erase(std::remove(live_.begin(), live_.end(), node), live_.end());
      Note(node + " lost mid-run during " + step + " (Slurm: " + state + "): later steps run without it");
    }
  }

  void Nodes() {
    if (!Budget("the node checks")) return;
    // Each task runs the checks and then names its node and exit code; the
    // program path and arguments are sh's positional parameters, never
    // parsed by the shell.
    std::vector<std::string> a = Srun(live_, false, 1, true);
    a.insert(a.end(), {"/bin/sh", "-c", "\"$0\" \"$@\" 2>&1; echo \"#accept-node ${SLURMD_NODENAME:-?} $?\"", o_.prolog,
                       "--level", o_.level, "--set", "set_drain_reason=no"});
    a.insert(a.end(), o_.pass_args.begin(), o_.pass_args.end());
    if (!o_.node_state_dir.empty()) a.insert(a.end(), {"--set", "state_dir=" + o_.node_state_dir});
    Say("nodes: node checks (level " + o_.level + ") on " + std::to_string(live_.size()) + " nodes");
    ProcessResult p = run_(a, Left());
    std::set<std::string> seen;
    for (const auto& [task, text] : SplitLabelled(p.output)) {
      size_t m = text.rfind("#accept-node ");
      if (m == std::string::npos) continue;
      std::string tail = text.substr(m + 13);
      std::string node = tail.substr(0, tail.find(' '));
      int rc = std::atoi(tail.c_str() + node.size() + 1);
      std::string body = text.substr(0, m);
      seen.insert(node);
      r_->node_checks[node] = rc == 0 ? "" : "exit " + std::to_string(rc) + ": " + LastLine(body);
    }
    if (p.timed_out) Note("node checks did not finish within the budget");
    std::vector<std::string> missing;
    for (const auto& n : live_)
      if (!seen.count(n)) missing.push_back(n);
    if (!missing.empty()) {
      FindLost(missing, "the node checks");
      for (const auto& n : missing)
        if (!r_->lost_nodes.count(n))
          r_->node_checks[n] = "no result from the node checks (" + (p.timed_out ? std::string("timed out") : LastLine(p.output)) + ")";
    }
    if (!Budget("the fleet comparison")) return;
    std::vector<std::string> f = {o_.preflight};
    f.insert(f.end(), o_.pass_args.begin(), o_.pass_args.end());
    if (!o_.node_state_dir.empty()) f.insert(f.end(), {"--set", "state_dir=" + o_.node_state_dir});
    f.insert(f.end(), {"fleet", Join(live_)});
    ProcessResult fl = run_(f, std::min(Left(), 60000u));
    if (fl.exit_code == 0) {
      Say("nodes: fleet versions consistent");
    } else {
      std::string text = LastLine(fl.output);
      Note("fleet: " + (text.empty() ? "exit " + std::to_string(fl.exit_code) : text));
    }
  }

  std::vector<std::string> NcclArgs(std::vector<std::string> a) {
    a.push_back(o_.nccl);
    a.insert(a.end(), o_.pass_args.begin(), o_.pass_args.end());
    a.insert(a.end(), {"--level", o_.level});
    if (!o_.max_bytes.empty()) a.insert(a.end(), {"--max-bytes", o_.max_bytes});
    return a;
  }

  void Collective() {
    int per = o_.ranks_per_node > 0 ? o_.ranks_per_node : 1;
    // Intra-node on every node at once: one JSON document per task.
    if (Budget("the intra-node sweeps")) {
      std::vector<std::string> a = NcclArgs(Srun(live_, false, 1, true));
      a.insert(a.end(), {"--intra-node", "--json"});
      Say("collective: intra-node on " + std::to_string(live_.size()) + " nodes");
      double t0 = Now();
      ProcessResult p = run_(a, Left());
      std::set<std::string> got;
      auto tasks = SplitLabelled(p.output);
      for (const auto& [task, text] : tasks) {
        Curve c;
        Status s = ParseNcclJson(text, &c);
        if (!s.ok() || c.node_names.empty()) continue;
        c.nodes = 1;
        c.reproduce = Cmdline({o_.srun, "-N1", "-w", c.node_names[0], o_.nccl, "--intra-node", "--json", "--level", o_.level});
        got.insert(c.node_names[0]);
        r_->curves.push_back(c);
      }
      std::vector<std::string> missing;
      for (const auto& n : live_)
        if (!got.count(n)) missing.push_back(n);
      if (!missing.empty()) FindLost(missing, "the intra-node sweeps");
      for (const auto& n : missing)
        if (!r_->lost_nodes.count(n)) {
          Curve c;
          c.nodes = 1;
          c.node_names = {n};
          // One task per node, in the allocation's order: task i ran on live_[i].
          size_t i = std::find(live_.begin(), live_.end(), n) - live_.begin();
          std::string own = tasks.count(static_cast<int>(i)) ? LastLine(tasks[static_cast<int>(i)]) : "";
          c.error = p.timed_out ? "no result within the budget" : "no result: " + (own.empty() ? LastLine(p.output) : own);
          r_->curves.push_back(c);
        }
      // Measure twice before blaming: a node the straggler rule names by its
      // intra-node figure runs again, alone, and keeps its better sweep.
      std::map<std::string, double> intra;
      for (const auto& c : r_->curves)
        if (c.nodes == 1 && c.error.empty() && !c.node_names.empty()) intra[c.node_names[0]] = c.Busbw();
      auto v = collective::FindStragglers(live_, {}, intra, o_.thresholds.straggler_fraction, 0);
      for (const auto& s : v.stragglers) {
        if (s.basis != "intra-node" || !Budget("the second intra-node sweep of " + s.node)) continue;
        Say("collective: intra-node again on " + s.node + " (suspect)");
        std::vector<std::string> again = NcclArgs(Srun({s.node}, false, 1, true));
        again.insert(again.end(), {"--intra-node", "--json"});
        ProcessResult p2 = run_(again, Left());
        for (const auto& [task, text] : SplitLabelled(p2.output)) {
          Curve c2;
          if (!ParseNcclJson(text, &c2).ok() || c2.node_names.empty() || c2.node_names[0] != s.node) continue;
          for (auto& c : r_->curves) {
            if (c.nodes != 1 || c.node_names.empty() || c.node_names[0] != s.node || !c2.error.empty()) continue;
            // The better sweep is the node's figure, the worse one goes to
            // the median (straggler.h): a suspect that comes back fast must
            // not raise the bar for everyone else.
            double worse = std::min(c.Busbw(), c2.Busbw());
            if (c2.Busbw() > c.Busbw()) {
              c2.nodes = 1;
              c2.reproduce = c.reproduce;
              c = c2;
            }
            c.worse_busbw = worse;
          }
        }
      }
      Say("collective: intra-node done in " + F("%.1f", Now() - t0) + " s");
    }
    if (live_.size() < 2) {
      Note("one node: the curve is intra-node only (no inter-node figure, no scaling, no ring pairs)");
      return;
    }
    for (int k : NodeCounts(static_cast<int>(live_.size()))) {
      if (k > static_cast<int>(live_.size())) break;
      if (!Budget(std::to_string(k) + "-node sweep")) return;
      std::vector<std::string> nodes(live_.begin(), live_.begin() + k);
      std::vector<std::string> a = NcclArgs(Srun(nodes, true, per, false));
      a.push_back("--json");
      double t0 = Now();
      ProcessResult p = run_(a, Left());
      Curve c;
      Status s = ParseNcclJson(p.output, &c);
      c.nodes = k;
      c.node_names = nodes;
      c.reproduce = Cmdline(a);
      if (!s.ok()) {
        c.error = p.timed_out ? "no verdict within the stage budget" : "no result: " + LastLine(p.output);
        FindLost(nodes, std::to_string(k) + "-node sweep");
      }
      r_->curves.push_back(c);
      Say("collective: " + std::to_string(k) + " nodes: " +
          (c.error.empty() ? RateWords(c.Busbw()) : c.error) + " (" + F("%.1f", Now() - t0) + " s)");
    }
    if (live_.size() >= 2 && Budget("the ring pairs")) Pairs(per);
  }

  std::vector<PairFigure> RunPairs(const std::vector<std::string>& nodes, int per, std::string* error) {
    std::vector<std::string> a = NcclArgs(Srun(nodes, true, per, false));
    a.insert(a.end(), {"--scope", "pairs", "--records"});
    ProcessResult p = run_(a, Left());
    auto parsed = collective::ParseOutput(p.output);
    std::vector<PairFigure> out;
    for (const auto& rec : parsed.records)
      if (rec.kind == "pair" && rec.nodes.size() == 2) {
        // preflight-nccl may have sampled the pair twice itself (samples_Bps).
        out.push_back({rec.nodes[0], rec.nodes[1], rec.busbw, rec.WorseSample(), rec.pass, rec.message});
      }
    if (out.empty()) *error = p.timed_out ? "no pair verdict within the stage budget" : "no pair records: " + LastLine(p.output);
    return out;
  }

  void Pairs(int per) {
    Say("collective: ring pairs on " + std::to_string(live_.size()) + " nodes");
    double t0 = Now();
    std::string err;
    r_->pairs = RunPairs(live_, per, &err);
    if (!err.empty()) {
      Note("ring pairs: " + err);
      FindLost(live_, "the ring pairs");
      return;
    }
    // Measure twice before blaming: the pairs of the nodes the rule names run
    // again and each pair keeps its better figure.
    std::vector<collective::PairFigure> pf;
    for (const auto& p : r_->pairs) pf.push_back({p.a, p.b, p.busbw, p.worse});
    auto v = collective::FindStragglers(live_, pf, {}, o_.thresholds.straggler_fraction, 0);
    auto again = collective::NodesToRemeasure(live_, v);
    if (!again.empty() && Budget("the second pair sample")) {
      Say("collective: measuring the ring pairs again (" + std::to_string(again.size()) + " suspect)");
      std::string err2;
      auto second = RunPairs(live_, per, &err2);
      for (auto& p : r_->pairs)
        for (const auto& q : second) {
          if (p.a != q.a || p.b != q.b) continue;
          // The better sample decides the pair, the worse goes to the median
          // (a figure measured once is its own worst sample).
          double worse = std::min(p.worse > 0 ? p.worse : p.busbw, q.worse > 0 ? q.worse : q.busbw);
          if (q.busbw > p.busbw) { p.busbw = q.busbw; p.pass = q.pass; p.message = q.message; }
          p.worse = worse;
        }
    }
    Say("collective: ring pairs done in " + F("%.1f", Now() - t0) + " s");
  }

  std::vector<std::string> WorkerArgs(std::vector<std::string> a) {
    a.push_back(o_.preflight);
    a.insert(a.end(), o_.pass_args.begin(), o_.pass_args.end());
    a.insert(a.end(), {"accept", "--storage-worker", "--level", o_.level, "--tag", o_.tag});
    if (!o_.storage_bytes.empty()) a.insert(a.end(), {"--storage-bytes", o_.storage_bytes});
    if (o_.storage_files > 0) a.insert(a.end(), {"--storage-files", std::to_string(o_.storage_files)});
    if (!o_.storage_runtime.empty()) a.insert(a.end(), {"--storage-runtime", o_.storage_runtime});
    for (const auto& p : o_.storage_paths) a.insert(a.end(), {"--storage", p});
    return a;
  }

  std::vector<StorageFigures> Worker(const std::vector<std::string>& nodes, const std::string& scope) {
    // --label: srun splits each task's output into whole lines (without it,
    // long lines of tasks running at once interleave mid-line).
    std::vector<std::string> a = WorkerArgs(Srun(nodes, false, 1, true));
    ProcessResult p = run_(a, Left());
    std::vector<StorageFigures> out;
    std::set<std::pair<std::string, std::string>> got;
    std::vector<std::string> lines;
    for (const auto& [task, text] : SplitLabelled(p.output)) {
      size_t pos = 0;
      while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        lines.push_back(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
        pos = nl == std::string::npos ? text.size() : nl + 1;
      }
    }
    for (const auto& line : lines) {
      if (line.rfind(kStoragePrefix, 0) != 0) continue;
      auto f = ParseStorageLine(line);
      if (!f) continue;
      f->scope = scope;
      auto so = StorageOptionsFor(o_.level, o_.storage_bytes, o_.storage_files, o_.storage_runtime);
      if (so) {
        so->path = f->path;
        so->node = f->node;
        so->tag = o_.tag;
        f->reproduce = ReproduceCommands(*so);
      }
      got.insert({f->node, f->path});
      out.push_back(*f);
    }
    bool missing = false;
    for (const auto& n : nodes)
      for (const auto& path : o_.storage_paths)
        if (!got.count({n, path})) {
          missing = true;
          StorageFigures f;
          f.path = path;
          f.node = n;
          f.scope = scope;
          f.error = p.timed_out ? "no result within the stage budget" : "no result from " + n + ": " + LastLine(p.output);
          out.push_back(f);
        }
    if (missing) FindLost(nodes, "storage (" + scope + ")");
    return out;
  }

  void Storage() {
    if (o_.storage_paths.empty()) {
      Note("no storage path given");
      return;
    }
    if (live_.empty()) {
      Note("no node left to measure storage from");
      return;
    }
    if (Budget("storage from every node at once")) {
      Say("storage: " + std::to_string(o_.storage_paths.size()) + " paths from " + std::to_string(live_.size()) +
          " nodes at once");
      double t0 = Now();
      auto all = Worker(live_, "all nodes");
      // The aggregate row: the nodes' rates summed (they ran at once).
      for (const auto& path : o_.storage_paths) {
        StorageFigures sum;
        sum.path = path;
        sum.scope = "all nodes";
        int n = 0;
        for (const auto& f : all) {
          if (f.path != path || !f.error.empty()) continue;
          ++n;
          sum.seq_write += f.seq_write;
          sum.seq_read += f.seq_read;
          sum.rand_read_iops += f.rand_read_iops;
          sum.ckpt_write += f.ckpt_write;
          sum.create_per_s += f.create_per_s;
          sum.read_files_per_s += f.read_files_per_s;
          sum.stat_per_s += f.stat_per_s;
          if (sum.reproduce.empty()) sum.reproduce = f.reproduce;
        }
        if (n > 0) r_->storage.push_back(sum);
      }
      for (const auto& f : all) {
        r_->storage.push_back(f);
        if (!f.error.empty()) Note(f.node + ": " + f.error);
      }
      Say("storage: every node at once done in " + F("%.1f", Now() - t0) + " s");
    }
    if (!live_.empty() && Budget("storage from one node alone")) {
      double t0 = Now();
      Say("storage: " + std::to_string(o_.storage_paths.size()) + " paths from " + live_[0] + " alone");
      for (auto& f : Worker({live_[0]}, "one node")) {
        if (!f.error.empty()) Note(f.node + " alone: " + f.error);
        r_->storage.push_back(f);
      }
      Say("storage: one node done in " + F("%.1f", Now() - t0) + " s");
    }
  }

  const RunOptions& o_;
  const Runner& run_;
  const Progress& progress_;
  Report* r_;
  std::vector<std::string> live_;
  Stage* stage_ = nullptr;
  double deadline_ = 0;
};

}  // namespace

void DefaultBudgets(RunOptions* o) {
  bool full = o->level == "full";
  if (o->budget_nodes <= 0) o->budget_nodes = full ? 1200 : 300;
  if (o->budget_collective <= 0) o->budget_collective = full ? 1800 : 600;
  if (o->budget_storage <= 0) o->budget_storage = full ? 1800 : 600;
}

std::vector<int> NodeCounts(int n) {
  std::vector<int> v;
  for (int k = 2; k < n; k *= 2) v.push_back(k);
  if (n >= 2) v.push_back(n);
  return v;
}

Status ParseNcclJson(const std::string& text, Curve* c) {
  size_t brace = text.find('{');
  if (brace == std::string::npos) return Status::InvalidArgument("no JSON document in preflight-nccl's output");
  // The document ends at the first line that is exactly "}" (pretty output);
  // anything after it (#record lines, srun's words) is not part of it.
  size_t end = text.find("\n}", brace);
  std::string doc = text.substr(brace, end == std::string::npos ? std::string::npos : end + 2 - brace);
  nlohmann::json j = nlohmann::json::parse(doc, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("preflight-nccl's JSON does not parse");
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  auto num = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_number() ? o[k].get<double>() : 0.0;
  };
  c->backend = str("backend");
  c->profile = str("profile");
  c->threshold_source = str("threshold_source");
  c->profile_threshold = num(j, "threshold_Bps");
  c->ranks = static_cast<int>(num(j, "ranks"));
  if (j.contains("nodes") && j["nodes"].is_array()) {
    c->node_names.clear();
    for (const auto& n : j["nodes"])
      if (n.is_string()) c->node_names.push_back(n.get<std::string>());
  }
  c->sizes.clear();
  if (j.contains("sizes") && j["sizes"].is_array())
    for (const auto& s : j["sizes"]) {
      if (!s.is_object()) continue;
      c->sizes.push_back({static_cast<uint64_t>(num(s, "bytes")), num(s, "busbw_Bps"), static_cast<uint64_t>(num(s, "wrong"))});
    }
  if (c->sizes.empty()) c->error = str("message").empty() ? "no sizes measured" : str("message");
  return Status::Ok();
}

Report RunAccept(const RunOptions& in, const Runner& run, const Progress& progress) {
  RunOptions o = in;
  DefaultBudgets(&o);
  Report r;
  r.tool_version = o.tool_version;
  r.job_id = o.job_id;
  r.level = o.level;
  r.nodes = o.nodes;
  r.storage_paths = o.storage_paths;
  r.thresholds = o.thresholds;
  Runner_ runner(o, run, progress, &r);
  runner.Go();
  Judge(&r);
  return r;
}

Status PrepareOutDir(const std::string& dir, const std::string& tag, std::string* used, std::string* note) {
  *used = dir;
  note->clear();
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::FromErrno(errno, "--out " + dir);
    return MakeDirs(dir, 0755);
  }
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument("--out " + dir + ": exists and is not a directory");
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Status::FromErrno(errno, "--out " + dir);
  std::vector<std::string> others;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == ".." || n == "report.json" || n == "report.html") continue;
    others.push_back(n);
  }
  ::closedir(d);
  if (others.empty()) return Status::Ok();
  std::string sub = dir + "/preflight-accept-" + tag;
  if (::mkdir(sub.c_str(), 0755) != 0) return Status::FromErrno(errno, "--out " + sub);
  *used = sub;
  *note = "--out " + dir + " holds other files (" + std::to_string(others.size()) +
          ", e.g. " + others[0] + "): left alone; the report is in " + sub;
  return Status::Ok();
}

}  // namespace preflight::accept
