// The acceptance run (accept_run.h): RunAccept and its stages'
// budgets, preflight-nccl's JSON, the output directory. The stages
// themselves are run_stages.h's.
#include "preflight/accept_run.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>

#include <nlohmann/json.hpp>

#include "preflight/accept_train.h"
#include "preflight/fileutil.h"
#include "run_stages.h"

namespace preflight::accept {

void DefaultBudgets(RunOptions* o) {
  bool full = o->level == "full";
  if (o->budget_nodes <= 0) o->budget_nodes = full ? 1200 : 300;
  if (o->budget_collective <= 0) o->budget_collective = full ? 1800 : 600;
  if (o->budget_storage <= 0) o->budget_storage = full ? 1800 : 600;
  if (o->train_seconds <= 0) o->train_seconds = full ? 300 : 30;
  // The run and its checkpoint grace, the resume run and its grace, and
  // 30 s of start-up for each of the two job steps; through a shared tier
  // also preflight-run's last round after each, and two short steps.
  const double resume = ResumeSeconds(o->train_seconds);
  if (o->budget_train <= 0)
    o->budget_train = o->train_seconds + RunnerGrace(o->train_seconds) + resume + RunnerGrace(resume) + 60 +
                      (o->train_tier.empty() ? 0 : 2 * kTierLastRound + 30);
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

Status ParseNcclOpsJson(const std::string& text, std::vector<Curve>* curves) {
  // The array starts at the first line that is "[" and ends at the first
  // line that is "]" (pretty output); srun's words may surround it.
  size_t open = text.rfind("[\n", 0) == 0 ? 0 : text.find("\n[\n");
  if (open == std::string::npos) return Status::InvalidArgument("no JSON array in preflight-nccl's output");
  if (open != 0) ++open;
  size_t end = text.find("\n]", open);
  std::string doc = text.substr(open, end == std::string::npos ? std::string::npos : end + 2 - open);
  nlohmann::json j = nlohmann::json::parse(doc, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return Status::InvalidArgument("preflight-nccl's JSON array does not parse");
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("test") || !e["test"].is_string()) continue;
    Curve c;
    Status s = ParseNcclJson(e.dump(2), &c);
    if (!s.ok()) return s;
    c.op = e["test"].get<std::string>();
    curves->push_back(std::move(c));
  }
  if (curves->empty()) return Status::InvalidArgument("preflight-nccl's JSON array holds no operation");
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
  run_internal::Stages runner(o, run, progress, &r);
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
