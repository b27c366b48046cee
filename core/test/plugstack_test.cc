#include "preflight/plugstack.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "preflight/fileutil.h"
#include "preflight/slurm_conf.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

using preflight_test::TempDir;

void Put(const std::string& path, const std::string& text) {
  ASSERT_TRUE(MakeDirs(path.substr(0, path.rfind('/')), 0755).ok());
  std::ofstream(path) << text;
}
std::vector<std::string> Names(const PlugstackStack& s) {
  std::vector<std::string> out;
  for (const auto& p : s.plugins) out.push_back(p.Name());
  return out;
}
bool Has(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}

TEST(Plugstack, LinesAsSlurmdSplitsThem) {
  PlugstackStack s;
  ParsePlugstackText("/etc/slurm/plugstack.conf",
                     "# a comment\n"
                     "\n"
                     "required /usr/lib/slurm/a.so conf=/x  y # trailing comment\n"
                     "optional\tb.so\r\n"
                     "bogus /usr/lib/c.so\n"
                     "required\n",
                     0, &s);
  ASSERT_EQ(s.plugins.size(), 2u);
  EXPECT_EQ(s.plugins[0].path, "/usr/lib/slurm/a.so");
  EXPECT_EQ(s.plugins[0].Name(), "a.so");
  EXPECT_TRUE(s.plugins[0].required);
  EXPECT_EQ(s.plugins[0].args, (std::vector<std::string>{"conf=/x", "y"}));
  EXPECT_EQ(s.plugins[0].line, 3);
  EXPECT_EQ(s.plugins[1].path, "b.so");  // PluginDir's
  EXPECT_FALSE(s.plugins[1].required);
  ASSERT_EQ(s.problems.size(), 2u);
  EXPECT_NE(s.problems[0].find("/etc/slurm/plugstack.conf:5: invalid line, slurmd ignores it"), std::string::npos)
      << s.problems[0];
  EXPECT_NE(s.problems[1].find(":6: invalid line"), std::string::npos) << s.problems[1];
}

TEST(Plugstack, IncludesInGlobOrderRelativeToTheirFile) {
  TempDir t("plugstack");
  Put(t / "plugstack.conf", "required /opt/first.so\ninclude plugstack.conf.d/*\nrequired /opt/last.so\n");
  Put(t / "plugstack.conf.d/pyxis.conf", "required /usr/local/lib/slurm/spank_pyxis.so\n");
  Put(t / "plugstack.conf.d/90-preflight.conf", "required /usr/lib/slurm/preflight.so\n");
  Put(t / "plugstack.conf.d/50-other.conf", "include ../more/*.conf\n");  // relative to plugstack.conf.d
  Put(t / "more/x.conf", "optional /opt/x.so\n");
  PlugstackStack s = ReadPlugstack(t / "plugstack.conf");
  EXPECT_TRUE(s.problems.empty()) << s.problems[0];
  // glob(3) sorts: "50-other" < "90-preflight" < "pyxis" ('9' < 'p').
  EXPECT_EQ(Names(s), (std::vector<std::string>{"first.so", "x.so", "preflight.so", "spank_pyxis.so", "last.so"}));
  EXPECT_EQ(s.plugins[2].file, t / "plugstack.conf.d/90-preflight.conf");
  EXPECT_EQ(s.plugins[2].line, 1);

  auto w = PlugstackOrderWarnings(s);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("preflight.so (" + (t / "plugstack.conf.d/90-preflight.conf") + ":1) loads before spank_pyxis.so (" +
                      (t / "plugstack.conf.d/pyxis.conf") + ":1)"),
            std::string::npos)
      << w[0];
  EXPECT_NE(w[0].find("zz-preflight.conf"), std::string::npos) << w[0];

  // The snippet renamed to sort after pyxis.conf: no warning.
  ASSERT_EQ(::rename((t / "plugstack.conf.d/90-preflight.conf").c_str(), (t / "plugstack.conf.d/zz-preflight.conf").c_str()), 0);
  s = ReadPlugstack(t / "plugstack.conf");
  EXPECT_EQ(Names(s), (std::vector<std::string>{"first.so", "x.so", "spank_pyxis.so", "preflight.so", "last.so"}));
  EXPECT_TRUE(PlugstackOrderWarnings(s).empty());
}

TEST(Plugstack, MissingFilesAndNoMatchAreEmpty) {
  TempDir t("plugstack");
  PlugstackStack s = ReadPlugstack(t / "plugstack.conf");  // slurmd: no file, no plugins
  EXPECT_TRUE(s.plugins.empty());
  EXPECT_TRUE(s.problems.empty());
  Put(t / "plugstack.conf", "include /nonexistent/plugstack.conf.d/*\nrequired /opt/preflight.so\n");
  s = ReadPlugstack(t / "plugstack.conf");
  EXPECT_EQ(Names(s), std::vector<std::string>{"preflight.so"});
  EXPECT_TRUE(s.problems.empty());
  EXPECT_TRUE(PlugstackOrderWarnings(s).empty());  // no pyxis: nothing to order
}

TEST(Plugstack, AnIncludeLoopStopsAtTheDepthBound) {
  TempDir t("plugstack");
  Put(t / "plugstack.conf", "include plugstack.conf\n");
  PlugstackStack s = ReadPlugstack(t / "plugstack.conf");
  ASSERT_EQ(s.problems.size(), 1u);
  EXPECT_NE(s.problems[0].find("nested deeper than 16 includes"), std::string::npos) << s.problems[0];
}

TEST(Plugstack, TheFirstLoadCounts) {
  PlugstackStack s;
  ParsePlugstackText("/p", "required /a/spank_pyxis.so\nrequired /b/preflight.so\nrequired /a/spank_pyxis.so\n", 0, &s);
  EXPECT_TRUE(PlugstackOrderWarnings(s).empty());  // the second pyxis line is refused by slurmd
}

TEST(Plugstack, PathFromSlurmConf) {
  EXPECT_EQ(PlugstackPath("/etc/slurm/slurm.conf", "ClusterName=x\n"), "/etc/slurm/plugstack.conf");
  EXPECT_EQ(PlugstackPath("/etc/slurm/slurm.conf", "plugstackconfig=/opt/p.conf # site\nPlugStackConfig=\"/srv/p.conf\"\n"),
            "/srv/p.conf");
  EXPECT_EQ(PlugstackPath("/etc/slurm/slurm.conf", "#PlugStackConfig=/opt/p.conf\n"), "/etc/slurm/plugstack.conf");
  EXPECT_EQ(SlurmConfValue("A=1 PlugStackConfig=/x B=2\n", "plugstackconfig"), "/x");
}

TEST(SlurmConf, BatchStartWindowIsBatchStartTimeoutPlusMessageTimeoutUpTo10) {
  EXPECT_EQ(BatchStartWindow("ClusterName=x\n"), 20);
  EXPECT_EQ(BatchStartWindow("BatchStartTimeout=300\nMessageTimeout=30\n"), 310);
  EXPECT_EQ(BatchStartWindow("BatchStartTimeout=60 MessageTimeout=5\n"), 65);
  EXPECT_EQ(BatchStartWindow("BatchStartTimeout=soon\n"), 20);
}

TEST(Plugstack, NotesForConfigCheck) {
  TempDir t("plugstack");
  Put(t / "slurm.conf", "ClusterName=c\nPlugStackConfig=" + (t / "etc/plugstack.conf") + "\n");
  Put(t / "etc/plugstack.conf", "include plugstack.conf.d/*.conf\n");
  Put(t / "etc/plugstack.conf.d/90-preflight.conf", "required /usr/lib/slurm/preflight.so\n");
  Put(t / "etc/plugstack.conf.d/pyxis.conf", "required /usr/local/lib/slurm/spank_pyxis.so\n");
  auto n = PlugstackNotes(t / "slurm.conf");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].rfind(t / "etc/plugstack.conf: warning: preflight.so (", 0), 0u) << n[0];
  ASSERT_EQ(::rename((t / "etc/plugstack.conf.d/90-preflight.conf").c_str(), (t / "etc/plugstack.conf.d/zz-preflight.conf").c_str()), 0);
  n = PlugstackNotes(t / "slurm.conf");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_TRUE(Has(n, "loads after spank_pyxis.so")) << n[0];
  EXPECT_FALSE(Has(n, "warning"));
  n = PlugstackNotes(t / "missing.conf");
  EXPECT_TRUE(Has(n, "missing.conf: not read")) << n[0];
}

}  // namespace
}  // namespace preflight
