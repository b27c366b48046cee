#include "preflight/config.h"

#include <cerrno>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

namespace preflight {

Expected<bool> ParseBool(const std::string& s) {
  if (s == "yes" || s == "true" || s == "on" || s == "1") return true;
  if (s == "no" || s == "false" || s == "off" || s == "0") return false;
  return Status::InvalidArgument("bad boolean '" + s + "' (expected yes or no)");
}

static Expected<uint64_t> ParseScaled(const std::string& s, const char* what,
                                      const std::vector<std::pair<std::string, uint64_t>>& units,
                                      uint64_t bare) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0) return Status::InvalidArgument(std::string("bad ") + what + " '" + s + "'");
  uint64_t n = 0;
  for (size_t k = 0; k < i; ++k) {
    uint64_t d = static_cast<uint64_t>(s[k] - '0');
    if (n > (UINT64_MAX - d) / 10) return Status::InvalidArgument(std::string(what) + " '" + s + "' too large");
    n = n * 10 + d;
  }
  std::string unit = s.substr(i);
  uint64_t mult = 0;
  if (unit.empty()) mult = bare;
  for (const auto& u : units)
    if (unit == u.first) mult = u.second;
  if (mult == 0) return Status::InvalidArgument(std::string("bad ") + what + " '" + s + "'");
  if (n != 0 && mult > UINT64_MAX / n) return Status::InvalidArgument(std::string(what) + " '" + s + "' too large");
  return n * mult;
}

Expected<uint64_t> ParseSize(const std::string& s) {
  return ParseScaled(s, "size", {{"K", 1ull << 10}, {"M", 1ull << 20}, {"G", 1ull << 30}, {"T", 1ull << 40}}, 1);
}

Expected<uint64_t> ParseCount(const std::string& s) { return ParseScaled(s, "count", {}, 1); }

Expected<uint32_t> ParseDurationMs(const std::string& s) {
  auto v = ParseScaled(s, "duration", {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}}, 1000);
  if (!v) return v.status();
  if (*v > UINT32_MAX) return Status::InvalidArgument("duration '" + s + "' too large");
  return static_cast<uint32_t>(*v);
}

std::string ExpandNode(const std::string& value, const std::string& node) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '%' && i + 1 < value.size()) {
      if (value[i + 1] == 'n' && !node.empty()) { out += node; ++i; continue; }
      if (value[i + 1] == '%') { out += '%'; ++i; continue; }
    }
    out += value[i];
  }
  return out;
}

namespace {

std::string SizeText(uint64_t v) {
  static const char* kUnits[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && v != 0 && v % 1024 == 0) { v /= 1024; ++u; }
  return std::to_string(v) + kUnits[u];
}

std::string DurationText(uint32_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

// Path values need the node name; the table's setters take the raw text and
// LoadConfig/ApplyOverrides expand it first (only for type "path").
#define PF_PATH(field)                                                        \
  [](const Config& c) { return c.field; },                                    \
  [](Config& c, const std::string& v) { c.field = v; return Status::Ok(); }
#define PF_PARSED(field, parser, text)                                        \
  [](const Config& c) { return text(c.field); },                              \
  [](Config& c, const std::string& v) {                                       \
    auto r = parser(v);                                                       \
    if (!r) return r.status();                                                \
    c.field = *r;                                                             \
    return Status::Ok();                                                      \
  }

std::string BoolText(bool b) { return b ? "yes" : "no"; }
std::string CountText(uint64_t v) { return std::to_string(v); }
std::string LevelText(Level l) { return LevelName(l); }
Expected<Level> ParseLevelKey(const std::string& s) {
  if (s.empty()) return Status::InvalidArgument("empty level (expected quick, full or off)");
  return ParseLevel(s.c_str());
}

}  // namespace

const std::vector<ConfigKey>& ConfigKeys() {
  static const std::vector<ConfigKey> kKeys = {
      {"state_dir", "path", "Directory for per-job result files and node state (root-owned)",
       PF_PATH(state_dir)},
      {"textfile_dir", "path", "node_exporter textfile collector directory; empty disables metrics",
       PF_PATH(textfile_dir)},
      {"default_level", "level", "Check level for jobs that did not pass --nccl-check (off, quick, full)",
       PF_PARSED(default_level, ParseLevelKey, LevelText)},
      {"fsroot", "path", "Root under which /sys, /proc and /dev are read (fixture trees in tests)",
       PF_PATH(fsroot)},
      {"topology_xml", "path", "hwloc XML file to load instead of probing this machine",
       PF_PATH(topology_xml)},
      {"topo_env", "bool", "Set the topology-aware NCCL/RDMA environment in each task (jobs opt out with --preflight-env=off)",
       PF_PARSED(topo_env, ParseBool, BoolText)},
      {"nccl_gid_index", "bool", "Export NCCL_IB_GID_INDEX when all paired ports are RoCE with a validated RoCE v2 GID",
       PF_PARSED(nccl_gid_index, ParseBool, BoolText)},
      {"nccl_topo_file", "path", "NCCL_TOPO_FILE given to tasks (only for VMs with a virtual PCI tree); empty never sets it",
       PF_PATH(nccl_topo_file)},
      {"scratch_dir", "path", "Node-local scratch (NVMe) directory to check; empty skips the check",
       PF_PATH(scratch_dir)},
      {"scratch_min_free", "size", "Minimum free space in scratch_dir",
       PF_PARSED(scratch_min_free_bytes, ParseSize, SizeText)},
      {"scratch_min_free_inodes", "count", "Minimum free inodes in scratch_dir",
       PF_PARSED(scratch_min_free_inodes, ParseCount, CountText)},
      {"set_drain_reason", "bool", "After a failed prolog check, set the node's drain reason to name it",
       PF_PARSED(set_drain_reason, ParseBool, BoolText)},
      {"scontrol", "path", "scontrol binary used for drain reasons and health-check resumes",
       PF_PATH(scontrol)},
      {"slurm_conf", "path", "SLURM_CONF for those scontrol calls (empty: inherit)",
       PF_PATH(slurm_conf)},
      {"probe_timeout", "duration", "Upper bound for any single probe (e.g. 10s, 500ms)",
       PF_PARSED(probe_timeout_ms, ParseDurationMs, DurationText)},
  };
  return kKeys;
}

#undef PF_PATH
#undef PF_PARSED

namespace {

const ConfigKey* FindKey(const std::string& name) {
  for (const auto& k : ConfigKeys())
    if (name == k.name) return &k;
  return nullptr;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

Status SetKey(Config& cfg, const std::string& key, const std::string& raw, const std::string& node) {
  const ConfigKey* k = FindKey(key);
  if (k == nullptr) return Status::InvalidArgument("unknown key '" + key + "'");
  std::string value = std::string(k->type) == "path" ? ExpandNode(raw, node) : raw;
  Status s = k->set(cfg, value);
  if (!s.ok()) return s.Context("key '" + key + "'");
  return s;
}

}  // namespace

Expected<Config> LoadConfig(const std::string& path, const std::string& node, bool required) {
  Config cfg;
  std::ifstream in(path);
  if (!in) {
    int err = errno;
    if (!required && err == ENOENT) return cfg;
    return Status::FromErrno(err, "cannot read config " + path);
  }
  cfg.source = path;
  std::set<std::string> seen;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    line = Trim(line);
    if (line.empty()) continue;
    std::string where = path + ":" + std::to_string(lineno);
    size_t eq = line.find('=');
    if (eq == std::string::npos)
      return Status::InvalidArgument(where + ": expected 'key = value', got '" + line + "'");
    std::string key = Trim(line.substr(0, eq));
    std::string value = Trim(line.substr(eq + 1));
    if (!seen.insert(key).second)
      return Status::InvalidArgument(where + ": key '" + key + "' given twice");
    Status s = SetKey(cfg, key, value, node);
    if (!s.ok()) return Status::InvalidArgument(where + ": " + s.message());
  }
  if (in.bad()) return Status::FromErrno(errno, "reading config " + path);
  return cfg;
}

Status ApplyOverrides(Config& cfg, const std::vector<std::string>& kv, const std::string& origin,
                      const std::string& node) {
  for (const auto& item : kv) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::InvalidArgument(origin + " '" + item + "': expected key=value");
    Status s = SetKey(cfg, item.substr(0, eq), item.substr(eq + 1), node);
    if (!s.ok()) return Status::InvalidArgument(origin + " '" + item + "': " + s.message());
  }
  return Status::Ok();
}

Expected<PluginArgs> ParsePluginArgs(int argc, char** argv) {
  PluginArgs a;
  Config scratch;  // validates values without touching a real config
  for (int i = 0; i < argc; ++i) {
    std::string item = argv[i] ? argv[i] : "";
    if (item.rfind("conf=", 0) == 0) {
      a.conf = item.substr(5);
      a.conf_given = true;
      if (a.conf.empty()) return Status::InvalidArgument("plugstack.conf argument 'conf=': empty path");
      continue;
    }
    Status s = ApplyOverrides(scratch, {item}, "plugstack.conf argument", "");
    if (!s.ok()) return s;
    a.overrides.push_back(item);
  }
  return a;
}

Expected<Config> LoadPluginConfig(const PluginArgs& args, const std::string& node) {
  auto cfg = LoadConfig(args.conf, node, args.conf_given);
  if (!cfg) return cfg;
  Status s = ApplyOverrides(*cfg, args.overrides, "plugstack.conf argument", node);
  if (!s.ok()) return s;
  return cfg;
}

std::string DumpConfig(const Config& cfg) {
  std::ostringstream out;
  for (const auto& k : ConfigKeys()) out << k.name << " = " << k.get(cfg) << "\n";
  return out.str();
}

}  // namespace preflight
