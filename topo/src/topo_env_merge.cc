#include "preflight/topo_env_merge.h"

#include <algorithm>
#include <cstdlib>

#include "preflight/gpu_vendor.h"
#include "preflight/json.h"
#include "preflight/text.h"

namespace preflight {

std::optional<std::string> MarkerValue(const std::string& marker, const std::string& name) {
  size_t pos = 0;
  while (pos < marker.size()) {
    size_t end = marker.find(';', pos);
    std::string item = marker.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (item.compare(0, name.size() + 1, name + "=") == 0) return item.substr(name.size() + 1);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return std::nullopt;
}

EnvMerge MergeEnv(const EnvPlan& plan, const EnvLookup& current) {
  EnvMerge m;
  std::optional<std::string> marker = current(kTopoEnvMarker);
  m.marker_found = marker.has_value();
  auto ours = [&](const std::string& name, const std::optional<std::string>& value) {
    if (!marker || !value) return false;
    auto recorded = MarkerValue(*marker, name);
    return recorded && *recorded == *value;
  };
  for (const auto& v : plan.vars) {
    auto now = current(v.name);
    if (now && !ours(v.name, now)) m.kept.push_back({v.name, *now});
    else m.set.push_back(v);
  }
  // Variables set in an earlier step that this task should not have (e.g. a
  // GPU-less step inside a GPU batch job) are removed again.
  if (marker) {
    for (const auto& name : EnvVarNames()) {
      bool planned = std::any_of(plan.vars.begin(), plan.vars.end(), [&](const EnvVar& v) { return v.name == name; });
      if (planned) continue;
      auto now = current(name);
      if (ours(name, now)) m.remove.push_back(name);
    }
  }
  return m;
}

TaskEnvPlan PlanTaskEnv(const Topology& topo, const std::vector<GpuPairing>& pairing, const EnvPolicy& policy,
                        const NodeGpuInputs& node_gpus, const std::string& rails_error, const EnvLookup& env) {
  TaskEnvPlan out;
  if (!rails_error.empty()) {
    for (const auto& n : EnvVarNames()) out.plan.unset.push_back({n, "site config: " + rails_error});
    return out;
  }
  // --gpu-bind narrows the task's visible-devices variable: CUDA's, or on
  // AMD GPUs ROCm's (Slurm sets ROCR_VISIBLE_DEVICES; HIP_VISIBLE_DEVICES
  // where a site sets that instead).
  std::string visible_name = "CUDA_VISIBLE_DEVICES", visible;
  for (const char* v : kGpuVisibleVars) {
    if (auto value = env(v)) {
      visible_name = v;
      visible = *value;
      break;
    }
  }
  auto gpus = TaskGpus(env("SLURM_STEP_GPUS").value_or(""), env("SLURM_JOB_GPUS").value_or(""), visible, visible_name);
  if (!gpus) {
    for (const auto& n : EnvVarNames()) out.plan.unset.push_back({n, "cannot tell the task's GPUs: " + gpus.status().message()});
    return out;
  }
  NodeGpuSet set = JobGpusOnNode(node_gpus, *gpus);
  out.node_gpus_from = set.source;
  // The job's node count (Slurm sets SLURM_JOB_NUM_NODES in every step;
  // SLURM_NNODES is the older name): Slingshot's NCCL_NET needs it.
  EnvPolicy pol = policy;
  for (const char* v : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}) {
    auto value = env(v);
    if (!value) continue;
    char* end = nullptr;
    long n = std::strtol(value->c_str(), &end, 10);
    if (end != value->c_str() && *end == '\0' && n > 0 && n < 1000000) pol.job_nodes = static_cast<int>(n);
    break;
  }
  out.plan = ComputeEnv(topo, pairing, set.gpus, *gpus, pol);
  return out;
}

std::string MarkerFor(const std::vector<EnvVar>& applied) {
  std::string s;
  for (const auto& v : applied) s += (s.empty() ? "" : ";") + v.name + "=" + v.value;
  return s;
}

std::string EnvRecordLine(const EnvTaskRecord& r) {
  static const EnvPlan kEmpty;
  const EnvPlan& plan = r.plan ? *r.plan : kEmpty;
  JsonWriter w(false);
  w.BeginObject().Field("step", r.step).Field("task", r.task);
  w.Field("topology", r.topology_source).Field("load_seconds", r.load_seconds).Field("env_seconds", r.env_seconds);
  w.Key("gpus").BeginArray();
  for (int g : plan.gpus) w.Int(g);
  w.EndArray();
  w.Key("node_gpus").BeginArray();
  for (int g : plan.node_gpus) w.Int(g);
  w.EndArray();
  w.Field("node_gpus_from", r.node_gpus_from);
  w.Key("pairing").BeginObject();
  for (const auto& gn : plan.gpu_nics) w.Field(std::to_string(gn.first), gn.second);
  w.EndObject();
  w.Key("set").BeginObject();
  for (const auto& v : r.set) w.Field(v.name, v.value);
  w.EndObject();
  w.Key("left_alone").BeginObject();
  for (const auto& v : r.kept) w.Field(v.name, v.value);
  w.EndObject();
  w.Key("not_set").BeginObject();
  for (const auto& u : plan.unset) w.Field(u.first, u.second);
  w.EndObject().EndObject();
  return w.str() + "\n";
}

std::string EnvShowText(const EnvTaskRecord& r, bool with_reasons) {
  static const EnvPlan kEmpty;
  const EnvPlan& plan = r.plan ? *r.plan : kEmpty;
  std::string gl;
  for (const auto& gn : plan.gpu_nics)
    gl += (gl.empty() ? "" : ", ") + std::string("GPU") + std::to_string(gn.first) + "->" + gn.second;
  auto ids = [](const std::vector<int>& v) {
    std::string s;
    for (int g : v) s += (s.empty() ? "" : ",") + std::to_string(g);
    return s;
  };
  std::string head = "preflight-env: " + r.node + " task " + std::to_string(r.task);
  if (!plan.gpus.empty())
    head += " (GPU " + ids(plan.gpus) + "; the job's GPUs here " + ids(plan.node_gpus) + ", from " + r.node_gpus_from + ")";
  std::string out = head + ": " + (gl.empty() ? std::string("no GPU") : gl) + "\n";
  for (const auto& v : r.set) out += "preflight-env:   set  " + v.name + "=" + v.value + "\n";
  for (const auto& v : r.kept) out += "preflight-env:   kept " + v.name + "=" + v.value + " (set by the user)\n";
  if (with_reasons)
    for (const auto& u : plan.unset) out += "preflight-env:   not set " + u.first + ": " + u.second + "\n";
  return out;
}

std::vector<LateEnv> LateEnvValues(const EnvPlan& plan, const EnvMerge& merge, const EnvLookup& submitted) {
  std::vector<LateEnv> out;
  for (const auto& k : merge.kept) {
    auto before = submitted(k.name);
    if (before && *before == k.value) continue;  // the user's own value
    for (const auto& v : plan.vars)
      if (v.name == k.name && v.value != k.value) out.push_back({k.name, k.value, v.value});
  }
  return out;
}

std::string LateEnvText(const std::vector<LateEnv>& late, const std::string& node, bool container) {
  if (late.empty()) return "";
  auto shown = [](const std::string& v) { return PrintableText(Utf8Cut(v, 200)); };
  std::string o, names;
  for (const auto& l : late) {
    o += "preflight: on " + shown(node) + " ";
    if (container)
      o += "the container image sets " + l.name + "=" + shown(l.found);
    else
      o += l.name + "=" + shown(l.found) + " was set after submission (a container image, a TaskProlog or an earlier SPANK plugin)";
    o += " where preflight computed " + shown(l.computed) + " for this task, and left it; ";
    o += container ? "to let preflight's value win, run with --container-env=" + l.name
                   : "in a pyxis container, --container-env=" + l.name + " lets preflight's value win";
    o += "\n";
    names += (names.empty() ? "" : ",") + l.name;
  }
  if (late.size() > 1) o += "preflight: for all of them: --container-env=" + names + "\n";
  return o;
}

}  // namespace preflight
