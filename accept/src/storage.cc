#include "preflight/accept_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "preflight/config.h"
#include "preflight/config_values.h"
#include "preflight/fileutil.h"
#include "preflight/hostlist.h"
#include "preflight/json.h"
#include "preflight/process.h"

namespace preflight::accept {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string SpaceWords(const std::string& out) {
  if (out.find("No space left") != std::string::npos || out.find("ENOSPC") != std::string::npos)
    return "no space left on device (the path filled up mid-run)";
  if (out.find("Permission denied") != std::string::npos) return "permission denied";
  if (out.find("Disk quota exceeded") != std::string::npos) return "disk quota exceeded";
  return "";
}

// The last non-empty line of fio's output (its error), trimmed.
std::string LastLine(const std::string& out) {
  size_t end = out.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  size_t start = out.rfind('\n', end);
  std::string l = out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
  return l.size() > 200 ? l.substr(0, 200) : l;
}

std::string Cmdline(const std::vector<std::string>& argv) {
  std::string o;
  for (const auto& a : argv) {
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+") == std::string::npos;
    std::string q = a;
    if (!plain) {
      q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      q += "'";
    }
    o += (o.empty() ? "" : " ") + q;
  }
  return o;
}

// Small files: create, read back, stat. Returns "" or why not.
std::string SmallFiles(const std::string& dir, int n, StorageFigures* f) {
  std::string sd = dir + "/small";
  if (::mkdir(sd.c_str(), 0700) != 0) return "small files: mkdir " + sd + ": " + std::strerror(errno);
  char buf[4096];
  std::memset(buf, 'p', sizeof buf);
  double t0 = Now();
  for (int i = 0; i < n; ++i) {
    std::string p = sd + "/f" + std::to_string(i);
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return "small files: create " + p + ": " + std::strerror(errno);
    ssize_t w = ::write(fd, buf, sizeof buf);
    int e = errno;
    ::close(fd);
    if (w != static_cast<ssize_t>(sizeof buf))
      return std::string("small files: write: ") + (w < 0 ? std::strerror(e) : "short write") +
             (e == ENOSPC ? " (the path filled up mid-run)" : "");
  }
  int dfd = ::open(sd.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) { ::fsync(dfd); ::close(dfd); }
  double t1 = Now();
  for (int i = 0; i < n; ++i) {
    std::string p = sd + "/f" + std::to_string(i);
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "small files: open " + p + ": " + std::strerror(errno);
    ssize_t r = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (r != static_cast<ssize_t>(sizeof buf)) return "small files: short read of " + p;
  }
  double t2 = Now();
  struct stat st;
  for (int i = 0; i < n; ++i) {
    std::string p = sd + "/f" + std::to_string(i);
    if (::stat(p.c_str(), &st) != 0) return "small files: stat " + p + ": " + std::strerror(errno);
  }
  double t3 = Now();
  auto rate = [n](double s) { return s > 0 ? n / s : 0.0; };
  f->create_per_s = rate(t1 - t0);
  f->read_files_per_s = rate(t2 - t1);
  f->stat_per_s = rate(t3 - t2);
  return "";
}

}  // namespace

Expected<StorageOptions> StorageOptionsFor(const std::string& level, const std::string& bytes, int files,
                                           const std::string& runtime) {
  StorageOptions o = StorageOptionsForLevel(level);
  if (!bytes.empty()) {
    auto b = ParseSize(bytes);
    if (!b) return Status::InvalidArgument("--storage-bytes: " + b.status().message());
    if (*b < 4096 || *b > (1ull << 40)) return Status::InvalidArgument("--storage-bytes " + bytes + ": outside 4K..1T");
    o.file_bytes = *b;
    o.ckpt_bytes = *b * 2;
  }
  if (files < 0 || files > 1000000) return Status::InvalidArgument("--storage-files " + std::to_string(files) + ": outside 0..1000000");
  if (files > 0) o.small_files = files;
  if (!runtime.empty()) {
    char* end = nullptr;
    double s = std::strtod(runtime.c_str(), &end);
    if (*end || s < 1 || s > 3600) return Status::InvalidArgument("--storage-runtime " + runtime + ": outside 1..3600 seconds");
    o.runtime_s = s;
  }
  return o;
}

Expected<std::string> NodePath(const StorageOptions& o) {
  if (o.path.find("%n") != std::string::npos) {
    Status v = ValidNodeName(o.node);
    if (!v.ok()) return v.Context("cannot use " + o.path);
  }
  return ExpandNode(o.path, o.node);
}

std::vector<std::string> ReproduceCommands(const StorageOptions& o) {
  auto path = NodePath(o);
  std::string dir = (path ? *path : o.path) + "/" + PrivateDirName(o);
  std::vector<std::string> out;
  for (const char* fig : {"seq_write", "seq_read", "rand_read_4k", "ckpt_write"})
    out.push_back(Cmdline(FioArgv(o, fig, dir, std::string(fig) == "ckpt_write" ? o.ckpt_bytes : o.file_bytes,
                                  dir + "/fio.json")));
  return out;
}

StorageOptions StorageOptionsForLevel(const std::string& level) {
  StorageOptions o;
  if (level == "full") {
    o.file_bytes = 2ull << 30;
    o.ckpt_bytes = 8ull << 30;
    o.runtime_s = 60;
    o.small_files = 20000;
  }
  return o;
}

Expected<FioFigures> ParseFioJson(const std::string& text) {
  // fio may print warnings before the document; start at the first '{'.
  size_t brace = text.find('{');
  if (brace == std::string::npos) return Status::InvalidArgument("fio output holds no JSON document");
  nlohmann::json j = nlohmann::json::parse(text.begin() + brace, text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("fio output is not valid JSON");
  if (!j.contains("jobs") || !j["jobs"].is_array() || j["jobs"].empty())
    return Status::InvalidArgument("fio JSON has no jobs");
  FioFigures f;
  for (const auto& job : j["jobs"]) {
    auto num = [](const nlohmann::json& o, const char* k) {
      return o.is_object() && o.contains(k) && o[k].is_number() ? o[k].get<double>() : 0.0;
    };
    if (job.contains("read")) { f.read_bw += num(job["read"], "bw_bytes"); f.read_iops += num(job["read"], "iops"); }
    if (job.contains("write")) { f.write_bw += num(job["write"], "bw_bytes"); f.write_iops += num(job["write"], "iops"); }
    if (job.contains("error") && job["error"].is_number_integer() && job["error"].get<int>() != 0) f.error = job["error"].get<int>();
  }
  return f;
}

std::string PrivateDirName(const StorageOptions& o) {
  std::string n = ".preflight-accept-" + o.node + "-" + o.tag;
  for (char& c : n)
    if (c == '/' || c == '\0') c = '_';
  return n;
}

std::vector<std::string> FioArgv(const StorageOptions& o, const std::string& figure, const std::string& dir,
                                 uint64_t bytes, const std::string& json_out) {
  std::vector<std::string> a = {o.fio, "--name=" + figure, "--directory=" + dir, "--ioengine=psync",
                                "--size=" + std::to_string(bytes), "--output-format=json", "--output=" + json_out};
  char rt[32];
  std::snprintf(rt, sizeof rt, "--runtime=%.0f", o.runtime_s < 1 ? 1.0 : o.runtime_s);
  a.push_back(rt);
  if (figure == "seq_write") a.insert(a.end(), {"--filename=seq.dat", "--rw=write", "--bs=1M", "--end_fsync=1"});
  if (figure == "seq_read") a.insert(a.end(), {"--filename=seq.dat", "--rw=read", "--bs=1M", "--invalidate=1"});
  if (figure == "rand_read_4k") a.insert(a.end(), {"--filename=seq.dat", "--rw=randread", "--bs=4k", "--invalidate=1"});
  if (figure == "ckpt_write") a.insert(a.end(), {"--filename=ckpt.dat", "--rw=write", "--bs=1M", "--end_fsync=1"});
  return a;
}

StorageFigures MeasureStorage(const StorageOptions& o) {
  StorageFigures f;
  f.path = o.path;
  f.node = o.node;
  auto node_path = NodePath(o);
  if (!node_path) {
    f.error = node_path.status().message();
    return f;
  }
  const std::string& path = *node_path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    f.error = "cannot use " + path + ": " + std::strerror(errno);
    return f;
  }
  if (!S_ISDIR(st.st_mode)) {
    f.error = "cannot use " + path + ": not a directory";
    return f;
  }
  std::string dir = path + "/" + PrivateDirName(o);
  if (::mkdir(dir.c_str(), 0700) != 0) {
    int e = errno;
    f.error = "cannot write " + path + ": " + std::strerror(e) + (e == EACCES ? " (the user running the job has no write access)" : "");
    return f;
  }
  std::function<Expected<ProcessResult>(const std::vector<std::string>&, unsigned)> run = o.run;
  if (!run) run = [](const std::vector<std::string>& argv, unsigned ms) { return RunCommand(argv, {}, ms); };
  unsigned limit_ms = static_cast<unsigned>((o.runtime_s + 60) * 1000);  // fio stops itself at runtime; fsync may add
  std::string json_out = dir + "/fio.json";
  uint64_t seq_bytes = o.file_bytes;
  for (const char* fig : {"seq_write", "seq_read", "rand_read_4k", "ckpt_write"}) {
    std::string figure = fig;
    uint64_t bytes = figure == "ckpt_write" ? o.ckpt_bytes : figure == "seq_write" ? o.file_bytes : seq_bytes;
    auto argv = FioArgv(o, figure, dir, bytes, json_out);
    f.reproduce.push_back(Cmdline(argv));
    ::unlink(json_out.c_str());
    auto r = run(argv, limit_ms);
    if (!r) { f.error = "fio: " + r.status().message(); break; }
    auto doc = ReadWholeFile(json_out);
    Expected<FioFigures> ff = doc ? ParseFioJson(*doc) : Expected<FioFigures>(doc.status());
    std::string why = SpaceWords(r->output);
    if (r->timed_out) why = "fio did not finish within " + std::to_string(limit_ms / 1000) + " s";
    if (ff && ff->error == ENOSPC) why = "no space left on device (the path filled up mid-run)";
    if (r->exit_code != 0 || !ff || (ff && ff->error)) {
      if (why.empty()) why = r->exit_code == 127 ? "fio not found (install Debian's fio)" : LastLine(r->output);
      if (why.empty() && !ff) why = ff.status().message();
      f.error = figure + ": " + why;
      break;
    }
    if (figure == "seq_write") {
      f.seq_write = ff->write_bw;
      // A write cut short by --runtime left a shorter file: read what is there.
      struct stat fs;
      if (::stat((dir + "/seq.dat").c_str(), &fs) == 0 && fs.st_size > 0) seq_bytes = static_cast<uint64_t>(fs.st_size);
    }
    if (figure == "seq_read") f.seq_read = ff->read_bw;
    if (figure == "rand_read_4k") f.rand_read_iops = ff->read_iops;
    if (figure == "ckpt_write") f.ckpt_write = ff->write_bw;
  }
  ::unlink((dir + "/ckpt.dat").c_str());  // free the checkpoint before the small files
  ::unlink((dir + "/seq.dat").c_str());
  if (f.error.empty()) {
    std::string e = SmallFiles(dir, o.small_files, &f);
    if (!e.empty()) f.error = e;
  }
  (void)RemoveTree(dir);  // rm -r (fileutil.h): it holds only what this worker wrote
  if (!f.error.empty()) f.error = path + ": " + f.error;
  return f;
}

std::string StorageLine(const StorageFigures& f) {
  JsonWriter w(false);
  w.BeginObject().Field("path", f.path).Field("node", f.node).Field("seq_write", f.seq_write);
  w.Field("seq_read", f.seq_read).Field("rand_read_iops", f.rand_read_iops).Field("ckpt_write", f.ckpt_write);
  w.Field("create_per_s", f.create_per_s).Field("read_files_per_s", f.read_files_per_s);
  w.Field("stat_per_s", f.stat_per_s).Field("error", f.error.size() > 400 ? f.error.substr(0, 400) + "..." : f.error);
  w.EndObject();
  return std::string(kStoragePrefix) + w.str() + "\n";
}

Expected<StorageFigures> ParseStorageLine(const std::string& line) {
  std::string body = line.rfind(kStoragePrefix, 0) == 0 ? line.substr(std::strlen(kStoragePrefix)) : line;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("storage record is not JSON: " + body.substr(0, 80));
  StorageFigures f;
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  auto num = [&](const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; };
  f.path = str("path");
  f.node = str("node");
  f.error = str("error");
  f.seq_write = num("seq_write");
  f.seq_read = num("seq_read");
  f.rand_read_iops = num("rand_read_iops");
  f.ckpt_write = num("ckpt_write");
  f.create_per_s = num("create_per_s");
  f.read_files_per_s = num("read_files_per_s");
  f.stat_per_s = num("stat_per_s");
  return f;
}

}  // namespace preflight::accept
