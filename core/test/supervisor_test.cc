#include "preflight/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

namespace preflight {
namespace {

TEST(Supervisor, ReturnsTheChildsExitCode) {
  auto r = RunSupervised({"sh", "-c", "exit 7"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_EQ(r->signal, 0);
}

TEST(Supervisor, MissingCommandIsAnError) {
  auto r = RunSupervised({"/nonexistent/cmd"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/cmd"), std::string::npos);
}

TEST(Supervisor, RelaysSignalsToTheChild) {
  // The child traps USR2 and exits 42 when it arrives.
  std::thread sender([] {
    usleep(300000);
    kill(getpid(), SIGUSR2);
  });
  auto r = RunSupervised({"sh", "-c", "trap 'exit 42' USR2; for i in $(seq 1 100); do sleep 0.05; done; exit 1"});
  sender.join();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 42);
  ASSERT_FALSE(r->relayed.empty());
  EXPECT_EQ(r->relayed[0], SIGUSR2);
}

}  // namespace
}  // namespace preflight
