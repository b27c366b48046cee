#include "preflight/ckpt_convention.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ckpt_test_util.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

using K = CkptEntryKind;

// A listing built by hand: the rules are pure functions over it.
struct L {
  CkptDirListing l;
  L& Dir(const std::string& name, double mtime, std::vector<CkptListedEntry> probes = {}) {
    l.top.push_back({name, K::kDir, mtime});
    l.probes[name] = std::move(probes);
    return *this;
  }
  L& File(const std::string& name, double mtime = 1) {
    l.top.push_back({name, K::kFile, mtime});
    return *this;
  }
  L& Tracker(const std::string& text, double mtime) {
    l.tracker_present = true;
    l.tracker = text;
    l.tracker_mtime = mtime;
    return *this;
  }
};

CkptConventionSpec Spec(CkptConvention k) {
  CkptConventionSpec s;
  s.kind = k;
  return s;
}

const LocalCkpt* Get(const std::vector<LocalCkpt>& v, const std::string& name) {
  for (const auto& c : v)
    if (c.name == name) return &c;
  return nullptr;
}

TEST(CkptConvention, ParsesEveryNameAndRejectsOthers) {
  EXPECT_EQ(*ParseCkptConvention("marker"), CkptConvention::kMarker);
  EXPECT_EQ(*ParseCkptConvention("dcp"), CkptConvention::kDcp);
  EXPECT_EQ(*ParseCkptConvention("torchtitan"), CkptConvention::kDcp);
  EXPECT_EQ(*ParseCkptConvention("megatron"), CkptConvention::kMegatron);
  EXPECT_EQ(*ParseCkptConvention("deepspeed"), CkptConvention::kDeepSpeed);
  EXPECT_EQ(*ParseCkptConvention("nemo"), CkptConvention::kNemo);
  auto bad = ParseCkptConvention("orbax");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("orbax"), std::string::npos);
  for (auto c : {CkptConvention::kMarker, CkptConvention::kDcp, CkptConvention::kMegatron, CkptConvention::kDeepSpeed,
                 CkptConvention::kNemo})
    EXPECT_EQ(*ParseCkptConvention(CkptConventionName(c)), c);
}

TEST(CkptConvention, MarkerNeedsARegularFileAndOrdersByItsTime) {
  auto v = ClassifyCkpts(L()
                             .Dir("step_10", 5, {{"COMPLETE", K::kFile, 30}})
                             .Dir("step_9", 5, {{"COMPLETE", K::kFile, 30}})
                             .Dir("step_11", 50, {})                                 // being written
                             .Dir("step_12", 60, {{"COMPLETE", K::kDir, 61}})        // not a file
                             .Dir("step_13", 70, {{"COMPLETE", K::kSymlink, 71}})    // not a file
                             .Dir(".hidden", 80, {{"COMPLETE", K::kFile, 81}})
                             .File("notes.txt")
                             .l,
                         Spec(CkptConvention::kMarker));
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0].name, "step_9");  // same time: shorter name first
  EXPECT_EQ(v[1].name, "step_10");
  EXPECT_TRUE(v[1].complete);
  EXPECT_EQ(v[1].evidence, "COMPLETE");
  EXPECT_EQ(v[1].time, 30);
  for (const char* torn : {"step_11", "step_12", "step_13"}) {
    ASSERT_NE(Get(v, torn), nullptr);
    EXPECT_FALSE(Get(v, torn)->complete) << torn;
    EXPECT_NE(Get(v, torn)->why_not.find("COMPLETE"), std::string::npos);
  }
  EXPECT_EQ(Get(v, ".hidden"), nullptr);
}

TEST(CkptConvention, DcpPartIsCompleteByMetadataOrThePerNodeMarker) {
  auto v = ClassifyCkpts(L()
                             .Dir("step-100", 1, {{".metadata", K::kFile, 10}, {".preflight-part", K::kMissing, 0}})
                             .Dir("step-200", 1, {{".metadata", K::kMissing, 0}, {".preflight-part", K::kFile, 20}})
                             .Dir("step-300", 30, {{".metadata", K::kMissing, 0}, {".preflight-part", K::kMissing, 0}})
                             .Dir("step-400", 40, {{".metadata", K::kDir, 41}})
                             .l,
                         Spec(CkptConvention::kDcp));
  ASSERT_EQ(v.size(), 4u);
  EXPECT_TRUE(Get(v, "step-100")->complete);
  EXPECT_EQ(Get(v, "step-100")->evidence, ".metadata");
  EXPECT_TRUE(Get(v, "step-200")->complete);
  EXPECT_EQ(Get(v, "step-200")->evidence, ".preflight-part");
  EXPECT_FALSE(Get(v, "step-300")->complete);  // torn: a rank still writing, or killed
  EXPECT_NE(Get(v, "step-300")->why_not.find(".preflight-part"), std::string::npos);
  EXPECT_FALSE(Get(v, "step-400")->complete);
}

TEST(CkptConvention, MegatronTrackerProvesExactlyTheIterationItNames) {
  // Saved 100, then 300 torn by a crash, resumed from 100, saved 200: the
  // tracker names 200; 300 is newer by number and torn; 100 has no proof.
  auto v = ClassifyCkpts(L()
                             .Dir("iter_0000100", 1, {})
                             .Dir("iter_0000300", 3, {})
                             .Dir("iter_0000200", 2, {})
                             .Dir("iter_0000050", 1, {{".preflight-part", K::kFile, 5}})
                             .Dir("tensorboard", 9, {})
                             .Tracker("200\n", 20)
                             .l,
                         Spec(CkptConvention::kMegatron));
  ASSERT_EQ(v.size(), 4u) << "folders that are not iter_N are not checkpoints";
  EXPECT_TRUE(Get(v, "iter_0000200")->complete);
  EXPECT_EQ(Get(v, "iter_0000200")->evidence, kMegatronTracker);
  EXPECT_EQ(Get(v, "iter_0000200")->time, 20);
  EXPECT_FALSE(Get(v, "iter_0000300")->complete);
  EXPECT_NE(Get(v, "iter_0000300")->why_not.find("names '200'"), std::string::npos);
  EXPECT_FALSE(Get(v, "iter_0000100")->complete);
  EXPECT_TRUE(Get(v, "iter_0000050")->complete);
  EXPECT_EQ(v.back().name, "iter_0000200");

  auto rel = ClassifyCkpts(L().Dir("release", 1, {}).Tracker("release", 2).l, Spec(CkptConvention::kMegatron));
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_TRUE(rel[0].complete);
  // Another node: no tracker at all.
  auto other = ClassifyCkpts(L().Dir("iter_0000200", 1, {}).l, Spec(CkptConvention::kMegatron));
  ASSERT_EQ(other.size(), 1u);
  EXPECT_FALSE(other[0].complete);
  EXPECT_NE(other[0].why_not.find("no latest_checkpointed_iteration.txt"), std::string::npos);
}

TEST(CkptConvention, DeepSpeedLatestNamesTheTag) {
  auto v = ClassifyCkpts(L()
                             .Dir("global_step10", 1, {})
                             .Dir("global_step20", 2, {})
                             .Dir("global_step5", 1, {{".preflight-part", K::kFile, 3}})
                             .Tracker("global_step10\n", 4)
                             .l,
                         Spec(CkptConvention::kDeepSpeed));
  ASSERT_EQ(v.size(), 3u);
  EXPECT_TRUE(Get(v, "global_step10")->complete);
  EXPECT_FALSE(Get(v, "global_step20")->complete);  // being written: latest not moved yet
  EXPECT_TRUE(Get(v, "global_step5")->complete);
}

TEST(CkptConvention, NemoUnfinishedMarkerMeansNotCompleteAndAbsenceProvesOnlyOnTheCoordinator) {
  CkptDirListing l = L()
                         .Dir("m--step=99-consumed_samples=100.0", 10, {})
                         .Dir("m--step=199.ckpt", 20, {{".preflight-part", K::kFile, 21}})
                         .File("m--step=199-unfinished")  // NeMo strips .ckpt before adding the suffix
                         .Dir("m--step=299-EMA.ckpt", 30, {})
                         .File("m--step=299-unfinished")  // ... and -EMA
                         .Dir("m--step=399", 40, {{".preflight-part", K::kFile, 41}})
                         .l;
  auto coord = Spec(CkptConvention::kNemo);
  coord.coordinator = true;
  auto v = ClassifyCkpts(l, coord);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_TRUE(Get(v, "m--step=99-consumed_samples=100.0")->complete);
  EXPECT_FALSE(Get(v, "m--step=199.ckpt")->complete) << "the marker wins over the per-node marker";
  EXPECT_NE(Get(v, "m--step=199.ckpt")->why_not.find("m--step=199-unfinished"), std::string::npos);
  EXPECT_FALSE(Get(v, "m--step=299-EMA.ckpt")->complete);
  EXPECT_TRUE(Get(v, "m--step=399")->complete);
  EXPECT_EQ(Get(v, "m--step=399")->evidence, ".preflight-part");

  auto w = ClassifyCkpts(l, Spec(CkptConvention::kNemo));  // not the coordinator's node
  EXPECT_FALSE(Get(w, "m--step=99-consumed_samples=100.0")->complete);
  EXPECT_NE(Get(w, "m--step=99-consumed_samples=100.0")->why_not.find("coordinator"), std::string::npos);
  EXPECT_TRUE(Get(w, "m--step=399")->complete);
}

TEST(CkptConvention, ListsARealDirectory) {
  preflight_test::TempDir tmp("ckpt-conv");
  preflight_test::MakeCkpt(tmp, "iter_0000010", {{"mp_rank_00/model_optim_rng.pt", "w"}}, "");
  preflight_test::MakeCkpt(tmp, "iter_0000020", {{"mp_rank_00/model_optim_rng.pt", "w"}}, "");
  preflight_test::Write(tmp / "iter_0000010/.preflight-part", "");
  preflight_test::Write(tmp / kMegatronTracker, "20\n");
  auto l = ListCkptDir(tmp, Spec(CkptConvention::kMegatron));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_TRUE(l->tracker_present);
  EXPECT_EQ(l->tracker, "20\n");
  auto v = LocalCkpts(tmp, Spec(CkptConvention::kMegatron));
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 2u);
  EXPECT_TRUE((*v)[0].complete);
  EXPECT_TRUE((*v)[1].complete);

  auto none = LocalCkpts(tmp / "absent", Spec(CkptConvention::kMarker));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  // A tracker that is a symlink is not read.
  preflight_test::TempDir t2("ckpt-conv");
  preflight_test::MakeCkpt(t2, "global_step1", {{"x", "1"}}, "");
  ASSERT_EQ(::symlink("/etc/hostname", (t2 / "latest").c_str()), 0);
  auto l2 = ListCkptDir(t2, Spec(CkptConvention::kDeepSpeed));
  ASSERT_TRUE(l2.ok());
  EXPECT_FALSE(l2->tracker_present);
}

TEST(CkptConvention, SkipAndCommitMarkers) {
  auto m = Spec(CkptConvention::kMarker);
  m.marker = "DONE";
  EXPECT_EQ(CkptPartSkipNames(m), (std::vector<std::string>{".preflight-part", "DONE"}));
  EXPECT_EQ(CkptCommitMarker(m), "DONE");
  EXPECT_EQ(CkptPartSkipNames(Spec(CkptConvention::kDcp)), (std::vector<std::string>{".preflight-part"}));
  EXPECT_EQ(CkptCommitMarker(Spec(CkptConvention::kDcp)), "");
}

}  // namespace
}  // namespace preflight
