#include "preflight/slurmctl.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "preflight/clock.h"
#include "preflight/job.h"
#include "preflight/process.h"
#include "preflight/log.h"
#include "preflight/report.h"
#include "preflight/text.h"

namespace preflight {

using nlohmann::json;

bool NodeState::ours() const { return IsPreflightReason(reason); }

namespace {

std::vector<std::string> SlurmEnv(const Config& cfg) {
  if (cfg.slurm_conf.empty()) return {};
  return {"SLURM_CONF=" + cfg.slurm_conf};
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// argv[0] args..., bounded by probe_timeout; the output on exit 0;
// NotFound on exit `not_found_exit` (when >= 0).
Expected<std::string> Run(const Config& cfg, std::vector<std::string> argv, int not_found_exit = -1) {
  auto r = RunCommand(argv, SlurmEnv(cfg), cfg.probe_timeout_ms);
  if (!r) return r.status();
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (r->timed_out) return Status::Timeout(cmd + ": no answer within " + std::to_string(cfg.probe_timeout_ms) + " ms");
  if (not_found_exit >= 0 && r->exit_code == not_found_exit) return Status::NotFound(cmd + ": " + Trimmed(r->output));
  if (r->exit_code != 0) return Status::IOError(cmd + ": exit " + std::to_string(r->exit_code) + ": " + Trimmed(r->output));
  return r->output;
}

Expected<std::string> Scontrol(const Config& cfg, std::vector<std::string> args) {
  args.insert(args.begin(), cfg.scontrol);
  return Run(cfg, std::move(args));
}

Expected<std::string> Records(const Config& cfg, const std::string& kind, const std::string& arg) {
  // `preflight slurm job` exits 3 when slurmctld does not know the job
  // (slurm_records.cc): NotFound, which AskSlurmJobs reads as gone.
  return Run(cfg, {cfg.slurm_query, "slurm", kind, arg}, kind == "job" ? 3 : -1);
}

// The JSON object in `output`: its last line that starts with '{' (libslurm
// may log lines of its own on stderr, which RunCommand merges).
Expected<json> LastObject(const std::string& output, const char* what) {
  size_t end = output.size();
  while (end > 0) {
    size_t b = output.rfind('\n', end - 1);
    b = b == std::string::npos ? 0 : b + 1;
    if (b < end && output[b] == '{') {
      json j = json::parse(output.begin() + static_cast<long>(b), output.begin() + static_cast<long>(end), nullptr,
                           /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object())
        return Status::InvalidArgument(std::string(what) + ": not a JSON object: " + Trimmed(output.substr(b, end - b)));
      return j;
    }
    if (b == 0) break;
    end = b - 1;
  }
  return Status::InvalidArgument(std::string(what) + ": no JSON record in: " + Trimmed(output));
}

// Typed getters: a wrong type is an error, an absent key its default.
template <class T>
Status Get(const json& j, const char* key, T* out, const char* what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  try {
    *out = it->get<T>();
  } catch (const json::exception&) {
    return Status::InvalidArgument(std::string(what) + ": field '" + key + "' has the wrong type");
  }
  return Status::Ok();
}

}  // namespace

Expected<JobRecord> ParseJobRecord(const std::string& output) {
  auto j = LastObject(output, "job record");
  if (!j) return j.status();
  JobRecord r;
  int64_t id = 0;
  Status s = Get(*j, "job_id", &id, "job record");
  if (s.ok()) s = Get(*j, "state", &r.state, "job record");
  if (s.ok()) s = Get(*j, "node_list", &r.node_list, "job record");
  if (s.ok()) s = Get(*j, "nodes", &r.nodes, "job record");
  if (s.ok()) s = Get(*j, "batch_host", &r.batch_host, "job record");
  if (s.ok()) s = Get(*j, "restarts", &r.restarts, "job record");
  if (s.ok()) s = Get(*j, "admin_comment", &r.admin_comment, "job record");
  if (s.ok()) s = Get(*j, "exc_node_list", &r.exc_node_list, "job record");
  if (s.ok()) s = Get(*j, "req_nodes", &r.required_nodes, "job record");  // absent from older `preflight slurm`
  if (s.ok()) s = Get(*j, "gres_per_node", &r.gres_per_node, "job record");
  if (!s.ok()) return s;
  if (id <= 0) return Status::InvalidArgument("job record: no job_id");
  r.job_id = std::to_string(id);
  return r;
}

Expected<std::vector<StepRecord>> ParseStepRecords(const std::string& output) {
  auto j = LastObject(output, "step records");
  if (!j) return j.status();
  auto it = j->find("steps");
  if (it == j->end() || !it->is_array()) return Status::InvalidArgument("step records: no 'steps' array");
  std::vector<StepRecord> v;
  for (const auto& e : *it) {
    if (!e.is_object()) return Status::InvalidArgument("step records: a step is not an object");
    StepRecord r;
    Status s = Get(e, "id", &r.id, "step record");
    if (s.ok()) s = Get(e, "step", &r.step, "step record");
    if (s.ok()) s = Get(e, "nodes", &r.nodes, "step record");
    if (!s.ok()) return s;
    v.push_back(std::move(r));
  }
  return v;
}

Expected<std::vector<NodeState>> ParseNodeRecords(const std::string& output) {
  auto j = LastObject(output, "node records");
  if (!j) return j.status();
  auto it = j->find("nodes");
  if (it == j->end() || !it->is_array()) return Status::InvalidArgument("node records: no 'nodes' array");
  std::vector<NodeState> v;
  size_t index = 0;
  for (const auto& e : *it) {
    // One bad record costs only itself: the others are still read, so one
    // node's odd record cannot blind `preflight reasons` or a health check
    // to every other node.
    ++index;
    NodeState n;
    Status s = e.is_object() ? Status::Ok() : Status::InvalidArgument("node records: record " + std::to_string(index) + " is not an object");
    if (s.ok()) s = Get(e, "name", &n.name, "node record");
    if (s.ok()) s = Get(e, "state", &n.state, "node record");
    if (s.ok()) s = Get(e, "drain", &n.drain, "node record");
    if (s.ok()) s = Get(e, "reason", &n.reason, "node record");
    if (s.ok()) s = Get(e, "reason_time", &n.reason_time, "node record");  // absent from older `preflight slurm`
    if (s.ok()) s = Get(e, "addr", &n.addr, "node record");                // ... as is NodeAddr
    if (s.ok() && (n.name.empty() || n.state.empty()))
      s = Status::InvalidArgument("node records: record " + std::to_string(index) + " has no name or state");
    if (!s.ok()) {
      Log(LogLevel::kError, "slurm", "node record " + (n.name.empty() ? "#" + std::to_string(index) : PrintableText(n.name)),
          s.message() + " (skipped)");
      continue;
    }
    v.push_back(std::move(n));
  }
  return v;
}

Expected<std::vector<int>> GpuIndexesFromGres(const std::string& gres) {
  // Top-level entries: "name[:type]:count(IDX:list)" separated by ',' outside ().
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : gres) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) { items.push_back(cur); cur.clear(); continue; }
    cur += c;
  }
  items.push_back(cur);
  std::vector<int> out;
  for (const auto& it : items) {
    if (it.compare(0, 4, "gpu:") != 0 && it != "gpu") continue;
    size_t idx = it.find("(IDX:");
    if (idx == std::string::npos) continue;  // "gpu:0": none on this node
    size_t close = it.find(')', idx);
    if (close == std::string::npos) return Status::InvalidArgument("GRES '" + gres + "': unterminated '(IDX:'");
    std::string list = it.substr(idx + 5, close - idx - 5);
    if (list == "N/A") continue;
    auto ids = ParseIdList(list);
    if (!ids) return Status::InvalidArgument("GRES '" + gres + "': " + ids.status().message());
    out.insert(out.end(), ids->begin(), ids->end());
  }
  return out;
}

std::string OtherSteps(const std::vector<StepRecord>& steps, const std::string& self_id) {
  std::string others;
  for (const auto& s : steps) {
    if (s.id == self_id || s.step == "batch" || s.step == "extern" || s.step == "interactive") continue;
    others += (others.empty() ? "" : ",") + s.id;
  }
  return others;
}

Expected<JobRecord> LoadJob(const Config& cfg, const std::string& job) {
  auto out = Records(cfg, "job", job);
  if (!out) return out.status();
  auto r = ParseJobRecord(*out);
  if (r && r->job_id != job) return Status::InvalidArgument("job record: asked for job " + job + ", got " + r->job_id);
  return r;
}

SlurmJobs AskSlurmJobs(const Config& cfg, const std::string& node, const std::set<std::string>& jobs, size_t limit) {
  SlurmJobs s;
  s.answered = true;
  for (const auto& j : jobs) {
    // A name that is no Slurm job id (a folder someone made) is no job.
    if (j.empty() || j.find_first_not_of("0123456789") != std::string::npos) {
      AddAnswer(&s, j, JobWhere::kGone);
      continue;
    }
    if (limit == 0) break;  // the rest are kept, asked about next time
    --limit;
    auto rec = LoadJob(cfg, j);
    if (!rec && rec.status().code() == Status::Code::kNotFound) {
      AddAnswer(&s, j, JobWhere::kGone);
    } else if (!rec) {
      s.answered = false;  // fail safe: keep every job's data
      s.error = rec.status().message();
      return s;
    } else {
      AddAnswer(&s, j, ClassifyJob(rec->state, rec->nodes, node));
    }
  }
  return s;
}

Expected<std::vector<StepRecord>> LoadSteps(const Config& cfg, const std::string& job) {
  auto out = Records(cfg, "steps", job);
  if (!out) return out.status();
  return ParseStepRecords(*out);
}

Expected<std::vector<NodeState>> LoadNodes(const Config& cfg, const std::string& hostlist) {
  auto out = Records(cfg, "nodes", hostlist);
  if (!out) return out.status();
  return ParseNodeRecords(*out);
}

Expected<NodeState> QueryNode(const Config& cfg, const std::string& node) {
  auto nodes = LoadNodes(cfg, node);
  if (!nodes) return nodes.status();
  for (auto& n : *nodes)
    if (n.name == node) return std::move(n);
  return Status::NotFound("node " + node + ": not in slurmctld's records");
}

Expected<std::string> StepNode(const Config& cfg, const std::string& job, const std::string& step, uint32_t nodeid) {
  auto steps = LoadSteps(cfg, job);
  if (!steps) return steps.status();
  std::string id = job + "." + step;
  for (const auto& s : *steps) {
    if (s.id != id) continue;
    if (nodeid >= s.nodes.size())
      return Status::NotFound("node id " + std::to_string(nodeid) + " outside step " + id + "'s " +
                              std::to_string(s.nodes.size()) + " node(s)");
    return s.nodes[nodeid];
  }
  return Status::NotFound("no step " + id + " in slurmctld's records");
}

Status DrainNode(const Config& cfg, const std::string& node, const std::string& reason) {
  return Scontrol(cfg, {"update", "NodeName=" + node, "State=DRAIN", "Reason=" + reason}).status();
}

Status ResumeNode(const Config& cfg, const std::string& node) {
  return Scontrol(cfg, {"update", "NodeName=" + node, "State=RESUME"}).status();
}

Status SetNodeComment(const Config& cfg, const std::string& node, const std::string& comment) {
  return Scontrol(cfg, {"update", "NodeName=" + node, "Comment=" + comment}).status();
}

Status SetNodeReason(const Config& cfg, const std::string& node, const std::string& reason) {
  return Scontrol(cfg, {"update", "NodeName=" + node, "Reason=" + reason}).status();
}

Status RequeueJob(const Config& cfg, const std::string& job) { return Scontrol(cfg, {"requeue", job}).status(); }

Status SetJobExcludedNodes(const Config& cfg, const std::string& job, const std::string& hostlist) {
  return Scontrol(cfg, {"update", "JobId=" + job, "ExcNodeList=" + hostlist}).status();
}

Status ExcludeNodesWhenPending(const Config& cfg, const std::string& job, const std::vector<std::string>& nodes) {
  if (nodes.empty()) return Status::Ok();
  std::string merged;
  for (const auto& n : nodes) merged += (merged.empty() ? "" : ",") + n;
  auto prior = LoadJob(cfg, job);
  if (prior && !prior->exc_node_list.empty()) merged = prior->exc_node_list + "," + merged;
  if (SetJobExcludedNodes(cfg, job, merged).ok()) return Status::Ok();
  // The command travels as arguments ("$@"), never spliced into the script.
  static const char kLoop[] =
      "for i in $(seq 600); do \"$@\" >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1";
  return SpawnDetached({"/bin/sh", "-c", kLoop, "preflight-exclude", cfg.scontrol, "update", "JobId=" + job,
                        "ExcNodeList=" + merged},
                       SlurmEnv(cfg));
}

Expected<std::string> JobGpusOn(const Config& cfg, const std::string& job, const std::string& node) {
  auto rec = LoadJob(cfg, job);
  if (!rec) return rec.status();
  auto it = rec->gres_per_node.find(node);
  if (it == rec->gres_per_node.end()) return std::string();
  auto ids = GpuIndexesFromGres(it->second);
  if (!ids) return ids.status();
  std::string s;
  for (int i : *ids) s += (s.empty() ? "" : ",") + std::to_string(i);
  return s;
}

Expected<std::string> OtherStepsOf(const Config& cfg, const std::string& job, uint32_t self) {
  auto steps = LoadSteps(cfg, job);
  if (!steps) return steps.status();
  return OtherSteps(*steps, job + "." + std::to_string(self));
}

Status SetJobAdminComment(const Config& cfg, const std::string& job, const std::string& comment) {
  return Scontrol(cfg, {"update", "JobId=" + job, "AdminComment=" + comment}).status();
}

Expected<std::vector<std::string>> NodesDrainedByPreflight(const Config& cfg, const std::string& hostlist) {
  auto nodes = LoadNodes(cfg, hostlist);
  if (!nodes) return nodes.status();
  std::vector<std::string> out;
  for (const auto& n : *nodes)
    if (n.drained() && n.ours()) out.push_back(n.name);
  return out;
}

}  // namespace preflight
