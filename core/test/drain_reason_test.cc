#include "preflight/drain_reason.h"

#include <gtest/gtest.h>

#include <string>

#include "preflight/text.h"

namespace preflight {
namespace {

DrainReason Ecc() {
  return {FaultOwner::kNode, "gpu.ecc", "GPU3 0000:1b:00.0", "uncorrected ECC errors volatile 12, aggregate 0 > 0",
          "12", "<= 0", "", false};
}

void ExpectSame(const DrainReason& a, const DrainReason& b) {
  EXPECT_EQ(a.owner, b.owner);
  EXPECT_EQ(a.check, b.check);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.finding, b.finding);
  EXPECT_EQ(a.figure, b.figure);
  EXPECT_EQ(a.threshold, b.threshold);
  EXPECT_EQ(a.more, b.more);
}

TEST(DrainReason, FormatsTheGrammar) {
  EXPECT_EQ(FormatReason(Ecc()),
            "preflight[node] gpu.ecc GPU3 0000:1b:00.0: uncorrected ECC errors volatile 12, aggregate 0 > 0 "
            "[got 12, want <= 0]");
  DrainReason c;
  c.owner = FaultOwner::kConfig;
  c.check = reason_check::kConfig;
  c.finding = "/etc/preflight/preflight.conf:7: key 'x': bad value";
  EXPECT_EQ(FormatReason(c), "preflight[config] config: /etc/preflight/preflight.conf:7: key 'x': bad value");
  DrainReason t = c;
  t.owner = FaultOwner::kNone;  // unclassed is written as the node's
  t.check = "scratch";
  t.figure = "";
  t.threshold = ">= 1G";
  EXPECT_EQ(FormatReason(t).rfind("preflight[node] scratch: ", 0), 0u);
  EXPECT_NE(FormatReason(t).find(" [want >= 1G]"), std::string::npos);
}

TEST(DrainReason, RoundTrips) {
  std::vector<DrainReason> cases;
  cases.push_back(Ecc());
  DrainReason more = Ecc();
  more.more = "ib.port mlx5_3 port 1: port DOWN/LinkUp, need ACTIVE/LinkUp";
  cases.push_back(more);
  DrainReason user = Ecc();
  user.owner = FaultOwner::kUser;
  user.device = "";
  user.figure = "";
  cases.push_back(user);
  DrainReason nomore = user;
  nomore.threshold = "";
  nomore.more = "scratch /scratch: free 1M < 1G";
  cases.push_back(nomore);
  DrainReason nccl;
  nccl.check = reason_check::kNcclIntra;
  nccl.device = "n2 (host-tcp, 2 ranks)";
  nccl.finding = "busbw 4.98 MB/s at 1M < 20 MB/s";
  nccl.figure = "4.98 MB/s";
  nccl.threshold = ">= 20 MB/s";
  cases.push_back(nccl);
  for (const auto& d : cases) {
    std::string text = FormatReason(d);
    auto back = ParseReason(text);
    ASSERT_TRUE(back.has_value()) << text;
    EXPECT_FALSE(back->legacy);
    ExpectSame(*back, d);
    EXPECT_EQ(FormatReason(*back), text) << "formatting the parsed reason gives the same text";
  }
}

TEST(DrainReason, FixedPrefixesForFleetTools) {
  std::string text = FormatReason(Ecc());
  EXPECT_EQ(text.rfind(kReasonPrefix, 0), 0u);
  EXPECT_EQ(text.rfind("preflight[node] ", 0), 0u);
  EXPECT_TRUE(IsPreflightReason(text));
  EXPECT_TRUE(IsNcclReason(*ParseReason(FormatReason({FaultOwner::kNode, reason_check::kNcclStraggler, "", "x", "", "", ""}))));
  EXPECT_FALSE(IsNcclReason(*ParseReason(text)));
}

TEST(DrainReason, CutsTheFindingNeverThePrefixOrFigure) {
  DrainReason d = Ecc();
  d.finding = std::string(300, 'x');
  d.more = "ib.port mlx5_0 port 1: down";
  std::string text = FormatReason(d);
  EXPECT_EQ(text.size(), kReasonMax);
  EXPECT_EQ(text.rfind("preflight[node] gpu.ecc GPU3 0000:1b:00.0: xxx", 0), 0u);
  const std::string tail = "... [got 12, want <= 0]";
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail) << text;
  auto back = ParseReason(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->figure, "12");
  EXPECT_EQ(back->threshold, "<= 0");
  EXPECT_TRUE(back->more.empty()) << "`more` is cut first";
  EXPECT_EQ(back->finding.substr(back->finding.size() - 3), "...");

  // `more` alone too long: cut ("..."), the finding stays whole.
  d = Ecc();
  d.more = std::string(300, 'y');
  text = FormatReason(d);
  EXPECT_EQ(text.size(), kReasonMax);
  auto cut = ParseReason(text);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->finding, Ecc().finding);
  EXPECT_EQ(cut->more.substr(0, 3), "yyy");
  EXPECT_EQ(cut->more.substr(cut->more.size() - 3), "...");

  // Overlong fixed parts are bounded, and the text stays one line.
  d = Ecc();
  d.check = std::string(100, 'c');
  d.device = std::string(100, 'd') + ": z";
  d.figure = std::string(100, '9');
  d.threshold = "";
  d.finding = "line one\nline two";
  text = FormatReason(d);
  EXPECT_LE(text.size(), kReasonMax);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  back = ParseReason(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_EQ(back->check, std::string(20, 'c'));
  EXPECT_EQ(back->device, std::string(20, 'd') + "..." + std::string(35, 'd') + ":z");
  EXPECT_EQ(back->figure, std::string(29, '9') + "...");
  EXPECT_EQ(back->finding, "line one line two");
}

TEST(DrainReason, ALongPathKeepsItsEnd) {
  // Seen in CI: a checkout under a longer root cut the scratch path to
  // ".../build/tests/cluster/..." and lost the directory that was missing.
  DrainReason d;
  d.check = "scratch";
  d.device = "/check/work/main/build-slurm/25.11.7/build/tests/cluster/nodes/n1/scratch";
  d.finding = "not usable: No such file or directory";
  std::string text = FormatReason(d);
  auto back = ParseReason(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_EQ(back->device, "/check/work/main/.../build/tests/cluster/nodes/n1/scratch");
  EXPECT_LE(back->device.size(), 60u);
  EXPECT_EQ(back->finding, d.finding);
  // One that fits is left whole.
  d.device = "/srv/cluster/nodes/n1/scratch";
  EXPECT_EQ(ParseReason(FormatReason(d))->device, d.device);
}

// Issue 29: a reason built from a user's bytes is printable UTF-8 of at most
// kReasonMax bytes, whatever the bytes: cut on a character boundary, controls
// and invalid bytes written as \xNN.
TEST(DrainReason, UserBytesGivePrintableUtf8CutOnACharacter) {
  std::string path = "/data/";
  for (int i = 0; i < 110; ++i) path += "\xc3\xa9";  // 110 'é'
  DrainReason r;
  r.owner = FaultOwner::kUser;
  r.check = reason_check::kStage;
  r.finding = "staging " + path + ": source walker was killed by signal 9 (SIGKILL)";
  for (size_t shift = 0; shift < 4; ++shift) {  // the cut falls on every byte of a character once
    DrainReason s = r;
    s.finding = std::string(shift, 'x') + r.finding;
    std::string text = FormatReason(s);
    EXPECT_LE(text.size(), kReasonMax);
    EXPECT_TRUE(IsValidUtf8(text)) << "shift " << shift << ": " << text;
    EXPECT_EQ(text.substr(text.size() - 3), "...");
    ASSERT_TRUE(ParseReason(text).has_value());
  }
  DrainReason d = r;
  d.device = "/data/\x1b[2J\xff\xfe" + path;
  d.finding = "bad \x1b]0;title\x07 name \xff\x80 \xc2\x9b end\r\nnext";
  d.figure = "\xff";
  d.more = "\x1b[31mred";
  std::string text = FormatReason(d);
  EXPECT_TRUE(IsValidUtf8(text)) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_NE(text.find("bad \\x1b]0;title\\x07 name \\xff\\x80 \\xc2\\x9b end  next"), std::string::npos) << text;
  EXPECT_NE(text.find(" [got \\xff]"), std::string::npos) << text;
  auto p = ParseReason(text);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->owner, FaultOwner::kUser);
  EXPECT_EQ(p->check, "stage");
  EXPECT_EQ(p->figure, "\\xff");
}

TEST(DrainReason, ReadsEveryOlderFormat) {
  struct Case {
    const char* text;
    FaultOwner owner;
    const char* check;
    const char* device;
    const char* finding;
  } cases[] = {
      {"preflight: gpu.ecc GPU2 0000:3a:00.0: uncorrected ECC errors volatile 3, aggregate 0 > 0", FaultOwner::kNode,
       "gpu.ecc", "GPU2 0000:3a:00.0", "uncorrected ECC errors volatile 3, aggregate 0 > 0"},
      {"preflight: scratch /scratch: not usable: No such file or directory", FaultOwner::kNode, "scratch", "/scratch",
       "not usable: No such file or directory"},
      {"preflight: gpu.count: 3 GPUs, expected 4; ib.port mlx5_0 port 1: down", FaultOwner::kNode, "gpu.count", "",
       "3 GPUs, expected 4; ib.port mlx5_0 port 1: down"},
      {"preflight: prolog failed", FaultOwner::kNode, "prolog", "", "failed"},
      {"preflight: config /etc/preflight/preflight.conf:7: key 'stage_peer_port': bad value '70000'",
       FaultOwner::kConfig, "config", "", "/etc/preflight/preflight.conf:7: key 'stage_peer_port': bad value '70000'"},
      {"preflight: config: stage_dir /var/stage: mode 1777 lets others write in it", FaultOwner::kConfig, "stage", "",
       "stage_dir /var/stage: mode 1777 lets others write in it"},
      {"preflight: stage /data/x: Input/output error", FaultOwner::kNode, "stage", "", "/data/x: Input/output error"},
      {"preflight: nccl intra-node n2 (host-tcp, 2 ranks): busbw 4.98 MB/s at 1M < 20 MB/s", FaultOwner::kNode,
       "nccl.intra", "n2 (host-tcp, 2 ranks)", "busbw 4.98 MB/s at 1M < 20 MB/s"},
      {"preflight: nccl inter-node n3: both ring pairs below threshold", FaultOwner::kNode, "nccl.inter", "n3",
       "both ring pairs below threshold"},
  };
  for (const auto& c : cases) {
    auto r = ParseReason(c.text);
    ASSERT_TRUE(r.has_value()) << c.text;
    EXPECT_TRUE(r->legacy);
    EXPECT_EQ(r->owner, c.owner) << c.text;
    EXPECT_EQ(r->check, c.check) << c.text;
    EXPECT_EQ(r->device, c.device) << c.text;
    EXPECT_EQ(r->finding, c.finding) << c.text;
    EXPECT_TRUE(IsPreflightReason(c.text));
  }
  EXPECT_TRUE(IsNcclReason(*ParseReason(cases[7].text)));
}

TEST(DrainReason, OthersReasonsAreNotOurs) {
  for (const char* t : {"", "Prolog error", "Epilog error", "Not responding", "admin: reseat GPU tray", "preflight",
                        "preflight:x", "preflight[root] gpu.ecc: x", "preflight[node]", "[node_problem] gpu",
                        "preflight warn: [node] gpu.temp GPU1: 91C"})
    EXPECT_FALSE(IsPreflightReason(t)) << t;
}

}  // namespace
}  // namespace preflight
