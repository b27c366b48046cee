#include "preflight/ckpt_manifest.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "preflight/strings.h"
#include "preflight/text.h"

namespace preflight {
namespace {

constexpr char kMagic[] = "preflight-ckpt-manifest";

bool CharIn(const std::string& s, bool (*ok)(char)) {
  for (char c : s)
    if (!ok(c)) return false;
  return true;
}
bool RunChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+'; }
bool NodeChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> v;
  size_t i = 0;
  while (i <= line.size()) {
    size_t j = line.find(' ', i);
    if (j == std::string::npos) j = line.size();
    v.push_back(line.substr(i, j - i));
    i = j + 1;
  }
  return v;
}

bool ParseU64(const std::string& s, int base, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, base);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  *out = v;
  return true;
}

// Parses the manifest; header_only stops at the first entry line.
// One entry line, "d MODE NODE PATH", "f MODE NODE SIZE HASH PATH" or
// "l MODE NODE PATH TARGET", into *e: "" or why it is refused.
std::string ParseEntry(const std::vector<std::string>& f, const CkptManifest& m, CkptEntry* e) {
  const std::string& k = f[0];
  if (f.size() != (k == "f" ? 6u : k == "l" ? 5u : 4u)) return "wrong number of fields";
  e->type = k[0];
  uint64_t mode, node;
  if (!ParseU64(f[1], 8, &mode) || mode > 07777) return "bad mode";
  if (!ParseU64(f[2], 10, &node) || node >= m.nodes.size()) return "bad node index";
  e->mode = static_cast<uint32_t>(mode);
  e->node = static_cast<uint32_t>(node);
  size_t pi = 3;
  if (k == "f") {
    if (!ParseU64(f[3], 10, &e->size)) return "bad size";
    if (f[4].size() != 16 || !ParseU64(f[4], 16, &e->hash)) return "bad hash";
    pi = 5;
  }
  auto p = CkptUnescape(f[pi]);
  if (!p) return p.status().message();
  if (Status s = ValidCkptRelPath(*p); !s.ok()) return s.message();
  e->path = *p;
  if (k == "l") {
    auto t = CkptUnescape(f[4]);
    if (!t || t->empty() || t->size() > kCkptMaxPathBytes) return "bad symlink target";
    e->link = *t;
  }
  return "";
}

// One header line (name, run, node, nodes, marker, time) into *m: "" or
// why it is refused (an unknown line among them).
std::string ParseHeaderLine(const std::vector<std::string>& f, const std::string& line, CkptManifest* m) {
  const std::string& k = f[0];
  if (k == "name" && f.size() == 2) {
    auto v = CkptUnescape(f[1]);
    if (!v || !ValidCkptName(*v).ok()) return "bad name";
    m->name = *v;
  } else if (k == "run" && f.size() == 2) {
    if (!ValidCkptRun(f[1]).ok()) return "bad run id";
    m->run = f[1];
  } else if (k == "node" && f.size() == 2) {
    if (!ValidCkptNode(f[1]).ok()) return "bad node";
    m->node = f[1];
  } else if (k == "nodes" && f.size() >= 2) {
    if (f.size() - 1 > kCkptMaxNodes) return "more than kCkptMaxNodes nodes";
    std::unordered_set<std::string> seen;
    for (size_t i = 1; i < f.size(); ++i) {
      if (!ValidCkptNode(f[i]).ok() || !seen.insert(f[i]).second) return "bad or repeated node";
      m->nodes.push_back(f[i]);
    }
  } else if (k == "marker" && f.size() == 2) {
    if (f[1] != "-") {
      auto v = CkptUnescape(f[1]);
      if (!v || ValidCkptRelPath(*v).code() != Status::Code::kOk || v->find('/') != std::string::npos) return "bad marker";
      m->marker = *v;
    }
  } else if (k == "time" && f.size() == 2) {
    char* end = nullptr;
    m->time = std::strtod(f[1].c_str(), &end);
    if (f[1].empty() || end != f[1].c_str() + f[1].size()) return "bad time";
  } else {
    return "unknown line '" + Utf8Cut(PrintableText(line), 80) + "'";
  }
  return "";
}

Expected<CkptManifest> Parse(const std::string& text, bool header_only) {
  if (text.size() > kCkptMaxManifestBytes) return Status::InvalidArgument("manifest larger than kCkptMaxManifestBytes");
  CkptManifest m;
  std::unordered_set<std::string> paths, dirs;
  bool ended = false, have_name = false, have_run = false;
  uint64_t lineno = 0;
  size_t pos = 0;
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("manifest line " + std::to_string(lineno) + ": " + why);
  };
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      if (header_only) break;  // a prefix may end mid-line
      return Status::InvalidArgument("manifest: last line has no newline (cut short)");
    }
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    if (ended) return bad("text after the end line");
    auto f = Fields(line);
    if (lineno == 1) {
      if (f.size() != 3 || f[0] != kMagic || f[1] != "1" || (f[2] != "part" && f[2] != "combined"))
        return bad("not a preflight checkpoint manifest, version 1");
      m.combined = f[2] == "combined";
      continue;
    }
    const std::string& k = f[0];
    if (k == "d" || k == "f" || k == "l") {
      if (header_only) return m;
      if (!have_name || !have_run || m.nodes.empty()) return bad("entry before the name, run and nodes lines");
      CkptEntry e;
      if (std::string why = ParseEntry(f, m, &e); !why.empty()) return bad(why);
      if (m.entries.size() >= kCkptMaxEntries) return bad("more than kCkptMaxEntries entries");
      if (!paths.insert(e.path).second) return bad("path listed twice: " + f[k == "f" ? 5 : 3]);
      if (e.type == 'd') dirs.insert(e.path);
      m.entries.push_back(std::move(e));
    } else if (k == "end") {
      uint64_t n, bytes;
      if (f.size() != 3 || !ParseU64(f[1], 10, &n) || !ParseU64(f[2], 10, &bytes)) return bad("bad end line");
      if (n != m.entries.size() || bytes != m.Bytes()) return bad("end line does not match the entries");
      ended = true;
    } else if (!m.entries.empty()) {
      return bad("header line after the entries");
    } else if (std::string why = ParseHeaderLine(f, line, &m); !why.empty()) {
      return bad(why);
    } else {
      have_name = have_name || k == "name";
      have_run = have_run || k == "run";
    }
  }
  if (header_only) return m;
  if (!ended) return Status::InvalidArgument("manifest: no end line (cut short)");
  if (!have_name || !have_run || m.nodes.empty()) return Status::InvalidArgument("manifest: no name, run or nodes line");
  if (!m.combined && (m.node.empty() || m.nodes.end() == std::find(m.nodes.begin(), m.nodes.end(), m.node)))
    return Status::InvalidArgument("manifest: a part's node is missing or not among its nodes");
  for (const auto& e : m.entries) {
    size_t slash = e.path.rfind('/');
    if (slash != std::string::npos && dirs.count(e.path.substr(0, slash)) == 0)
      return Status::InvalidArgument("manifest: " + CkptEscape(e.path) + " is listed without its directory");
  }
  return m;
}

}  // namespace

Status ValidCkptName(const std::string& name) {
  if (name.empty() || name.size() > kCkptMaxNameBytes)
    return Status::InvalidArgument("checkpoint name '" + CkptEscape(name) + "': 1 to " +
                                   std::to_string(kCkptMaxNameBytes) + " bytes (kCkptMaxNameBytes)");
  if (name[0] == '.' || name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
    return Status::InvalidArgument("checkpoint name '" + CkptEscape(name) + "': must not start with '.' or hold '/'");
  return Status::Ok();
}

Status ValidCkptRun(const std::string& run) {
  if (run.empty() || run.size() > kCkptMaxRunBytes || !CharIn(run, RunChar))
    return Status::InvalidArgument("run id '" + CkptEscape(run) + "': 1 to " + std::to_string(kCkptMaxRunBytes) +
                                   " of [A-Za-z0-9_.+]");
  return Status::Ok();
}

Status ValidCkptNode(const std::string& node) {
  if (node.empty() || node.size() > kCkptMaxNodeBytes || node[0] == '.' || !CharIn(node, NodeChar))
    return Status::InvalidArgument("node name '" + CkptEscape(node) + "': 1 to " + std::to_string(kCkptMaxNodeBytes) +
                                   " of [A-Za-z0-9_.-], not starting with '.'");
  return Status::Ok();
}

Status ValidCkptRelPath(const std::string& path) {
  if (path.empty() || path.size() > kCkptMaxPathBytes)
    return Status::InvalidArgument("path '" + CkptEscape(path) + "': 1 to " + std::to_string(kCkptMaxPathBytes) +
                                   " bytes (kCkptMaxPathBytes)");
  if (path.find('\0') != std::string::npos) return Status::InvalidArgument("path holds a NUL byte");
  size_t depth = 0;
  for (size_t i = 0; i <= path.size();) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string c = path.substr(i, j - i);
    if (c.empty() || c == "." || c == "..")
      return Status::InvalidArgument("path '" + CkptEscape(path) + "': empty, '.' or '..' component");
    if (c.size() > kCkptMaxComponentBytes)
      return Status::InvalidArgument("path '" + CkptEscape(path) + "': a component longer than " +
                                     std::to_string(kCkptMaxComponentBytes) + " bytes");
    if (++depth > kCkptMaxDepth)
      return Status::InvalidArgument("path '" + CkptEscape(path) + "': deeper than " + std::to_string(kCkptMaxDepth) +
                                     " levels (kCkptMaxDepth)");
    i = j + 1;
  }
  return Status::Ok();
}

uint64_t CkptManifest::Bytes() const {
  uint64_t b = 0;
  for (const auto& e : entries) b += e.type == 'f' ? e.size : 0;
  return b;
}

uint64_t CkptManifest::Files() const {
  uint64_t n = 0;
  for (const auto& e : entries) n += e.type == 'f';
  return n;
}

std::string SerializeCkptManifest(const CkptManifest& m) {
  std::string s;
  s.reserve(256 + m.entries.size() * 96);
  s += std::string(kMagic) + " 1 " + (m.combined ? "combined" : "part") + "\n";
  s += "name " + CkptEscape(m.name) + "\n";
  s += "run " + m.run + "\n";
  if (!m.combined) s += "node " + m.node + "\n";
  s += "nodes " + Join(m.nodes, " ") + "\n";
  s += "marker " + (m.marker.empty() ? std::string("-") : CkptEscape(m.marker)) + "\n";
  char t[64];
  std::snprintf(t, sizeof t, "%.6f", m.time);
  s += std::string("time ") + t + "\n";
  for (const auto& e : m.entries) {
    char head[96];
    std::snprintf(head, sizeof head, "%c %o %u ", e.type, e.mode, e.node);
    s += head;
    if (e.type == 'f') s += std::to_string(e.size) + " " + CkptHex(e.hash) + " ";
    s += CkptEscape(e.path);
    if (e.type == 'l') s += " " + CkptEscape(e.link);
    s += "\n";
  }
  s += "end " + std::to_string(m.entries.size()) + " " + std::to_string(m.Bytes()) + "\n";
  return s;
}

Expected<CkptManifest> ParseCkptManifest(const std::string& text) { return Parse(text, false); }
Expected<CkptManifest> ParseCkptManifestHeader(const std::string& prefix) { return Parse(prefix, true); }

uint64_t CkptHashBytes(const void* p, size_t n) { return XXH3_64bits(p, n); }

CkptPieceHasher::CkptPieceHasher() : state_(XXH3_createState()) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }
CkptPieceHasher::~CkptPieceHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void CkptPieceHasher::Update(const void* p, size_t n) { XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), p, n); }
uint64_t CkptPieceHasher::Digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }

uint64_t CkptCombinePieces(const std::vector<uint64_t>& pieces) {
  std::string le;
  le.reserve(pieces.size() * 8);
  for (uint64_t h : pieces)
    for (int i = 0; i < 8; ++i) le.push_back(static_cast<char>((h >> (8 * i)) & 0xff));
  return XXH3_64bits(le.data(), le.size());
}

uint64_t CkptFileHashOf(const std::string& bytes) {
  std::vector<uint64_t> pieces;
  for (size_t off = 0; off < bytes.size(); off += kCkptHashPiece)
    pieces.push_back(CkptHashBytes(bytes.data() + off, std::min<size_t>(kCkptHashPiece, bytes.size() - off)));
  return CkptCombinePieces(pieces);
}

uint64_t CkptManifestDigest(const std::string& bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::string CkptEscape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string o;
  o.reserve(s.size());
  for (unsigned char c : s) {
    if (c <= 0x20 || c == 0x7f || c == '%') {
      o += '%';
      o += kHex[c >> 4];
      o += kHex[c & 15];
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}

Expected<std::string> CkptUnescape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c <= 0x20 || c == 0x7f) return Status::InvalidArgument("unescaped control byte or space");
    if (c != '%') {
      o += static_cast<char>(c);
      continue;
    }
    uint64_t v;
    if (i + 2 >= s.size() || !ParseU64(s.substr(i + 1, 2), 16, &v))
      return Status::InvalidArgument("bad %XX escape");
    o += static_cast<char>(v);
    i += 2;
  }
  return o;
}

std::string CkptHex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}

}  // namespace preflight
