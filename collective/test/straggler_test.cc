// The straggler rule (straggler.h): pure figures in, verdict out.
#include "preflight/straggler.h"

#include <gtest/gtest.h>

namespace preflight::collective {
namespace {

constexpr double M = 1e6;

std::vector<std::string> Nodes(int n) {
  std::vector<std::string> v;
  for (int i = 1; i <= n; ++i) v.push_back("n" + std::to_string(i));
  return v;
}

// Ring pairs where every link touching `slow` runs at `slow_rate`.
std::vector<PairFigure> Ring(const std::vector<std::string>& nodes, const std::string& slow, double fast, double slow_rate) {
  std::vector<PairFigure> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& a = nodes[i];
    const auto& b = nodes[(i + 1) % nodes.size()];
    out.push_back({a, b, (a == slow || b == slow) ? slow_rate : fast});
  }
  return out;
}

TEST(Straggler, NamesTheNodeWhoseBothPairsAreSlow) {
  auto nodes = Nodes(5);
  auto v = FindStragglers(nodes, Ring(nodes, "n3", 100 * M, 10 * M), {}, 0.5, 0);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].node, "n3");
  EXPECT_DOUBLE_EQ(v.stragglers[0].figure, 10 * M);
  EXPECT_DOUBLE_EQ(v.stragglers[0].median, 100 * M);
  EXPECT_EQ(v.stragglers[0].basis, "ring pairs");
  EXPECT_NE(v.text.find("straggler n3: ring pairs 10 MB/s (its better pair) < 0.5"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("0.5 x the allocation's median 100 MB/s"), std::string::npos) << v.text;
  EXPECT_FALSE(v.fabric_wide);
  EXPECT_EQ(NodesToRemeasure(nodes, v), std::vector<size_t>{2});
}

TEST(Straggler, ThreeNodesStillFindTheSlowOne) {
  // Two of three pairs are slow, so the median of the pairs would be slow;
  // the median of the nodes' better pairs is not.
  auto nodes = Nodes(3);
  auto v = FindStragglers(nodes, Ring(nodes, "n2", 100 * M, 5 * M), {}, 0.5, 0);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].node, "n2");
}

TEST(Straggler, OneSlowPairBlamesNobody) {
  // n2-n3 slow, both nodes' other pair fast: a link, not a node.
  auto nodes = Nodes(4);
  std::vector<PairFigure> p = {{"n1", "n2", 100 * M}, {"n2", "n3", 1 * M}, {"n3", "n4", 100 * M}, {"n4", "n1", 100 * M}};
  EXPECT_TRUE(FindStragglers(nodes, p, {}, 0.5, 0).stragglers.empty());
}

TEST(Straggler, CutNodeHasNoFigureAndIsNamed) {
  auto nodes = Nodes(6);
  auto pairs = Ring(nodes, "n4", 80 * M, 0);
  auto v = FindStragglers(nodes, pairs, {}, 0.5, 0);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].node, "n4");
  EXPECT_NE(v.text.find("none (both pairs failed)"), std::string::npos) << v.text;
  // A missing pair counts as no figure too.
  pairs.erase(pairs.begin() + 2);  // n3-n4
  v = FindStragglers(nodes, pairs, {}, 0.5, 0);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].node, "n4");
}

TEST(Straggler, NoiseWithinTheFractionNamesNobody) {
  auto nodes = Nodes(8);
  std::vector<PairFigure> p;
  double figs[] = {100, 61, 140, 75, 90, 55, 120, 70};
  for (size_t i = 0; i < nodes.size(); ++i) p.push_back({nodes[i], nodes[(i + 1) % 8], figs[i] * M});
  auto v = FindStragglers(nodes, p, {}, 0.5, 0);
  EXPECT_TRUE(v.stragglers.empty()) << v.text;
  EXPECT_TRUE(v.text.empty());
}

TEST(Straggler, EveryNodeSlowAlikeIsTheFabric) {
  auto nodes = Nodes(4);
  auto v = FindStragglers(nodes, Ring(nodes, "", 10 * M, 10 * M), {}, 0.5, 100 * M);
  EXPECT_TRUE(v.fabric_wide);
  EXPECT_TRUE(v.stragglers.empty());
  EXPECT_NE(v.text.find("not one node"), std::string::npos) << v.text;
  // Without a reference there is nothing to call slow.
  v = FindStragglers(nodes, Ring(nodes, "", 10 * M, 10 * M), {}, 0.5, 0);
  EXPECT_FALSE(v.fabric_wide);
  EXPECT_TRUE(v.text.empty());
}

TEST(Straggler, TwoNodesNameALinkAgainstTheProfileOnly) {
  auto nodes = Nodes(2);
  std::vector<PairFigure> p = {{"n1", "n2", 5 * M}};
  auto v = FindStragglers(nodes, p, {}, 0.5, 0);
  EXPECT_TRUE(v.stragglers.empty());
  EXPECT_TRUE(v.slow_link.empty());
  v = FindStragglers(nodes, p, {}, 0.5, 100 * M);
  EXPECT_TRUE(v.stragglers.empty());
  EXPECT_EQ(v.slow_link, "n1-n2");
  EXPECT_NE(v.text.find("neither can be told"), std::string::npos);
}

TEST(Straggler, IntraNodeFiguresHaveTheirOwnMedian) {
  auto nodes = Nodes(4);
  auto pairs = Ring(nodes, "", 100 * M, 100 * M);
  std::map<std::string, double> intra = {{"n1", 900 * M}, {"n2", 1000 * M}, {"n3", 200 * M}, {"n4", 950 * M}};
  auto v = FindStragglers(nodes, pairs, intra, 0.5, 0);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].node, "n3");
  EXPECT_EQ(v.stragglers[0].basis, "intra-node");
  EXPECT_TRUE(NodesToRemeasure(nodes, v).empty());  // re-measuring is for pairs
  // Two nodes: the slower against the faster.
  v = FindStragglers(Nodes(2), {{"n1", "n2", 50 * M}}, {{"n1", 1000 * M}, {"n2", 100 * M}}, 0.5, 0);
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].node, "n2");
}

}  // namespace
}  // namespace preflight::collective
