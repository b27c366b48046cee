// The harness: sweep, warm-up, timing, verification, verdict, output.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <time.h>

#include "preflight/clock.h"
#include "preflight/collective.h"
#include "preflight/json.h"

namespace preflight::collective {
namespace {

std::string SizeLabel(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) std::snprintf(buf, sizeof buf, "%" PRIu64 "G", b >> 30);
  else if (b >= (1ull << 20) && b % (1ull << 20) == 0) std::snprintf(buf, sizeof buf, "%" PRIu64 "M", b >> 20);
  else if (b >= (1ull << 10) && b % (1ull << 10) == 0) std::snprintf(buf, sizeof buf, "%" PRIu64 "K", b >> 10);
  else std::snprintf(buf, sizeof buf, "%" PRIu64, b);
  return buf;
}

}  // namespace

double AllReduceBusFactor(int n) { return n <= 0 ? 0.0 : 2.0 * (n - 1) / n; }

uint64_t AllReduceCount(uint64_t bytes) { return bytes / sizeof(float); }

float AllReduceInput(int rank, uint64_t i) { return static_cast<float>(i % 61 + 1 + rank); }

float AllReduceExpected(int n, uint64_t i) {
  // sum over r of (i%61 + 1 + r) = n*(i%61+1) + n(n-1)/2; exact in float
  // while it stays below 2^24 (any n up to a few hundred thousand ranks).
  double v = static_cast<double>(n) * static_cast<double>(i % 61 + 1) + n * (n - 1) / 2.0;
  return static_cast<float>(v);
}

SweepOptions SweepForLevel(Level level, uint64_t max_bytes) {
  SweepOptions o;
  std::vector<uint64_t> all;
  if (level == Level::kFull) {
    for (uint64_t b = 1ull << 20; b <= 8ull << 30; b *= 2) all.push_back(b);
    o.warmup = 5;
    o.iters = 20;
  } else {
    all = {256ull << 10, 4ull << 20, 64ull << 20, 256ull << 20};
    o.warmup = 2;
    o.iters = 5;
  }
  for (uint64_t b : all)
    if (max_bytes == 0 || b <= max_bytes) o.sizes.push_back(b);
  // A cap between two sweep sizes is itself measured: the largest size is
  // the one judged, so it should be as large as the site allows.
  uint64_t cap = max_bytes - max_bytes % sizeof(float);
  if (max_bytes != 0 && cap > 0 && (o.sizes.empty() || o.sizes.back() < cap) && cap < all.back()) o.sizes.push_back(cap);
  return o;
}

namespace {

Status Issue(Backend& b, Op op, uint64_t count) {
  switch (op) {
    case Op::kAllReduce: return b.AllReduce(count);
    case Op::kAllGather: return b.AllGather(count);
    case Op::kReduceScatter: return b.ReduceScatter(count);
    case Op::kAllToAll: return b.AllToAll(count);
  }
  return Status::InvalidArgument("unknown operation");
}

// Elements of this rank's last result that differ from the expected ones;
// beyond verify_max_elems, the head and the tail only.
Expected<uint64_t> CountWrong(Backend& b, Op op, uint64_t count, const SweepOptions& opt) {
  uint64_t wrong = 0, n_out = OutputCount(op, count, b.Size());
  std::vector<float> out;
  auto check = [&](uint64_t off, uint64_t n) -> Status {
    out.resize(n);
    Status g = b.GetOutput(out.data(), off, n);
    if (!g.ok()) return g;
    for (uint64_t i = 0; i < n; ++i)
      if (out[i] != OpExpected(op, b.Size(), b.Rank(), count, off + i)) ++wrong;
    return Status::Ok();
  };
  Status s;
  if (n_out <= opt.verify_max_elems) {
    s = check(0, n_out);
  } else {
    uint64_t half = opt.verify_max_elems / 2;
    s = check(0, half);
    if (s.ok()) s = check(n_out - half, half);
  }
  if (!s.ok()) return s;
  return wrong;
}

}  // namespace

Expected<SweepResult> RunSweep(Backend& b, Op op, const SweepOptions& opt) {
  if (opt.sizes.empty()) return Status::InvalidArgument("no message sizes to test");
  double t_start = MonotonicSeconds();
  SweepResult res;
  res.op = op;
  res.backend = b.Name();
  res.nranks = b.Size();
  // Every operation's buffers fit OpBytes/4 elements (collective_ops.h).
  uint64_t max_count = 0;
  std::vector<uint64_t> counts;
  for (uint64_t bytes : opt.sizes) {
    uint64_t c = OpCount(op, bytes, res.nranks);
    if (c == 0) continue;
    counts.push_back(c);
    max_count = std::max(max_count, OpBytes(op, c, res.nranks) / sizeof(float));
  }
  if (max_count == 0)
    return Status::InvalidArgument(op == Op::kAllReduce ? "message size below one element"
                                                        : "message size below one chunk of 4 elements per rank");
  Status s = b.Prepare(max_count);
  if (!s.ok()) return s;

  // One input buffer for the largest size; smaller sizes use its prefix.
  std::vector<float> in(max_count);
  for (uint64_t i = 0; i < max_count; ++i) in[i] = OpInput(b.Rank(), i);
  s = b.SetInput(in.data(), max_count);
  if (!s.ok()) return s;
  in.clear();
  in.shrink_to_fit();

  for (uint64_t count : counts) {
    SizeResult r;
    r.bytes = OpBytes(op, count, res.nranks);
    r.count = r.bytes / sizeof(float);
    for (int i = 0; i < opt.warmup; ++i)
      if (!(s = Issue(b, op, count)).ok()) return s.Context("warm-up at " + SizeLabel(r.bytes));
    if (!(s = b.Wait()).ok()) return s.Context("warm-up at " + SizeLabel(r.bytes));
    // Start together: a max-reduction doubles as a barrier.
    std::vector<double> sync = {0};
    if (!(s = b.MaxAcrossRanks(sync)).ok()) return s;
    double t0 = MonotonicSeconds();
    for (int i = 0; i < opt.iters; ++i)
      if (!(s = Issue(b, op, count)).ok()) return s.Context("at " + SizeLabel(r.bytes));
    if (!(s = b.Wait()).ok()) return s.Context("at " + SizeLabel(r.bytes));
    double per_op = (MonotonicSeconds() - t0) / std::max(1, opt.iters);

    // Verify the last result (every iteration computes the same one).
    auto wrong = CountWrong(b, op, count, opt);
    if (!wrong) return wrong.status().Context("reading back the result at " + SizeLabel(r.bytes));

    std::vector<double> agg = {per_op, static_cast<double>(*wrong)};
    if (!(s = b.MaxAcrossRanks(agg)).ok()) return s;
    r.seconds = agg[0];
    r.wrong = static_cast<uint64_t>(agg[1]);
    r.algbw = r.seconds > 0 ? r.bytes / r.seconds : 0;
    r.busbw = r.algbw * BusFactor(op, res.nranks);
    res.sizes.push_back(r);
  }
  res.seconds = MonotonicSeconds() - t_start;
  return res;
}

Expected<SweepResult> RunAllReduceSweep(Backend& b, const SweepOptions& opt) { return RunSweep(b, Op::kAllReduce, opt); }

Expected<std::vector<SweepResult>> RunSweeps(Backend& b, const std::vector<Op>& ops, const SweepOptions& opt, Op* failed) {
  std::vector<SweepResult> out;
  for (Op op : ops) {
    auto r = RunSweep(b, op, opt);
    if (!r) {
      if (failed) *failed = op;
      // A lone all_reduce keeps today's message; with several, say which.
      return ops.size() == 1 ? r.status() : r.status().Context(OpName(op));
    }
    out.push_back(std::move(*r));
  }
  return out;
}

std::string RateText(double v) {
  const char* units[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"};
  int u = 0;
  while (u < 4 && v >= 1000) { v /= 1000; ++u; }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g %s", v, units[u]);
  return buf;
}

Judgement Judge(const SweepResult& r, double min_busbw) {
  Judgement j;
  j.threshold = min_busbw;
  if (r.sizes.empty()) {
    j.message = "no sizes measured";
    return j;
  }
  for (const auto& s : r.sizes) {
    if (s.wrong != 0) {
      // The other operations' result per rank is not the row's count
      // (reduce_scatter's is a chunk of it), so no "of N" for them.
      j.message = r.op == Op::kAllReduce
                      ? "wrong all-reduce result at " + SizeLabel(s.bytes) + ": " + std::to_string(s.wrong) + " of " +
                            std::to_string(s.count) + " elements differ from the expected sum"
                      : "wrong " + std::string(OpName(r.op)) + " result at " + SizeLabel(s.bytes) + ": " +
                            std::to_string(s.wrong) + " elements differ from the expected values (worst rank)";
      return j;
    }
  }
  const SizeResult& last = r.sizes.back();
  j.busbw = last.busbw;
  if (r.nranks < 2) {
    j.ok = true;
    j.message = "1 rank: nothing crosses a link, data verified, bandwidth not judged";
    return j;
  }
  std::string fig = "busbw " + RateText(j.busbw) + " at " + SizeLabel(last.bytes);
  if (min_busbw <= 0) {
    j.ok = true;
    j.message = fig + ", no threshold set";
  } else if (j.busbw >= min_busbw) {
    j.ok = true;
    j.message = fig + " >= " + RateText(min_busbw);
  } else {
    j.message = fig + " < " + RateText(min_busbw);
  }
  return j;
}

std::string ResultJson(const SweepResult& r, const Judgement& j, const RunInfo& info) {
  JsonWriter w;
  w.BeginObject();
  w.Field("tool", "preflight-nccl");
  w.Field("test", OpName(r.op));
  w.Field("scope", info.scope);
  w.Field("level", info.level);
  w.Field("backend", r.backend);
  w.Field("bootstrap", info.bootstrap);
  w.Field("ranks", r.nranks);
  w.Key("nodes").BeginArray();
  for (const auto& n : info.nodes) w.String(n);
  w.EndArray();
  w.Field("profile", info.profile);
  w.Key("sizes").BeginArray();
  for (const auto& s : r.sizes) {
    w.BeginObject();
    w.Field("bytes", static_cast<int64_t>(s.bytes));
    w.Field("count", static_cast<int64_t>(s.count));
    w.Field("time_us", s.seconds * 1e6);
    w.Field("algbw_Bps", s.algbw);
    w.Field("busbw_Bps", s.busbw);
    w.Field("wrong", static_cast<int64_t>(s.wrong));
    w.EndObject();
  }
  w.EndArray();
  w.Field("busbw_Bps", j.busbw);
  w.Field("threshold_Bps", j.threshold);
  w.Field("threshold_source", info.threshold_source);
  w.Field("verdict", j.ok ? "pass" : "fail");
  w.Field("message", j.message);
  w.Field("seconds", r.seconds);
  w.EndObject();
  return w.str() + "\n";
}

std::string ResultText(const SweepResult& r, const Judgement& j, const RunInfo& info) {
  std::string out;
  char line[256];
  std::string nodes;
  for (const auto& n : info.nodes) nodes += (nodes.empty() ? "" : ",") + n;
  out += "# preflight-nccl " + std::string(OpName(r.op)) + " (" + info.scope + ", " + info.level + "): backend " + r.backend + ", " +
         std::to_string(r.nranks) + " ranks on " + nodes + ", bootstrap " + info.bootstrap + "\n";
  std::snprintf(line, sizeof line, "#%12s %12s %12s %12s %12s %8s\n", "size", "count", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "#wrong");
  out += line;
  for (const auto& s : r.sizes) {
    std::snprintf(line, sizeof line, " %12" PRIu64 " %12" PRIu64 " %12.1f %12.3f %12.3f %8" PRIu64 "\n", s.bytes,
                  s.count, s.seconds * 1e6, s.algbw / 1e9, s.busbw / 1e9, s.wrong);
    out += line;
  }
  out += "# threshold: " + (j.threshold > 0 ? RateText(j.threshold) : std::string("none")) + " (" +
         info.threshold_source + ")\n";
  out += std::string("# ") + (j.ok ? "OK" : "FAILED") + ": " + j.message + "\n";
  return out;
}

}  // namespace preflight::collective
