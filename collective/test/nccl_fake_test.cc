// The NCCL backend's own code for the operations beyond all-reduce, behind
// a fake CUDA runtime with one device in host memory and a fake NCCL as old
// as 2.6 (no ncclSend/ncclRecv), both through the real dlopen seam. A
// binary of its own: the backend loads its libraries once per process, and
// collective_test loads the no-device runtime.
#include <gtest/gtest.h>

#include "preflight/collective.h"

namespace preflight::collective {
namespace {

NcclOptions Fakes() {
  NcclOptions o;
  o.cudart = FAKE_CUDART_ONEDEV;
  o.nccl = FAKE_NCCL_OLD;
  return o;
}

SweepOptions Small() {
  SweepOptions o;
  o.sizes = {1000, 64 << 10};
  o.warmup = 1;
  o.iters = 2;
  return o;
}

TEST(NcclBackendOps, OneRankRunsTheCollectivesExactly) {
  auto group = MakeLocalGroup(1, "n1", 1000);
  auto boot = MakeLocalBootstrap(group, 0);
  auto b = MakeNcclBackend(*boot, Fakes());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto res = RunSweeps(**b, {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter}, Small());
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->size(), 3u);
  for (const auto& r : *res) {
    EXPECT_EQ(r.backend, "nccl");
    ASSERT_EQ(r.sizes.size(), 2u) << OpName(r.op);
    for (const auto& s : r.sizes) EXPECT_EQ(s.wrong, 0u) << OpName(r.op) << " at " << s.bytes;
  }
}

TEST(NcclBackendOps, AnNcclWithoutSendFailsAllToAllNamingIt) {
  auto group = MakeLocalGroup(1, "n1", 1000);
  auto boot = MakeLocalBootstrap(group, 0);
  auto b = MakeNcclBackend(*boot, Fakes());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Op failed = Op::kAllReduce;
  auto res = RunSweeps(**b, {Op::kAllReduce, Op::kAllToAll}, Small(), &failed);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(failed, Op::kAllToAll);
  EXPECT_NE(res.status().message().find("has no ncclSend"), std::string::npos) << res.status().message();
  EXPECT_NE(res.status().message().find("all_to_all cannot run"), std::string::npos) << res.status().message();
  // The backend is still usable: the missing symbol was found before any call.
  auto again = RunSweep(**b, Op::kAllReduce, Small());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->sizes.back().wrong, 0u);
}

}  // namespace
}  // namespace preflight::collective
