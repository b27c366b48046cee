#include "preflight/slurmctl.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {

TEST(NodeLine, DrainedByPreflight) {
  auto s = ParseNodeLine(
      "NodeName=n2 Arch=x86_64 CoresPerSocket=2 State=IDLE+DRAIN ThreadsPerCore=1 "
      "Reason=preflight: scratch /s: free 1M < 1G [root@2026-12-02T14:15:02]\n");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state, "IDLE+DRAIN");
  EXPECT_TRUE(s->drained());
  EXPECT_TRUE(s->ours());
  EXPECT_EQ(s->reason, "preflight: scratch /s: free 1M < 1G");
}

TEST(NodeLine, AdminDrainIsNotOurs) {
  auto s = ParseNodeLine("NodeName=n3 State=IDLE+DRAIN Reason=admin: memtest [root@2026-12-02T14:00:00]");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->drained());
  EXPECT_FALSE(s->ours());
}

TEST(NodeLine, IdleWithoutReason) {
  auto s = ParseNodeLine("NodeName=n1 State=IDLE ThreadsPerCore=1");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->drained());
  EXPECT_EQ(s->reason, "");
  EXPECT_FALSE(ParseNodeLine("garbage").ok());
}

TEST(Scontrol, MissingBinaryIsAnErrorNotAHang) {
  Config cfg;
  cfg.scontrol = "/nonexistent/scontrol";
  cfg.probe_timeout_ms = 2000;
  auto s = QueryNode(cfg, "n1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("exit 127"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace preflight
