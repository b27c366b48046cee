#include "preflight/config_check.h"

#include <pwd.h>
#include <sys/stat.h>

#include <cerrno>

#include "preflight/fileutil.h"
#include "preflight/node_addresses.h"
#include "preflight/status.h"

namespace preflight {
namespace {

using FindingLevel = ConfigFinding::Level;

std::string Owner(uid_t uid) {
  struct passwd pw, *res = nullptr;
  char buf[1024];
  std::string out = "uid " + std::to_string(uid);
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) out += std::string(" (") + res->pw_name + ")";
  return out;
}

bool StickyWorldWritable(const struct stat& st) {
  return S_ISDIR(st.st_mode) && (st.st_mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH);
}

}  // namespace

std::vector<ConfigFinding> CheckStageChain(const std::string& dir, const std::vector<std::string>& subdirs, uid_t me) {
  std::vector<ConfigFinding> out;
  auto add = [&](FindingLevel l, const std::string& m) { out.push_back({l, "stage_dir " + m}); };
  if (dir.empty() || dir[0] != '/') {
    add(FindingLevel::kError, "'" + dir + "': not an absolute path");
    return out;
  }
  struct stat parent;
  if (::lstat("/", &parent) != 0) {
    add(FindingLevel::kWarning, Status::FromErrno(errno, "stat /").message() + ": not checked");
    return out;
  }
  std::string cur, above = "/";
  size_t i = 1;
  while (i <= dir.size()) {
    size_t j = dir.find('/', i);
    if (j == std::string::npos) j = dir.size();
    std::string name = dir.substr(i, j - i);
    i = j + 1;
    if (name.empty() || name == ".") continue;
    if (name == "..") {
      add(FindingLevel::kError, dir + ": '..' in the path; refused");
      return out;
    }
    cur += "/" + name;
    bool last = i > dir.size() || dir.find_first_not_of('/', j) == std::string::npos;
    struct stat st;
    if (::lstat(cur.c_str(), &st) != 0) {
      if (errno != ENOENT) {
        add(FindingLevel::kWarning, Status::FromErrno(errno, "stat " + cur).message() + ": not checked on this host");
      } else if (StickyWorldWritable(parent)) {
        add(FindingLevel::kWarning, cur + ": does not exist, in the sticky world-writable " + above +
                                 ": any user can create it before the first stage job (which would then set theirs "
                                 "aside); create it now, root-owned, mode 0711");
      }
      return out;  // missing elsewhere: the prolog makes it
    }
    if (UserEntryInStickyDir(parent, st, me)) {
      add(FindingLevel::kWarning, cur + ": owned by " + Owner(st.st_uid) + ", not root, in the sticky world-writable " + above +
                               ": a user's; the first stage job on this node sets it aside and makes a fresh one "
                               "(remove it, or make it root's with mode 0711)");
      return out;
    }
    std::string why = PrivateDirRefusal(cur, st, last, me);
    if (!why.empty()) {
      add(FindingLevel::kError, why + " (the prolog drains the node)");
      return out;
    }
    parent = st;
    above = cur;
  }
  for (const auto& sub : subdirs) {
    std::string p = cur + "/" + sub;
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) continue;  // made at first use
    std::string why = PrivateDirRefusal(p, st, true, me);
    if (!why.empty()) add(FindingLevel::kError, why + " (the prolog drains the node)");
  }
  return out;
}

std::vector<ConfigFinding> CheckConfigOnHost(const Config& cfg) {
  std::vector<ConfigFinding> out;
  if (!cfg.node_addresses.empty()) {
    auto m = LoadNodeAddresses(cfg.node_addresses);
    if (!m) out.push_back({FindingLevel::kError, m.status().message()});
  }
  if (!cfg.stage.dir.empty()) {
    if (cfg.stage.dir.find("%n") != std::string::npos) {
      out.push_back({FindingLevel::kNote, "stage_dir " + cfg.stage.dir +
                                       ": names %n; give a NODE (preflight config check NODE) to check that node's folder"});
    } else {
      auto chain = CheckStageChain(cfg.stage.dir, {"jobs", "cache"}, 0);  // as the prolog, root
      out.insert(out.end(), chain.begin(), chain.end());
    }
  }
  return out;
}

}  // namespace preflight
