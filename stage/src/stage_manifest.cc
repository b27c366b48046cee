#include "preflight/stage_manifest.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>

#include <xxhash.h>

#include "preflight/fileutil.h"
#include "preflight/report.h"
#include "stage_check_format.h"

namespace preflight {

std::string ManifestRootLine(char type, const std::string& path) { return std::string("root ") + type + " " + path; }

bool ParseManifestRootLine(const std::string& line, char* type, std::string* path) {
  if (line.size() < 7 || line.compare(0, 5, "root ") != 0 || (line[5] != 'd' && line[5] != 'f') || line[6] != ' ')
    return false;
  *type = line[5];
  *path = line.substr(7);
  return true;
}

char ManifestRootType(const std::vector<std::string>& manifest) {
  char type = 0;
  std::string path;
  return !manifest.empty() && ParseManifestRootLine(manifest[0], &type, &path) ? type : 0;
}

std::string ManifestRootPath(const std::vector<std::string>& manifest) {
  char type = 0;
  std::string path;
  return !manifest.empty() && ParseManifestRootLine(manifest[0], &type, &path) ? path : std::string();
}

bool SameManifest(const std::vector<std::string>& a_in, const std::vector<std::string>& b_in) {
  if (a_in.size() != b_in.size()) return false;
  if (a_in == b_in) return true;  // the usual case: same readdir order
  std::vector<std::string> a = a_in, b = b_in;
  std::sort(a.begin() + (a.empty() ? 0 : 1), a.end());
  std::sort(b.begin() + (b.empty() ? 0 : 1), b.end());
  return a == b;
}

// The digest of a set of lines: their count and the sums of each line's
// 128-bit XXH3, so the order the lines come in does not matter.
void ManifestDigest::Add(const std::string& line) {
  XXH128_hash_t h = XXH3_128bits(line.data(), line.size());
  ++n_;
  a_ += h.low64;
  b_ += h.high64;
}

std::string ManifestDigest::str() const {
  char b[64];
  std::snprintf(b, sizeof b, "%llu-%016llx-%016llx", static_cast<unsigned long long>(n_),
                static_cast<unsigned long long>(a_), static_cast<unsigned long long>(b_));
  return b;
}

std::string DigestOf(const std::vector<std::string>& lines) {
  ManifestDigest d;
  for (const auto& l : lines) d.Add(l);
  return d.str();
}

using namespace stage_internal;  // the check file's records


void CheckManifestBuilder::Root(const std::string& real, uint32_t mode, uint64_t ino, int64_t ctime_sec,
                                uint32_t ctime_nsec) {
  real_ = real;
  root_ = Item{'d', mode, 0, ino, 0, ctime_sec, 0, ctime_nsec, "", ""};
  if (dirs_.empty()) {
    dirs_.push_back({"", kNoEntry, {}});
    dir_index_[""] = 0;
  }
}

uint32_t CheckManifestBuilder::Add(char type, const std::string& path, uint32_t mode, uint64_t size, uint64_t ino,
                                   int64_t mtime_sec, uint32_t mtime_nsec, int64_t ctime_sec, uint32_t ctime_nsec,
                                   const std::string& link) {
  if (dirs_.empty()) {
    dirs_.push_back({"", kNoEntry, {}});
    dir_index_[""] = 0;
  }
  size_t slash = path.rfind('/');
  size_t plen = slash == std::string::npos ? 0 : slash;
  uint32_t parent = last_dir_;
  const std::string& lp = dirs_[parent].path;
  if (lp.size() != plen || path.compare(0, plen, lp) != 0) {
    auto it = dir_index_.find(path.substr(0, plen));
    if (it == dir_index_.end()) broken_ = true;  // the walker lists a directory before its entries
    else parent = last_dir_ = it->second;
  }
  uint32_t idx = static_cast<uint32_t>(items_.size());
  items_.push_back(Item{type, mode, type == 'f' ? size : 0, ino, type == 'f' ? mtime_sec : 0, ctime_sec,
                        type == 'f' ? mtime_nsec : 0u, ctime_nsec,
                        slash == std::string::npos ? path : path.substr(slash + 1), link});
  dirs_[parent].members.push_back(idx);
  if (type == 'd') {
    dir_index_[path] = static_cast<uint32_t>(dirs_.size());
    dirs_.push_back({path, idx, {}});
  }
  return idx;
}

void CheckManifestBuilder::MarkAcl(uint32_t index) {
  std::lock_guard<std::mutex> l(mu_);
  acl_.push_back(index);
}

std::string CheckManifestBuilder::Serialize() const {
  if (real_.empty() || broken_ || dirs_.empty()) return "";  // nothing sound to check against
  const std::vector<Dir>& dirs = dirs_;
  std::vector<uint8_t> acl(items_.size(), 0);
  {
    std::lock_guard<std::mutex> l(const_cast<std::mutex&>(mu_));
    for (uint32_t i : acl_)
      if (i < acl.size()) acl[i] = 1;
  }
  std::string strings = real_;
  std::vector<uint32_t> pos(items_.size());
  std::vector<Rec> recs;
  recs.reserve(items_.size());
  std::vector<DirRec> drecs;
  auto rec_of = [&](const Item& it, const std::string& name) {
    Rec r{};
    r.ino = it.ino;
    r.size = it.size;
    r.mtime_sec = it.mtime_sec;
    r.ctime_sec = it.ctime_sec;
    r.mtime_nsec = it.mtime_nsec;
    r.ctime_nsec = it.ctime_nsec;
    r.mode = it.mode;
    r.name_off = static_cast<uint32_t>(strings.size());
    r.name_len = static_cast<uint16_t>(name.size());
    r.link_len = static_cast<uint16_t>(it.link.size());
    strings += name;
    strings += '\0';
    strings += it.link;
    strings += '\0';
    return r;
  };
  for (const Dir& d : dirs) {
    DirRec dr{};
    dr.path_off = static_cast<uint32_t>(strings.size());
    dr.path_len = static_cast<uint32_t>(d.path.size());
    strings += d.path;
    strings += '\0';
    dr.first = static_cast<uint32_t>(recs.size());
    dr.count = static_cast<uint32_t>(d.members.size());
    dr.self = d.self;  // remapped below
    for (uint32_t i : d.members) {
      const Item& it = items_[i];
      pos[i] = static_cast<uint32_t>(recs.size());
      Rec r = rec_of(it, it.name);
      r.flags = acl[i] ? kFlagAcl : 0;
      recs.push_back(r);
    }
    drecs.push_back(dr);
  }
  for (auto& dr : drecs)
    if (dr.self != kNoEntry) dr.self = pos[dr.self];
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.ndirs = static_cast<uint32_t>(drecs.size());
  h.nentries = static_cast<uint32_t>(recs.size());
  h.strings_len = static_cast<uint32_t>(strings.size());
  h.real_len = static_cast<uint32_t>(real_.size());
  h.root = Rec{};
  h.root.ino = root_.ino;
  h.root.mode = root_.mode;
  h.root.ctime_sec = root_.ctime_sec;
  h.root.ctime_nsec = root_.ctime_nsec;
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out.append(reinterpret_cast<const char*>(drecs.data()), drecs.size() * sizeof(DirRec));
  out.append(reinterpret_cast<const char*>(recs.data()), recs.size() * sizeof(Rec));
  out += strings;
  return out;
}

CheckManifest::~CheckManifest() {
  if (map_) ::munmap(map_, size_);
}

Status CheckManifest::Validate(const char* data, size_t size, std::string* real) {
  Header h;
  if (size < sizeof h) return Status::IOError("check manifest: truncated");
  std::memcpy(&h, data, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return Status::IOError("check manifest: bad magic");
  uint64_t need = sizeof h + uint64_t{h.ndirs} * sizeof(DirRec) + uint64_t{h.nentries} * sizeof(Rec) + h.strings_len;
  if (size != need || h.real_len > h.strings_len || h.ndirs == 0)
    return Status::IOError("check manifest: size mismatch");
  // Bounds of every record, once, so the checker can trust offsets.
  const char* base = data + sizeof h;
  const DirRec* dirs = reinterpret_cast<const DirRec*>(base);
  const Rec* recs = reinterpret_cast<const Rec*>(base + h.ndirs * sizeof(DirRec));
  for (uint32_t i = 0; i < h.ndirs; ++i) {
    const DirRec& d = dirs[i];
    if (uint64_t{d.path_off} + d.path_len + 1 > h.strings_len || uint64_t{d.first} + d.count > h.nentries ||
        (d.self != kNoEntry && d.self >= h.nentries))
      return Status::IOError("check manifest: bad directory record");
  }
  for (uint32_t i = 0; i < h.nentries; ++i) {
    const Rec& r = recs[i];
    if (uint64_t{r.name_off} + r.name_len + r.link_len + 2 > h.strings_len)
      return Status::IOError("check manifest: bad entry record");
  }
  real->assign(base + h.ndirs * sizeof(DirRec) + h.nentries * sizeof(Rec), h.real_len);
  return Status::Ok();
}

Expected<std::shared_ptr<CheckManifest>> CheckManifest::Parse(std::string bytes) {
  auto m = std::make_shared<CheckManifest>();
  m->owned_ = std::move(bytes);
  m->data_ = m->owned_.data();
  m->size_ = m->owned_.size();
  Status s = Validate(m->data_, m->size_, &m->real_);
  if (!s.ok()) return s;
  return m;
}

Expected<std::shared_ptr<CheckManifest>> CheckManifest::Load(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno(e, "stat " + path);
  }
  if (!S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(sizeof(Header))) {
    ::close(fd);
    return Status::IOError(path + ": check manifest: truncated");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return Status::FromErrno(e, "map " + path);
  auto m = std::make_shared<CheckManifest>();
  m->map_ = p;
  m->data_ = static_cast<const char*>(p);
  m->size_ = size;
  Status s = Validate(m->data_, m->size_, &m->real_);
  if (!s.ok()) return Status::IOError(path + ": " + s.message());
  return m;
}

uint64_t CheckManifest::entries() const {
  Header h;
  std::memcpy(&h, data_, sizeof h);
  return h.nentries;
}
uint64_t CheckManifest::dirs() const {
  Header h;
  std::memcpy(&h, data_, sizeof h);
  return h.ndirs;
}

}  // namespace preflight
