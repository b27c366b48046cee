#include "preflight/ras_status.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

#include "preflight/strings.h"

namespace preflight {
namespace {

const char* const kCollectives[kRasCollectives] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool StartsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// Reads a decimal number at s[*i]; false when there is none.
bool Num(const std::string& s, size_t* i, uint64_t* v) {
  size_t j = *i;
  uint64_t n = 0;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])) && j - *i < 19) n = n * 10 + (s[j++] - '0');
  if (j == *i) return false;
  *i = j;
  *v = n;
  return true;
}

// "Process PID on node HOST managing GPU[s] G[ (NVML ...)]"
bool ParseProcessLine(const std::string& t, RasProcess* p) {
  if (!StartsWith(t, "Process ")) return false;
  size_t i = 8;
  uint64_t pid;
  if (!Num(t, &i, &pid)) return false;
  const std::string on = " on node ";
  if (t.compare(i, on.size(), on) != 0) return false;
  i += on.size();
  size_t sp = t.find(' ', i);
  p->pid = static_cast<long>(pid);
  p->host = t.substr(i, sp == std::string::npos ? std::string::npos : sp - i);
  size_t g = t.find("managing GPU", i);
  if (g != std::string::npos) {
    size_t k = t.find(' ', g + 12);
    p->gpu = k == std::string::npos ? "" : Trim(t.substr(k + 1, t.find(" (NVML", k) - k - 1));
  }
  return !p->host.empty();
}

// "... -- GPU G managed by process P on node HOST"
bool ParseManagedTail(const std::string& t, RasProcess* p) {
  size_t g = t.find("-- GPU ");
  size_t m = t.find(" managed by process ");
  size_t n = t.find(" on node ");
  if (g == std::string::npos || m == std::string::npos || n == std::string::npos || !(g < m && m < n)) return false;
  p->gpu = Trim(t.substr(g + 7, m - g - 7));
  size_t i = m + 20;
  uint64_t pid;
  if (!Num(t, &i, &pid)) return false;
  p->pid = static_cast<long>(pid);
  p->host = Trim(t.substr(n + 9));
  return !p->host.empty();
}

// Text MISMATCH block state: the groups of one collective type, and the
// ranks listed without a count (the outliers of one group).
struct Block {
  std::string collective;
  struct G { long ranks; uint64_t upto; bool none; bool single; };
  std::vector<G> groups;
  std::vector<RasLag> singles;  // "Rank R has launched up to operation K -- ..."
  std::vector<RasRank> listed;  // "Rank R -- GPU ..."
};

void CloseBlock(Block& b, RasComm* c, RasSnapshot* s) {
  if (b.groups.empty() && b.singles.empty()) { b = Block(); return; }
  uint64_t top = 0;
  for (const auto& g : b.groups) if (!g.none) top = std::max(top, g.upto);
  for (const auto& l : b.singles) top = std::max(top, l.launched);
  for (auto l : b.singles)
    if (l.launched < top) { l.ahead = top; c->lags.push_back(l); }
  // The listed ranks are the members of the one group small enough to be
  // an outlier (NCCL lists a group of at most 10 ranks and 25% of the
  // communicator); with several candidates the lowest count is taken
  // when the number of listed ranks matches it, else they are left out.
  if (!b.listed.empty()) {
    const Block::G* pick = nullptr;
    for (const auto& g : b.groups)
      if (!g.single && g.ranks == static_cast<long>(b.listed.size()) && (!pick || g.upto < pick->upto || g.none)) pick = &g;
    if (pick && (pick->none || pick->upto < top)) {
      for (const auto& r : b.listed) {
        RasLag l;
        l.collective = b.collective;
        l.rank = r;
        l.launched = pick->none ? 0 : pick->upto;
        l.none = pick->none;
        l.ahead = top;
        c->lags.push_back(l);
      }
    } else if (!pick) {
      s->notes.push_back(c->id + ": " + std::to_string(b.listed.size()) + " listed rank(s) match no count group");
    }
  }
  b = Block();
}

}  // namespace

const char* RasCollectiveName(size_t i) { return i < kRasCollectives ? kCollectives[i] : "?"; }

bool ValidRasVersion(const std::string& v) {
  if (v.empty() || v.size() > 32) return false;
  bool digit = false;
  for (char c : v) {
    if (std::isdigit(static_cast<unsigned char>(c))) digit = true;
    else if (c == '.' && digit) digit = false;
    else return false;
  }
  return digit;
}

bool RasVersionLess(const std::string& a, const std::string& b) {
  if (!ValidRasVersion(a) || !ValidRasVersion(b)) return false;
  std::istringstream x(a), y(b);
  for (int i = 0; i < 8; ++i) {
    std::string p, q;
    bool more_a = static_cast<bool>(std::getline(x, p, '.')), more_b = static_cast<bool>(std::getline(y, q, '.'));
    if (!more_a && !more_b) return false;
    long u = more_a ? std::atol(p.c_str()) : 0, v = more_b ? std::atol(q.c_str()) : 0;
    if (u != v) return u < v;
  }
  return false;
}

Expected<RasSnapshot> ParseRasStatus(const std::string& reply) {
  size_t i = reply.find_first_not_of(" \t\r\n");
  if (i == std::string::npos) return Status::InvalidArgument("empty RAS reply");
  return reply[i] == '{' ? ParseRasJson(reply) : ParseRasText(reply);
}

Expected<RasSnapshot> ParseRasJson(const std::string& reply) {
  // NCCL 2.28.7 and 2.28.9: no comma after a missing rank's "nvml_dev".
  std::string fixed;
  fixed.reserve(reply.size() + 64);
  for (size_t i = 0; i < reply.size();) {
    size_t k = reply.find("\"nvml_dev\":", i);
    if (k == std::string::npos) { fixed.append(reply, i, std::string::npos); break; }
    size_t j = k + 11;
    while (j < reply.size() && (reply[j] == ' ' || reply[j] == '-' || std::isdigit(static_cast<unsigned char>(reply[j])))) ++j;
    fixed.append(reply, i, j - i);
    size_t n = j;
    while (n < reply.size() && std::isspace(static_cast<unsigned char>(reply[n]))) ++n;
    if (n < reply.size() && reply[n] == '"') fixed += ',';
    i = j;
  }
  nlohmann::json j = nlohmann::json::parse(fixed, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("RAS reply: not a JSON object");
  RasSnapshot s;
  s.format = "json";
  if (j.contains("nccl_version") && j["nccl_version"].is_string()) s.nccl_version = j["nccl_version"].get<std::string>();
  auto str = [](const nlohmann::json& o, const char* k) -> std::string {
    if (!o.is_object() || !o.contains(k)) return "";
    const auto& v = o[k];
    return v.is_string() ? v.get<std::string>() : v.is_number() ? v.dump() : "";
  };
  auto num = [](const nlohmann::json& o, const char* k, long d) -> long {
    return o.is_object() && o.contains(k) && o[k].is_number_integer() ? o[k].get<long>() : d;
  };
  auto proc = [&](const nlohmann::json& r) {
    RasProcess p;
    p.host = str(r, "host");
    p.pid = num(r, "pid", -1);
    p.gpu = str(r, "cuda_dev");
    return p;
  };
  if (j.contains("ras") && j["ras"].is_object()) s.timeouts = num(j["ras"], "timeouts_count", 0);
  if (!j.contains("communicators") || !j["communicators"].is_array()) return s;
  std::map<std::string, bool> seen_dead, seen_unresp;
  size_t ranks_seen = 0;
  for (const auto& c : j["communicators"]) {
    if (s.comms.size() >= kRasMaxComms) { s.notes.push_back("more than " + std::to_string(kRasMaxComms) + " communicators: the rest not read"); break; }
    RasComm comm;
    comm.id = str(c, "hash");
    std::string second = str(c, "secondary_hash");
    if (!second.empty()) comm.id += ":" + second;
    comm.size = num(c, "size", 0);
    std::array<uint64_t, kRasCollectives> top{};
    struct R { RasRank rank; std::array<uint64_t, kRasCollectives> n{}; };
    std::vector<R> ranks;
    if (c.contains("ranks") && c["ranks"].is_array())
      for (const auto& r : c["ranks"]) {
        if (++ranks_seen > kRasMaxRanks) break;
        R x;
        x.rank.rank = num(r, "rank", -1);
        x.rank.proc = proc(r);
        if (r.contains("collective_counts") && r["collective_counts"].is_object())
          for (size_t k = 0; k < kRasCollectives; ++k) {
            const auto& cc = r["collective_counts"];
            if (cc.contains(kCollectives[k]) && cc[kCollectives[k]].is_number_unsigned()) x.n[k] = cc[kCollectives[k]].get<uint64_t>();
            top[k] = std::max(top[k], x.n[k]);
          }
        ranks.push_back(x);
      }
    for (const auto& x : ranks)
      for (size_t k = 0; k < kRasCollectives; ++k)
        if (x.n[k] < top[k]) {
          comm.mismatch = true;
          RasLag l;
          l.collective = kCollectives[k];
          l.rank = x.rank;
          l.launched = x.n[k];
          l.ahead = top[k];
          l.none = x.n[k] == 0;
          comm.lags.push_back(l);
        }
    if (c.contains("missing_ranks") && c["missing_ranks"].is_array())
      for (const auto& r : c["missing_ranks"]) {
        if (++ranks_seen > kRasMaxRanks) break;
        RasRank m;
        m.rank = num(r, "rank", -1);
        m.proc = proc(r);
        comm.missing.push_back(m);
        const auto& st = r.contains("status") ? r["status"] : nlohmann::json();
        bool dead = st.is_object() && st.contains("considered_dead") && st["considered_dead"].is_boolean() && st["considered_dead"].get<bool>();
        std::string key = m.proc.host + "/" + std::to_string(m.proc.pid);
        if (dead && !seen_dead[key]) { seen_dead[key] = true; s.dead.push_back(m.proc); }
        if (!dead && !seen_unresp[key]) { seen_unresp[key] = true; s.unresponsive.push_back(m.proc); }
      }
    s.comms.push_back(std::move(comm));
  }
  if (ranks_seen > kRasMaxRanks) s.notes.push_back("more than " + std::to_string(kRasMaxRanks) + " ranks: the rest not read");
  return s;
}

namespace {

// A line under a communicator's INCOMPLETE header: a rank that is missing.
void IncompleteCommLine(const std::string& t, RasComm* comm) {
  RasRank r;
  size_t i = 5;
  uint64_t n;
  if (StartsWith(t, "Rank ") && Num(t, &i, &n)) {
    r.rank = static_cast<long>(n);
    ParseManagedTail(t, &r.proc);
    comm->missing.push_back(r);
  } else if (StartsWith(t, "The missing rank: ") && (i = 18, Num(t, &i, &n))) {
    r.rank = static_cast<long>(n);
    comm->missing.push_back(r);
  }
}

// A line under a communicator's MISMATCH header: a new block ("Communicator
// ranks have different ..."), a group count, or one rank's launch count.
void MismatchLine(const std::string& t, RasComm* comm, Block* block, RasSnapshot* s) {
  const std::string diff = "Communicator ranks have different ";
  if (StartsWith(t, diff)) {
    CloseBlock(*block, comm, s);  // resets *block
    std::string what = t.substr(diff.size());
    size_t sp = what.find(' ');
    std::string word = what.substr(0, sp);
    if (what.find("operation counts") == std::string::npos) block->collective = "?status";
    else block->collective = word == "collective" ? "" : word;
    return;
  }
  if (block->collective == "?status") return;  // "ranks have different status": not counts
  size_t i = 0;
  uint64_t n, k;
  if (Num(t, &i, &n)) {  // "N ranks have launched up to operation K" / "... not launched any operations"
    size_t u = t.find("up to operation ");
    if (u != std::string::npos && (u += 16, Num(t, &u, &k))) block->groups.push_back({static_cast<long>(n), k, false, false});
    else if (t.find("not launched any") != std::string::npos) block->groups.push_back({static_cast<long>(n), 0, true, false});
    return;
  }
  if (!StartsWith(t, "Rank ")) return;
  i = 5;
  if (!Num(t, &i, &n)) return;
  RasRank r;
  r.rank = static_cast<long>(n);
  ParseManagedTail(t, &r.proc);
  size_t u = t.find("has launched up to operation ");
  if (u != std::string::npos && (u += 29, Num(t, &u, &k))) {
    RasLag l;
    l.collective = block->collective;
    l.rank = r;
    l.launched = k;
    block->singles.push_back(l);
    block->groups.push_back({1, k, false, true});
  } else if (t.find("has not launched any") != std::string::npos) {
    RasLag l;
    l.collective = block->collective;
    l.rank = r;
    l.none = true;
    block->singles.push_back(l);
    block->groups.push_back({1, 0, true, true});
  } else {
    block->listed.push_back(r);
  }
}

}  // namespace

Expected<RasSnapshot> ParseRasText(const std::string& reply) {
  RasSnapshot s;
  s.format = "text";
  std::istringstream in(reply);
  std::string line;
  enum { kNone, kDead, kIncomplete, kCommIncomplete, kCommMismatch, kTimeout, kOther } mode = kNone;
  RasComm* comm = nullptr;
  Block block;
  bool recognised = false;
  size_t ranks_seen = 0;
  auto leave_comm = [&] {
    if (comm != nullptr && mode == kCommMismatch) CloseBlock(block, comm, &s);
    block = Block();
  };
  while (std::getline(in, line)) {
    std::string t = Trim(line);
    if (StartsWith(line, "NCCL version ")) {
      size_t i = 13, e = line.find_first_not_of("0123456789.", i);
      s.nccl_version = line.substr(i, e == std::string::npos ? std::string::npos : e - i);
      recognised = true;
      continue;
    }
    if (t.empty()) continue;
    if (t == "Errors" || t == "Warnings" || t == "Job summary") { leave_comm(); mode = kNone; comm = nullptr; recognised = true; continue; }
    if (line[0] != ' ') {  // a block header
      leave_comm();
      comm = nullptr;
      if (t == "DEAD") mode = kDead;
      else if (t == "INCOMPLETE") mode = kIncomplete;
      else if (t == "TIMEOUT") mode = kTimeout;
      else if (t[0] == '#') {
        size_t sp = t.rfind(' ');
        std::string kind = sp == std::string::npos ? "" : t.substr(sp + 1);
        if (s.comms.size() >= kRasMaxComms) { mode = kOther; continue; }
        s.comms.emplace_back();
        comm = &s.comms.back();
        comm->id = t.substr(0, sp);
        mode = kind == "INCOMPLETE" ? kCommIncomplete : kind == "MISMATCH" ? kCommMismatch : kOther;
        comm->mismatch = mode == kCommMismatch;
      } else {
        mode = kOther;
      }
      recognised = recognised || mode != kOther;
      continue;
    }
    if (++ranks_seen > kRasMaxRanks) { s.notes.push_back("more than " + std::to_string(kRasMaxRanks) + " lines of detail: the rest not read"); break; }
    RasProcess p;
    switch (mode) {
      case kDead:
        if (ParseProcessLine(t, &p)) s.dead.push_back(p);
        break;
      case kIncomplete:
        if (ParseProcessLine(t, &p)) s.unresponsive.push_back(p);
        break;
      case kTimeout: {
        size_t i = t.find("Encountered ");
        uint64_t n;
        if (i != std::string::npos && (i += 12, Num(t, &i, &n))) s.timeouts += static_cast<long>(n);
        break;
      }
      case kCommIncomplete:
        IncompleteCommLine(t, comm);
        break;
      case kCommMismatch:
        MismatchLine(t, comm, &block, &s);
        break;
      default:
        break;
    }
  }
  leave_comm();
  if (!recognised) return Status::InvalidArgument("RAS reply: neither JSON nor NCCL's text report");
  return s;
}

}  // namespace preflight
