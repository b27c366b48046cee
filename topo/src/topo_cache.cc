// The per-node topology cache (see topo_load.h): its key, its text form
// and LoadTopologyCached, which reads it or loads hwloc and writes it.
#include <hwloc.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "preflight/fileutil.h"
#include "preflight/state_paths.h"
#include "preflight/topo_load.h"

namespace preflight {

namespace {

// Cache format version: bump when the text layout or the meaning of a field
// changes, so old caches are rebuilt instead of misread.
constexpr const char* kCacheMagic = "preflight-topo-cache 3";  // 3: CPX/TPX logical GPUs, AMD VGA Instinct parts

}  // namespace

std::string TopoCacheKey(const Config& cfg, const FsRoot& fs) {
  std::string key = kCacheMagic;
  auto boot = fs.ReadFile("/proc/sys/kernel/random/boot_id");
  key += " boot=" + (boot ? *boot : std::string("unknown"));
  char hw[16];
  std::snprintf(hw, sizeof hw, "%08x", hwloc_get_api_version());
  key += std::string(" hwloc=") + hw;
  key += " fsroot=" + cfg.fsroot;
  key += " xml=" + (cfg.topology_xml.empty() ? std::string("-") : cfg.topology_xml);
  struct stat st;
  if (!cfg.topology_xml.empty() && ::stat(cfg.topology_xml.c_str(), &st) == 0)
    key += ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec);
  return key;
}

std::string TopoCachePath(const Config& cfg, const std::string& node) {
  return state::NodeFile(cfg, node, state::kTopo);
}

// Format, one record a line, fields separated by tabs, "-" for empty, lists
// joined by ",":
//   preflight-topo-cache 3            (magic; the key line repeats it)
//   key <TopoCacheKey>
//   source <text>
//   gpu <index> <busid> <osdev> <numa> <package> <path> <vendor>
//   nic <name> <kind> <busid> <numa> <package> <path> <netdevs> <netdevs_up>
//   port <nic> <num> <state> <link_layer> <rate> <gid_index>
namespace {

std::string F(const std::string& s) { return s.empty() ? "-" : s; }
std::string U(const std::string& s) { return s == "-" ? "" : s; }
std::string L(const std::vector<std::string>& v) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) o += (i ? "," : "") + v[i];
  return F(o);
}
std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  if (s == "-" || s.empty()) return out;
  size_t b = 0;
  for (;;) {
    size_t e = s.find(',', b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}
bool ToInt(const std::string& s, int* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || x < -1 || x > 1 << 20) return false;
  *v = static_cast<int>(x);
  return true;
}

}  // namespace

std::string SerializeTopology(const Topology& topo, const std::string& key) {
  std::string o = std::string(kCacheMagic) + "\nkey\t" + key + "\nsource\t" + F(topo.source) + "\n";
  for (const auto& g : topo.gpus)
    o += "gpu\t" + std::to_string(g.index) + "\t" + F(g.busid) + "\t" + F(g.osdev) + "\t" + std::to_string(g.numa) +
         "\t" + std::to_string(g.package) + "\t" + L(g.path) + "\t" + F(g.vendor) + "\n";
  for (const auto& n : topo.nics) {
    o += "nic\t" + n.name + "\t" + n.kind + "\t" + F(n.busid) + "\t" + std::to_string(n.numa) + "\t" +
         std::to_string(n.package) + "\t" + L(n.path) + "\t" + L(n.netdevs) + "\t" + L(n.netdevs_up) + "\n";
    for (const auto& p : n.ports)
      o += "port\t" + n.name + "\t" + std::to_string(p.num) + "\t" + F(p.state) + "\t" + F(p.link_layer) + "\t" +
           F(p.rate) + "\t" + std::to_string(p.gid_index) + "\n";
  }
  return o;
}

Expected<Topology> ParseTopologyCache(const std::string& text, const std::string& key, const std::string& where) {
  Topology topo;
  size_t pos = 0;
  int lineno = 0;
  bool key_ok = false;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    ++lineno;
    std::string at = where + ":" + std::to_string(lineno);
    if (lineno == 1) {
      if (line != kCacheMagic) return Status::NotFound(at + ": not a cache of this version");
      continue;
    }
    std::vector<std::string> f;
    size_t b = 0;
    for (;;) {
      size_t e = line.find('\t', b);
      f.push_back(line.substr(b, e == std::string::npos ? std::string::npos : e - b));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    auto bad = [&](const char* what) { return Status::InvalidArgument(at + ": malformed " + what + " record"); };
    if (f[0] == "key") {
      if (f.size() != 2) return bad("key");
      if (f[1] != key) return Status::NotFound(at + ": stale (key differs)");
      key_ok = true;
    } else if (!key_ok) {
      return bad("leading");
    } else if (f[0] == "source") {
      if (f.size() != 2) return bad("source");
      topo.source = U(f[1]);
    } else if (f[0] == "gpu") {
      TopoGpu g;
      if (f.size() != 8 || !ToInt(f[1], &g.index) || !ToInt(f[4], &g.numa) || !ToInt(f[5], &g.package)) return bad("gpu");
      g.busid = U(f[2]);
      g.osdev = U(f[3]);
      g.path = SplitList(f[6]);
      g.vendor = U(f[7]);
      topo.gpus.push_back(std::move(g));
    } else if (f[0] == "nic") {
      TopoNic n;
      if (f.size() != 9 || f[1].empty() || !ToInt(f[4], &n.numa) || !ToInt(f[5], &n.package)) return bad("nic");
      n.name = f[1];
      n.kind = f[2];
      n.busid = U(f[3]);
      n.path = SplitList(f[6]);
      n.netdevs = SplitList(f[7]);
      n.netdevs_up = SplitList(f[8]);
      topo.nics.push_back(std::move(n));
    } else if (f[0] == "port") {
      TopoPort p;
      if (f.size() != 7 || topo.nics.empty() || topo.nics.back().name != f[1] || !ToInt(f[2], &p.num) ||
          !ToInt(f[6], &p.gid_index))
        return bad("port");
      p.state = U(f[3]);
      p.link_layer = U(f[4]);
      p.rate = U(f[5]);
      topo.nics.back().ports.push_back(p);
    } else if (!line.empty()) {
      return Status::InvalidArgument(at + ": unknown record '" + f[0] + "'");
    }
  }
  if (!key_ok) return Status::InvalidArgument(where + ": no key record");
  return topo;
}

Expected<Topology> LoadTopologyCached(const Config& cfg, const std::string& node, const TopoLoadOptions& opts,
                                      bool* from_cache) {
  if (from_cache) *from_cache = false;
  FsRoot fs(cfg.fsroot);
  std::string key = TopoCacheKey(cfg, fs);
  std::string path = TopoCachePath(cfg, node);
  if (auto text = ReadWholeFile(path)) {
    auto t = ParseTopologyCache(*text, key, path);
    if (t) {
      t->state_from = "sysfs:" + fs.root();
      if (from_cache) *from_cache = true;
      if (!opts.refresh_sysfs) return t;
      RefreshSysfsState(*t, fs);
      if (opts.write_cache) {
        Status w = MakeDirs(state::NodesDir(cfg), 0755);
        if (w.ok()) w = WriteFileAtomic(path, SerializeTopology(*t, key), 0644);
        if (!w.ok()) return w;
      }
      return t;
    }
    // Stale or malformed: rebuild below (a malformed cache is overwritten).
  }
  auto t = LoadTopologyHwloc(cfg.topology_xml, fs);
  if (!t) return t;
  if (opts.write_cache) {
    Status w = MakeDirs(state::NodesDir(cfg), 0755);
    if (w.ok()) w = WriteFileAtomic(path, SerializeTopology(*t, key), 0644);
    if (!w.ok()) return w.Context("topology cache");
  }
  return t;
}

}  // namespace preflight
