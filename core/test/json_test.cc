#include "preflight/json.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {

TEST(Json, CompactNestedOutput) {
  JsonWriter w(false);
  w.BeginObject().Field("a", 1).Field("s", "x\"y\n").Key("l").BeginArray().Bool(true).Null().Number(0.5).EndArray();
  w.Key("e").BeginObject().EndObject().EndObject();
  EXPECT_EQ(w.str(), "{\"a\":1,\"s\":\"x\\\"y\\n\",\"l\":[true,null,0.5],\"e\":{}}");
}

TEST(Json, EscapesControlCharacters) { EXPECT_EQ(JsonEscape(std::string("\x01", 1)), "\\u0001"); }

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
