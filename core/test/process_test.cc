#include "preflight/process.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace preflight {
namespace {

TEST(RunCommand, CapturesOutputAndExitCode) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}, {}, 5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->output, "out\nerr\n");
}

TEST(RunCommand, ExtraEnvironmentReplaces) {
  auto r = RunCommand({"sh", "-c", "echo $PF_TEST_VAR"}, {"PF_TEST_VAR=b"}, 5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "b\n");
}

TEST(RunCommand, StdinIsDevNull) {
  auto r = RunCommand({"sh", "-c", "cat; echo done"}, {}, 5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "done\n");
}

TEST(RunCommand, HungChildIsKilledWithItsGroup) {
  // The grandchild holds the pipe open too: the whole group must die.
  auto r = RunCommand({"sh", "-c", "sleep 30 & sleep 30"}, {}, 200);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
}

TEST(RunCommand, MissingProgramIs127) {
  auto r = RunCommand({"/nonexistent/prog"}, {}, 5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
}

TEST(SpawnDetached, ReturnsWithoutWaiting) {
  std::string marker = "/tmp/preflight-detached-" + std::to_string(getpid());
  ASSERT_TRUE(SpawnDetached({"sh", "-c", "sleep 0.2; touch " + marker}, {}).ok());
  EXPECT_NE(access(marker.c_str(), F_OK), 0);  // not yet: we did not wait
  for (int i = 0; i < 100 && access(marker.c_str(), F_OK) != 0; ++i) usleep(50000);
  EXPECT_EQ(access(marker.c_str(), F_OK), 0);
  unlink(marker.c_str());
}

}  // namespace
}  // namespace preflight
