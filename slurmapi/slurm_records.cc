// preflight slurm job|steps|nodes: slurmctld's records through libslurm,
// printed as JSON for core/slurmctl (man preflight(8), SLURM RECORDS).
//
// Why not `scontrol -o show job` text: the root-run code must know which
// nodes a job holds, its restart count and AdminComment, and the GPUs it
// holds per node. In scontrol's text, fields a user writes (JobName,
// Command, WorkDir, Comment, from 25.11 SubmitLine) come before NodeList, so
// a job named "x NodeList=n2" steered a first-match parser. Here every value
// is read from its own struct member; only fields slurmctld itself writes
// are printed, and the JSON writer escapes every byte.
//
// This is the only file of preflight that calls libslurm, so it is the only
// one whose code depends on the Slurm release's API (see slurm_compat.h).
extern "C" {
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
}

#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "preflight/json.h"
#include "preflight/log.h"
#include "preflight/hostlist.h"
#include "slurm_compat.h"
#include "slurm_records.h"

namespace preflight::admin {
namespace {

std::string Str(const char* s) { return s ? std::string(s) : std::string(); }

// Expand a Slurm hostlist ("n[1-3],gpu07") in Slurm's own order.
std::vector<std::string> Hosts(const char* list) {
  std::vector<std::string> out;
  if (!list || !*list) return out;
  auto hl = slurm_hostlist_create(list);
  if (!hl) return out;
  while (char* h = slurm_hostlist_shift(hl)) {
    out.emplace_back(h);
    std::free(h);
  }
  slurm_hostlist_destroy(hl);
  return out;
}

std::string StepName(uint32_t step) {
  switch (step) {
    case SLURM_BATCH_SCRIPT: return "batch";
    case SLURM_EXTERN_CONT: return "extern";
    case SLURM_PENDING_STEP: return "pending";
#ifdef SLURM_INTERACTIVE_STEP
    case SLURM_INTERACTIVE_STEP: return "interactive";
#endif
    default: return std::to_string(step);
  }
}

// libslurm leaves its error code in errno (slurm_get_errno() is gone in 24.11).
int SlurmError(const std::string& what) {
  Log(LogLevel::kError, "slurm", what, slurm_strerror(errno));
  return 1;
}

void HostArray(JsonWriter& w, const std::string& key, const std::vector<std::string>& hosts) {
  w.Key(key).BeginArray();
  for (const auto& h : hosts) w.String(h);
  w.EndArray();
}

// `preflight slurm job` exit status for a job slurmctld does not know.
constexpr int kNoSuchJob = 3;

// A job id as Slurm numbers them; logs and returns false otherwise.
bool ParseJobId(const std::string& id, uint32_t* out) {
  char* end = nullptr;
  unsigned long jid = std::strtoul(id.c_str(), &end, 10);
  if (id.empty() || *end || jid == 0 || jid > 0xfffffff0UL) {
    Log(LogLevel::kError, "slurm", "job '" + id + "'", "expected a numeric job id");
    return false;
  }
  *out = static_cast<uint32_t>(jid);
  return true;
}

int Job(const std::string& id, uint32_t jid) {  job_info_msg_t* msg = nullptr;
  if (slurm_load_job(&msg, jid, SHOW_ALL | SHOW_DETAIL) != SLURM_SUCCESS) {
    // Exit 3: slurmctld answered that it does not know the job (never ran,
    // or ended more than MinJobAge ago); core/slurmctl reads it as gone.
    bool unknown = errno == ESLURM_INVALID_JOB_ID;
    int rc = SlurmError("job " + id);
    return unknown ? kNoSuchJob : rc;
  }
  const slurm_job_info_t* job = nullptr;
  for (uint32_t i = 0; i < msg->record_count; ++i)
    if (msg->job_array[i].job_id == jid) job = &msg->job_array[i];
  if (!job) {
    slurm_free_job_info_msg(msg);
    Log(LogLevel::kError, "slurm", "job " + id, "not in slurmctld's answer");
    return kNoSuchJob;
  }
  auto nodes = Hosts(job->nodes);
  JsonWriter w(false);
  w.BeginObject();
  w.Field("job_id", static_cast<int64_t>(job->job_id));
  w.Field("state", Str(compat::JobStateName(job->job_state)));
  w.Field("user_id", static_cast<int64_t>(job->user_id));
  w.Field("node_list", Str(job->nodes));
  HostArray(w, "nodes", nodes);
  w.Field("batch_host", Str(job->batch_host));
  w.Field("restarts", static_cast<int64_t>(job->restart_cnt));
  w.Field("admin_comment", Str(job->admin_comment));
  w.Field("exc_node_list", Str(job->exc_nodes));
  HostArray(w, "req_nodes", Hosts(job->req_nodes));  // -w/--nodelist, expanded
  // "status:signal", as scontrol's ExitCode=.
  uint32_t ec = job->exit_code, status = 0, sig = 0;
  if (ec != NO_VAL) {
    if (WIFSIGNALED(ec)) sig = WTERMSIG(ec);
    else if (WIFEXITED(ec)) status = WEXITSTATUS(ec);
  }
  w.Field("exit_code", std::to_string(status) + ":" + std::to_string(sig));
  // gres_detail_str[i] is node i of the allocation, e.g. "gpu:2(IDX:0-1)".
  w.Key("gres_per_node").BeginObject();
  for (uint32_t i = 0; i < job->gres_detail_cnt && i < nodes.size(); ++i)
    w.Field(nodes[i], Str(job->gres_detail_str[i]));
  w.EndObject();
  w.EndObject();
  slurm_free_job_info_msg(msg);
  std::printf("%s\n", w.str().c_str());
  return 0;
}

int Steps(const std::string& id, uint32_t jid) {  job_step_info_response_msg_t* msg = nullptr;
  if (compat::GetJobSteps(jid, &msg) != SLURM_SUCCESS)
    return SlurmError("steps of job " + id);
  JsonWriter w(false);
  w.BeginObject();
  w.Field("job_id", static_cast<int64_t>(jid));
  w.Key("steps").BeginArray();
  for (uint32_t i = 0; i < msg->job_step_count; ++i) {
    const job_step_info_t& s = msg->job_steps[i];
    if (s.step_id.job_id != jid) continue;
    std::string step = StepName(s.step_id.step_id);
    w.BeginObject();
    w.Field("id", id + "." + step);
    w.Field("step", step);
    w.Field("node_list", Str(s.nodes));
    HostArray(w, "nodes", Hosts(s.nodes));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  slurm_free_job_step_info_response_msg(msg);
  std::printf("%s\n", w.str().c_str());
  return 0;
}

int Nodes(const std::string& list) {
  const bool all = list == kAllNodes;
  auto wanted_v = all ? std::vector<std::string>{kAllNodes} : Hosts(list.c_str());
  if (wanted_v.empty()) {
    Log(LogLevel::kError, "slurm", "nodes '" + list + "'", "expected a Slurm hostlist, e.g. n[1-3]");
    return 2;
  }
  std::set<std::string> wanted(wanted_v.begin(), wanted_v.end());
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node(0, &msg, SHOW_ALL) != SLURM_SUCCESS) return SlurmError("nodes " + list);
  JsonWriter w(false);
  w.BeginObject();
  w.Key("nodes").BeginArray();
  std::set<std::string> seen;
  for (uint32_t i = 0; i < msg->record_count; ++i) {
    const node_info_t& n = msg->node_array[i];
    if (!n.name || (!all && !wanted.count(n.name))) continue;
    seen.insert(n.name);
    w.BeginObject();
    w.Field("name", Str(n.name));
    w.Field("state", compat::NodeStateName(n.node_state));
    w.Field("drain", (n.node_state & NODE_STATE_DRAIN) != 0);
    w.Field("addr", Str(n.node_addr));  // NodeAddr: how RAS and peers name the node (preflight-run's hang attribution)
    // reason stays the last field: scripts (tests/system/lib.sh) cut it from the line's end.
    w.Field("reason_time", static_cast<int64_t>(n.reason_time));
    w.Field("reason", Str(n.reason));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  slurm_free_node_info_msg(msg);
  for (const auto& n : wanted_v)
    if (!all && !seen.count(n)) {
      Log(LogLevel::kError, "slurm", "node " + n, "no such node in slurmctld's records");
      return 1;
    }
  std::printf("%s\n", w.str().c_str());
  return 0;
}

}  // namespace

int SlurmCmd(const std::vector<std::string>& args) {
  if (args.size() != 2 || (args[0] != "job" && args[0] != "steps" && args[0] != "nodes")) {
    Log(LogLevel::kError, "slurm", "bad arguments", "expected: job JOBID | steps JOBID | nodes HOSTLIST");
    return 2;
  }
  // Bad arguments are refused before libslurm looks for a configuration.
  uint32_t jid = 0;
  if (args[0] != "nodes" && !ParseJobId(args[1], &jid)) return 2;
  if (args[0] == "nodes") {
    // libslurm reads a malformed list ("n[1-") as one node name; the core
    // parser refuses it with the reason, and bounds the expansion.
    auto hosts = ExpandHostlist(args[1]);
    if (!hosts || hosts->empty()) {
      Log(LogLevel::kError, "slurm", "nodes", hosts ? "empty hostlist (expected e.g. n[1-3])" : hosts.status().message());
      return 2;
    }
  }
  slurm_init(nullptr);  // reads SLURM_CONF (or the built-in path)
  int rc = args[0] == "job" ? Job(args[1], jid) : args[0] == "steps" ? Steps(args[1], jid) : Nodes(args[1]);
  slurm_fini();
  return rc;
}

}  // namespace preflight::admin
