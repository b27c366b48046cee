#include "preflight/ckpt_manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ckpt_test_util.h"
#include "preflight/ckpt_verify.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

CkptManifest Sample() {
  CkptManifest m;
  m.name = "step 10";  // a space survives
  m.run = "1234.0";
  m.node = "n2";
  m.nodes = {"n1", "n2"};
  m.marker = "COMPLETE";
  m.time = 1700000000.5;
  m.entries.push_back({'d', 0755, 1, 0, 0, "sub dir", ""});
  m.entries.push_back({'f', 0644, 1, 5, CkptFileHashOf("hello"), "sub dir/a%b\nc", ""});
  m.entries.push_back({'f', 0600, 1, 0, CkptFileHashOf(""), std::string("bin\xff\xfe", 5), ""});
  m.entries.push_back({'l', 0777, 1, 0, 0, "link", "sub dir/a%b\nc"});
  return m;
}

TEST(CkptManifest, RoundTripsAnyFileName) {
  CkptManifest m = Sample();
  std::string text = SerializeCkptManifest(m);
  auto back = ParseCkptManifest(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  EXPECT_FALSE(back->combined);
  EXPECT_EQ(back->name, m.name);
  EXPECT_EQ(back->node, "n2");
  EXPECT_EQ(back->nodes, m.nodes);
  EXPECT_EQ(back->marker, "COMPLETE");
  EXPECT_DOUBLE_EQ(back->time, m.time);
  ASSERT_EQ(back->entries.size(), m.entries.size());
  for (size_t i = 0; i < m.entries.size(); ++i) {
    EXPECT_TRUE(back->entries[i] == m.entries[i]) << i;
    EXPECT_EQ(back->entries[i].node, 1u);
  }
  EXPECT_EQ(back->Bytes(), 5u);
  EXPECT_EQ(back->Files(), 2u);
  EXPECT_EQ(SerializeCkptManifest(*back), text);
  // One line per entry: the newline in a name is escaped.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 7 + 4 + 1);
}

TEST(CkptManifest, RejectsEveryDamagedForm) {
  std::string good = SerializeCkptManifest(Sample());
  auto expect_bad = [](const std::string& text, const std::string& what) {
    auto m = ParseCkptManifest(text);
    ASSERT_FALSE(m.ok()) << "accepted: " << what;
    EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument) << what;
  };
  expect_bad(good.substr(0, good.size() - 1), "last newline cut");
  expect_bad(good.substr(0, good.rfind("end ")), "no end line");
  std::string wrong_end = good;
  wrong_end.replace(wrong_end.rfind("end 4 5"), 7, "end 4 6");
  expect_bad(wrong_end, "end bytes mismatch");
  std::string dup = good;
  dup.insert(dup.rfind("end "), "d 755 0 sub%20dir\n");
  expect_bad(dup, "duplicate path");
  std::string orphan = good;
  orphan.insert(orphan.rfind("end "), "f 644 0 1 0000000000000000 nodir/x\n");
  expect_bad(orphan, "parent missing");
  std::string dotdot = good;
  dotdot.insert(dotdot.rfind("end "), "d 755 0 sub%20dir/../../etc\n");
  expect_bad(dotdot, "'..' component");
  std::string badhash = good;
  badhash.replace(badhash.find(CkptHex(CkptFileHashOf("hello"))), 16, "zz");
  expect_bad(badhash, "bad hash");
  expect_bad("preflight-ckpt-manifest 2 part\n", "version 2");
  expect_bad("hello\n", "not a manifest");
  std::string unknown = good;
  unknown.insert(unknown.find("time "), "colour blue\n");
  expect_bad(unknown, "unknown header");
  std::string badnode = good;
  badnode.replace(badnode.find("nodes n1 n2"), 11, "nodes n1 n1");
  expect_bad(badnode, "repeated node");
  std::string index = good;
  index.replace(index.find("d 755 1 "), 8, "d 755 7 ");
  expect_bad(index, "node index out of range");
}

TEST(CkptManifest, HeaderParsesFromAPrefix) {
  std::string text = SerializeCkptManifest(Sample());
  auto h = ParseCkptManifestHeader(text.substr(0, text.find("d 755") + 3));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_DOUBLE_EQ(h->time, 1700000000.5);
  EXPECT_TRUE(h->entries.empty());
}

TEST(CkptManifest, NamesAndBounds) {
  EXPECT_TRUE(ValidCkptName(std::string(kCkptMaxNameBytes, 'a')).ok());
  EXPECT_FALSE(ValidCkptName(std::string(kCkptMaxNameBytes + 1, 'a')).ok());
  EXPECT_FALSE(ValidCkptName(".partial-x").ok());
  EXPECT_FALSE(ValidCkptName("a/b").ok());
  EXPECT_FALSE(ValidCkptName("").ok());
  EXPECT_TRUE(ValidCkptRun("1234_5.2+0").ok());
  EXPECT_FALSE(ValidCkptRun("12-3").ok()) << "'-' splits the partial folder's name";
  EXPECT_FALSE(ValidCkptRun(std::string(kCkptMaxRunBytes + 1, '1')).ok());
  EXPECT_TRUE(ValidCkptNode("gpu-a100-001.cluster").ok());
  EXPECT_FALSE(ValidCkptNode(".n1").ok());
  EXPECT_FALSE(ValidCkptNode("n 1").ok());
  std::string deep;
  for (size_t i = 0; i < kCkptMaxDepth; ++i) deep += (i ? "/" : "") + std::string("d");
  EXPECT_TRUE(ValidCkptRelPath(deep).ok());
  auto too_deep = ValidCkptRelPath(deep + "/d");
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.message().find("kCkptMaxDepth"), std::string::npos);
  EXPECT_FALSE(ValidCkptRelPath(std::string(kCkptMaxComponentBytes + 1, 'x')).ok());
  EXPECT_FALSE(ValidCkptRelPath("/abs").ok());
  EXPECT_FALSE(ValidCkptRelPath("a//b").ok());
  EXPECT_FALSE(ValidCkptRelPath("a/./b").ok());
}

TEST(CkptManifest, EscapeRoundTripsAllBytes) {
  std::string all;
  for (int c = 1; c < 256; ++c) all.push_back(static_cast<char>(c));
  std::string e = CkptEscape(all);
  EXPECT_EQ(e.find(' '), std::string::npos);
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_EQ(*CkptUnescape(e), all);
  EXPECT_FALSE(CkptUnescape("%4").ok());
  EXPECT_FALSE(CkptUnescape("%zz").ok());
  EXPECT_FALSE(CkptUnescape("a b").ok());
}

TEST(CkptManifest, FileHashIsByPiecesAndMatchesTheFdHash) {
  preflight_test::TempDir tmp("ckpt-hash");
  // Just over one piece: two pieces, the second one byte.
  std::string big(kCkptHashPiece + 1, 'x');
  big[kCkptHashPiece] = 'y';
  preflight_test::Write(tmp / "big", big);
  int fd = ::open((tmp / "big").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  auto h = CkptHashFd(fd, big.size());
  ASSERT_TRUE(h.ok());
  uint64_t p0 = CkptHashBytes(big.data(), kCkptHashPiece), p1 = CkptHashBytes(big.data() + kCkptHashPiece, 1);
  EXPECT_EQ(*h, CkptCombinePieces({p0, p1}));
  EXPECT_EQ(*h, CkptFileHashOf(big));
  EXPECT_NE(*h, CkptHashBytes(big.data(), big.size())) << "not the plain hash of the bytes";
  auto longer = CkptHashFd(fd, big.size() + 1);
  ASSERT_FALSE(longer.ok());
  EXPECT_EQ(longer.status().code(), Status::Code::kFailed);
  ::close(fd);
  EXPECT_EQ(CkptFileHashOf(""), CkptCombinePieces({}));
}

TEST(CkptVerify, SampleStaysInItsBudgetAndChangesWithTheSeed) {
  CkptManifest m;
  m.nodes = {"n"};
  for (int i = 0; i < 100; ++i)
    m.entries.push_back({'f', 0644, 0, static_cast<uint64_t>(10 + i), 0, "f" + std::to_string(i), ""});
  auto a = CkptSampleFiles(m, 200, 1);
  uint64_t bytes = 0;
  for (size_t i : a) bytes += m.entries[i].size;
  EXPECT_LE(bytes, 200u);
  EXPECT_GE(a.size(), 2u);
  EXPECT_EQ(a, CkptSampleFiles(m, 200, 1)) << "deterministic for a seed";
  EXPECT_NE(a, CkptSampleFiles(m, 200, 2));
  EXPECT_EQ(CkptSampleFiles(m, 0, 1).size(), 1u) << "at least one file";
  EXPECT_EQ(CkptSampleFiles(m, UINT64_MAX, 1).size(), 100u);
}

TEST(CkptVerify, FindsEachKindOfMismatch) {
  preflight_test::TempDir tmp("ckpt-verify");
  preflight_test::Write(tmp / "a", "hello");
  preflight_test::Write(tmp / "d/b", "world");
  ASSERT_EQ(::symlink("d/b", (tmp / "l").c_str()), 0);
  CkptManifest m;
  m.combined = true;
  m.nodes = {"n"};
  m.entries = {{'f', 0644, 0, 5, CkptFileHashOf("hello"), "a", ""},
               {'d', 0755, 0, 0, 0, "d", ""},
               {'f', 0644, 0, 5, CkptFileHashOf("world"), "d/b", ""},
               {'l', 0777, 0, 0, 0, "l", "d/b"}};
  CkptVerifyOptions full;
  full.level = CkptVerify::kFull;
  CkptVerifyStats st;
  ASSERT_TRUE(VerifyCkptTree(tmp, m, full, &st).ok());
  EXPECT_EQ(st.entries, 4u);
  EXPECT_EQ(st.files_hashed, 2u);

  preflight_test::Write(tmp / "a", "hellO");  // same size, other bytes
  EXPECT_TRUE(VerifyCkptTree(tmp, m, CkptVerifyOptions{}).ok()) << "sizes alone cannot see it";
  Status s = VerifyCkptTree(tmp, m, full);
  EXPECT_EQ(s.code(), Status::Code::kFailed);
  EXPECT_NE(s.message().find("checksum"), std::string::npos);
  preflight_test::Write(tmp / "a", "hello!");
  s = VerifyCkptTree(tmp, m, CkptVerifyOptions{});
  EXPECT_EQ(s.code(), Status::Code::kFailed);
  EXPECT_NE(s.message().find("/a: size 6, manifest says 5"), std::string::npos) << s.message();
  preflight_test::Write(tmp / "a", "hello");
  ASSERT_EQ(::unlink((tmp / "d/b").c_str()), 0);
  s = VerifyCkptTree(tmp, m, CkptVerifyOptions{});
  EXPECT_NE(s.message().find("d/b: missing"), std::string::npos) << s.message();
  preflight_test::Write(tmp / "d/b", "world");
  ASSERT_EQ(::unlink((tmp / "l").c_str()), 0);
  ASSERT_EQ(::symlink("a", (tmp / "l").c_str()), 0);
  s = VerifyCkptTree(tmp, m, CkptVerifyOptions{});
  EXPECT_NE(s.message().find("symlink points to 'a'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace preflight
