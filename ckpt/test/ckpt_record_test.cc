#include "preflight/ckpt_record.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {

TEST(CkptRecord, RoundTripsThroughJson) {
  CkptRecord r;
  r.name = "step_10";
  r.run = "12.1";
  r.node = "n1";
  r.tier = "/lustre/ckpt";
  r.state = CkptState::kPersisting;
  r.bytes = 1ull << 40;
  r.files = 64;
  r.local_time = 1700000000.25;
  r.persist_start = 1700000001;
  r.copy_seconds = 512;
  r.missing = {"n2", "n3"};
  std::string j = CkptRecordJson(r);
  EXPECT_NE(j.find("\"throughput_bytes_per_second\":2147483648"), std::string::npos) << j;
  auto back = ParseCkptRecord(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, "step_10");
  EXPECT_EQ(back->run, "12.1");
  EXPECT_EQ(back->tier, "/lustre/ckpt");
  EXPECT_EQ(back->state, CkptState::kPersisting);
  EXPECT_EQ(back->bytes, 1ull << 40);
  EXPECT_EQ(back->files, 64u);
  EXPECT_DOUBLE_EQ(back->local_time, 1700000000.25);
  EXPECT_DOUBLE_EQ(back->copy_seconds, 512);
  EXPECT_EQ(back->missing, r.missing);
  EXPECT_EQ(CkptRecordJson(*back), j);
  EXPECT_TRUE(ParseCkptRecord(CkptRecordJson(r, true)).ok());
}

TEST(CkptRecord, RejectsWhatItCannotRead) {
  EXPECT_FALSE(ParseCkptRecord("not json").ok());
  EXPECT_FALSE(ParseCkptRecord("[]").ok());
  EXPECT_FALSE(ParseCkptRecord(R"({"state":"durable"})").ok()) << "no name";
  EXPECT_FALSE(ParseCkptRecord(R"({"name":"s"})").ok()) << "no state";
  EXPECT_FALSE(ParseCkptRecord(R"({"name":"s","state":"lost"})").ok());
  EXPECT_FALSE(ParseCkptRecord(R"({"name":"s","state":"local","bytes":-1})").ok());
  EXPECT_FALSE(ParseCkptRecord(R"({"name":"s","state":"local","missing":"n2"})").ok());
  auto newer = ParseCkptRecord(R"({"name":"s","state":"failed","error":"EIO","future_key":1})");
  ASSERT_TRUE(newer.ok());
  EXPECT_EQ(newer->state, CkptState::kFailed);
  EXPECT_EQ(newer->error, "EIO");
}

TEST(CkptRecord, FromAPersistAttempt) {
  CkptPersistRequest req;
  req.name = "s";
  req.node = "n1";
  req.complete_time = 10;
  CkptPersistResult waiting;
  waiting.missing = {"n2"};
  waiting.bytes = 100;
  waiting.seconds = 2;
  auto w = CkptRecordFromPersist(req, waiting, 20, 22);
  EXPECT_EQ(w.state, CkptState::kPersisting);
  EXPECT_EQ(w.persist_end, 0);
  EXPECT_EQ(w.missing, waiting.missing);
  EXPECT_DOUBLE_EQ(w.Throughput(), 50);
  CkptPersistResult durable;
  durable.state = CkptCommitState::kDurable;
  auto d = CkptRecordFromPersist(req, durable, 20, 25);
  EXPECT_EQ(d.state, CkptState::kDurable);
  EXPECT_EQ(d.persist_end, 25);
  EXPECT_EQ(d.local_time, 10);
  auto f = CkptRecordFromPersist(req, Expected<CkptPersistResult>(Status::IOError("write x: No space left")), 20, 21);
  EXPECT_EQ(f.state, CkptState::kFailed);
  EXPECT_EQ(f.error, "write x: No space left");
  EXPECT_EQ(CkptStateName(CkptState::kDurable), std::string("durable"));
  EXPECT_FALSE(ParseCkptState("x").ok());
}

}  // namespace
}  // namespace preflight
