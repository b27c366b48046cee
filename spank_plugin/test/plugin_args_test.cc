// The plugin's plugstack.conf arguments (plugin_args.h), without Slurm.
#include "plugin_args.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace preflight {
namespace {

std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/preflight-plugin-args-XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(PluginArgs, ConfAndOverrides) {
  const char* argv[] = {"conf=/etc/pf.conf", "default_level=quick"};
  auto a = ParsePluginArgs(2, const_cast<char**>(argv));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->conf, "/etc/pf.conf");
  EXPECT_TRUE(a->conf_given);
  ASSERT_EQ(a->overrides.size(), 1u);
}

TEST(PluginArgs, UnknownKeyRefusedWithItsName) {
  const char* argv[] = {"frob=1"};
  auto a = ParsePluginArgs(1, const_cast<char**>(argv));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "plugstack.conf argument 'frob=1': unknown key 'frob'");
}

TEST(PluginArgs, MalformedArgument) {
  const char* argv[] = {"quick"};
  auto a = ParsePluginArgs(1, const_cast<char**>(argv));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("expected key=value"), std::string::npos);
}

TEST(PluginArgs, OverridesBeatTheFile) {
  std::string p = WriteTemp("default_level = off\n");
  std::string conf = "conf=" + p;
  const char* argv[] = {conf.c_str(), "default_level=full"};
  auto a = ParsePluginArgs(2, const_cast<char**>(argv));
  ASSERT_TRUE(a.ok());
  auto c = LoadPluginConfig(*a, "n1");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->default_level, Level::kFull);
  unlink(p.c_str());
}

}  // namespace
}  // namespace preflight
