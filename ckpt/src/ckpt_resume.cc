#include "preflight/ckpt_resume.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include "ckpt_io.h"
#include "preflight/ckpt_commit.h"
#include "preflight/ckpt_manifest.h"
#include "preflight/ckpt_tier.h"
#include "preflight/strings.h"

namespace preflight {
namespace {

using ckpt_internal::HeaderAt;

std::vector<std::string> ListNames(int at, const std::string& rel) {
  std::vector<std::string> out;
  int fd = ::openat(at, rel.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return out;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return out;
  }
  while (struct dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool Newer(const CkptCandidate& a, const CkptCandidate& b) {
  if (a.time != b.time) return a.time > b.time;
  if (a.name.size() != b.name.size()) return a.name.size() > b.name.size();
  if (a.name != b.name) return a.name > b.name;
  return a.where == CkptWhere::kLocal && b.where != CkptWhere::kLocal;  // local first within a name
}

}  // namespace

const char* CkptWhereName(CkptWhere w) { return w == CkptWhere::kLocal ? "local disk" : "shared tier"; }

std::vector<std::string> CkptResumeChoice::Lines() const {
  std::vector<std::string> out;
  if (found)
    out.push_back("preflight: resume from " + chosen.name + " on the " + CkptWhereName(chosen.where) + " (" +
                  chosen.path + ")");
  else
    out.push_back("preflight: no checkpoint to resume from");
  for (const auto& c : passed_over)
    out.push_back("preflight: not resuming from " + c.name + " (" + CkptWhereName(c.where) + "): " + c.why);
  return out;
}

CkptResumeChoice PickCkptResume(std::vector<CkptCandidate> cands) {
  // A name ok on local disk is the same checkpoint as a durable one of that
  // name: offered once, from local disk.
  std::set<std::string> local_ok;
  for (const auto& c : cands)
    if (c.where == CkptWhere::kLocal && c.ok) local_ok.insert(c.name);
  cands.erase(std::remove_if(cands.begin(), cands.end(),
                             [&](const CkptCandidate& c) {
                               return c.where == CkptWhere::kShared && c.ok && local_ok.count(c.name);
                             }),
              cands.end());
  std::sort(cands.begin(), cands.end(), Newer);
  CkptResumeChoice out;
  for (auto& c : cands) {
    if (c.ok) {
      out.found = true;
      out.chosen = std::move(c);
      break;
    }
    out.passed_over.push_back(std::move(c));
  }
  return out;
}

Expected<std::vector<CkptCandidate>> SharedCkptCandidates(const std::string& tier, const CkptVerifyOptions& verify) {
  auto entries = ListCkptTier(tier);
  if (!entries) return entries.status();
  auto tfd = ckpt_internal::OpenDirAt(AT_FDCWD, tier, "shared tier " + tier);
  if (!tfd) {
    if (tfd.status().code() == Status::Code::kNotFound) return std::vector<CkptCandidate>{};
    return tfd.status();
  }
  std::set<std::string> named;
  for (const auto& e : *entries)
    if (e.kind == CkptTierKind::kMarked || e.kind == CkptTierKind::kUnmarked || e.kind == CkptTierKind::kForeign)
      named.insert(e.name);
  std::vector<CkptCandidate> out;
  for (const auto& e : *entries) {
    CkptCandidate c;
    c.name = e.name;
    c.where = CkptWhere::kShared;
    c.path = tier + "/" + e.name;
    c.time = e.mtime;
    switch (e.kind) {
      case CkptTierKind::kTrash:
        continue;
      case CkptTierKind::kMarked: {
        auto m = CheckCkptDurable(tier, e.name, verify);
        if (m) {
          c.ok = true;
          c.time = m->time;
          break;
        }
        if (auto h = HeaderAt(tfd->get(), e.entry + "/" + kCkptManifestFile)) c.time = h->time;
        c.why = m.status().message();
        break;
      }
      case CkptTierKind::kUnmarked:
        if (auto h = HeaderAt(tfd->get(), e.entry + "/" + kCkptManifestFile)) c.time = h->time;
        c.why = "torn: committed but not marked durable (its commit stopped before the marker; the next persist or gc "
                "verifies and finishes it)";
        break;
      case CkptTierKind::kForeign:
        c.why = "not written by preflight (no " + std::string(kCkptManifestFile) + ")";
        break;
      case CkptTierKind::kPartial: {
        if (named.count(e.name)) continue;  // a leftover beside a committed NAME: gc's
        c.path = tier + "/" + e.entry;
        std::string parts = e.entry + "/" + kCkptPartsDir;
        auto arrived = ListNames(tfd->get(), parts);
        std::vector<std::string> missing;
        if (!arrived.empty()) {
          if (auto h = HeaderAt(tfd->get(), parts + "/" + arrived[0])) {
            c.time = h->time;
            for (const auto& n : h->nodes)
              if (!std::binary_search(arrived.begin(), arrived.end(), n)) missing.push_back(n);
          }
        }
        c.why = "parts missing (run " + e.run + "): " + std::to_string(arrived.size()) + " arrived" +
                (arrived.empty() ? "" : " (" + Join(arrived, ",") + ")") +
                (missing.empty() ? std::string(", the rest not yet known") : ", waiting for " + Join(missing, ","));
        break;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

Expected<CkptResumeChoice> ChooseCkptResume(const CkptResumeInputs& in) {
  std::vector<CkptCandidate> cands;
  if (!in.tier.empty()) {
    auto shared = SharedCkptCandidates(in.tier, in.verify);
    if (!shared) return shared.status();
    cands = std::move(*shared);
  }
  if (in.allow_local && !in.local_dir.empty()) {
    auto local = LocalCkpts(in.local_dir, in.convention);
    if (!local) return local.status();
    for (const auto& l : *local) {
      CkptCandidate c;
      c.name = l.name;
      c.path = in.local_dir + "/" + l.name;
      c.where = CkptWhere::kLocal;
      c.time = l.time;
      c.ok = l.complete;
      if (!l.complete) c.why = "torn or being written: " + l.why_not;
      cands.push_back(std::move(c));
    }
  }
  return PickCkptResume(std::move(cands));
}

}  // namespace preflight
