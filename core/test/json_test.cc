#include "preflight/json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "preflight/text.h"

namespace preflight {
namespace {

TEST(Json, CompactNestedOutput) {
  JsonWriter w(false);
  w.BeginObject().Field("a", 1).Field("s", "x\"y\n").Key("l").BeginArray().Bool(true).Null().Number(0.5).EndArray();
  w.Key("e").BeginObject().EndObject().EndObject();
  EXPECT_EQ(w.str(), "{\"a\":1,\"s\":\"x\\\"y\\n\",\"l\":[true,null,0.5],\"e\":{}}");
}

TEST(Json, EscapesControlCharacters) { EXPECT_EQ(JsonEscape(std::string("\x01", 1)), "\\u0001"); }

// Issue 29: valid JSON (valid UTF-8) for any bytes, e.g. a drain reason an
// admin typed with raw bytes, or one an older release cut inside a character.
TEST(Json, InvalidUtf8BecomesReplacementValidStaysAsIs) {
  EXPECT_EQ(JsonEscape("\xff"), "\\ufffd");
  EXPECT_EQ(JsonEscape("caf\xc3"), "caf\\ufffd") << "a character cut at the end";
  EXPECT_EQ(JsonEscape("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac") << "valid UTF-8 passes";
  EXPECT_EQ(JsonEscape("\xc0\xaf"), "\\ufffd\\ufffd") << "overlong '/'";
  EXPECT_EQ(JsonEscape("\xed\xa0\x80"), "\\ufffd\\ufffd\\ufffd") << "a UTF-16 surrogate";
  EXPECT_EQ(JsonEscape("\x1b[31m\x7f\xc2\x9b"), "\\u001b[31m\\u007f\\u009b") << "ESC, DEL, C1 CSI";
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (int b = 0; b < 256; ++b) all += static_cast<char>(255 - b);
  JsonWriter w(false);
  w.BeginObject().Field("reason", all).EndObject();
  auto j = nlohmann::json::parse(w.str(), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "every byte value still gives a document a strict reader accepts";
  EXPECT_TRUE(IsValidUtf8(j["reason"].get<std::string>()));
}

TEST(Json, NonFiniteIsNull) {
  JsonWriter w(false);
  w.BeginArray().Number(1.0 / 0.0).EndArray();
  EXPECT_EQ(w.str(), "[null]");
}

TEST(Json, TimestampsKeepPrecision) {
  JsonWriter w(false);
  w.BeginArray().Number(1796220000.125).EndArray();
  EXPECT_EQ(w.str(), "[1796220000.125]");
}

}  // namespace
}  // namespace preflight
