// The node binaries' decisions (node_phase.h), without Slurm.
#include "preflight/node_phase.h"

#include <gtest/gtest.h>

#include "preflight/drain_reason.h"
#include "node_state_fixture.h"

namespace preflight {
namespace {

const Expected<std::vector<std::string>> kRunInJob = std::vector<std::string>{"alloc", "runinjob"};
const Expected<std::vector<std::string>> kAlloc = std::vector<std::string>{"alloc", "deferbatch"};
const Expected<std::vector<std::string>> kUnreadable = Status::NotFound("/etc/slurm/slurm.conf");

TEST(PlanDrain, RunInJobDrainsNowOtherwiseDetached) {
  for (Phase p : {Phase::kProlog, Phase::kEpilog}) {
    EXPECT_EQ(PlanDrain(p, true, kRunInJob), DrainMode::kNow);
    EXPECT_EQ(PlanDrain(p, true, kAlloc), DrainMode::kDetached);
    EXPECT_EQ(PlanDrain(p, true, kUnreadable), DrainMode::kDetached) << "unreadable slurm.conf: no RunInJob";
    EXPECT_EQ(PlanDrain(p, false, kRunInJob), DrainMode::kNone) << "set_drain_reason=no";
  }
  EXPECT_EQ(PlanDrain(Phase::kHealth, true, kRunInJob), DrainMode::kNone) << "the health check drains itself";
}

using node_test::Node;

TEST(PlanHealth, DrainsResumesAndLeavesOthersDrainsAlone) {
  NodeState up = Node(false, ""), ours = Node(true, "preflight[node] gpu.ecc GPU0: 3 > 0"),
            old = Node(true, "preflight: gpu.ecc GPU0: 3 > 0"), admin = Node(true, "admin: reseat");
  HealthPlan p = PlanHealth(true, "", false, &up);
  EXPECT_TRUE(p.drain);
  EXPECT_FALSE(p.resume);
  EXPECT_FALSE(PlanHealth(true, "", false, &ours).drain) << "already drained";
  EXPECT_FALSE(PlanHealth(true, "", false, &admin).drain) << "an admin's reason is never replaced";
  EXPECT_TRUE(PlanHealth(false, "", false, &ours).resume);
  EXPECT_TRUE(PlanHealth(false, "", false, &old).resume) << "an older version's drain is still preflight's";
  EXPECT_FALSE(PlanHealth(false, "", false, &admin).resume);
  EXPECT_FALSE(PlanHealth(false, "", false, &up).resume);
  p = PlanHealth(true, "", false, nullptr);
  EXPECT_FALSE(p.drain || p.resume) << "slurmctld not asked: neither";
}

TEST(PlanHealth, CommentSetOnWarningsClearedOnlyWhenOurs) {
  NodeState up = Node(false, "");
  EXPECT_EQ(PlanHealth(false, "preflight warn: [node] gpu.temp GPU1: 91C", false, &up).comment, HealthPlan::Comment::kSet);
  EXPECT_EQ(PlanHealth(false, "", true, &up).comment, HealthPlan::Comment::kClear);
  EXPECT_EQ(PlanHealth(false, "", false, &up).comment, HealthPlan::Comment::kKeep);
  EXPECT_EQ(PlanHealth(false, "w", false, nullptr).comment, HealthPlan::Comment::kSet) << "independent of slurmctld";
}

TEST(FoldStageResult, NodeAndConfigFaultsDrainUserFaultsFailTheJob) {
  StageJobResult st;
  st.summary = "preflight: stage on n1: ...\n";
  NodeRunOutcome out;
  EXPECT_EQ(FoldStageResult(st, &out), "");
  EXPECT_FALSE(out.failed);
  EXPECT_EQ(out.summary, st.summary);

  st.ok = false;
  st.drain = true;
  st.owner = FaultOwner::kConfig;
  st.message = "stage_dir /var/stage: mode 1777 lets others write in it";
  out = NodeRunOutcome();
  EXPECT_EQ(FoldStageResult(st, &out), "");
  EXPECT_TRUE(out.failed);
  EXPECT_EQ(out.drain_reason, "preflight[config] stage: stage_dir /var/stage: mode 1777 lets others write in it");

  st.owner = FaultOwner::kNode;
  st.message = "/data/x: Input/output error";
  out = NodeRunOutcome();
  FoldStageResult(st, &out);
  EXPECT_EQ(out.drain_reason, "preflight[node] stage: /data/x: Input/output error");

  st.drain = false;
  st.owner = FaultOwner::kUser;
  st.message = "/data/secret: Permission denied";
  out = NodeRunOutcome();
  EXPECT_EQ(FoldStageResult(st, &out), "stage: /data/secret: Permission denied");
  EXPECT_FALSE(out.failed) << "the user's fault never fails the node";
  EXPECT_TRUE(out.drain_reason.empty());
}

}  // namespace
}  // namespace preflight
