// LateEnvValues / LateEnvText: a value a container image (or a TaskProlog)
// put in a task's environment after submission, told from the user's own.
#include <gtest/gtest.h>

#include <map>

#include "preflight/topo_env_merge.h"

namespace preflight {
namespace {

EnvLookup From(const std::map<std::string, std::string>& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

TEST(TopoEnvLate, AnImageValueIsNamedTheUsersIsNot) {
  EnvPlan plan;
  plan.vars = {{"NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"}, {"NCCL_SOCKET_IFNAME", "=ib0"}, {"UCX_NET_DEVICES", "mlx5_0:1"}};
  // Now: NCCL_IB_HCA from the image, NCCL_SOCKET_IFNAME the user's export,
  // UCX_NET_DEVICES the image's but equal to the plan (nothing to say).
  std::map<std::string, std::string> now = {
      {"NCCL_IB_HCA", "mlx5_0"}, {"NCCL_SOCKET_IFNAME", "=eth0"}, {"UCX_NET_DEVICES", "mlx5_0:1"}};
  EnvMerge merge = MergeEnv(plan, From(now));
  ASSERT_EQ(merge.kept.size(), 3u);
  auto late = LateEnvValues(plan, merge, From({{"NCCL_SOCKET_IFNAME", "=eth0"}}));
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].name, "NCCL_IB_HCA");
  EXPECT_EQ(late[0].found, "mlx5_0");
  EXPECT_EQ(late[0].computed, "=mlx5_0:1,mlx5_1:1");
  EXPECT_EQ(LateEnvText(late, "n1", true),
            "preflight: on n1 the container image sets NCCL_IB_HCA=mlx5_0 where preflight computed =mlx5_0:1,mlx5_1:1 "
            "for this task, and left it; to let preflight's value win, run with --container-env=NCCL_IB_HCA\n");
  // A user value the image changed counts as late too (the step had it otherwise).
  auto changed = LateEnvValues(plan, merge, From({{"NCCL_IB_HCA", "mlx5_1"}, {"NCCL_SOCKET_IFNAME", "=eth0"}}));
  EXPECT_EQ(changed.size(), 1u);
  // Nothing late: no text.
  EXPECT_EQ(LateEnvText({}, "n1", true), "");
}

TEST(TopoEnvLate, SeveralAreNamedInOneOptionAndNoContainerSaysWhoElse) {
  std::vector<LateEnv> late = {{"NCCL_IB_HCA", "a", "b"}, {"NCCL_TOPO_FILE", std::string("/x\x1b[31m", 7), "/y"}};
  std::string text = LateEnvText(late, "n2", true);
  EXPECT_NE(text.find("--container-env=NCCL_IB_HCA,NCCL_TOPO_FILE\n"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL_TOPO_FILE=/x\\x1b[31m "), std::string::npos) << text;  // printable
  std::string bare = LateEnvText({late[0]}, "n2", false);
  EXPECT_EQ(bare,
            "preflight: on n2 NCCL_IB_HCA=a was set after submission (a container image, a TaskProlog or an earlier "
            "SPANK plugin) where preflight computed b for this task, and left it; in a pyxis container, "
            "--container-env=NCCL_IB_HCA lets preflight's value win\n");
}

}  // namespace
}  // namespace preflight
