// The nodes' records carried by the collective step (collective_node_records.h).
#include "preflight/collective_node_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preflight/collective_records.h"
#include "preflight/gemm_record.h"
#include "preflight/state_paths.h"

namespace preflight::collective {

namespace {

constexpr size_t kMaxRecordBytes = 64 * 1024;

// The record's JSON lines, or "" with `why` set when there is none to carry.
std::string ReadRecord(const std::string& path, std::string* why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    *why = errno == ENOENT ? "" : "unreadable";
    return "";
  }
  struct stat st;
  std::string text;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = "not a regular file";
  } else {
    text.resize(kMaxRecordBytes + 1);
    size_t got = 0;
    for (;;) {
      ssize_t n = ::read(fd, &text[got], text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
      if (got == text.size()) break;
    }
    text.resize(got);
    if (got > kMaxRecordBytes) {
      *why = "larger than 64 KiB";
      text.clear();
    }
  }
  ::close(fd);
  return text;
}

}  // namespace

const std::vector<NodeRecordKind>& CarriedNodeRecords() {
  static const std::vector<NodeRecordKind> kKinds = {
      {"rails", state::kRails}, {"versions", state::kVersions}, {"gemm", kGemmRecordSuffix}};
  return kKinds;
}

Expected<std::string> ShareNodeRecords(Bootstrap& b, const std::string& nodes_dir) {
  // One fence for every kind: "node RS text RS text ...", RS (0x1e) being
  // a byte no JSON line holds raw. The other ranks of a node send "".
  constexpr char kRs = '\x1e';
  const auto& kinds = CarriedNodeRecords();
  std::string mine;
  if (b.LocalRank() == 0) {
    mine = b.Node();
    for (const auto& kind : kinds) {
      std::string why;
      std::string text = ReadRecord(nodes_dir + "/" + b.Node() + kind.suffix, &why);
      if (text.find(kRs) != std::string::npos) text.clear(), why = "holds a 0x1e byte";
      if (text.empty()) text = "-" + (why.empty() ? std::string() : " " + why);
      mine += kRs + text;
    }
  }
  auto all = b.AllGather("node-records", mine);
  if (!all) return all.status();
  if (b.Rank() != 0) return std::string();
  std::vector<std::string> lines(kinds.size());
  for (const auto& v : *all) {
    std::vector<std::string> f;
    for (size_t p = 0;;) {
      size_t e = v.find(kRs, p);
      f.push_back(v.substr(p, e == std::string::npos ? std::string::npos : e - p));
      if (e == std::string::npos) break;
      p = e + 1;
    }
    if (f.size() != kinds.size() + 1) continue;  // a rank that is not its node's reader
    for (size_t k = 0; k < kinds.size(); ++k) lines[k] += NodeRecordLines(kinds[k].name, f[0], f[k + 1]);
  }
  std::string out;
  for (const auto& l : lines) out += l;
  return out;
}

}  // namespace preflight::collective
