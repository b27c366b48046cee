#include "preflight/text.h"

#include <gtest/gtest.h>

#include <string>

namespace preflight {
namespace {

TEST(Text, Utf8CharLengthRefusesWhatRfc3629Refuses) {
  EXPECT_EQ(Utf8CharLength("a", 0), 1u);
  EXPECT_EQ(Utf8CharLength("\xc3\xa9", 0), 2u);
  EXPECT_EQ(Utf8CharLength("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(Utf8CharLength("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(Utf8CharLength("\xc3", 0), 0u) << "truncated";
  EXPECT_EQ(Utf8CharLength("\xa9", 0), 0u) << "stray continuation";
  EXPECT_EQ(Utf8CharLength("\xc0\xaf", 0), 0u) << "overlong";
  EXPECT_EQ(Utf8CharLength("\xe0\x80\xaf", 0), 0u) << "overlong";
  EXPECT_EQ(Utf8CharLength("\xed\xa0\x80", 0), 0u) << "surrogate";
  EXPECT_EQ(Utf8CharLength("\xf4\x90\x80\x80", 0), 0u) << "past U+10FFFF";
  EXPECT_EQ(Utf8CharLength("\xff", 0), 0u);
}

TEST(Text, PrintableTextEscapesControlsAndInvalidBytes) {
  EXPECT_EQ(PrintableText("plain /data/caf\xc3\xa9"), "plain /data/caf\xc3\xa9");
  EXPECT_EQ(PrintableText("\x1b[31mred\x07"), "\\x1b[31mred\\x07");
  EXPECT_EQ(PrintableText("a\xff" "b\xc3"), "a\\xffb\\xc3");
  EXPECT_EQ(PrintableText("\xc2\x9b" "1m\x7f"), "\\xc2\\x9b1m\\x7f") << "C1 CSI and DEL";
  EXPECT_EQ(PrintableText("\xe2\x82" "A"), "\\xe2\\x82A") << "a broken sequence does not eat the next character";
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string p = PrintableText(all);
  EXPECT_TRUE(IsValidUtf8(p));
  for (char c : p) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << p;
}

TEST(Text, CutsNeverSplitACharacter) {
  std::string e = "\xc3\xa9\xc3\xa9\xc3\xa9";  // 6 bytes, 3 characters
  EXPECT_EQ(Utf8Prefix(e, 6), e);
  EXPECT_EQ(Utf8Prefix(e, 5), "\xc3\xa9\xc3\xa9");
  EXPECT_EQ(Utf8Prefix(e, 4), "\xc3\xa9\xc3\xa9");
  EXPECT_EQ(Utf8Prefix(e, 3), "\xc3\xa9");
  EXPECT_EQ(Utf8Prefix(e, 1), "");
  EXPECT_EQ(Utf8Suffix(e, 5), "\xc3\xa9\xc3\xa9");
  EXPECT_EQ(Utf8Suffix(e, 1), "");
  std::string emoji = "ab\xf0\x9f\x98\x80";
  for (size_t n = 0; n <= emoji.size(); ++n) {
    EXPECT_TRUE(IsValidUtf8(Utf8Prefix(emoji, n))) << n;
    EXPECT_TRUE(IsValidUtf8(Utf8Suffix(emoji, n))) << n;
  }
  EXPECT_EQ(Utf8Cut(e, 6), e);
  EXPECT_EQ(Utf8Cut(e, 5), "\xc3\xa9...");
  EXPECT_EQ(Utf8Prefix("\xff\xff\xff\xff", 2), "\xff\xff") << "not UTF-8: cut where asked";
}

}  // namespace
}  // namespace preflight
