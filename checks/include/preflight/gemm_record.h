// gpu.gemm across an allocation: each node's soak figures, recorded by the
// check in <state_dir>/nodes/<node>.gemm.json (one JSON line, the last soak
// only), and their comparison across the nodes of one job (issue 33, item 3:
// "TFLOPS ... against the node's and the allocation's median").
//
// The node check (gemm.h) judges each GPU against its profile and its own
// node's median; only the allocation sees a node whose GPUs are all slow
// alike (a node-wide power cap, a slow driver) or all wrong alike. The
// --nccl-check batch step, which runs after every node's prolog, reads the
// records of its nodes (carried by the collective step,
// collective_node_records.h, else a user step) and names in the job output
// each GPU below kGemmStragglerFraction of the allocation's median and each
// GPU whose output hash differs from the allocation's majority. Like the
// versions comparison it runs as the job's user: it informs, it drains
// nothing (the node check that drains is the prolog's gpu.gemm).
//
// The hash comparison holds across nodes too: the inputs are small
// integers, so every correct GPU, whatever cuBLAS algorithm it picked, gets
// the same exact product of the same gemm_size (records of other sizes are
// compared only with their own).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "preflight/config.h"
#include "preflight/status.h"

namespace preflight {

// The record's suffix under <state_dir>/nodes (as state_paths.h's kVersions).
inline constexpr const char* kGemmRecordSuffix = ".gemm.json";

struct NodeGemm {
  std::string node;
  std::string job;        // the job whose prolog (or epilog) ran the soak
  double at = 0;          // unix time recorded
  std::string gpu_model;  // the NVML name ("" without NVML)
  uint64_t size = 0;      // gemm_size
  struct Gpu {
    int gpu = 0;
    double tflops = 0;
    std::string hash;     // 16 hex digits; "" when the soak failed on this GPU
  };
  std::vector<Gpu> gpus;  // the GPUs whose soak failed are left out
};

std::string GemmRecordJson(const NodeGemm& g);                     // one line
Expected<NodeGemm> ParseGemmRecordJson(const std::string& line);   // one line
// <state_dir>/nodes/<node>.gemm.json, written atomically (replacing the last).
Status WriteGemmRecord(const Config& cfg, const NodeGemm& g);

struct GemmAcross {
  bool consistent = true;
  size_t nodes = 0;                // this job's records compared
  std::vector<std::string> odd;    // "n2 GPU3", each once, in node order
  std::string text;                // one line per finding, or a summary line; "" when nothing to compare
};
// The records of `job` (others are another job's soak, left out), per
// (gpu_model, size) group of 2+ nodes: each GPU below kGemmStragglerFraction
// of the group's median TFLOPS, and each GPU whose hash differs from the
// hash more than half of the group's GPUs got, is named; with no strict
// majority of hashes every hash is listed.
GemmAcross CompareGemm(const std::vector<NodeGemm>& nodes, const std::string& job);

}  // namespace preflight
