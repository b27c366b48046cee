#include "preflight/dcgm.h"

#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "preflight/process.h"

namespace preflight {

using nlohmann::json;

namespace {

std::string Upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string FirstLine(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "(no output)";
  size_t e = s.find('\n', b);
  return s.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

// "warnings": strings (DCGM <= 2) or objects {"warning": ..., "error_id": N} (3.x).
std::string Warnings(const json& r) {
  std::string out;
  auto it = r.find("warnings");
  if (it == r.end() || !it->is_array()) return out;
  for (const auto& w : *it) {
    std::string t;
    if (w.is_string()) t = w.get<std::string>();
    else if (w.is_object() && w.contains("warning") && w["warning"].is_string()) t = w["warning"].get<std::string>();
    if (w.is_object() && w.contains("error_id") && w["error_id"].is_number())
      t += " (DCGM error " + std::to_string(w["error_id"].get<long long>()) + ")";
    if (!t.empty()) out += (out.empty() ? "" : "; ") + t;
  }
  return out;
}

std::string GpuIds(const json& r) {
  auto it = r.find("gpu_ids");
  if (it == r.end()) return "";
  if (it->is_number()) return std::to_string(it->get<long long>());
  if (it->is_string()) return it->get<std::string>();
  return "";
}

bool Findable(const std::string& path) {
  if (path.find('/') != std::string::npos) return ::access(path.c_str(), X_OK) == 0;
  const char* p = std::getenv("PATH");
  std::string dirs = p ? p : "/usr/bin:/bin";
  size_t b = 0;
  while (b <= dirs.size()) {
    size_t e = dirs.find(':', b);
    std::string d = dirs.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (!d.empty() && ::access((d + "/" + path).c_str(), X_OK) == 0) return true;
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return false;
}

}  // namespace

std::vector<CheckResult> ParseDcgmDiag(const std::string& output, int exit_code, unsigned level) {
  std::vector<CheckResult> out;
  std::string what = "dcgmi diag -r " + std::to_string(level);
  CheckResult sum;
  sum.check = "gpu.dcgm";
  sum.device = "node";
  sum.threshold = "no test FAIL";
  size_t b = output.find('{'), e = output.rfind('}');
  json j = b == std::string::npos || e == std::string::npos || e < b
               ? json()
               : json::parse(output.substr(b, e - b + 1), nullptr, /*allow_exceptions=*/false);
  const json* root = nullptr;
  if (j.is_object()) {
    for (const char* k : {"DCGM GPU Diagnostic", "DCGM Diagnostic"})
      if (j.contains(k) && j[k].is_object()) root = &j[k];
  }
  if (root == nullptr || !root->contains("test_categories") || !(*root)["test_categories"].is_array()) {
    // DCGM is installed but did not run the diagnostic (no nv-hostengine,
    // an unsupported GPU): a problem for the admin, not a verdict on the GPUs.
    sum.verdict = Verdict::kWarn;
    sum.value = "exit " + std::to_string(exit_code);
    sum.message = what + " gave no result: " + FirstLine(output);
    return {sum};
  }
  int pass = 0, skip = 0, fail = 0, warn = 0;
  for (const auto& cat : (*root)["test_categories"]) {
    if (!cat.is_object() || !cat.contains("tests") || !cat["tests"].is_array()) continue;
    std::string category = cat.value("category", "");
    for (const auto& t : cat["tests"]) {
      if (!t.is_object() || !t.contains("results") || !t["results"].is_array()) continue;  // DCGM 3.x puts nulls here
      std::string name = t.value("name", "?");
      for (const auto& r : t["results"]) {
        if (!r.is_object()) continue;
        std::string st = Upper(r.value("status", ""));
        if (st == "PASS") { ++pass; continue; }
        if (st == "SKIP" || st == "SKIPPED" || st == "NOT RUN") { ++skip; continue; }
        CheckResult f;
        f.check = "gpu.dcgm";
        std::string ids = GpuIds(r);
        f.device = ids.empty() ? "node" : (ids.find(',') == std::string::npos ? "GPU" + ids : "GPUs " + ids);
        f.value = st;
        f.threshold = "PASS";
        std::string w = Warnings(r);
        f.message = what + ": " + category + "/" + name + " " + st + (w.empty() ? "" : ": " + w);
        if (st == "WARN" || st == "WARNING") {
          f.verdict = Verdict::kWarn;
          ++warn;
        } else {
          f.verdict = Verdict::kFail;
          ++fail;
        }
        out.push_back(f);
      }
    }
  }
  std::string version = root->value("version", "");
  sum.value = std::to_string(pass) + " passed, " + std::to_string(skip) + " skipped, " + std::to_string(warn) +
              " warned, " + std::to_string(fail) + " failed";
  if (pass + skip + warn + fail == 0) {
    sum.verdict = Verdict::kWarn;
    sum.message = what + " ran no test" + (version.empty() ? "" : " (DCGM " + version + ")");
  } else {
    sum.message = what + ": " + sum.value + (version.empty() ? "" : " (DCGM " + version + ")");
  }
  out.insert(out.begin(), sum);
  return out;
}

std::vector<CheckResult> CheckDcgm(const CheckEnv& env) {
  const Config& c = env.cfg;
  unsigned level = env.phase == Phase::kHealth ? static_cast<unsigned>(c.dcgm_health_level)
                                               : static_cast<unsigned>(c.dcgm_level);
  // Only at full (prolog, failed job's epilog), and in the sweep when asked.
  if (env.phase != Phase::kHealth && env.level < Level::kFull) return {};
  CheckResult r;
  r.check = "gpu.dcgm";
  r.device = "node";
  if (level == 0) {
    r.verdict = Verdict::kSkip;
    r.message = env.phase == Phase::kHealth ? "skipped: not in the health check (dcgm_health_level = 0)"
                                            : "skipped: dcgm_level = 0";
    return env.phase == Phase::kHealth ? std::vector<CheckResult>{} : std::vector<CheckResult>{r};
  }
  if (!Findable(c.dcgmi)) {
    r.verdict = Verdict::kSkip;
    r.message = "skipped: " + c.dcgmi + " not found (DCGM is not installed on this node)";
    return {r};
  }
  std::vector<std::string> argv = {c.dcgmi, "diag", "-r", std::to_string(level), "-j"};
  ProbeStep("gpu.dcgm", "node", c.dcgmi + " diag -r " + std::to_string(level) + " -j");
  double t0 = MonotonicSeconds();
  auto p = RunCommand(argv, {}, c.dcgm_timeout_ms);
  double dt = MonotonicSeconds() - t0;
  if (!p) {
    r.verdict = Verdict::kWarn;
    r.message = "cannot run " + c.dcgmi + ": " + p.status().message();
    return {r};
  }
  if (p->timed_out) {
    r.verdict = Verdict::kFail;
    r.value = "no answer";
    r.threshold = "< " + std::to_string(c.dcgm_timeout_ms / 1000) + " s (dcgm_timeout)";
    r.message = "dcgmi diag -r " + std::to_string(level) + " gave no answer within " +
                std::to_string(c.dcgm_timeout_ms / 1000) + " s (killed): a GPU may be wedged";
    r.seconds = dt;
    return {r};
  }
  auto rs = ParseDcgmDiag(p->output, p->exit_code, level);
  for (auto& x : rs) x.seconds = dt / rs.size();
  return rs;
}

}  // namespace preflight
