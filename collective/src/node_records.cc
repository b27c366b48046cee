// The nodes' records carried by the collective step (collective_node_records.h).
#include "preflight/collective_node_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preflight/collective_records.h"
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
  static const std::vector<NodeRecordKind> kKinds = {{"rails", state::kRails}, {"versions", state::kVersions}};
  return kKinds;
}

Expected<std::string> ShareNodeRecords(Bootstrap& b, const std::string& nodes_dir) {
  std::string out;
  for (const auto& kind : CarriedNodeRecords()) {
    // One reader per node; the other ranks of the node send nothing.
    std::string mine;
    if (b.LocalRank() == 0) {
      std::string why;
      std::string text = ReadRecord(nodes_dir + "/" + b.Node() + kind.suffix, &why);
      mine = b.Node() + "\n" + (text.empty() ? "-" + (why.empty() ? std::string() : " " + why) : text);
    }
    auto all = b.AllGather(std::string("node-record-") + kind.name, mine);
    if (!all) return all.status();
    if (b.Rank() != 0) continue;
    for (const auto& v : *all) {
      size_t nl = v.find('\n');
      if (v.empty() || nl == std::string::npos) continue;
      out += NodeRecordLines(kind.name, v.substr(0, nl), v.substr(nl + 1));
    }
  }
  return out;
}

}  // namespace preflight::collective
