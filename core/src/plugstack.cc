#include "preflight/plugstack.h"

#include <glob.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "preflight/slurm_conf.h"

namespace preflight {

namespace {

constexpr const char* kPreflight = "preflight.so";
constexpr const char* kPyxis = "spank_pyxis.so";

std::string Where(const std::string& file, int line) { return file + ":" + std::to_string(line); }

// The plugin named `name` as slurmd loads it: its first line (a second is
// refused, "cowardly refusing to load a second time").
const PlugstackPlugin* FirstOf(const PlugstackStack& stack, const char* name) {
  for (const auto& p : stack.plugins)
    if (p.Name() == name) return &p;
  return nullptr;
}

std::string Folder(const std::string& file) {
  size_t slash = file.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return file.substr(0, slash);
}

void ReadFileInto(const std::string& path, int depth, PlugstackStack* out, const std::string& from);

// include PATTERN at `where`: glob(3) as slurmd calls it (no flags: sorted).
void Include(const std::string& file, const std::string& where, std::string pattern, int depth, PlugstackStack* out) {
  if (pattern[0] != '/') pattern = Folder(file) + "/" + pattern;
  if (depth + 1 > kMaxPlugstackDepth) {
    out->problems.push_back(where + ": include '" + pattern + "' nested deeper than " +
                            std::to_string(kMaxPlugstackDepth) + " includes (a loop?): not followed");
    return;
  }
  glob_t gl;
  std::memset(&gl, 0, sizeof gl);
  int rc = ::glob(pattern.c_str(), 0, nullptr, &gl);
  if (rc == 0) {
    for (size_t i = 0; i < gl.gl_pathc; ++i) ReadFileInto(gl.gl_pathv[i], depth + 1, out, where);
  } else if (rc == GLOB_ABORTED) {
    out->problems.push_back(where + ": include '" + pattern + "': a folder cannot be read (slurmd skips it)");
  } else if (rc != GLOB_NOMATCH) {
    out->problems.push_back(where + ": include '" + pattern + "': glob(3) failed (" + std::to_string(rc) + ")");
  }
  ::globfree(&gl);
}

void ReadFileInto(const std::string& path, int depth, PlugstackStack* out, const std::string& from) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno;
    // slurmd: a missing file is an empty one; any other failure ends the stack.
    if (e != ENOENT)
      out->problems.push_back((from.empty() ? path : from + ": " + path) + ": cannot be read: " + std::strerror(e));
    return;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  ParsePlugstackText(path, ss.str(), depth, out);
}

}  // namespace

std::string PlugstackPlugin::Name() const {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void ParsePlugstackText(const std::string& file, const std::string& text, int depth, PlugstackStack* out) {
  std::istringstream in(text);
  std::string raw;
  int lineno = 0;
  while (std::getline(in, raw)) {
    ++lineno;
    std::string line = raw.substr(0, raw.find('#'));
    std::vector<std::string> words;
    size_t i = 0;
    while (i < line.size()) {
      size_t start = line.find_first_not_of(" \t\r\n", i);  // Slurm: " \t\n"; '\r' from a DOS file too
      if (start == std::string::npos) break;
      size_t end = line.find_first_of(" \t\r\n", start);
      if (end == std::string::npos) end = line.size();
      words.push_back(line.substr(start, end - start));
      i = end;
    }
    if (words.empty()) continue;
    std::string where = Where(file, lineno);
    const std::string& kind = words[0];
    if ((kind != "required" && kind != "optional" && kind != "include") || words.size() < 2) {
      out->problems.push_back(where + ": invalid line, slurmd ignores it (expected 'required PLUGIN [ARGS]', "
                              "'optional PLUGIN [ARGS]' or 'include GLOB')");
      continue;
    }
    if (kind == "include") {
      Include(file, where, words[1], depth, out);
      continue;
    }
    PlugstackPlugin p;
    p.file = file;
    p.line = lineno;
    p.required = kind == "required";
    p.path = words[1];
    p.args.assign(words.begin() + 2, words.end());
    out->plugins.push_back(std::move(p));
  }
}

PlugstackStack ReadPlugstack(const std::string& path) {
  PlugstackStack s;
  ReadFileInto(path, 0, &s, "");
  return s;
}

std::string PlugstackPath(const std::string& slurm_conf_path, const std::string& slurm_conf_text) {
  std::string v = SlurmConfValue(slurm_conf_text, "PlugStackConfig");
  if (!v.empty()) return v;
  return Folder(slurm_conf_path) + "/plugstack.conf";
}

std::vector<std::string> PlugstackOrderWarnings(const PlugstackStack& stack) {
  const PlugstackPlugin* pf = FirstOf(stack, kPreflight);
  const PlugstackPlugin* pyxis = FirstOf(stack, kPyxis);
  if (!pf || !pyxis || pyxis < pf) return {};
  return {std::string(kPreflight) + " (" + Where(pf->file, pf->line) + ") loads before " + kPyxis + " (" +
          Where(pyxis->file, pyxis->line) +
          "): pyxis's task_init then copies the container image's environment over each task's, replacing the "
          "per-task NCCL_*/UCX_* values preflight set; load preflight after pyxis (a plugstack.conf.d snippet "
          "named to sort after pyxis.conf, such as zz-preflight.conf, or its line below pyxis's)"};
}

std::vector<std::string> PlugstackNotes(const std::string& slurm_conf_path) {
  std::ifstream in(slurm_conf_path, std::ios::binary);
  if (!in) return {slurm_conf_path + ": not read (" + std::strerror(errno) + "): plugstack.conf not checked"};
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string path = PlugstackPath(slurm_conf_path, ss.str());
  PlugstackStack stack = ReadPlugstack(path);
  std::vector<std::string> lines;
  // One line per problem: a file reached along two include paths (an
  // include loop entered twice) reports the same line twice.
  std::set<std::string> seen;
  for (const auto& p : stack.problems)
    if (seen.insert(p).second) lines.push_back(path + ": warning: " + p);
  std::vector<std::string> order = PlugstackOrderWarnings(stack);
  for (const auto& w : order) lines.push_back(path + ": warning: " + w);
  if (!order.empty()) return lines;
  const PlugstackPlugin* pf = FirstOf(stack, kPreflight);
  const PlugstackPlugin* pyxis = FirstOf(stack, kPyxis);
  if (!pf)
    lines.push_back(path + ": " + kPreflight + " is not loaded: no job options, no per-task environment");
  else if (!pyxis)
    lines.push_back(path + ": " + kPreflight + " loads from " + Where(pf->file, pf->line) + "; no " + kPyxis);
  else
    lines.push_back(path + ": " + kPreflight + " (" + Where(pf->file, pf->line) + ") loads after " + kPyxis + " (" +
                    Where(pyxis->file, pyxis->line) + "), so its task environment survives pyxis's");
  return lines;
}

}  // namespace preflight
