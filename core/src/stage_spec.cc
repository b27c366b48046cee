#include "preflight/stage_spec.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <fstream>
#include <set>

namespace preflight {

bool HasDotDot(const std::string& path) {
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (path.compare(i, j - i, "..") == 0 && j - i == 2) return true;
    i = j + 1;
  }
  return false;
}

namespace {

bool ValidNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

std::string DefaultName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  std::string base = p.substr(p.find_last_of('/') == std::string::npos ? 0 : p.find_last_of('/') + 1);
  for (char& c : base)
    if (!ValidNameChar(c)) c = '_';
  while (!base.empty() && base[0] == '.') base.erase(0, 1);
  return base;
}

Status CheckName(const std::string& name, const std::string& item) {
  if (name.empty() || name[0] == '.' || name.size() > 64)
    return Status::InvalidArgument("'" + item + "': dataset name '" + name +
                                   "' must be 1-64 characters of A-Z a-z 0-9 . _ - not starting with '.'");
  for (char c : name)
    if (!ValidNameChar(c))
      return Status::InvalidArgument("'" + item + "': dataset name '" + name + "' has '" + std::string(1, c) +
                                     "' (allowed: A-Z a-z 0-9 . _ -)");
  return Status::Ok();
}

Expected<StageSource> ParseItem(const std::string& raw, bool allow_list) {
  std::string item = raw;
  while (!item.empty() && (item.back() == ' ' || item.back() == '\t' || item.back() == '\r')) item.pop_back();
  while (!item.empty() && (item[0] == ' ' || item[0] == '\t')) item.erase(0, 1);
  if (item.empty()) return Status::InvalidArgument("empty dataset in the list");
  for (char c : item)
    if (c == '\n' || static_cast<unsigned char>(c) < 0x20)
      return Status::InvalidArgument("'" + item + "': control character in path");
  StageSource s;
  if (item[0] == '@') {
    if (!allow_list) return Status::InvalidArgument("'" + item + "': a list file may not name another list");
    s.list = true;
    s.path = item.substr(1);
    if (s.path.empty()) return Status::InvalidArgument("'@': list file path missing");
    if (HasDotDot(s.path)) return Status::InvalidArgument("'" + item + "': '..' is not allowed in paths");
    return s;
  }
  size_t colon = item.rfind(':');
  if (colon != std::string::npos && item.find('/', colon) == std::string::npos) {
    s.path = item.substr(0, colon);
    s.name = item.substr(colon + 1);
    Status n = CheckName(s.name, item);
    if (!n.ok()) return n;
  } else {
    s.path = item;
  }
  if (s.path.empty()) return Status::InvalidArgument("'" + item + "': empty path");
  if (HasDotDot(s.path)) return Status::InvalidArgument("'" + item + "': '..' is not allowed in paths");
  if (s.name.empty()) {
    s.name = DefaultName(s.path);
    Status n = CheckName(s.name, item);
    if (!n.ok()) return Status::InvalidArgument(n.message() + " (give one with SRC:NAME)");
  }
  return s;
}

Status CheckDuplicates(const std::vector<StageSource>& v) {
  std::set<std::string> names;
  for (const auto& s : v)
    if (!s.list && !names.insert(s.name).second)
      return Status::InvalidArgument("dataset name '" + s.name + "' given twice (rename one with SRC:NAME)");
  return Status::Ok();
}

}  // namespace

Expected<std::vector<StageSource>> ParseStageSpec(const std::string& text) {
  if (text.empty() || text == "(null)")
    return Status::InvalidArgument("expected SRC[:NAME][,SRC...] or @LISTFILE");
  std::vector<StageSource> out;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    auto s = ParseItem(text.substr(i, j - i), true);
    if (!s) return s.status();
    out.push_back(*s);
    i = j + 1;
  }
  Status d = CheckDuplicates(out);
  if (!d.ok()) return d;
  return out;
}

std::string StageSpecText(const std::vector<StageSource>& sources) {
  std::string t;
  for (const auto& s : sources) {
    if (!t.empty()) t += ",";
    t += s.list ? "@" + s.path : s.path + ":" + s.name;
  }
  return t;
}

std::string StageVarName(const std::string& name) {
  std::string v = "PREFLIGHT_STAGE_";
  for (char c : name) v += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  return v;
}

namespace {

std::string Absolute(const std::string& p, const std::string& base) {
  if (!p.empty() && p[0] == '/') return p;
  return (base.empty() || base.back() == '/' ? base : base + "/") + p;
}

Status CheckReadable(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, path);
  if (S_ISDIR(st.st_mode)) {
    if (::access(path.c_str(), R_OK | X_OK) != 0) return Status::FromErrno(errno, path);
  } else if (S_ISREG(st.st_mode)) {
    if (::access(path.c_str(), R_OK) != 0) return Status::FromErrno(errno, path);
  } else {
    return Status::InvalidArgument(path + ": not a directory or regular file");
  }
  return Status::Ok();
}

}  // namespace

Status ResolveStageSources(std::vector<StageSource>& sources, const std::string& cwd) {
  std::vector<StageSource> out;
  for (const auto& s : sources) {
    if (!s.list) {
      StageSource a = s;
      a.path = Absolute(s.path, cwd);
      Status r = CheckReadable(a.path);
      if (!r.ok()) return r;
      out.push_back(a);
      continue;
    }
    std::string list = Absolute(s.path, cwd);
    std::ifstream in(list);
    if (!in) return Status::FromErrno(errno, "list file " + list);
    std::string dir = list.substr(0, list.find_last_of('/') + 1);
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      size_t hash = line.find('#');
      if (hash != std::string::npos) line.erase(hash);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      std::string where = list + ":" + std::to_string(lineno);
      auto item = ParseItem(line, false);
      if (!item) return item.status().Context(where);
      item->path = Absolute(item->path, dir);
      Status r = CheckReadable(item->path);
      if (!r.ok()) return r.Context(where);
      out.push_back(*item);
    }
  }
  if (out.empty()) return Status::InvalidArgument("no datasets to stage");
  Status d = CheckDuplicates(out);
  if (!d.ok()) return d;
  sources = out;
  return Status::Ok();
}

}  // namespace preflight
