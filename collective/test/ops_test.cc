// Unit tests of the collective operations beyond all-reduce: the
// vocabulary, the nccl-tests formulas and counts, the expected values, and
// the host backend running each operation on 1 to 4 ranks (threads of this
// process over the local bootstrap and loopback TCP, as collective_test.cc).
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "preflight/collective.h"
#include "preflight/collective_run.h"

namespace preflight::collective {
namespace {

TEST(Ops, NamesRoundTripAndAllIsEveryOperation) {
  for (Op op : AllOps()) {
    auto p = ParseOp(OpName(op));
    ASSERT_TRUE(p.ok()) << OpName(op);
    EXPECT_EQ(*p, op);
  }
  EXPECT_EQ(OpsText(AllOps()), "all_reduce,all_gather,reduce_scatter,all_to_all");
  auto all = ParseOps("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, AllOps());
  auto two = ParseOps("all_to_all,all_gather");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<Op>{Op::kAllToAll, Op::kAllGather}));
}

TEST(Ops, BadListsAreRefusedNamingTheChoices) {
  auto bad = ParseOps("all_reduce,alltoall");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'alltoall'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("all_to_all"), std::string::npos);
  EXPECT_FALSE(ParseOps("").ok());
  EXPECT_FALSE(ParseOps("all_gather,").ok());
  auto twice = ParseOps("all_gather,all_gather");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos);
}

TEST(Ops, BusFactorsAreNcclTests) {
  // doc/PERFORMANCE.md of nccl-tests: 2(n-1)/n for all-reduce, (n-1)/n for the others.
  EXPECT_DOUBLE_EQ(BusFactor(Op::kAllReduce, 8), 1.75);
  for (Op op : {Op::kAllGather, Op::kReduceScatter, Op::kAllToAll}) {
    EXPECT_DOUBLE_EQ(BusFactor(op, 1), 0.0) << OpName(op);
    EXPECT_DOUBLE_EQ(BusFactor(op, 2), 0.5) << OpName(op);
    EXPECT_DOUBLE_EQ(BusFactor(op, 4), 0.75) << OpName(op);
    EXPECT_DOUBLE_EQ(BusFactor(op, 8), 0.875) << OpName(op);
    EXPECT_DOUBLE_EQ(BusFactor(op, 0), 0.0) << OpName(op);
  }
  for (int n = 1; n <= 8; ++n) EXPECT_DOUBLE_EQ(BusFactor(Op::kAllReduce, n), AllReduceBusFactor(n));
}

TEST(Ops, CountsFollowNcclTestsSizeConvention) {
  // all_reduce: the size is each rank's buffer.
  EXPECT_EQ(OpCount(Op::kAllReduce, 1 << 20, 8), 1u << 18);
  EXPECT_EQ(OpBytes(Op::kAllReduce, 1u << 18, 8), 1u << 20);
  // The others: the size is the total (n chunks), the count one chunk.
  for (Op op : {Op::kAllGather, Op::kReduceScatter, Op::kAllToAll}) {
    EXPECT_EQ(OpCount(op, 1 << 20, 8), (1u << 20) / 8 / 4) << OpName(op);
    EXPECT_EQ(OpBytes(op, OpCount(op, 1 << 20, 8), 8), 1u << 20) << OpName(op);
    // nccl-tests' ALIGN: a chunk is whole groups of 4 elements (250 / 12 -> 20 groups).
    EXPECT_EQ(OpCount(op, 1000, 3), 80u) << OpName(op);
    EXPECT_EQ(OpBytes(op, 80, 3), 960u) << OpName(op);
    EXPECT_EQ(OpCount(op, 44, 3), 0u) << OpName(op);  // below one group per rank
    EXPECT_EQ(OpCount(op, 48, 3), 4u) << OpName(op);
  }
  EXPECT_EQ(OutputCount(Op::kAllReduce, 10, 4), 10u);
  EXPECT_EQ(OutputCount(Op::kAllGather, 10, 4), 40u);
  EXPECT_EQ(OutputCount(Op::kReduceScatter, 10, 4), 10u);
  EXPECT_EQ(OutputCount(Op::kAllToAll, 10, 4), 40u);
}

TEST(Ops, ExpectedValuesMatchTheDefinitions) {
  // Each operation done by hand on the inputs, against OpExpected.
  const uint64_t c = 5;
  for (int n = 1; n <= 4; ++n) {
    for (int r = 0; r < n; ++r) {
      for (uint64_t j = 0; j < c * n; ++j) {
        uint64_t q = j / c, i = j % c;
        EXPECT_EQ(OpExpected(Op::kAllGather, n, r, c, j), OpInput(static_cast<int>(q), i));
        EXPECT_EQ(OpExpected(Op::kAllToAll, n, r, c, j), OpInput(static_cast<int>(q), r * c + i));
      }
      for (uint64_t j = 0; j < c; ++j) {
        double sum = 0;
        for (int q = 0; q < n; ++q) sum += OpInput(q, r * c + j);
        EXPECT_EQ(OpExpected(Op::kReduceScatter, n, r, c, j), static_cast<float>(sum));
      }
    }
  }
  // A chunk from the wrong rank shows: rank 0's value differs from rank 1's.
  EXPECT_NE(OpExpected(Op::kAllGather, 2, 0, c, 0), OpExpected(Op::kAllGather, 2, 0, c, c));
}

// Damages one element of what it reads back, and can refuse all_to_all as
// an NCCL without ncclSend would.
class DamagingBackend : public Backend {
 public:
  DamagingBackend(std::unique_ptr<Backend> b, bool damage, bool no_alltoall)
      : b_(std::move(b)), damage_(damage), no_alltoall_(no_alltoall) {}
  const char* Name() const override { return b_->Name(); }
  int Rank() const override { return b_->Rank(); }
  int Size() const override { return b_->Size(); }
  std::string Device() const override { return b_->Device(); }
  Status Prepare(uint64_t n) override { return b_->Prepare(n); }
  Status SetInput(const float* h, uint64_t n) override { return b_->SetInput(h, n); }
  Status AllReduce(uint64_t n) override { return b_->AllReduce(n); }
  Status AllGather(uint64_t n) override { return b_->AllGather(n); }
  Status ReduceScatter(uint64_t n) override { return b_->ReduceScatter(n); }
  Status AllToAll(uint64_t n) override {
    if (no_alltoall_) return Status::Unavailable("libnccl.so.2 has no ncclSend (an NCCL too old for it)");
    return b_->AllToAll(n);
  }
  Status Wait() override { return b_->Wait(); }
  Status GetOutput(float* h, uint64_t off, uint64_t n) override {
    Status s = b_->GetOutput(h, off, n);
    if (s.ok() && damage_ && n > 5) h[5] += 1;
    return s;
  }
  Status MaxAcrossRanks(std::vector<double>& v) override { return b_->MaxAcrossRanks(v); }

 private:
  std::unique_ptr<Backend> b_;
  bool damage_, no_alltoall_;
};

SweepOptions Small() {
  SweepOptions o;
  o.sizes = {4, 1000, 64 << 10, 1 << 20};  // 4: below one chunk of 4 elements but for all_reduce
  o.warmup = 1;
  o.iters = 2;
  return o;
}

// `n` host-backend ranks as threads; rank `damaged` (-1: none) reads back
// one wrong element.
std::vector<Expected<SweepResult>> RunLocal(int n, Op op, int damaged = -1) {
  auto group = MakeLocalGroup(n, "localhost", 20000);
  std::vector<Expected<SweepResult>> out(n, Status::Unavailable("not run"));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      auto boot = MakeLocalBootstrap(group, r);
      HostOptions o;
      o.address = "127.0.0.1";
      auto b = MakeHostBackend(*boot, o);
      if (!b) { out[r] = b.status(); return; }
      DamagingBackend be(std::move(*b), r == damaged, false);
      out[r] = RunSweep(be, op, Small());
    });
  }
  for (auto& t : th) t.join();
  return out;
}

TEST(HostBackendOps, EveryOperationIsExactOnOneToFourRanks) {
  for (Op op : AllOps()) {
    for (int n : {1, 2, 3, 4}) {
      auto res = RunLocal(n, op);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(res[r].ok()) << OpName(op) << " n=" << n << " rank " << r << ": " << res[r].status().ToString();
        EXPECT_EQ(res[r]->op, op);
        EXPECT_EQ(res[r]->nranks, n);
        // The 4-byte size is below one aligned chunk (all_reduce keeps it).
        size_t want = op == Op::kAllReduce ? 4u : 3u;
        ASSERT_EQ(res[r]->sizes.size(), want) << OpName(op) << " n=" << n;
        for (const auto& s : res[r]->sizes) {
          EXPECT_EQ(s.wrong, 0u) << OpName(op) << " n=" << n << " bytes=" << s.bytes;
          EXPECT_EQ(s.bytes, OpBytes(op, OpCount(op, s.bytes, n), n));
          EXPECT_DOUBLE_EQ(s.busbw, s.algbw * BusFactor(op, n));
        }
        // 1 MiB is n whole chunks except for 3 ranks (nccl-tests drops the remainder too).
        EXPECT_EQ(res[r]->sizes.back().bytes, n == 3 && op != Op::kAllReduce ? (1u << 20) / 48 * 48 : 1u << 20);
      }
      EXPECT_TRUE(Judge(*res[0], 0).ok) << Judge(*res[0], 0).message;
    }
  }
}

TEST(HostBackendOps, AWrongElementIsCaughtForEveryOperation) {
  for (Op op : AllOps()) {
    for (int n : {1, 2, 3}) {
      auto res = RunLocal(n, op, /*damaged=*/n - 1);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(res[r].ok()) << res[r].status().ToString();
        // Damaged on the last rank, the count reduced to every rank.
        EXPECT_GE(res[r]->sizes.back().wrong, 1u) << OpName(op) << " n=" << n << " rank " << r;
        Judgement j = Judge(*res[r], 0);
        EXPECT_FALSE(j.ok);
        if (op != Op::kAllReduce) {
          EXPECT_NE(j.message.find(std::string("wrong ") + OpName(op)), std::string::npos) << j.message;
        }
      }
    }
  }
}

TEST(HostBackendOps, AnOperationThatCannotRunEndsTheSweepsNamingIt) {
  auto group = MakeLocalGroup(1, "localhost", 20000);
  auto boot = MakeLocalBootstrap(group, 0);
  HostOptions o;
  o.address = "127.0.0.1";
  auto b = MakeHostBackend(*boot, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  DamagingBackend be(std::move(*b), false, /*no_alltoall=*/true);
  Op failed = Op::kAllReduce;
  auto res = RunSweeps(be, {Op::kAllGather, Op::kAllToAll}, Small(), &failed);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(failed, Op::kAllToAll);
  EXPECT_NE(res.status().message().find("all_to_all"), std::string::npos) << res.status().message();
  EXPECT_NE(res.status().message().find("ncclSend"), std::string::npos) << res.status().message();
}

TEST(HostBackendOps, OutputNamesTheOperation) {
  auto res = RunLocal(2, Op::kReduceScatter);
  ASSERT_TRUE(res[0].ok()) << res[0].status().ToString();
  Judgement j = Judge(*res[0], 1);
  RunInfo info{"intra-node", "quick", {"n1"}, "local", "test", ""};
  EXPECT_NE(ResultJson(*res[0], j, info).find("\"test\": \"reduce_scatter\""), std::string::npos);
  EXPECT_EQ(ResultText(*res[0], j, info).rfind("# preflight-nccl reduce_scatter (intra-node, quick)", 0), 0u);
  // A result that names no operation is all_reduce's, as before --ops.
  SweepResult plain;
  EXPECT_NE(ResultJson(plain, j, info).find("\"test\": \"all_reduce\""), std::string::npos);
  EXPECT_EQ(ResultText(plain, j, info).rfind("# preflight-nccl all_reduce (intra-node, quick)", 0), 0u);
}

TEST(IntraNodeOps, EveryOperationJudgedWithTheSameThreshold) {
  Config cfg;
  cfg.nccl.max_bytes = 1 << 20;
  cfg.nccl.min_intra_busbw = 1;  // 1 B/s: every healthy run passes
  CheckRun run = RunIntraNode(cfg, "n1", Level::kQuick, BackendKind::kHost, 3, AllOps());
  ASSERT_TRUE(run.error.empty()) << run.error;
  EXPECT_EQ(run.result.op, Op::kAllReduce);
  ASSERT_EQ(run.rest.size(), 3u);
  EXPECT_EQ(run.rest[0].result.op, Op::kAllGather);
  EXPECT_EQ(run.rest[2].result.op, Op::kAllToAll);
  for (const auto& o : run.rest) EXPECT_DOUBLE_EQ(o.judgement.threshold, run.judgement.threshold);
  EXPECT_TRUE(Passed(run)) << Deciding(run).judgement.message;

  // One failed operation fails the run and is the one the drain reason names.
  run.rest[1].judgement.ok = false;
  run.rest[1].judgement.message = "wrong reduce_scatter result";
  EXPECT_FALSE(Passed(run));
  EXPECT_EQ(Deciding(run).result.op, Op::kReduceScatter);
  EXPECT_NE(IntraDrainReason(run, "n1").find("reduce_scatter: wrong"), std::string::npos) << IntraDrainReason(run, "n1");
}

}  // namespace
}  // namespace preflight::collective
