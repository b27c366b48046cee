// Unit tests of the collective harness and the host backend. Ranks are
// threads of this process over the local bootstrap and real loopback TCP
// (the real backend, not a mock); the NCCL path is reached through a fake
// CUDA runtime loaded by the same dlopen seam.
#include <gtest/gtest.h>

#include "preflight_test/temp_dir.h"
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "preflight/collective.h"
#include "preflight/collective_metrics.h"
#include "preflight/collective_records.h"
#include "preflight/collective_run.h"

namespace preflight::collective {
namespace {

TEST(AllReduceFormula, BusFactorIsTwoNMinusOneOverN) {
  EXPECT_DOUBLE_EQ(AllReduceBusFactor(1), 0.0);
  EXPECT_DOUBLE_EQ(AllReduceBusFactor(2), 1.0);
  EXPECT_DOUBLE_EQ(AllReduceBusFactor(4), 1.5);
  EXPECT_DOUBLE_EQ(AllReduceBusFactor(8), 1.75);
  EXPECT_DOUBLE_EQ(AllReduceBusFactor(0), 0.0);
}

TEST(AllReduceFormula, ByteCountsAreFloatElements) {
  EXPECT_EQ(AllReduceCount(256u << 20), 64u << 20);
  EXPECT_EQ(AllReduceCount(4), 1u);
  EXPECT_EQ(AllReduceCount(7), 1u);  // a partial element is not sent
  EXPECT_EQ(AllReduceCount(3), 0u);
}

TEST(AllReduceFormula, ExpectedIsTheSumOfInputs) {
  for (int n : {1, 2, 3, 8, 1000})
    for (uint64_t i : {0ull, 1ull, 60ull, 61ull, 123456789ull}) {
      double sum = 0;
      for (int r = 0; r < n; ++r) sum += AllReduceInput(r, i);
      EXPECT_EQ(AllReduceExpected(n, i), static_cast<float>(sum)) << "n=" << n << " i=" << i;
    }
}

TEST(Sweep, LevelsAndCap) {
  SweepOptions q = SweepForLevel(Level::kQuick, 0);
  ASSERT_FALSE(q.sizes.empty());
  EXPECT_EQ(q.sizes.back(), 256ull << 20);
  EXPECT_LE(q.sizes.size(), 5u);
  SweepOptions f = SweepForLevel(Level::kFull, 0);
  EXPECT_EQ(f.sizes.front(), 1ull << 20);
  EXPECT_EQ(f.sizes.back(), 8ull << 30);
  EXPECT_GT(f.iters, q.iters);
  SweepOptions capped = SweepForLevel(Level::kFull, 64ull << 20);
  EXPECT_EQ(capped.sizes.back(), 64ull << 20);
  SweepOptions between = SweepForLevel(Level::kQuick, 1 << 20);
  ASSERT_EQ(between.sizes.size(), 2u);
  EXPECT_EQ(between.sizes[1], 1u << 20);
  SweepOptions tiny = SweepForLevel(Level::kQuick, 1000);
  ASSERT_EQ(tiny.sizes.size(), 1u);
  EXPECT_EQ(tiny.sizes[0], 1000u);
}

// A finished sweep with made-up figures, for the verdict and output tests.
SweepResult Fake(int n, double seconds, uint64_t wrong) {
  SweepResult r;
  r.backend = "host-tcp";
  r.nranks = n;
  SizeResult s;
  s.bytes = 1 << 20;
  s.count = s.bytes / 4;
  s.seconds = seconds;
  s.algbw = s.bytes / seconds;
  s.busbw = s.algbw * AllReduceBusFactor(n);
  s.wrong = wrong;
  r.sizes.push_back(s);
  return r;
}

TEST(Judge, ThresholdAndWrongData) {
  SweepResult r = Fake(4, 1e-3, 0);  // algbw 1.048576e9, busbw 1.572864e9
  EXPECT_NEAR(r.sizes[0].busbw, 1.572864e9, 1);
  EXPECT_TRUE(Judge(r, 1.5e9).ok);
  Judgement low = Judge(r, 2e9);
  EXPECT_FALSE(low.ok);
  EXPECT_NE(low.message.find("< 2 GB/s"), std::string::npos) << low.message;
  EXPECT_TRUE(Judge(r, 0).ok);
  Judgement bad = Judge(Fake(4, 1e-3, 3), 0);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.message.find("3 of 262144 elements"), std::string::npos) << bad.message;
}

TEST(Output, JsonAndFooterComeFromTheResult) {
  SweepResult r = Fake(2, 1e-3, 0);
  Judgement j = Judge(r, 5e9);
  RunInfo info{"allocation", "quick", {"n1", "n2"}, "pmix", "config nccl_min_busbw", "host-tcp"};
  std::string json = ResultJson(r, j, info);
  EXPECT_NE(json.find("\"verdict\": \"fail\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"backend\": \"host-tcp\""), std::string::npos);
  EXPECT_NE(json.find("\"threshold_Bps\": 5000000000"), std::string::npos) << json;
  std::string text = ResultText(r, j, info);
  EXPECT_NE(text.find("\n# FAILED: busbw"), std::string::npos) << text;
  EXPECT_NE(ResultText(r, Judge(r, 1), info).find("\n# OK: "), std::string::npos);
}

// Run `n` ranks as threads over loopback TCP; return each rank's result.
std::vector<Expected<SweepResult>> RunLocal(int n, const SweepOptions& opt, const HostOptions& ho,
                                            bool corrupt_rank1 = false);

// Wraps a backend and damages one element of the result: the harness must
// notice, whatever the backend.
class CorruptingBackend : public Backend {
 public:
  explicit CorruptingBackend(std::unique_ptr<Backend> b) : b_(std::move(b)) {}
  const char* Name() const override { return b_->Name(); }
  int Rank() const override { return b_->Rank(); }
  int Size() const override { return b_->Size(); }
  std::string Device() const override { return b_->Device(); }
  Status Prepare(uint64_t n) override { return b_->Prepare(n); }
  Status SetInput(const float* h, uint64_t n) override { return b_->SetInput(h, n); }
  Status AllReduce(uint64_t n) override { return b_->AllReduce(n); }
  Status AllGather(uint64_t n) override { return b_->AllGather(n); }
  Status ReduceScatter(uint64_t n) override { return b_->ReduceScatter(n); }
  Status AllToAll(uint64_t n) override { return b_->AllToAll(n); }
  Status Wait() override { return b_->Wait(); }
  Status GetOutput(float* h, uint64_t off, uint64_t n) override {
    Status s = b_->GetOutput(h, off, n);
    if (s.ok() && n > 5) h[5] += 1;
    return s;
  }
  Status MaxAcrossRanks(std::vector<double>& v) override { return b_->MaxAcrossRanks(v); }

 private:
  std::unique_ptr<Backend> b_;
};

std::vector<Expected<SweepResult>> RunLocal(int n, const SweepOptions& opt, const HostOptions& ho, bool corrupt_rank1) {
  auto group = MakeLocalGroup(n, "localhost", 20000);
  std::vector<Expected<SweepResult>> out(n, Status::Unavailable("not run"));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      auto boot = MakeLocalBootstrap(group, r);
      HostOptions o = ho;
      o.address = "127.0.0.1";
      auto b = MakeHostBackend(*boot, o);
      if (!b) { out[r] = b.status(); return; }
      std::unique_ptr<Backend> be = std::move(*b);
      if (corrupt_rank1 && r == 1) be = std::make_unique<CorruptingBackend>(std::move(be));
      out[r] = RunAllReduceSweep(*be, opt);
    });
  }
  for (auto& t : th) t.join();
  return out;
}

SweepOptions Small() {
  SweepOptions o;
  o.sizes = {4, 1000, 64 << 10, 1 << 20};  // 1000: chunks of unequal size
  o.warmup = 1;
  o.iters = 2;
  return o;
}

TEST(HostBackend, RanksOnLoopbackSumCorrectly) {
  for (int n : {1, 2, 3, 5}) {
    auto res = RunLocal(n, Small(), HostOptions{});
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(res[r].ok()) << "n=" << n << " rank " << r << ": " << res[r].status().ToString();
      ASSERT_EQ(res[r]->sizes.size(), 4u);
      for (const auto& s : res[r]->sizes) EXPECT_EQ(s.wrong, 0u) << "n=" << n << " bytes=" << s.bytes;
      EXPECT_EQ(res[r]->nranks, n);
      EXPECT_EQ(res[r]->backend, "host-tcp");
    }
    // Every rank reports the same (max-reduced) figures.
    EXPECT_EQ(res[0]->sizes.back().seconds, res[n - 1]->sizes.back().seconds);
    EXPECT_TRUE(Judge(*res[0], 0).ok);
  }
}

TEST(HostBackend, VerificationCatchesAWrongSum) {
  auto res = RunLocal(3, Small(), HostOptions{}, /*corrupt_rank1=*/true);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(res[r].ok()) << res[r].status().ToString();
    // The damage is on rank 1, but the error count is reduced to every rank.
    EXPECT_GE(res[r]->sizes.back().wrong, 1u) << "rank " << r;
    EXPECT_FALSE(Judge(*res[r], 0).ok);
  }
}

TEST(HostBackend, RateCapSlowsTheRing) {
  // 2 ranks, 256 KiB, capped at 4 MB/s: each op sends 256 KiB per rank, so
  // at least ~50 ms per op, i.e. busbw at most ~5 MB/s. A bound that only a
  // broken cap can miss (not a timing assertion on the machine's speed).
  SweepOptions o;
  o.sizes = {256 << 10};
  o.warmup = 0;
  o.iters = 2;
  HostOptions ho;
  ho.send_rate_cap = 4e6;
  auto res = RunLocal(2, o, ho);
  ASSERT_TRUE(res[0].ok()) << res[0].status().ToString();
  EXPECT_LT(res[0]->sizes[0].busbw, 6e6);
  EXPECT_FALSE(Judge(*res[0], 50e6).ok);
}

TEST(HostBackend, MissingPeerTimesOutNamingIt) {
  // 2-rank group where only rank 0 shows up: the bootstrap names the gap.
  auto group = MakeLocalGroup(2, "localhost", 300);
  auto boot = MakeLocalBootstrap(group, 0);
  HostOptions ho;
  ho.address = "127.0.0.1";
  auto b = MakeHostBackend(*boot, ho);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("1 of 2 ranks arrived"), std::string::npos) << b.status().message();
}

TEST(HostBackend, SubGroupRingWhileOthersStandBy) {
  // 4 ranks; ranks 1 and 3 form a pair (as one node pair of --scope pairs)
  // while 0 and 2 stand by in the same exchanges.
  auto group = MakeLocalGroup(4, "localhost", 20000);
  std::vector<std::string> verdict(4);
  std::vector<std::thread> th;
  for (int r = 0; r < 4; ++r) {
    th.emplace_back([&, r] {
      auto boot = MakeLocalBootstrap(group, r);
      if (r == 1 || r == 3) {
        auto sub = MakeSubBootstrap(*boot, {1, 3});
        HostOptions ho;
        ho.address = "127.0.0.1";
        auto b = MakeHostBackend(*sub, ho);
        if (!b) { verdict[r] = b.status().message(); return; }
        auto res = RunAllReduceSweep(**b, Small());
        verdict[r] = !res ? res.status().message()
                          : std::to_string(res->nranks) + " ranks, wrong " + std::to_string(res->sizes.back().wrong);
      } else {
        auto v = boot->AllGather(kBackendGatherKey, "");
        verdict[r] = v ? "stood by" : v.status().message();
      }
    });
  }
  for (auto& t : th) t.join();
  EXPECT_EQ(verdict[1], "2 ranks, wrong 0");
  EXPECT_EQ(verdict[3], "2 ranks, wrong 0");
  EXPECT_EQ(verdict[0], "stood by");
}

TEST(HostBackend, ARankThatFailsEarlyFailsTheOthersFast) {
  // Rank 1 cannot even build its backend (bad rate file): it still joins
  // the one exchange, so rank 0 fails at once naming it, not at a timeout.
  auto group = MakeLocalGroup(2, "localhost", 20000);
  Status s0, s1;
  std::thread t1([&] {
    auto boot = MakeLocalBootstrap(group, 1);
    s1 = FailBackendGather(*boot, Status::InvalidArgument("bad rate 'fast'"));
  });
  auto boot = MakeLocalBootstrap(group, 0);
  HostOptions ho;
  ho.address = "127.0.0.1";
  ho.timeout_ms = 600000;
  auto b = MakeHostBackend(*boot, ho);
  t1.join();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "host backend: rank 1: bad rate 'fast'");
}

TEST(IntraNode, HostRanksAsThreads) {
  Config cfg;
  cfg.nccl.max_bytes = 64 << 10;
  cfg.nccl.min_intra_busbw = 1;  // 1 B/s: any working loopback passes
  CheckRun run = RunIntraNode(cfg, "n9", Level::kQuick, BackendKind::kHost, 3);
  EXPECT_TRUE(run.error.empty()) << run.error;
  EXPECT_TRUE(run.judgement.ok) << run.judgement.message;
  EXPECT_EQ(run.result.nranks, 3);
  EXPECT_EQ(run.info.threshold_source, "config nccl_min_intra_busbw");
  auto why = ParseReason(IntraDrainReason(run, "n9"));  // drain_reason.h grammar (was "preflight: nccl ...")
  ASSERT_TRUE(why.has_value());
  EXPECT_TRUE(IsNcclReason(*why));
}

TEST(IntraNode, RankCountIsBounded) {
  // Issue #19 defect 5: --ranks 100000 aborted (a thread per rank), 5000 ran
  // past a minute. Refused before any thread starts, as the caller's error.
  EXPECT_TRUE(CheckIntraRanks(1, 0).ok());
  EXPECT_TRUE(CheckIntraRanks(kMaxIntraRanks, 0).ok());
  EXPECT_EQ(CheckIntraRanks(100000, 0).message(), "--ranks 100000: expected 1 to 64 (the limit of ranks per node)");
  EXPECT_FALSE(CheckIntraRanks(0, 0).ok());
  EXPECT_FALSE(CheckIntraRanks(-3, 0).ok());
  EXPECT_EQ(CheckIntraRanks(9, 8).message(), "--ranks 9: more than this node's 8 GPUs (one rank per GPU)");
  EXPECT_TRUE(CheckIntraRanks(8, 8).ok());
  Config cfg;
  for (int n : {100000, 5000, kMaxIntraRanks + 1, -1}) {
    CheckRun run = RunIntraNode(cfg, "n1", Level::kQuick, BackendKind::kHost, n);
    EXPECT_TRUE(run.usage_error) << n;
    EXPECT_FALSE(run.judgement.ok);
    EXPECT_NE(run.error.find("--ranks " + std::to_string(n)), std::string::npos) << run.error;
  }
}

TEST(IntraNode, AbortedGroupEndsEveryWait) {
  // What RunIntraNode does when a rank's thread cannot start: the started
  // ranks' waits end at once instead of at the timeout (10 minutes here).
  auto group = MakeLocalGroup(3, "n1", 600000);
  Expected<std::vector<std::string>> got = Status::Unavailable("not run");
  std::thread t([&] { got = MakeLocalBootstrap(group, 0)->AllGather("k", "x"); });
  AbortLocalGroup(*group, "rank 2 could not be started");
  t.join();
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("rank 2 could not be started"), std::string::npos) << got.status().message();
}

TEST(IntraNode, RateFileMakesTheNodeFail) {
  preflight_test::TempDir dir("nccl");
  std::string f = dir / "rate";
  std::ofstream(f) << "2M\n";
  Config cfg;
  cfg.nccl.host_rate_file = f;
  cfg.nccl.max_bytes = 64 << 10;
  cfg.nccl.min_intra_busbw = 100e6;
  auto cap = HostRateCap(cfg);
  ASSERT_TRUE(cap.ok());
  EXPECT_DOUBLE_EQ(*cap, 2e6);
  CheckRun run = RunIntraNode(cfg, "n2", Level::kQuick, BackendKind::kHost, 2);
  EXPECT_FALSE(run.judgement.ok);
  // Reason text since the drain_reason.h grammar (was "preflight: nccl intra-node n2 (...): busbw ...").
  EXPECT_EQ(IntraDrainReason(run, "n2").rfind("preflight[node] nccl.intra n2 (host-tcp, 2 ranks): busbw", 0), 0u)
      << IntraDrainReason(run, "n2");
  auto why = ParseReason(IntraDrainReason(run, "n2"));
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->threshold, ">= 100 MB/s");
  std::ofstream(f) << "fast\n";
  EXPECT_FALSE(HostRateCap(cfg).ok());
  ::unlink(f.c_str());
  EXPECT_DOUBLE_EQ(*HostRateCap(cfg), 0.0);  // no file: no cap
}

// --- node_exporter textfile metrics (collective_metrics.h) ---------------------
// Metric -> the label-name lists of its series, as in Report.PrometheusLabelsTheAlertRulesUse.
std::map<std::string, std::set<std::string>> MetricLabels(const std::string& prom) {
  std::map<std::string, std::set<std::string>> labels;
  std::istringstream in(prom);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t brace = line.find('{');
    EXPECT_NE(brace, std::string::npos) << line;
    if (brace == std::string::npos) continue;
    std::string names;
    for (size_t i = brace + 1; i < line.size() && line[i] != '}';) {
      size_t eq = line.find("=\"", i);
      EXPECT_NE(eq, std::string::npos) << line;
      if (eq == std::string::npos) break;
      names += (names.empty() ? "" : ",") + line.substr(i, eq - i);
      i = eq + 2;
      while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
      i += line[i + 1] == ',' ? 2 : 1;
    }
    labels[line.substr(0, brace)].insert(names);
  }
  return labels;
}

// The names conf/prometheus/preflight.rules.yml (PreflightCollectiveBelowThreshold,
// PreflightCollectiveSuspect) and its promtool tests use.
TEST(NcclMetrics, LabelsTheAlertRulesUse) {
  NcclMetrics m;
  m.node = "n1";
  m.ok = false;
  m.busbw = 4.98e6;
  m.threshold = 20e6;
  m.suspects = {"n3", "n2", "n3"};  // drained and suspect: one series each
  m.finished_unix = 1764806400;
  std::string p = NcclPrometheus(m);
  auto labels = MetricLabels(p);
  using Set = std::set<std::string>;
  EXPECT_EQ(labels["preflight_nccl_ok"], Set{"node,scope"});
  EXPECT_EQ(labels["preflight_nccl_busbw_bytes_per_second"], Set{"node,scope"});
  EXPECT_EQ(labels["preflight_nccl_threshold_bytes_per_second"], Set{"node,scope"});
  EXPECT_EQ(labels["preflight_nccl_suspect"], Set{"node,suspect"});
  EXPECT_EQ(labels["preflight_nccl_last_run_timestamp_seconds"], Set{"node,scope"});
  EXPECT_EQ(labels.size(), 5u) << p;
  EXPECT_NE(p.find("preflight_nccl_ok{node=\"n1\",scope=\"allocation\"} 0\n"), std::string::npos) << p;
  EXPECT_NE(p.find("preflight_nccl_busbw_bytes_per_second{node=\"n1\",scope=\"allocation\"} 4.98e+06\n"),
            std::string::npos) << p;
  EXPECT_NE(p.find("preflight_nccl_threshold_bytes_per_second{node=\"n1\",scope=\"allocation\"} 2e+07\n"),
            std::string::npos) << p;
  EXPECT_NE(p.find("preflight_nccl_suspect{node=\"n1\",suspect=\"n3\"} 1\n"), std::string::npos) << p;
  EXPECT_NE(p.find("preflight_nccl_suspect{node=\"n1\",suspect=\"n2\"} 1\n"), std::string::npos) << p;
  EXPECT_EQ(p.find("suspect=\"n3\"", p.find("suspect=\"n3\"") + 1), std::string::npos) << p;  // deduplicated
  // Whole seconds: %.6g would put the timestamp hours off.
  EXPECT_NE(p.find("preflight_nccl_last_run_timestamp_seconds{node=\"n1\",scope=\"allocation\"} 1764806400\n"),
            std::string::npos) << p;
  EXPECT_NE(p.find("# TYPE preflight_nccl_ok gauge\n"), std::string::npos) << p;
}

TEST(NcclMetrics, PassWithoutSuspectsAndEscapedLabels) {
  NcclMetrics m;
  m.node = "n\"1\\";
  m.ok = true;
  std::string p = NcclPrometheus(m);
  EXPECT_NE(p.find("preflight_nccl_ok{node=\"n\\\"1\\\\\",scope=\"allocation\"} 1\n"), std::string::npos) << p;
  EXPECT_NE(p.find("preflight_nccl_threshold_bytes_per_second{node=\"n\\\"1\\\\\",scope=\"allocation\"} 0\n"),
            std::string::npos) << p;
  EXPECT_EQ(p.find("preflight_nccl_suspect{"), std::string::npos) << p;  // no series when nobody is named
}

TEST(NcclMetrics, WrittenOnlyWithTextfileDir) {
  preflight_test::TempDir dir("ncclprom");
  NcclMetrics m;
  m.node = "n4";
  m.ok = true;
  Config cfg;
  ASSERT_TRUE(WriteNcclMetrics(cfg, m).ok());  // no textfile_dir: nothing, no error
  cfg.textfile_dir = dir / "textfile";           // made when absent
  ASSERT_TRUE(WriteNcclMetrics(cfg, m).ok());
  std::ifstream in(cfg.textfile_dir + "/preflight_n4_nccl.prom");
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), NcclPrometheus(m));
  cfg.textfile_dir = "/proc/no-such-dir/textfile";
  Status s = WriteNcclMetrics(cfg, m);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("metrics"), std::string::npos) << s.message();
}

TEST(Backends, AutoPicksNcclOnlyWithGpus) {
  EXPECT_EQ(ResolveBackend(BackendKind::kAuto, GpusRequested({{"CUDA_VISIBLE_DEVICES", "0,1"}})), BackendKind::kNccl);
  EXPECT_EQ(ResolveBackend(BackendKind::kAuto, GpusRequested({{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}})), BackendKind::kHost);
  EXPECT_EQ(ResolveBackend(BackendKind::kAuto, GpusRequested({{"PATH", "/bin"}})), BackendKind::kHost);
  EXPECT_EQ(ResolveBackend(BackendKind::kHost, true), BackendKind::kHost);
}

// One spelling per backend and scope: each name parses back to its value;
// the old third spelling of the host backend ("host-tcp") is a result
// name, not a choice, and is refused with the three a user may give.
TEST(Backends, OneSpellingPerKindAndScope) {
  for (BackendKind k : {BackendKind::kAuto, BackendKind::kNccl, BackendKind::kHost})
    EXPECT_EQ(*ParseBackendKind(BackendKindName(k)), k);
  auto bad = ParseBackendKind("host-tcp");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected auto, nccl or host"), std::string::npos) << bad.status().message();
  EXPECT_STREQ(ResultBackendName(BackendKind::kHost), "host-tcp");
  EXPECT_STREQ(ResultBackendName(BackendKind::kNccl), "nccl");
  for (Scope k : {Scope::kAllocation, Scope::kIntraNode, Scope::kPairs}) EXPECT_EQ(*ParseScope(ScopeName(k)), k);
  EXPECT_FALSE(ParseScope("pair").ok());
}

TEST(Backends, NoGpuIsAnErrorNotAPass) {
  // The fake runtime reports zero devices, as a CPU node with CUDA installed.
  NcclOptions o;
  o.cudart = FAKE_CUDART_NODEV;
  auto inv = ProbeGpus(o);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->count, 0);
  auto group = MakeLocalGroup(1, "n1", 1000);
  auto boot = MakeLocalBootstrap(group, 0);
  auto b = MakeNcclBackend(*boot, o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(b.status().message().find("no CUDA device"), std::string::npos) << b.status().message();
  Config cfg;
  auto m = MakeBackend(BackendKind::kNccl, *boot, cfg);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kFailed);
  EXPECT_NE(m.status().message().find("GPU check asked for"), std::string::npos);
  CheckRun run = RunIntraNode(cfg, "n1", Level::kQuick, BackendKind::kNccl, 0);
  EXPECT_FALSE(run.judgement.ok);
  EXPECT_NE(run.error.find("no CUDA device"), std::string::npos) << run.error;
}

TEST(Profiles, ExplicitBeatsProfileBeatsNothing) {
  Config cfg;
  GpuInventory h100{8, "NVIDIA H100 80GB HBM3"};
  const NodeProfile* p = PickProfile(cfg, BackendKind::kNccl, h100);
  ASSERT_NE(p, nullptr);
  EXPECT_STREQ(p->name, "8xH100-nvlink");
  std::string src;
  EXPECT_GT(Threshold(cfg, p, true, &src), 0);
  EXPECT_EQ(src, "profile 8xH100-nvlink");
  EXPECT_EQ(PickProfile(cfg, BackendKind::kNccl, GpuInventory{3, "NVIDIA H100"}), nullptr);
  cfg.nccl.min_busbw = 5e9;
  EXPECT_DOUBLE_EQ(Threshold(cfg, p, false, &src), 5e9);
  EXPECT_EQ(src, "config nccl_min_busbw");
  cfg.nccl.profile = "8xA100-nvlink";
  EXPECT_STREQ(PickProfile(cfg, BackendKind::kNccl, h100)->name, "8xA100-nvlink");
  cfg.nccl.profile = "no-such";
  EXPECT_EQ(PickProfile(cfg, BackendKind::kNccl, h100), nullptr);
}

TEST(Localize, InterNodeSuspectIsInTwoFailedPairs) {
  // pairs: 0=(n0,n1) 1=(n1,n2) 2=(n2,n0)
  EXPECT_EQ(InterNodeSuspects(3, {true, true, false}), std::vector<size_t>{1});
  EXPECT_EQ(InterNodeSuspects(3, {true, false, true}), std::vector<size_t>{0});
  EXPECT_TRUE(InterNodeSuspects(3, {true, false, false}).empty());
  EXPECT_EQ(InterNodeSuspects(4, {false, false, true, true}), std::vector<size_t>{3});
  EXPECT_TRUE(InterNodeSuspects(2, {true}).empty());  // two nodes: can't tell which
  EXPECT_TRUE(InterNodeSuspects(3, {true, true, true}).empty());  // every link: nobody singled out
}

TEST(Localize, RequeueNoteNamesTheDrainedNode) {
  AllocationOutcome o;
  o.drained = {"n2"};
  o.requeue = true;
  EXPECT_EQ(RequeueNote(o, {"n1", "n2", "n3"}, "1"),
            "preflight: nccl check failed at start 1 on n1,n2,n3: drained n2; requeued without n2");
  o.requeue = false;
  o.drained.clear();
  EXPECT_EQ(RequeueNote(o, {"n1"}, "3"), "preflight: nccl check failed at start 3 on n1: no single node at fault; job failed");
}

TEST(RunAs, CapturesOutputAndExitCode) {
  auto r = RunAs({"sh", "-c", "echo hi; echo err >&2; exit 3"}, {"PATH=/bin:/usr/bin"}, ::getuid(), ::getgid(), {}, 5000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->first, 3);
  EXPECT_EQ(r->second, "hi\nerr\n");
  auto t = RunAs({"sleep", "5"}, {"PATH=/bin:/usr/bin"}, ::getuid(), ::getgid(), {}, 200);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->first, 124);
}

}  // namespace
}  // namespace preflight::collective

namespace preflight::collective {
namespace {

// The batch step of `sbatch --gpus-per-task=2 -n2` on 24.11: what srun
// would read as options of the check's steps must not pass.
TEST(LaunchEnv, OnlyTheAllowListPasses) {
  std::vector<std::string> job = {
      "PATH=/usr/bin", "HOME=/home/u", "LD_LIBRARY_PATH=/opt/nccl/lib", "LC_ALL=C", "SLURM_JOB_ID=42",
      "SLURM_CONF=/etc/slurm/slurm.conf", "NCCL_IB_HCA==mlx5_0:1", "NCCL_DEBUG=INFO", "UCX_TLS=rc",
      "SLURM_SPANK_PREFLIGHT_NCCL_CHECK=quick", "_SLURM_SPANK_OPTION_preflight_nccl_check=quick",
      "PREFLIGHT_NCCL_STEP=intra",  // a user's own value never passes
      "SLURM_TRES_PER_TASK=gres/gpu:2", "SLURM_TRES_BIND=gres/gpu:single:2", "SLURM_NTASKS_PER_CORE=1",
      "SLURM_GPUS_PER_TASK=2", "SLURM_CPUS_PER_GPU=4", "SLURM_MEM_PER_GPU=1000", "SLURM_NTASKS=2",
      "SLURM_NTASKS_PER_NODE=2", "SLURM_DISTRIBUTION=block", "SLURM_MPI_TYPE=none", "SLURM_GPU_BIND=closest",
      "SLURM_JOB_NODELIST=n1", "SBATCH_EXPORT=ALL", "SRUN_CPUS_PER_TASK=3", "CUDA_VISIBLE_DEVICES=0,1",
      "GPU_DEVICE_ORDINAL=0,1", "ROCR_VISIBLE_DEVICES=0", "NOEQUALS", "=x"};
  auto env = LaunchEnv(job, false);
  std::vector<std::string> want = {
      "PATH=/usr/bin", "HOME=/home/u", "LD_LIBRARY_PATH=/opt/nccl/lib", "LC_ALL=C", "SLURM_JOB_ID=42",
      "SLURM_CONF=/etc/slurm/slurm.conf", "NCCL_IB_HCA==mlx5_0:1", "NCCL_DEBUG=INFO", "UCX_TLS=rc",
      "SLURM_SPANK_PREFLIGHT_NCCL_CHECK=quick", "_SLURM_SPANK_OPTION_preflight_nccl_check=quick"};
  EXPECT_EQ(env, want);
  auto intra = LaunchEnv(job, true);
  ASSERT_EQ(intra.size(), want.size() + 1);
  EXPECT_EQ(intra.back(), std::string(kIntraStepEnv) + "=intra");
}

}  // namespace
}  // namespace preflight::collective

namespace preflight::collective {
namespace {

// --- result records (collective_records.h) -------------------------------------
TEST(Records, RoundTripAndDisplayWithoutThem) {
  ResultRecord a;
  a.kind = "pair";
  a.nodes = {"n1", "n2"};
  a.pass = true;
  a.busbw = 8.5e8;
  a.threshold = 2e7;
  a.message = "busbw 850 MB/s at 1M >= 20 MB/s";
  ResultRecord b;
  b.kind = "intra-node";
  b.nodes = {"n2"};
  b.message = "quote \" and\nnewline";
  b.drain_reason = "preflight[node] nccl.intra n2 (host-tcp, 2 ranks): busbw 4.98 MB/s at 1M < 20 MB/s";
  std::string line_b = RecordLine(b);
  EXPECT_EQ(std::count(line_b.begin(), line_b.end(), '\n'), 1) << line_b;  // one line, whatever the strings hold
  std::string out = "# pair n1-n2: OK: x\n" + RecordLine(a) + "# table\n" + line_b + "tail without newline";
  ParsedOutput p = ParseOutput(out);
  ASSERT_EQ(p.records.size(), 2u);
  EXPECT_TRUE(p.errors.empty());
  EXPECT_EQ(p.display, "# pair n1-n2: OK: x\n# table\ntail without newline");
  const ResultRecord* ra = FindRecord(p, "pair", {"n1", "n2"});
  ASSERT_NE(ra, nullptr);
  EXPECT_TRUE(ra->pass);
  EXPECT_DOUBLE_EQ(ra->busbw, 8.5e8);
  EXPECT_EQ(ra->message, a.message);
  EXPECT_EQ(FindRecord(p, "pair", {"n2", "n1"}), nullptr);  // order matters: ring pair (i, i+1)
  const ResultRecord* rb = FindRecord(p, "intra-node", {"n2"});
  ASSERT_NE(rb, nullptr);
  EXPECT_FALSE(rb->pass);
  EXPECT_EQ(rb->message, b.message);
  EXPECT_EQ(rb->drain_reason, b.drain_reason);
}

TEST(Records, BadRecordsAreNamedNotTrusted) {
  std::string out = std::string(kRecordPrefix) + "{not json\n" + kRecordPrefix +
                    R"({"tool":"preflight-nccl","kind":"pair","nodes":["n1","n2"],"verdict":"maybe"})" "\n" +
                    kRecordPrefix + R"({"tool":"other","kind":"pair","verdict":"pass"})" "\n" +
                    kRecordPrefix + R"({"tool":"preflight-nccl","kind":"pair","nodes":"n1","verdict":"pass"})" "\n";
  ParsedOutput p = ParseOutput(out);
  EXPECT_TRUE(p.records.empty());
  ASSERT_EQ(p.errors.size(), 4u);
  EXPECT_NE(p.errors[0].find("not a JSON object"), std::string::npos);
  EXPECT_NE(p.errors[1].find("verdict 'maybe'"), std::string::npos);
  EXPECT_NE(p.errors[2].find("not a preflight-nccl record"), std::string::npos);
  EXPECT_NE(p.errors[3].find("nodes is not an array"), std::string::npos);
  EXPECT_EQ(p.display, "");
}

}  // namespace
}  // namespace preflight::collective
