#include "preflight/collective_ops.h"

#include "preflight/collective.h"

namespace preflight::collective {
namespace {

// The vocabulary, one row per operation.
struct OpRow {
  Op op;
  const char* name;
};
constexpr OpRow kOps[] = {
    {Op::kAllReduce, "all_reduce"},
    {Op::kAllGather, "all_gather"},
    {Op::kReduceScatter, "reduce_scatter"},
    {Op::kAllToAll, "all_to_all"},
};

}  // namespace

const char* OpName(Op op) {
  for (const auto& r : kOps)
    if (r.op == op) return r.name;
  return "?";
}

const std::vector<Op>& AllOps() {
  static const std::vector<Op> all = {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter, Op::kAllToAll};
  return all;
}

Expected<Op> ParseOp(const std::string& name) {
  std::string names;
  for (const auto& r : kOps) {
    if (name == r.name) return r.op;
    names += (names.empty() ? "" : ", ") + std::string(r.name);
  }
  return Status::InvalidArgument("unknown operation '" + name + "' (expected " + names + " or all)");
}

Expected<std::vector<Op>> ParseOps(const std::string& list) {
  if (list == "all") return AllOps();
  std::vector<Op> ops;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    auto op = ParseOp(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!op) return op.status();
    for (Op o : ops)
      if (o == *op) return Status::InvalidArgument(std::string(OpName(o)) + " named twice");
    ops.push_back(*op);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ops;
}

std::string OpsText(const std::vector<Op>& ops) {
  std::string s;
  for (Op o : ops) s += (s.empty() ? "" : ",") + std::string(OpName(o));
  return s;
}

double BusFactor(Op op, int n) {
  if (n <= 0) return 0.0;
  // nccl-tests doc/PERFORMANCE.md: an all-reduce moves every byte out and
  // back in (2(n-1)/n); the others move each byte once ((n-1)/n).
  return op == Op::kAllReduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
}

uint64_t OpCount(Op op, uint64_t bytes, int n) {
  if (op == Op::kAllReduce) return bytes / sizeof(float);
  if (n <= 0) return 0;
  // nccl-tests' all_gather.cu, reduce_scatter.cu, alltoall.cu: a chunk is a
  // whole number of ALIGN (4) elements, base = count / (ALIGN * n) * ALIGN.
  constexpr uint64_t kAlign = 4;
  return bytes / sizeof(float) / (kAlign * static_cast<uint64_t>(n)) * kAlign;
}

uint64_t OpBytes(Op op, uint64_t count, int n) {
  return op == Op::kAllReduce ? count * sizeof(float) : count * static_cast<uint64_t>(n) * sizeof(float);
}

uint64_t OutputCount(Op op, uint64_t count, int n) {
  return op == Op::kAllReduce || op == Op::kReduceScatter ? count : count * static_cast<uint64_t>(n);
}

float OpInput(int rank, uint64_t i) { return AllReduceInput(rank, i); }

float OpExpected(Op op, int n, int rank, uint64_t count, uint64_t j) {
  switch (op) {
    case Op::kAllReduce:
      return AllReduceExpected(n, j);
    case Op::kAllGather:  // chunk q is rank q's send buffer
      return OpInput(static_cast<int>(j / count), j % count);
    case Op::kReduceScatter:  // this rank's chunk of the sum
      return AllReduceExpected(n, static_cast<uint64_t>(rank) * count + j);
    case Op::kAllToAll:  // chunk q is what rank q sent to this rank: its chunk `rank`
      return OpInput(static_cast<int>(j / count), static_cast<uint64_t>(rank) * count + j % count);
  }
  return 0;
}

}  // namespace preflight::collective
