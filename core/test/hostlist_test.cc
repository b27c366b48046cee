// ExpandHostlist and ValidNodeName: the bounds every hostlist and every node
// name that becomes a path component are held to (issue #19).
#include "preflight/hostlist.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace preflight {
namespace {

TEST(Hostlist, ExpandsGroupsAndPadding) {
  auto h = ExpandHostlist("n[1-3,7],gpu[08-10],login");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(*h, (std::vector<std::string>{"n1", "n2", "n3", "n7", "gpu08", "gpu09", "gpu10", "login"}));
  auto two = ExpandHostlist("r[1-2]n[1-2]-ib");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::string>{"r1n1-ib", "r1n2-ib", "r2n1-ib", "r2n2-ib"}));
}

TEST(Hostlist, ProductOfGroupsIsBounded) {
  // Issue #19 defect 4: 12 groups of 9 = 282 billion names, refused before expanding.
  std::string twelve;
  for (int i = 0; i < 12; ++i) twelve += "n[1-9]";
  auto h = ExpandHostlist(twelve);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("expands to more than 65536 names"), std::string::npos) << h.status().message();
  // Exactly at the bound is taken; one more (over two comma items) is not.
  auto at = ExpandHostlist("a[0-255]b[0-255]");
  ASSERT_TRUE(at.ok()) << at.status().message();
  EXPECT_EQ(at->size(), kMaxHostlistNames);
  EXPECT_FALSE(ExpandHostlist("a[0-255]b[0-255],c1").ok());
  // One huge range alone, and a range whose width would overflow 64 bits.
  EXPECT_FALSE(ExpandHostlist("n[0-999999999999]").ok());
  EXPECT_FALSE(ExpandHostlist("n[0-999999999999999999999]").ok());
  // Many ranges inside one group count too.
  std::string many = "n[";
  for (int i = 0; i < 2000; ++i) many += (i ? "," : "") + std::to_string(i * 100) + "-" + std::to_string(i * 100 + 99);
  many += "]";
  EXPECT_FALSE(ExpandHostlist(many).ok());
  EXPECT_FALSE(ExpandHostlist(std::string(kMaxHostlistLength + 1, 'n')).ok());
}

TEST(Hostlist, MalformedBracketsRefusedWithReason) {
  auto open = ExpandHostlist("n[1-");
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("unbalanced '['"), std::string::npos) << open.status().message();
  EXPECT_NE(ExpandHostlist("n1-]").status().message().find("unbalanced ']'"), std::string::npos);
  EXPECT_NE(ExpandHostlist("n[[1]]").status().message().find("nested"), std::string::npos);
  EXPECT_NE(ExpandHostlist("n[]").status().message().find("empty brackets"), std::string::npos);
  EXPECT_NE(ExpandHostlist("n[3-1]").status().message().find("bad range '3-1'"), std::string::npos);
  EXPECT_FALSE(ExpandHostlist("n[a-b]").ok());
  EXPECT_FALSE(ExpandHostlist("n[1-]").ok());
  EXPECT_FALSE(ExpandHostlist("n[1,]").ok());
}

TEST(Hostlist, NamesMustBeNodeNames) {
  auto up = ExpandHostlist("../../x");
  ASSERT_FALSE(up.ok());
  EXPECT_NE(up.status().message().find("node name '../../x'"), std::string::npos) << up.status().message();
  EXPECT_FALSE(ExpandHostlist("n[1-2]/x").ok());
}

TEST(Hostlist, CompressesToWhatExpandsBack) {
  EXPECT_EQ(CompressHostlist({}), "");
  EXPECT_EQ(CompressHostlist({"n3", "n1", "n2", "n7", "n2"}), "n[1-3,7]");
  EXPECT_EQ(CompressHostlist({"n5"}), "n5");
  EXPECT_EQ(CompressHostlist({"n9", "n10", "n8"}), "n[8-10]");
  EXPECT_EQ(CompressHostlist({"gpu10", "gpu08", "gpu09", "gpu12"}), "gpu[08-10,12]");
  EXPECT_EQ(CompressHostlist({"login", "n2", "n1", "gpu01"}), "gpu01,login,n[1-2]");
  EXPECT_EQ(CompressHostlist({"r1n1-ib", "r1n2-ib", "r2n1-ib"}), "r1n[1-2]-ib,r2n1-ib");
  // Padded and unpadded numbers of other widths stay apart.
  EXPECT_EQ(CompressHostlist({"n01", "n1", "n2"}), "n[1-2],n01");
  std::vector<std::string> many;
  for (int i = 1; i <= 300; ++i)
    if (i % 7 != 0) many.push_back("node" + std::string(i < 10 ? "00" : i < 100 ? "0" : "") + std::to_string(i));
  many.push_back("head");
  std::string text = CompressHostlist(many);
  auto back = ExpandHostlist(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  std::sort(many.begin(), many.end());
  std::vector<std::string> sorted = *back;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, many) << text;
}

TEST(NodeName, SlurmCharsetAndLength) {
  EXPECT_TRUE(ValidNodeName("gpu-node_01.rack2").ok());
  EXPECT_FALSE(ValidNodeName("").ok());
  EXPECT_FALSE(ValidNodeName(".").ok());
  EXPECT_FALSE(ValidNodeName("..").ok());
  EXPECT_FALSE(ValidNodeName("../../x").ok());
  EXPECT_FALSE(ValidNodeName("a/b").ok());
  EXPECT_FALSE(ValidNodeName("n1 ").ok());
  EXPECT_TRUE(ValidNodeName(std::string(kMaxNodeNameLength, 'n')).ok());
  EXPECT_FALSE(ValidNodeName(std::string(kMaxNodeNameLength + 1, 'n')).ok());
  Status nul = ValidNodeName(std::string("n\0x", 3));
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(nul.message().find("n\\x00x"), std::string::npos) << nul.message();
}

}  // namespace
}  // namespace preflight
