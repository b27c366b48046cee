#include "preflight/rails.h"

#include <gtest/gtest.h>

namespace preflight {
namespace {

// Two GPUs, each below its own PCIe switch with one HCA (PIX): two rails,
// plus a storage NIC on another host bridge.
Topology TwoRails() {
  Topology t;
  for (int i = 0; i < 2; ++i) {
    TopoGpu g;
    g.index = i;
    g.busid = "0000:0" + std::to_string(i) + ":00.0";
    g.path = {"hb" + std::to_string(i), "sw" + std::to_string(i)};
    t.gpus.push_back(g);
    TopoNic n;
    n.name = "mlx5_" + std::to_string(i);
    n.kind = "ib";
    n.path = g.path;
    TopoPort p;
    p.state = "ACTIVE";
    p.link_layer = "InfiniBand";
    p.rate = "200 Gb/sec (4X HDR)";
    n.ports.push_back(p);
    t.nics.push_back(n);
  }
  TopoNic st;
  st.name = "mlx5_9";
  st.kind = "ib";
  st.path = {"hb9"};
  TopoPort p;
  p.state = "ACTIVE";
  p.link_layer = "Ethernet";
  p.rate = "25 Gb/sec (1X EDR)";
  st.ports.push_back(p);
  t.nics.push_back(st);
  EXPECT_TRUE(ClassifyRails(t, {}).ok());
  return t;
}

TEST(Rails, SignatureHoldsOnlyComputeRailsAndThePlacement) {
  NodeRails r = RailsOf("n1", TwoRails());
  ASSERT_EQ(r.rails.size(), 2u);  // mlx5_9 is storage
  EXPECT_EQ(r.rails[0].name, "mlx5_0");
  EXPECT_EQ(r.rails[1].state, "usable");
  EXPECT_EQ(r.gpu_map, "0:mlx5_0,1:mlx5_1");
  EXPECT_EQ(r.Summary(), "2 rails (2 x InfiniBand 200 Gb/sec (4X HDR)), GPU map 0:mlx5_0,1:mlx5_1");
  auto back = ParseRailsJson(RailsJson(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->Key(), r.Key());
  EXPECT_EQ(back->node, "n1");
  EXPECT_FALSE(ParseRailsJson("{\"rails\":[]}").ok());  // no node
  EXPECT_FALSE(ParseRailsJson("nonsense").ok());
}

TEST(Rails, TheOddNodeIsNamedWithWhatDiffers) {
  Topology down = TwoRails();
  down.nics[1].ports[0].state = "DOWN";
  ASSERT_TRUE(ClassifyRails(down, {}).ok());
  Topology slow = TwoRails();
  slow.nics[0].ports[0].rate = "100 Gb/sec (4X EDR)";
  ASSERT_TRUE(ClassifyRails(slow, {}).ok());
  Topology missing = TwoRails();
  missing.nics.erase(missing.nics.begin() + 1);
  ASSERT_TRUE(ClassifyRails(missing, {}).ok());

  auto c = CompareRails({RailsOf("n1", TwoRails()), RailsOf("n2", TwoRails()), RailsOf("n3", down)});
  EXPECT_FALSE(c.consistent);
  EXPECT_EQ(c.majority, 2u);
  ASSERT_EQ(c.odd.size(), 1u);
  EXPECT_EQ(c.odd[0].node, "n3");
  EXPECT_TRUE(c.odd[0].missing_or_down);
  EXPECT_EQ(c.odd[0].what, "mlx5_1 down (others: usable)");
  EXPECT_EQ(c.text, "n3 differs from the other 2 node(s): mlx5_1 down (others: usable)\n");

  c = CompareRails({RailsOf("n1", slow), RailsOf("n2", TwoRails()), RailsOf("n3", TwoRails()), RailsOf("n4", TwoRails())});
  ASSERT_EQ(c.odd.size(), 1u);
  EXPECT_EQ(c.odd[0].node, "n1");
  EXPECT_FALSE(c.odd[0].missing_or_down);
  EXPECT_EQ(c.odd[0].what, "mlx5_0 rate 100 Gb/sec (4X EDR) (others: 200 Gb/sec (4X HDR))");

  c = CompareRails({RailsOf("n1", TwoRails()), RailsOf("n2", missing), RailsOf("n3", TwoRails())});
  ASSERT_EQ(c.odd.size(), 1u);
  EXPECT_TRUE(c.odd[0].missing_or_down);
  // GPU1 now pairs elsewhere (or nowhere): both facts are named.
  EXPECT_NE(c.odd[0].what.find("mlx5_1 missing"), std::string::npos) << c.odd[0].what;
  EXPECT_NE(c.odd[0].what.find("GPU map"), std::string::npos) << c.odd[0].what;
}

TEST(Rails, SameEverywhereAndNoMajority) {
  auto same = CompareRails({RailsOf("n1", TwoRails()), RailsOf("n2", TwoRails())});
  EXPECT_TRUE(same.consistent);
  EXPECT_TRUE(same.odd.empty());
  EXPECT_EQ(same.text, "same rails on all 2 node(s): 2 rails (2 x InfiniBand 200 Gb/sec (4X HDR)), GPU map 0:mlx5_0,1:mlx5_1\n");
  Topology down = TwoRails();
  down.nics[0].ports[0].state = "DOWN";
  ASSERT_TRUE(ClassifyRails(down, {}).ok());
  // Two nodes that differ: nobody can be singled out.
  auto two = CompareRails({RailsOf("n1", TwoRails()), RailsOf("n2", down)});
  EXPECT_FALSE(two.consistent);
  EXPECT_TRUE(two.odd.empty());
  EXPECT_NE(two.text.find("no majority among 2 nodes; nobody singled out"), std::string::npos) << two.text;
}

}  // namespace
}  // namespace preflight
