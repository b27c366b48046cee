#include "preflight/ckpt_job.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <nlohmann/json.hpp>

#include "ckpt_io.h"
#include "ckpt_walk.h"
#include "preflight/ckpt_manifest.h"
#include "preflight/ckpt_retention.h"
#include "preflight/ckpt_tier.h"
#include "preflight/clock.h"
#include "preflight/fileutil.h"
#include "preflight/json.h"

namespace preflight {

CkptConventionSpec CkptPlan::ConventionFor(const std::string& node) const {
  CkptConventionSpec s;
  s.kind = convention;
  s.marker = marker;
  s.coordinator = !nodes.empty() && nodes.front() == node;
  return s;
}

Status ValidCkptPlan(const CkptPlan& p) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("persist plan: " + field + ": " + why);
  };
  if (p.tier.empty() || p.tier[0] != '/') return bad("tier", "'" + p.tier + "' is not an absolute path");
  if (p.tier.size() > 1024) return bad("tier", "longer than 1024 bytes");
  if (Status s = ValidCkptRun(p.run); !s.ok()) return bad("run", s.message());
  if (p.nodes.empty()) return bad("nodes", "none");
  if (p.nodes.size() > kCkptMaxNodes) return bad("nodes", "more than " + std::to_string(kCkptMaxNodes));
  for (const auto& n : p.nodes)
    if (Status s = ValidCkptNode(n); !s.ok()) return bad("nodes", s.message());
  if (p.convention == CkptConvention::kMarker) {
    if (Status s = ValidCkptName(p.marker); !s.ok()) return bad("marker", s.message());
  }
  return Status::Ok();
}

std::string CkptPlanJson(const CkptPlan& p) {
  JsonWriter w(true);
  w.BeginObject();
  w.Field("version", static_cast<int64_t>(1));
  w.Field("tier", p.tier).Field("run", p.run);
  w.Key("nodes").BeginArray();
  for (const auto& n : p.nodes) w.String(n);
  w.EndArray();
  w.Field("convention", CkptConventionName(p.convention)).Field("marker", p.marker);
  w.Field("keep_shared", static_cast<int64_t>(p.keep_shared)).Field("keep_local", static_cast<int64_t>(p.keep_local));
  w.Field("verify", CkptVerifyName(p.verify));
  w.EndObject();
  return w.str() + "\n";
}

Expected<CkptPlan> ParseCkptPlan(const std::string& text) {
  if (text.size() > kCkptPlanMaxBytes) return Status::InvalidArgument("persist plan: larger than 1 MiB");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::InvalidArgument("persist plan: not a JSON object");
  CkptPlan p;
  auto str = [&](const char* k, std::string* out, bool required) -> Status {
    auto it = j.find(k);
    if (it == j.end()) return required ? Status::InvalidArgument(std::string("persist plan: no ") + k) : Status::Ok();
    if (!it->is_string()) return Status::InvalidArgument(std::string("persist plan: ") + k + " is not a string");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  auto count = [&](const char* k, uint64_t* out) -> Status {
    auto it = j.find(k);
    if (it == j.end()) return Status::Ok();
    if (!it->is_number_unsigned())
      return Status::InvalidArgument(std::string("persist plan: ") + k + " is not a non-negative integer");
    *out = it->get<uint64_t>();
    return Status::Ok();
  };
  std::string convention = "marker", verify = "sizes";
  for (Status s : {str("tier", &p.tier, true), str("run", &p.run, true), str("convention", &convention, false),
                   str("marker", &p.marker, false), str("verify", &verify, false),
                   count("keep_shared", &p.keep_shared), count("keep_local", &p.keep_local)})
    if (!s.ok()) return s;
  auto nodes = j.find("nodes");
  if (nodes == j.end() || !nodes->is_array()) return Status::InvalidArgument("persist plan: nodes is not an array");
  for (const auto& n : *nodes) {
    if (!n.is_string()) return Status::InvalidArgument("persist plan: nodes holds a non-string");
    p.nodes.push_back(n.get<std::string>());
  }
  auto c = ParseCkptConvention(convention);
  if (!c) return Status::InvalidArgument("persist plan: " + c.status().message());
  p.convention = *c;
  auto v = ParseCkptVerify(verify);
  if (!v) return Status::InvalidArgument("persist plan: " + v.status().message());
  p.verify = *v;
  if (Status s = ValidCkptPlan(p); !s.ok()) return s;
  return p;
}

Status WriteCkptPlan(const std::string& local_dir, const CkptPlan& p) {
  if (Status s = ValidCkptPlan(p); !s.ok()) return s;
  return WriteFileAtomic(local_dir + "/" + kCkptPlanFile, CkptPlanJson(p), 0600);
}

Expected<CkptPlan> ReadCkptPlan(const std::string& local_dir) {
  std::string path = local_dir + "/" + kCkptPlanFile;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Status::FromErrno(errno, path);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kCkptPlanMaxBytes) return Status::InvalidArgument(path + ": larger than 1 MiB");
  auto text = ReadWholeFile(path);
  if (!text) return text.status();
  auto p = ParseCkptPlan(*text);
  if (!p) return p.status().Context(path);
  return p;
}

namespace {

uint64_t PartBytes(const std::string& dir, const CkptConventionSpec& spec) {
  auto walked = ckpt_internal::WalkCheckpoint(dir, CkptPartSkipNames(spec));
  if (!walked) return 0;
  uint64_t n = 0;
  for (const auto& e : *walked)
    if (e.type == 'f') n += e.size;
  return n;
}

// The newest checkpoint a round found durable with this node's part, and
// its local completion time: "NAME TIME". Checkpoints complete before it
// are never persisted again, though local retention may have removed it
// (else a round would take an older one, which the other nodes no longer
// send, for the newest still to persist).
struct Watermark {
  std::string name;
  double time = 0;
};

Watermark ReadWatermark(const std::string& local_dir) {
  Watermark w;
  std::string path = local_dir + "/" + kCkptDurableWatermark;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 4096) return w;
  auto text = ReadWholeFile(path);
  if (!text) return w;
  size_t sp = text->find(' ');
  if (sp == std::string::npos) return w;
  char* end = nullptr;
  double t = std::strtod(text->c_str() + sp + 1, &end);
  if (end == text->c_str() + sp + 1 || !ValidCkptName(text->substr(0, sp)).ok()) return w;
  w.name = text->substr(0, sp);
  w.time = t;
  return w;
}

}  // namespace

Expected<CkptRoundResult> PersistRound(const std::string& local_dir, const CkptPlan& plan, const std::string& node,
                                       const CkptRoundOptions& o) {
  if (Status s = ValidCkptPlan(plan); !s.ok()) return s;
  CkptConventionSpec spec = plan.ConventionFor(node);
  auto local = LocalCkpts(local_dir, spec);
  if (!local) return local.status();
  std::vector<LocalCkpt> complete;
  for (const auto& c : *local)
    if (c.complete) complete.push_back(c);
  std::reverse(complete.begin(), complete.end());  // newest first

  CkptVerifyOptions sizes;
  CkptRoundResult out;
  CkptPersistOptions po;
  po.threads = o.threads;
  po.deadline = o.deadline;
  po.rate_cap = o.rate_cap;
  po.verify.level = plan.verify;
  po.verify.seed = static_cast<uint64_t>(NowUnix());
  po.fault = o.fault;
  unsigned attempts = 0;
  bool committed = false;
  std::vector<const LocalCkpt*> not_durable;
  Watermark mark = ReadWatermark(local_dir);
  double newest_time = 0;
  for (const auto& c : complete) {
    if (!mark.name.empty() && (c.time < mark.time || (c.time == mark.time && c.name != mark.name))) {
      out.newest_durable = mark.name;  // older than a durable one: never persisted again
      break;
    }
    newest_time = c.time;
    if (LocalPartDurable(local_dir, c.name, plan.tier, node, spec, sizes).ok()) {
      out.newest_durable = c.name;
      break;
    }
    not_durable.push_back(&c);
    if (attempts >= o.max_attempts) continue;
    if (o.deadline > 0 && MonotonicSeconds() >= o.deadline) {
      out.timed_out = true;
      continue;
    }
    ++attempts;
    CkptPersistRequest req;
    req.local_dir = local_dir;
    req.name = c.name;
    req.tier = plan.tier;
    req.run = plan.run;
    req.node = node;
    req.nodes = plan.nodes;
    req.convention = spec;
    req.complete_time = c.time;
    double start = NowUnix();
    auto r = PersistCkpt(req, po);
    out.records.push_back(CkptRecordFromPersist(req, r, start, NowUnix()));
    if (!r && r.status().code() == Status::Code::kTimeout) out.timed_out = true;
    if (r && r->state == CkptCommitState::kDurable) {
      committed = committed || r->committed_here;
      not_durable.pop_back();
      out.newest_durable = c.name;
      break;
    }
  }
  for (const LocalCkpt* c : not_durable) out.bytes_not_durable += PartBytes(local_dir + "/" + c->name, spec);
  if (!out.newest_durable.empty() && out.newest_durable != mark.name) {
    char text[64];
    std::snprintf(text, sizeof text, " %.9f\n", newest_time);
    Status s = WriteFileAtomic(local_dir + "/" + kCkptDurableWatermark, out.newest_durable + text, 0600);
    if (!s.ok()) out.notes.push_back("durable watermark: " + s.message());
  }

  if (o.local_gc && !out.timed_out) {
    CkptLocalGcOptions lo;
    lo.keep = plan.keep_local;
    lo.tier = plan.tier;
    lo.node = node;
    lo.convention = spec;
    auto removed = CkptLocalGc(local_dir, lo);
    if (removed) out.removed_local = *removed;
    else out.notes.push_back("local retention: " + removed.status().message());
  }
  if (o.tier_gc && committed && plan.keep_shared > 0 && !out.timed_out) {
    CkptTierGcOptions to;
    to.keep = plan.keep_shared;
    auto gc = CkptTierGc(plan.tier, to);
    if (gc) {
      out.removed_shared = gc->removed;
      for (const auto& n : gc->notes) out.notes.push_back("tier retention: " + n);
    } else {
      out.notes.push_back("tier retention: " + gc.status().message());
    }
  }
  return out;
}

Expected<std::vector<std::string>> RemoveOvertakenCopies(const std::string& local_dir, const CkptPlan& plan,
                                                         const std::string& node) {
  std::vector<std::string> removed;
  auto entries = ListCkptTier(plan.tier);
  if (!entries) return entries.status();
  auto tfd = ckpt_internal::OpenDirAt(AT_FDCWD, plan.tier, "shared tier " + plan.tier);
  if (!tfd) return tfd.status();
  // The newest marked checkpoint on the tier, by its combined manifest's
  // time (the latest of its parts' local completion times). This node's
  // watermark may lag it: another node's agent made the last commit.
  std::string newest;
  double newest_time = 0;
  for (const auto& e : *entries) {
    if (e.kind != CkptTierKind::kMarked) continue;
    auto h = ckpt_internal::HeaderAt(tfd->get(), e.entry + "/" + kCkptManifestFile);
    if (h && h->time > newest_time) newest = e.name, newest_time = h->time;
  }
  if (newest.empty()) return removed;
  auto local = LocalCkpts(local_dir, plan.ConventionFor(node));
  if (!local) return local.status();
  std::set<std::string> older;  // complete here before the newest durable one
  for (const auto& c : *local)
    if (c.complete && c.time < newest_time && c.name != newest) older.insert(c.name);
  for (const auto& e : *entries) {
    if (e.kind != CkptTierKind::kPartial || e.run != plan.run || !older.count(e.name)) continue;
    if (Status s = ckpt_internal::Discard(tfd->get(), plan.tier, e.entry); !s.ok()) return s;
    removed.push_back(e.entry);
  }
  return removed;
}

Status SetCkptIoClass(CkptIoClass c) {
  constexpr int kWhoProcess = 1, kClassShift = 13, kBestEffort = 2, kIdle = 3;
  int prio = -1;
  if (c == CkptIoClass::kIdle) prio = kIdle << kClassShift;
  if (c == CkptIoClass::kLow) prio = (kBestEffort << kClassShift) | 7;
  if (prio < 0) return Status::Ok();
  if (::syscall(SYS_ioprio_set, kWhoProcess, 0, prio) != 0)
    return Status::FromErrno(errno, std::string("ioprio_set ") + CkptIoClassName(c));
  // The CPU too: hashing and copying yield to the training's own threads
  // (its data loaders) on a busy node. Linux: the calling thread, and the
  // threads it starts after. Only ever raised: a user cannot lower it back.
  const int nice = c == CkptIoClass::kIdle ? kCkptIdleNice : kCkptLowNice;
  errno = 0;
  int now = ::getpriority(PRIO_PROCESS, 0);
  if (errno == 0 && now < nice && ::setpriority(PRIO_PROCESS, 0, nice) != 0)
    return Status::FromErrno(errno, "setpriority " + std::to_string(nice));
  return Status::Ok();
}

}  // namespace preflight
