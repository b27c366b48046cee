// `preflight config check`'s host-side checks (config_check.h) and the
// rules they share with the node binaries: node_addresses as the stage
// fan-out loads it, stage_dir's chain as the prolog's MakePrivateDirs
// takes it. Issue 29 (6, and the node_addresses weak spot): both passed
// `config check` and then drained nodes.
#include "preflight/config_check.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>

#include "preflight/fileutil.h"
#include "preflight/node_addresses.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

using preflight_test::TempDir;
using FindingLevel = ConfigFinding::Level;

void Put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string All(const std::vector<ConfigFinding>& fs) {
  std::string out;
  for (const auto& f : fs) out += f.message + "\n";
  return out;
}
int Count(const std::vector<ConfigFinding>& fs, FindingLevel l) {
  int n = 0;
  for (const auto& f : fs) n += f.level == l;
  return n;
}

TEST(NodeAddresses, ANodeNamedTwiceIsAnErrorNamingBothLines) {
  TempDir t;
  std::string p = t.path() + "/hosts";
  Put(p, "127.0.1.101 n1\n127.0.1.102 n2\n# n1 moved\n127.0.1.109 n1\n");
  auto m = LoadNodeAddresses(p);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "node_addresses " + p + ":4: node 'n1' is named twice (lines 1 and 4)");
  Put(p, "127.0.1.101 n1 n1\n");
  EXPECT_EQ(LoadNodeAddresses(p).status().message(), "node_addresses " + p + ":1: node 'n1' is named twice (lines 1 and 1)");
  // The same node under two spellings of one name is still one name; two
  // nodes on one address are fine (aliases).
  Put(p, "127.0.1.101 n1 n1-ib\n127.0.1.102 n2\n");
  EXPECT_TRUE(LoadNodeAddresses(p).ok());
}

TEST(ConfigCheck, NodeAddressesIsLoadedAndEveryProblemNamesFileAndLine) {
  TempDir t;
  Config cfg;
  EXPECT_TRUE(CheckConfigOnHost(cfg).empty());  // unset: nothing to check
  cfg.node_addresses = t.path() + "/missing";
  auto f = CheckConfigOnHost(cfg);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, FindingLevel::kError);
  EXPECT_NE(f[0].message.find("node_addresses " + t.path() + "/missing: No such file"), std::string::npos) << f[0].message;

  cfg.node_addresses = t.path() + "/hosts";
  Put(cfg.node_addresses, "127.0.1.101 n1\n127.0.1.10x n2\n");
  f = CheckConfigOnHost(cfg);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, FindingLevel::kError);
  EXPECT_EQ(f[0].message, "node_addresses " + cfg.node_addresses + ":2: '127.0.1.10x' is not an IPv4 or IPv6 address");

  Put(cfg.node_addresses, "127.0.1.101 n1\n127.0.1.102 n1\n");
  f = CheckConfigOnHost(cfg);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message.find(":2: node 'n1' is named twice (lines 1 and 2)"), std::string::npos) << f[0].message;

  // 2 MB of random bytes: over the bound, said before anything is parsed.
  std::string junk(2 << 20, '\0');
  std::mt19937 rng(29);
  for (auto& c : junk) c = static_cast<char>(rng());
  Put(cfg.node_addresses, junk);
  f = CheckConfigOnHost(cfg);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message.find(cfg.node_addresses + ": 2097152 bytes; the limit is 1048576"), std::string::npos) << f[0].message;

  Put(cfg.node_addresses, "127.0.1.101 n1\n127.0.1.102 n2\n");
  EXPECT_TRUE(CheckConfigOnHost(cfg).empty()) << All(CheckConfigOnHost(cfg));
}

TEST(ConfigCheck, StageDirChainAsThePrologTakesIt) {
  TempDir t;
  std::string scratch = t.path() + "/scratch";
  ASSERT_TRUE(MakeDirs(scratch).ok());
  ASSERT_EQ(::chmod(scratch.c_str(), 01777), 0);
  std::string dir = scratch + "/pf";
  // Missing, under a sticky world-writable folder: any user can create it first.
  auto f = CheckStageChain(dir, {"jobs", "cache"}, ::geteuid());
  ASSERT_EQ(f.size(), 1u) << All(f);
  EXPECT_EQ(f[0].level, FindingLevel::kWarning);
  EXPECT_NE(f[0].message.find("stage_dir " + dir + ": does not exist, in the sticky world-writable " + scratch), std::string::npos)
      << f[0].message;
  // Missing under a private folder: the prolog makes it, nothing to say.
  EXPECT_TRUE(CheckStageChain(t.path() + "/private/pf", {"jobs", "cache"}, ::geteuid()).empty());
  // Made root's (as root) or the caller's: fine, subfolders included.
  ASSERT_TRUE(MakePrivateDirs(dir + "/cache", 0700).ok());
  EXPECT_TRUE(CheckStageChain(dir, {"jobs", "cache"}, ::geteuid()).empty()) << All(CheckStageChain(dir, {"jobs", "cache"}, ::geteuid()));
  // stage_dir itself 1777, root's (the admin's doing): an error, as the prolog's drain.
  ASSERT_EQ(::chmod(dir.c_str(), 01777), 0);
  f = CheckStageChain(dir, {"jobs", "cache"}, ::geteuid());
  ASSERT_EQ(f.size(), 1u) << All(f);
  EXPECT_EQ(f[0].level, FindingLevel::kError);
  EXPECT_NE(f[0].message.find(dir + ": mode 1777 lets others write in it"), std::string::npos) << f[0].message;
  ASSERT_EQ(::chmod(dir.c_str(), 0711), 0);
  // cache group-writable: an error naming it.
  ASSERT_EQ(::chmod((dir + "/cache").c_str(), 0770), 0);
  f = CheckStageChain(dir, {"jobs", "cache"}, ::geteuid());
  ASSERT_EQ(f.size(), 1u) << All(f);
  EXPECT_NE(f[0].message.find(dir + "/cache: mode 0770 lets others write in it"), std::string::npos) << f[0].message;
  ASSERT_EQ(::chmod((dir + "/cache").c_str(), 0700), 0);
  // A symlink of root's in the chain: an error (the prolog refuses it).
  ASSERT_EQ(::symlink(dir.c_str(), (scratch + "/link").c_str()), 0);
  f = CheckStageChain(scratch + "/link", {}, ::geteuid());
  ASSERT_EQ(Count(f, FindingLevel::kError), 1) << All(f);
  EXPECT_NE(f[0].message.find(scratch + "/link: a symlink or not a directory"), std::string::npos) << f[0].message;
}

TEST(ConfigCheck, AUsersFolderUnderAStickyFolderIsAWarningNotAnError) {
  struct passwd* pw = ::getpwnam("nobody");
  if (::geteuid() != 0 || !pw) GTEST_SKIP() << "needs root and a user 'nobody'";
  TempDir t;
  std::string scratch = t.path() + "/scratch";
  ASSERT_TRUE(MakeDirs(scratch + "/pf").ok());
  ASSERT_EQ(::chmod(scratch.c_str(), 01777), 0);
  ASSERT_EQ(::chown((scratch + "/pf").c_str(), pw->pw_uid, pw->pw_gid), 0);
  auto f = CheckStageChain(scratch + "/pf", {"jobs", "cache"}, 0);
  ASSERT_EQ(f.size(), 1u) << All(f);
  EXPECT_EQ(f[0].level, FindingLevel::kWarning);
  EXPECT_NE(f[0].message.find(scratch + "/pf: owned by uid " + std::to_string(pw->pw_uid) + " (nobody), not root, in the sticky "
                              "world-writable " + scratch + ": a user's; the first stage job on this node sets it aside"),
            std::string::npos)
      << f[0].message;
  // The same folder in a folder only root can write: the admin's doing, an error.
  ASSERT_EQ(::chmod(scratch.c_str(), 0755), 0);
  f = CheckStageChain(scratch + "/pf", {}, 0);
  ASSERT_EQ(f.size(), 1u) << All(f);
  EXPECT_EQ(f[0].level, FindingLevel::kError);
  EXPECT_NE(f[0].message.find("owned by uid " + std::to_string(pw->pw_uid) + ", not root; refused"), std::string::npos) << f[0].message;
}

TEST(ConfigCheck, AStageDirWithPercentNIsANoteWithoutANode) {
  Config cfg;
  cfg.stage.dir = "/local/%n/stage";
  auto f = CheckConfigOnHost(cfg);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].level, FindingLevel::kNote);
  EXPECT_NE(f[0].message.find("give a NODE"), std::string::npos) << f[0].message;
}

}  // namespace
}  // namespace preflight
