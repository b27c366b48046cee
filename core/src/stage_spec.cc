#include "preflight/stage_spec.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
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
  if (text.size() > kMaxStageSpecBytes)
    return Status::InvalidArgument("the value is " + std::to_string(text.size()) + " bytes; the limit is " +
                                   std::to_string(kMaxStageSpecBytes) + " (put a long list in a file: --stage=@LISTFILE)");
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
  if (out.size() > kMaxStageSources)
    return Status::InvalidArgument(std::to_string(out.size()) + " datasets; the limit is " +
                                   std::to_string(kMaxStageSources) + " per job");
  Status d = CheckDuplicates(out);
  if (!d.ok()) return d;
  return out;
}

bool OnPseudoFilesystem(int fd, std::string* what) {
  struct statfs sf;
  if (::fstatfs(fd, &sf) != 0) return false;
  struct Fs { unsigned long magic; const char* name; };
  static const Fs kPseudo[] = {
      {PROC_SUPER_MAGIC, "proc"},     {SYSFS_MAGIC, "sysfs"},         {DEBUGFS_MAGIC, "debugfs"},
      {TRACEFS_MAGIC, "tracefs"},     {CGROUP_SUPER_MAGIC, "cgroup"}, {CGROUP2_SUPER_MAGIC, "cgroup2"},
      {SECURITYFS_MAGIC, "securityfs"}, {DEVPTS_SUPER_MAGIC, "devpts"}, {BPF_FS_MAGIC, "bpf"},
      {PSTOREFS_MAGIC, "pstore"},     {EFIVARFS_MAGIC, "efivarfs"},   {0x62656570 /* CONFIGFS_MAGIC */, "configfs"},
  };
  for (const auto& f : kPseudo)
    if (static_cast<unsigned long>(sf.f_type) == f.magic) {
      if (what) *what = f.name;
      return true;
    }
  return false;
}

bool OnNetworkFilesystem(int fd, std::string* what) {
  struct statfs sf;
  if (::fstatfs(fd, &sf) != 0) return false;
  struct Fs { unsigned long magic; const char* name; };
  // Magic numbers: linux/magic.h where the kernel has the file system,
  // else the file system's own headers (lustre, gpfs, beegfs, panfs).
  static const Fs kNetwork[] = {
      {0x6969, "nfs"},          {0x0BD00BD0, "lustre"}, {0x47504653, "gpfs"},     {0x65735546, "fuse"},
      {0xFF534D42, "cifs"},     {0xFE534D42, "smb2"},   {0x517B, "smb"},          {0x00C36400, "ceph"},
      {0x19830326, "beegfs"},   {0x01021997, "9p"},     {0x5346414F, "afs"},      {0x6B414653, "afs"},
      {0x20030528, "orangefs"}, {0xAAD7AAEA, "panfs"},  {0x73757245, "coda"},
  };
  for (const auto& f : kNetwork)
    if (static_cast<unsigned long>(sf.f_type) == f.magic) {
      if (what) *what = f.name;
      return true;
    }
  return false;
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
  int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd >= 0) {
    std::string fs;
    bool pseudo = OnPseudoFilesystem(fd, &fs);
    ::close(fd);
    if (pseudo)
      return Status::InvalidArgument(path + ": on the kernel's " + fs +
                                     " pseudo filesystem, whose files change while read; refused");
  }
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
    // O_NONBLOCK: a FIFO must not hold sbatch forever; only a regular file
    // of bounded size is read.
    int fd = ::open(list.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno(errno, "list file " + list);
    struct stat st;
    if (::fstat(fd, &st) != 0) { int e = errno; ::close(fd); return Status::FromErrno(e, "list file " + list); }
    if (!S_ISREG(st.st_mode)) { ::close(fd); return Status::InvalidArgument("list file " + list + ": not a regular file"); }
    if (static_cast<uint64_t>(st.st_size) > kMaxStageListFileBytes) {
      ::close(fd);
      return Status::InvalidArgument("list file " + list + ": " + std::to_string(st.st_size) + " bytes; the limit is " +
                                     std::to_string(kMaxStageListFileBytes));
    }
    std::string text;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) { int e = errno; ::close(fd); return Status::FromErrno(e, "list file " + list); }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > kMaxStageListFileBytes) { ::close(fd); return Status::InvalidArgument("list file " + list + ": grew past " + std::to_string(kMaxStageListFileBytes) + " bytes while read"); }
    }
    ::close(fd);
    std::string dir = list.substr(0, list.find_last_of('/') + 1);
    std::string line;
    int lineno = 0;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      line = text.substr(pos, nl - pos);
      pos = nl + 1;
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
      if (out.size() > kMaxStageSources)
        return Status::InvalidArgument(where + ": more than " + std::to_string(kMaxStageSources) +
                                       " datasets; the limit is " + std::to_string(kMaxStageSources) + " per job");
    }
  }
  if (out.empty()) return Status::InvalidArgument("no datasets to stage");
  if (out.size() > kMaxStageSources)
    return Status::InvalidArgument(std::to_string(out.size()) + " datasets; the limit is " +
                                   std::to_string(kMaxStageSources) + " per job");
  Status d = CheckDuplicates(out);
  if (!d.ok()) return d;
  // What travels to the prolog and every task is the expanded text.
  size_t bytes = StageSpecText(out).size();
  if (bytes > kMaxStageSpecBytes)
    return Status::InvalidArgument("the expanded dataset list is " + std::to_string(bytes) + " bytes; the limit is " +
                                   std::to_string(kMaxStageSpecBytes) +
                                   " (it travels in the job's environment; stage a parent directory instead of many entries)");
  sources = out;
  return Status::Ok();
}

}  // namespace preflight
