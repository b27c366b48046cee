#include "preflight/slurm_conf.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "preflight/fileutil.h"

namespace preflight {

namespace {
std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace

std::string SlurmConfPath(const Config& cfg, const EnvMap& env) {
  if (!cfg.slurm_conf.empty()) return cfg.slurm_conf;
  auto it = env.find("SLURM_CONF");
  if (it != env.end() && !it->second.empty()) return it->second;
  return "/etc/slurm/slurm.conf";
}

std::vector<std::string> ParsePrologFlags(const std::string& text) {
  std::vector<std::string> flags;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    // A line may hold several KEY=VALUE words; PrologFlags is one of them.
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      size_t eq = w.find('=');
      if (eq == std::string::npos || Lower(w.substr(0, eq)) != "prologflags") continue;
      flags.clear();
      std::istringstream vs(w.substr(eq + 1));
      std::string f;
      while (std::getline(vs, f, ','))
        if (!f.empty()) flags.push_back(Lower(f));
    }
  }
  return flags;
}

std::string SlurmConfValue(const std::string& text, const std::string& key) {
  std::string want = Lower(key), value;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      size_t eq = w.find('=');
      if (eq == std::string::npos || Lower(w.substr(0, eq)) != want) continue;
      value = w.substr(eq + 1);
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    }
  }
  return value;
}

Expected<std::vector<std::string>> ReadPrologFlags(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text) return text.status();
  return ParsePrologFlags(*text);
}

DrainHow DrainHowFor(const std::vector<std::string>& flags) {
  return std::find(flags.begin(), flags.end(), "runinjob") != flags.end() ? DrainHow::kNow : DrainHow::kDetached;
}

long BatchStartWindow(const std::string& text) {
  auto seconds = [&](const char* key, long dflt) {
    std::string v = SlurmConfValue(text, key);
    char* end = nullptr;
    long n = v.empty() ? dflt : std::strtol(v.c_str(), &end, 10);
    return (v.empty() || (end && *end == '\0' && n >= 0)) ? n : dflt;
  };
  return seconds("BatchStartTimeout", 10) + std::min(seconds("MessageTimeout", 10), 10L);
}

}  // namespace preflight
