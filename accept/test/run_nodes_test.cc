// The nodes stage of the acceptance run with a scripted Runner: the rails
// comparison (preflight topo --compare) runs after the fleet comparison,
// against the same state_dir, and what it finds is a note while the other
// stages go on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "preflight/accept_report.h"
#include "preflight/accept_run.h"
#include "preflight/process.h"

namespace preflight::accept {
namespace {

// Four nodes whose checks pass; `topo --compare` answers `rails_rc` and
// `rails_out`; every command line is kept in `calls`.
Report RunWithRails(int rails_rc, const std::string& rails_out, std::vector<std::string>* calls) {
  RunOptions o;
  o.nodes = {"n1", "n2", "n3", "n4"};
  o.tag = "t";
  o.node_state_dir = "/out/.state-t";
  o.pass_args = {"--config", "/etc/site.conf"};
  auto run = [=](const std::vector<std::string>& argv, unsigned) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    calls->push_back(cmd);
    ProcessResult p;
    p.exit_code = 0;
    if (cmd.find("preflight-prolog") != std::string::npos) {
      for (int i = 0; i < 4; ++i) p.output += std::to_string(i) + ": #accept-node n" + std::to_string(i + 1) + " 0\n";
    } else if (cmd.find(" topo --compare ") != std::string::npos) {
      p.exit_code = rails_rc;
      p.output = rails_out;
    }
    return p;
  };
  return RunAccept(o, run, nullptr);
}

const Stage& NodesStage(const Report& r) { return r.stages.at(0); }

bool Noted(const Report& r, const std::string& needle) {
  for (const auto& n : NodesStage(r).notes)
    if (n.find(needle) != std::string::npos) return true;
  return false;
}

TEST(AcceptNodes, RailsComparedWithTheNodeChecksStateDir) {
  std::vector<std::string> calls;
  Report r = RunWithRails(0, "same rails on all 4 node(s): 4 rails (4 x IB 200 Gb/sec), GPU map 0:mlx5_0\n", &calls);
  int fleet = -1, rails = -1, collective = -1;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].find(" fleet n1,n2,n3,n4 ") != std::string::npos) fleet = static_cast<int>(i);
    if (calls[i].find(" topo --compare n1,n2,n3,n4 ") != std::string::npos) {
      rails = static_cast<int>(i);
      // The same program, site config and state_dir as the fleet comparison.
      EXPECT_EQ(calls[i].rfind("preflight --config /etc/site.conf --set state_dir=/out/.state-t topo", 0), 0u) << calls[i];
    }
    if (collective < 0 && calls[i].find("preflight-nccl") != std::string::npos) collective = static_cast<int>(i);
  }
  ASSERT_GE(fleet, 0);
  ASSERT_GT(rails, fleet);
  EXPECT_GT(collective, rails) << "the collective stage runs after the comparisons";
  EXPECT_TRUE(NodesStage(r).notes.empty()) << NodesStage(r).notes[0];
}

TEST(AcceptNodes, OddRailsAndMissingRecordsAreNotedAndTheRunGoesOn) {
  std::vector<std::string> calls;
  Report r = RunWithRails(1,
                          "no rails record on n4 (its prolog has not recorded one)\n"
                          "n3 differs from the other 2 node(s): mlx5_3 down (others: usable)\n",
                          &calls);
  EXPECT_TRUE(Noted(r, "rails: n3 differs from the other 2 node(s): mlx5_3 down (others: usable)"));
  EXPECT_TRUE(Noted(r, "rails: no rails record on n4"));
  EXPECT_NE(SummaryText(r).find("rails: n3 differs"), std::string::npos) << SummaryText(r);
  bool collective = false;
  for (const auto& c : calls) collective = collective || c.find("preflight-nccl") != std::string::npos;
  EXPECT_TRUE(collective);
}

TEST(AcceptNodes, MissingRecordIsNotedWhenTheRestAgree) {
  std::vector<std::string> calls;
  Report r = RunWithRails(0,
                          "no rails record on n[3-4] (its prolog has not recorded one)\n"
                          "same rails on all 2 node(s): 1 rail\n",
                          &calls);
  EXPECT_TRUE(Noted(r, "rails: no rails record on n[3-4]"));
  EXPECT_FALSE(Noted(r, "same rails"));
}

TEST(AcceptNodes, NoRecordsAtAllSaysWhy) {
  std::vector<std::string> calls;
  Report r = RunWithRails(2, "preflight: topo: no rails records: under /out/.state-t/nodes (the prolog writes them with topo_env on)\n",
                          &calls);
  EXPECT_TRUE(Noted(r, "rails: preflight: topo: no rails records"));
  Report quiet = RunWithRails(2, "", &calls);
  EXPECT_TRUE(Noted(quiet, "rails: exit 2"));
}

TEST(AcceptNodes, ManyOddLinesAreBounded) {
  std::vector<std::string> calls;
  std::string out;
  for (int i = 0; i < 15; ++i) out += "x" + std::to_string(i) + " differs from the other 20 node(s): mlx5_0 down\n";
  Report r = RunWithRails(1, out, &calls);
  EXPECT_EQ(NodesStage(r).notes.size(), 13u);
  EXPECT_TRUE(Noted(r, "rails: 3 more lines not shown"));
}

}  // namespace
}  // namespace preflight::accept
