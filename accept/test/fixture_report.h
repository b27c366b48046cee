// A measured-looking report for the unit tests and the HTML golden test: 8
// nodes, the 8-node step broken by a slow n5, one slow storage path, and
// names and paths holding markup (they must come out escaped).
#pragma once

#include <cstdio>
#include <string>

#include "preflight/accept_report.h"

namespace preflight::accept::testing {

inline Curve MakeCurve(int nodes, double busbw, const std::vector<std::string>& names, uint64_t wrong = 0) {
  Curve c;
  c.nodes = nodes;
  c.node_names = names;
  c.ranks = nodes == 1 ? 2 : nodes;
  c.backend = "host-tcp";
  c.threshold_source = "no threshold set";
  for (uint64_t b = 1 << 10; b <= (4u << 20); b *= 4)
    c.sizes.push_back({b, busbw * (static_cast<double>(b) / (b + (256u << 10))), b == (4u << 20) ? wrong : 0});
  c.sizes.back().busbw = busbw;
  c.reproduce = "srun --mpi=pmix -N" + std::to_string(nodes) + " preflight-nccl --json";
  return c;
}

inline StorageFigures MakeStorage(const std::string& path, const std::string& scope, const std::string& node,
                                  double seq) {
  StorageFigures s;
  s.path = path;
  s.scope = scope;
  s.node = node;
  s.seq_write = seq;
  s.seq_read = seq * 2;
  s.rand_read_iops = seq / 4096 / 4;
  s.ckpt_write = seq * 0.9;
  s.create_per_s = seq / 1e5;
  s.read_files_per_s = seq / 5e4;
  s.stat_per_s = seq / 1e4;
  s.reproduce = {"fio --name=seq_write --directory=" + path, "fio --name=seq_read --directory=" + path};
  return s;
}

// One node's training run: 20 samples over 30 s at `rate` steps/s (the first a little slower).
inline TrainNode MakeTrain(const std::string& node, double rate) {
  TrainNode t;
  t.node = node;
  for (int k = 1; k <= 20; ++k) t.rate.emplace_back(1.5 * k, k == 1 ? rate * 0.8 : rate);
  t.median_rate = rate;
  t.last_step = static_cast<long>(rate * 30);
  t.last_time = 30;
  t.has_loss = true;
  t.last_loss = 1.0 / static_cast<double>(t.last_step);
  t.end = "bound";
  t.lines = t.last_step;
  t.last = "step " + std::to_string(t.last_step) + " loss 0.0033";
  // The checkpoint round trip: the newest periodic checkpoint, resumed at
  // the next step.
  t.ckpt.tried = t.ckpt.resumed = true;
  t.ckpt.saved_step = t.last_step / 20 * 20;
  t.ckpt.saved = t.ckpt.from = "step-" + std::to_string(t.ckpt.saved_step);
  t.ckpt.first_step = 1;
  t.ckpt.resume_step = t.ckpt.saved_step + 1;
  t.ckpt.resume_time = 0.5;
  t.ckpt.resume_end = "bound";
  return t;
}

// fast: a healthy 8-node run; otherwise n5 slow on its pairs and at 8 nodes,
// and the path "/slow" far below "/fast".
inline Report FixtureReport(bool fast, const std::string& odd_path = "/scratch/<b>x</b>&'\"") {
  Report r;
  r.tool_version = "0.1.0";
  r.created = "2026-12-04T03:00:00Z";
  r.job_id = "42";
  r.level = "quick";
  for (int i = 1; i <= 8; ++i) r.nodes.push_back("n" + std::to_string(i));
  r.storage_paths = {"/fast", fast ? "/fast2" : "/slow", odd_path};
  r.stages = {{"nodes", Verdict::kSkip, 3.2, 300, {}},
              {"collective", Verdict::kSkip, 12.5, 600, {}},
              {"storage", Verdict::kSkip, 8.1, 600, {}}};
  for (const auto& n : r.nodes) {
    r.node_checks[n] = "";
    r.curves.push_back(MakeCurve(1, 900e6, {n}));
  }
  std::vector<std::string> all = r.nodes;
  r.curves.push_back(MakeCurve(2, 100e6, {all.begin(), all.begin() + 2}));
  r.curves.push_back(MakeCurve(4, 98e6, {all.begin(), all.begin() + 4}));
  r.curves.push_back(MakeCurve(8, fast ? 97e6 : 20e6, all));
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string& a = all[i];
    const std::string& b = all[(i + 1) % all.size()];
    bool slow = !fast && (a == "n5" || b == "n5");
    r.pairs.push_back({a, b, slow ? 10e6 : 100e6, 0, true, "ok"});
  }
  const std::string second = fast ? "/fast2" : "/slow";
  r.storage.push_back(MakeStorage("/fast", "all nodes", "", 8 * 500e6));
  for (const auto& n : r.nodes) r.storage.push_back(MakeStorage("/fast", "all nodes", n, 500e6));
  r.storage.push_back(MakeStorage("/fast", "one node", "n1", 600e6));
  r.storage.push_back(MakeStorage(second, "one node", "n1", fast ? 590e6 : 20e6));
  r.storage.push_back(MakeStorage(odd_path, "one node", "n1", 550e6));
  // Training: 20 samples a node over 30 s; not fast, n5 at 4 steps/s
  // against the others' ~10.
  r.stages.push_back({"train", Verdict::kSkip, 31.0, 120, {}});
  r.train.command = "'/usr/share/doc/preflight/examples/train.sh' 1000000 0.05";
  r.train.seconds = 30;
  r.train.resume_seconds = 15;
  for (const auto& n : r.nodes) r.train.nodes.push_back(MakeTrain(n, !fast && n == "n5" ? 4 : 10 + (n.back() - '0') * 0.1));
  return r;
}

// Wide: 200 nodes with long names, every third failing its node checks with
// one long unbroken message, every other one below a storage threshold (a
// long hostlist in the finding), a long path and long notes: what must still
// fit the page (tests/golden/accept_html.sh).
inline Report WideReport() {
  Report r = FixtureReport(true);
  r.nodes.clear();
  r.node_checks.clear();
  r.curves.clear();
  r.pairs.clear();
  r.storage.clear();
  char name[64];
  for (int i = 1; i <= 200; ++i) {
    std::snprintf(name, sizeof name, "gpu-node-rack%02d-slot%04d", i / 20, i);
    r.nodes.push_back(name);
  }
  r.train.nodes.clear();
  for (const auto& n : r.nodes) r.train.nodes.push_back(MakeTrain(n, 10));
  const std::string path = "/lustre/project-with-a-long-name/acceptance/" + std::string(120, 'd') + "/scratch";
  r.storage_paths = {path};
  std::string unbroken = "exit 1: gpu.pcie: /sys/bus/pci/devices/0000:17:00.0/" + std::string(160, 'p') + "/current_link_width=x8";
  r.stages[0].notes.push_back("rails: " + r.nodes[3] + " differs from the other 199 node(s): " + std::string(150, 'r'));
  r.notes.push_back("--out holds other files: left alone; the report is in " + path + "/preflight-accept-" + std::string(80, 't'));
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const std::string& n = r.nodes[i];
    r.node_checks[n] = i % 3 == 0 ? unbroken : "";
    r.curves.push_back(MakeCurve(1, 900e6, {n}));
    r.pairs.push_back({n, r.nodes[(i + 1) % r.nodes.size()], 100e6, 0, true, "ok"});
    r.storage.push_back(MakeStorage(path, "all nodes", n, i % 2 ? 5e6 : 50e6));
  }
  for (int k : {2, 4, 8, 16, 32, 64, 128, 200})
    r.curves.push_back(MakeCurve(k, 100e6, {r.nodes.begin(), r.nodes.begin() + k}));
  r.curves.back().reproduce = "srun --mpi=pmix -N200 --nodelist=" + std::string(600, 'n') + " preflight-nccl --json";
  r.thresholds.seq_write = 10e6;
  return r;
}

}  // namespace preflight::accept::testing
