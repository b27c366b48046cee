#include "preflight/config.h"
#include "preflight/node_addresses.h"
#include "preflight/stage_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace preflight {
namespace {

std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/preflight-config-XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(Config, DefaultsWhenOptionalFileMissing) {
  auto c = LoadConfig("/nonexistent/preflight.conf", "n1", false);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->state_dir, "/var/lib/preflight");
  EXPECT_EQ(c->default_level, Level::kOff);
  EXPECT_TRUE(c->source.empty());
}

TEST(Config, MissingRequiredFileIsAnError) {
  auto c = LoadConfig("/nonexistent/preflight.conf", "n1", true);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/preflight.conf"), std::string::npos);
}

TEST(Config, ParsesValuesCommentsAndNodeExpansion) {
  std::string p = WriteTemp(
      "# site config\n"
      "state_dir = /var/lib/pf/%n   # per node\n"
      "\n"
      "default_level=full\n"
      "scratch_min_free = 2G\n"
      "probe_timeout = 250ms\n"
      "set_drain_reason = no\n"
      "textfile_dir = /m/100%%\n");
  auto c = LoadConfig(p, "gpu07", true);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->state_dir, "/var/lib/pf/gpu07");
  EXPECT_EQ(c->default_level, Level::kFull);
  EXPECT_EQ(c->scratch_min_free_bytes, 2ull << 30);
  EXPECT_EQ(c->probe_timeout_ms, 250u);
  EXPECT_FALSE(c->set_drain_reason);
  EXPECT_EQ(c->textfile_dir, "/m/100%");
  unlink(p.c_str());
}

struct BadCase {
  const char* text;
  const char* expected;  // substring of the error
};

class ConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigErrors, NameFileLineAndKey) {
  std::string p = WriteTemp(GetParam().text);
  auto c = LoadConfig(p, "n1", true);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find(p + ":"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(GetParam().expected), std::string::npos) << c.status().message();
  unlink(p.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, ConfigErrors,
    ::testing::Values(BadCase{"frobnicate = 1\n", ":1: unknown key 'frobnicate'"},
                      BadCase{"\n\nscratch_min_free = lots\n", ":3: key 'scratch_min_free': bad size 'lots'"},
                      BadCase{"scratch_min_free = 99999999999T\n", "too large"},
                      BadCase{"default_level = sometimes\n", "key 'default_level': invalid level 'sometimes'"},
                      BadCase{"default_level =\n", "empty level"},
                      BadCase{"set_drain_reason = maybe\n", "bad boolean 'maybe'"},
                      BadCase{"probe_timeout = 3 days\n", "bad duration '3 days'"},
                      BadCase{"state_dir /x\n", ":1: expected 'key = value'"},
                      BadCase{"state_dir = /a\nstate_dir = /b\n", ":2: key 'state_dir' given twice"},
                      // Issue #19: numbers out of their range, relative paths, invisible bytes.
                      BadCase{"\nstage_peer_port = 70000\n",
                              ":2: key 'stage_peer_port': bad value '70000' (expected a number from 1 to 1023: a privileged port, where only root may listen)"},
                      BadCase{"stage_peer_port = 0\n", "expected a number from 1 to 1023"},
                      BadCase{"run_gpu_idle_percent = 101\n", "key 'run_gpu_idle_percent': bad value '101'"},
                      BadCase{"state_dir = var/lib/preflight\n",
                              ":1: key 'state_dir': relative path 'var/lib/preflight' (expected an absolute path"},
                      BadCase{"state_dir =\n", "key 'state_dir': empty path"},
                      BadCase{"stage_dir = ./scratch\n", "key 'stage_dir': relative path './scratch'"},
                      BadCase{"scontrol = bin/scontrol\n", "key 'scontrol': relative path 'bin/scontrol'"},
                      BadCase{"\nstate\xC2\xA0" "dir = /x\n", ":2: unknown key 'state\\xc2\\xa0dir'"}));

// The fan-out's ports stay privileged (only root listens there) and never
// wrap past 65535, however many nodes a job has.
TEST(Config, StagePeerPortsStayBelow1024) {
  EXPECT_EQ(StagePeerPortFor(900, 0), 900);
  EXPECT_EQ(StagePeerPortFor(900, 123), 1023);
  EXPECT_EQ(StagePeerPortFor(900, 124), 900);
  EXPECT_EQ(StagePeerPortFor(1023, 5), 1023);
  for (size_t i = 0; i < 100000; i += 7) EXPECT_LT(StagePeerPortFor(1000, i), 1024) << i;
  EXPECT_FALSE(ParseStagePeerPort("1024").ok());
  EXPECT_FALSE(ParseStagePeerPort("6830").ok());
  EXPECT_EQ(*ParseStagePeerPort("1023"), 1023u);
}

TEST(Config, LeadingByteOrderMarkIsAccepted) {
  std::string p = WriteTemp("\xEF\xBB\xBFstate_dir = /srv/preflight\nstage_peer_port = 1023\nscontrol = scontrol\n");
  auto c = LoadConfig(p, "n1", true);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->state_dir, "/srv/preflight");
  EXPECT_EQ(c->stage.peer_port, 1023u);
  unlink(p.c_str());
  // Only on line 1: a BOM further down is a stray byte, shown.
  p = WriteTemp("state_dir = /a\n\xEF\xBB\xBFstage_dir = /b\n");
  auto c2 = LoadConfig(p, "n1", true);
  ASSERT_FALSE(c2.ok());
  EXPECT_NE(c2.status().message().find(":2: unknown key '\\xef\\xbb\\xbfstage_dir'"), std::string::npos) << c2.status().message();
  unlink(p.c_str());
}

TEST(Config, NodeNameInPathKeysIsValidated) {
  std::string p = WriteTemp("stage_dir = /scratch/%n\n");
  auto ok = LoadConfig(p, "gpu-07.rack1", true);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->stage.dir, "/scratch/gpu-07.rack1");
  auto bad = LoadConfig(p, "../../x", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(":1: key 'stage_dir': node name '../../x'"), std::string::npos)
      << bad.status().message();
  unlink(p.c_str());
}

TEST(Parsers, SizesAndDurations) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("64K"), 65536u);
  EXPECT_FALSE(ParseSize("1.5G").ok());
  EXPECT_FALSE(ParseSize("").ok());
  EXPECT_EQ(*ParseDurationMs("10"), 10000u);
  EXPECT_EQ(*ParseDurationMs("2m"), 120000u);
  EXPECT_FALSE(ParseDurationMs("-1s").ok());
}

TEST(Config, DumpRoundTrips) {
  Config c;
  c.scratch_min_free_bytes = 3ull << 20;
  std::string p = WriteTemp(DumpConfig(c));
  auto back = LoadConfig(p, "", true);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->scratch_min_free_bytes, 3ull << 20);
  EXPECT_EQ(DumpConfig(*back), DumpConfig(c));
  unlink(p.c_str());
}


TEST(NodeAddresses, HostsShapedFileWithBoundsAndClearErrors) {
  char dir[] = "/tmp/preflight-na-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string p = std::string(dir) + "/hosts";
  auto put = [&](const std::string& text) { std::ofstream(p) << text; };
  put("# fabric\n127.0.1.101 n1\n127.0.1.102 n2 n2-alias  # two names\n\nfe80::1 n3\n");
  auto m = LoadNodeAddresses(p);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)["n1"], "127.0.1.101");
  EXPECT_EQ((*m)["n2-alias"], "127.0.1.102");
  EXPECT_EQ((*m)["n3"], "fe80::1");
  Config cfg;
  EXPECT_EQ(*NodeAddress(cfg, "n1"), "");  // unset: the caller's default
  cfg.node_addresses = p;
  EXPECT_EQ(*NodeAddress(cfg, "n2"), "127.0.1.102");
  EXPECT_EQ(*NodeAddress(cfg, "n9"), "");
  put("127.0.1.101 n1\n300.1.1.1 n2\n");
  auto bad = LoadNodeAddresses(p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(p + ":2: '300.1.1.1' is not an IPv4"), std::string::npos) << bad.status().message();
  put("127.0.1.101\n");
  EXPECT_NE(LoadNodeAddresses(p).status().message().find(":1: address '127.0.1.101' names no node"), std::string::npos);
  put("127.0.1.101 ../../x\n");
  EXPECT_FALSE(LoadNodeAddresses(p).ok());
  put(std::string(kMaxNodeAddressesBytes + 1, '#'));
  EXPECT_NE(LoadNodeAddresses(p).status().message().find("the limit is"), std::string::npos);
  EXPECT_FALSE(NodeAddress(cfg, "n1").ok());
  ::unlink(p.c_str());
  ::rmdir(dir);
}

TEST(Config, StragglerFractionIsStrictlyBetweenZeroAndOne) {
  Config cfg;
  EXPECT_DOUBLE_EQ(cfg.nccl.straggler_fraction, 0.5);
  ASSERT_TRUE(ApplyOverrides(cfg, {"nccl_straggler_fraction=0.3"}, "test", "").ok());
  EXPECT_DOUBLE_EQ(cfg.nccl.straggler_fraction, 0.3);
  for (const char* v : {"0", "1", "1.5", "-0.2", "half", ""}) {
    Status s = ApplyOverrides(cfg, {std::string("nccl_straggler_fraction=") + v}, "test", "");
    EXPECT_FALSE(s.ok()) << v;
    EXPECT_NE(s.message().find("nccl_straggler_fraction"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace preflight
