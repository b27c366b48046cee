// The prolog's checkpoint folder (MakeCkptJobDir) and what the epilog's
// finishing copy reports: the child's report on the pipe, the lines, the
// metrics and the state record (node_ckpt.h). The child and the epilog's
// part are in node_ckpt_epilog.cc.
#include "preflight/node_ckpt.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "preflight/ckpt_record.h"
#include "preflight/fileutil.h"
#include "preflight/json.h"
#include "preflight/text.h"

namespace preflight {

namespace {

std::string UserName(uid_t uid) {
  struct passwd pw, *res = nullptr;
  char buf[1024];
  std::string out = "uid " + std::to_string(uid);
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) out += std::string(" (") + res->pw_name + ")";
  return out;
}

bool ValidJobName(const std::string& j) {
  if (j.empty() || j.size() > 64) return false;
  for (char c : j)
    if (!((c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' || (c >= 'a' && c <= 'z'))) return false;
  return j != "." && j != "..";
}

std::string Stamp() {
  char buf[32];
  time_t t = ::time(nullptr);
  struct tm tm;
  ::gmtime_r(&t, &tm);
  ::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

}  // namespace

CkptDirResult MakeCkptJobDir(const Config& cfg, const JobContext& job) {
  CkptDirResult r;
  std::string dir = CkptJobDir(cfg.ckpt, job.job_id);
  if (dir.empty()) return r;
  auto fail = [&](FaultOwner owner, const std::string& msg) {
    r.owner = owner;
    r.message = "ckpt_dir " + dir + ": " + msg;
    return r;
  };
  if (!ValidJobName(job.job_id)) return fail(FaultOwner::kUser, "job id '" + PrintableText(job.job_id) + "' is not a folder name");
  bool root = ::geteuid() == 0;
  if (root && job.uid == static_cast<uid_t>(-1)) return fail(FaultOwner::kUser, "job user unknown (no SLURM_JOB_UID)");
  if (root && job.uid == 0) return r;  // a root job: nothing to drop to, no folder (documented)
  uid_t uid = root ? job.uid : ::geteuid();
  gid_t gid = root ? (job.gid == static_cast<gid_t>(-1) ? job.uid : job.gid) : ::getegid();
  // The chain as stage_dir's (stage_job.h): root's, nobody else may write;
  // 0711 so that the user passes through to the one folder that is theirs.
  std::vector<SetAside> aside;
  auto pfd = OpenPrivateDir(cfg.ckpt.dir, 0711, &aside);
  for (const auto& a : aside)
    r.warnings.push_back("set aside " + a.path + " (owned by " + UserName(a.owner) +
                         ", not root, in a sticky world-writable folder) as " + a.moved_to + ", untouched");
  if (!pfd) {
    Status::Code c = pfd.status().code();
    return fail(c == Status::Code::kPermission    ? FaultOwner::kConfig
                : c == Status::Code::kUnavailable ? FaultOwner::kUser
                                                  : FaultOwner::kNode,
                pfd.status().message());
  }
  int fd = *pfd;
  const char* name = job.job_id.c_str();
  struct stat st;
  if (::fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode) && st.st_uid == uid) {
      // An earlier run of this job left checkpoints that were not all
      // durable: kept for its resume.
      int jfd = ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      bool ok = jfd >= 0 && ::fchmod(jfd, 0700) == 0;
      int e = errno;
      if (jfd >= 0) ::close(jfd);
      ::close(fd);
      if (!ok) return fail(FaultOwner::kNode, std::string("cannot use the kept folder: ") + std::strerror(e));
      r.made = true;
      r.warnings.push_back("kept " + dir + " from an earlier run of job " + job.job_id + " (checkpoints not all durable)");
      return r;
    }
    // Only root writes here: a leftover of another job that had this id.
    std::string moved = job.job_id + ".set-aside." + std::to_string(st.st_uid) + "." + Stamp();
    if (::renameat(fd, name, fd, moved.c_str()) != 0) {
      int e = errno;
      ::close(fd);
      return fail(FaultOwner::kNode, std::string("cannot set aside an old folder: ") + std::strerror(e));
    }
    r.warnings.push_back("set aside " + dir + " (owned by " + UserName(st.st_uid) + ", not the job's user) as " +
                         cfg.ckpt.dir + "/" + moved + ", untouched");
  } else if (errno != ENOENT) {
    int e = errno;
    ::close(fd);
    return fail(FaultOwner::kNode, std::strerror(e));
  }
  // Made root's, then handed over: the parent is root's alone, so nobody
  // can put anything at this name in between.
  if (::mkdirat(fd, name, 0700) != 0) {
    int e = errno;
    ::close(fd);
    return fail(FaultOwner::kNode, std::string("mkdir: ") + std::strerror(e));
  }
  int jfd = ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  bool ok = jfd >= 0 && ::fchmod(jfd, 0700) == 0 && (!root || ::fchown(jfd, uid, gid) == 0);
  int e = errno;
  if (jfd >= 0) ::close(jfd);
  if (!ok) {
    ::unlinkat(fd, name, AT_REMOVEDIR);
    ::close(fd);
    return fail(FaultOwner::kNode, std::string("cannot hand the folder to uid ") + std::to_string(uid) + ": " + std::strerror(e));
  }
  ::close(fd);
  r.made = true;
  return r;
}

std::string CkptChildReportJson(const CkptChildReport& r) {
  nlohmann::json j;
  j["had_plan"] = r.had_plan;
  j["tier"] = r.tier;
  j["newest_durable_time"] = r.newest_durable_time;
  j["plan_error"] = r.plan_error;
  j["round_error"] = r.round_error;
  nlohmann::json recs = nlohmann::json::array();
  for (const auto& rec : r.round.records) recs.push_back(nlohmann::json::parse(CkptRecordJson(rec)));
  j["records"] = recs;
  j["newest_durable"] = r.round.newest_durable;
  j["bytes_not_durable"] = r.round.bytes_not_durable;
  j["notes"] = r.round.notes;
  j["timed_out"] = r.round.timed_out;
  j["cleared"] = r.cleared;
  j["clear_error"] = r.clear_error;
  j["kept_reason"] = r.kept_reason;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Expected<CkptChildReport> ParseCkptChildReport(const std::string& text) {
  if (text.size() > kCkptChildReportMax) return Status::InvalidArgument("checkpoint report: too large");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::InvalidArgument("checkpoint report: not a JSON object");
  CkptChildReport r;
  try {
    r.had_plan = j.at("had_plan").get<bool>();
    r.tier = j.value("tier", std::string());
    r.newest_durable_time = j.value("newest_durable_time", 0.0);
    r.plan_error = j.value("plan_error", std::string());
    r.round_error = j.value("round_error", std::string());
    for (const auto& rec : j.at("records")) {
      auto p = ParseCkptRecord(rec.dump());
      if (!p) return p.status();
      r.round.records.push_back(*p);
    }
    r.round.newest_durable = j.value("newest_durable", std::string());
    r.round.bytes_not_durable = j.value("bytes_not_durable", uint64_t{0});
    r.round.notes = j.value("notes", std::vector<std::string>());
    r.round.timed_out = j.value("timed_out", false);
    r.cleared = j.at("cleared").get<bool>();
    r.clear_error = j.value("clear_error", std::string());
    r.kept_reason = j.value("kept_reason", std::string());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("checkpoint report: ") + e.what());
  }
  return r;
}

std::vector<std::string> CkptOutcomeLines(const CkptChildReport& r, const std::string& child_error, double budget_s) {
  std::vector<std::string> out;
  std::string budget = std::to_string(static_cast<long long>(budget_s)) + " s";
  if (!child_error.empty()) {
    out.push_back("checkpoint: the finishing copy (as the job's user) did not finish: " + child_error +
                  "; the job's checkpoint folder is kept");
    return out;
  }
  if (!r.plan_error.empty()) {
    out.push_back("checkpoint: " + r.plan_error + "; nothing persisted, the job's checkpoint folder is kept");
    return out;
  }
  if (!r.had_plan) {
    out.push_back(std::string("checkpoint: no persist plan (the job did not ask to persist its checkpoints); ") +
                  (r.cleared ? "local checkpoints removed" : "the folder is kept: " + r.clear_error));
    return out;
  }
  if (!r.round_error.empty()) out.push_back("checkpoint: the finishing copy failed: " + r.round_error);
  bool newer_durable = false;  // records are in the order tried: newest first
  for (const auto& rec : r.round.records) {
    std::string l = "checkpoint " + rec.name + ": ";
    if (newer_durable && rec.state != CkptState::kDurable) {
      out.push_back(l + "not needed, " + r.round.newest_durable + " is durable");
      continue;
    }
    newer_durable = newer_durable || (!r.round.newest_durable.empty() && rec.name == r.round.newest_durable);
    switch (rec.state) {
      case CkptState::kDurable:
        l += "durable on " + rec.tier + " (" + HumanBytes(static_cast<double>(rec.bytes)) + " of this node)";
        break;
      case CkptState::kPersisting: {
        std::string m;
        for (const auto& n : rec.missing) m += (m.empty() ? "" : ",") + n;
        l += "not durable, waiting for the parts of " + (m.empty() ? std::string("other nodes") : m);
        break;
      }
      case CkptState::kFailed: l += "not durable: " + rec.error; break;
      case CkptState::kLocal: l += "not durable, not copied"; break;
    }
    out.push_back(l);
  }
  if (r.round.records.empty() && !r.round.newest_durable.empty())
    out.push_back("checkpoint " + r.round.newest_durable + ": durable on " + r.tier + "; nothing newer to copy");
  if (r.round.bytes_not_durable > 0) {
    std::string newest = r.round.records.empty() ? std::string("newest") : r.round.records.front().name;
    // The summary names the cause the newest record gives: a commit the tier
    // refused (another run's checkpoint of that name) is not "a copy that did
    // not finish".
    std::string why = "the copy did not finish";
    if (r.round.timed_out) {
      why = "budget " + budget + " spent";
    } else if (!r.round.records.empty()) {
      const CkptRecord& front = r.round.records.front();
      if (front.state == CkptState::kFailed && !front.error.empty()) why = front.error;
      else if (front.state == CkptState::kPersisting) why = "the other nodes' parts did not arrive";
    }
    out.push_back("checkpoint " + newest + ": not durable, " + why + "; " + std::to_string(r.round.bytes_not_durable) +
                  " bytes left on local disk (kept for the job's next run on this node)");
  } else if (r.round.records.empty() && r.round.newest_durable.empty() && r.round_error.empty()) {
    out.push_back("checkpoint: no complete checkpoint to persist");
  }
  for (const auto& n : r.round.notes) out.push_back("checkpoint: " + n);
  if (r.cleared) out.push_back("checkpoint: local checkpoints removed");
  else if (!r.kept_reason.empty()) out.push_back("checkpoint: the job's checkpoint folder is kept: " + r.kept_reason);
  return out;
}

std::string CkptPrometheus(const std::string& node, const CkptChildReport& r, const std::string& child_error,
                           double now_epoch) {
  std::string l = "{node=\"" + node + "\"}";
  bool ok = child_error.empty() && r.plan_error.empty() && r.round_error.empty() && r.round.bytes_not_durable == 0;
  struct M { const char* name; const char* help; double v; };
  const M ms[] = {
      {"preflight_ckpt_newest_durable_timestamp_seconds",
       "When the newest checkpoint durable with this node's part became durable, as the last epilog saw it (0: none).",
       r.newest_durable_time},
      {"preflight_ckpt_bytes_not_durable",
       "Bytes of complete checkpoints left on this node's local disk, not durable, at the last job's end.",
       static_cast<double>(r.round.bytes_not_durable)},
      {"preflight_ckpt_epilog_ok", "0 if the last epilog's finishing copy left something complete not durable or failed.",
       ok ? 1.0 : 0.0},
      {"preflight_ckpt_epilog_timestamp_seconds", "When the last epilog finished a job's checkpoints here.", now_epoch},
  };
  std::string o;
  for (const auto& m : ms) {
    char v[64];
    std::snprintf(v, sizeof v, "%.17g", m.v);
    o += std::string("# HELP ") + m.name + " " + m.help + "\n# TYPE " + m.name + " gauge\n" + m.name + l + " " + v + "\n";
  }
  return o;
}

std::string CkptStateJson(const std::string& job, const std::string& node, const CkptEpilogResult& r) {
  nlohmann::json j = nlohmann::json::parse(CkptChildReportJson(r.report));
  nlohmann::json out;
  out["job_id"] = job;
  out["node"] = node;
  out["dir"] = r.dir;
  out["child_error"] = r.child_error;
  out["removed"] = r.removed;
  for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = it.value();
  out["lines"] = r.lines;
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace preflight
