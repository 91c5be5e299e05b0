#pragma once
// The compute side of a decode row: how fast the model's own matmul kernels run on one core when
// their weights come from cache instead of DRAM. A row far below the memory roofline is then
// either waiting on memory the kernels could have used (pacer's loss) or held by the kernels'
// arithmetic on this CPU (a Zen 1 core's single 128-bit multiply pipe: TinyLlama Q4_0 decode at
// ~56 % of the DRAM roofline, its GEMV ~12-14 GB/s from L2). `pacer bench` quotes both.
//
// Each kind of decode matmul (weight type, layout, columns) is timed on a slice of its first
// matrix that stays in L2, with the kernel set the session runs and one packed activation row;
// the ceiling is 1 / sum over kinds of (bytes per token / rate), the matmuls alone (no
// attention, norms or sampling), on the calling thread. Rows of T threads quote T times it: the
// per-core rate, assuming cores that do not share their arithmetic (not SMT siblings).
#include <cstdint>
#include <string>
#include <vector>

#include "loader/weights.h"
#include "ops/kernel_set.h"

namespace pacer::runtime {

struct KernelRate {
  ops::WeightType type = ops::WeightType::F32;
  ops::WeightLayout layout = ops::WeightLayout::RowMajor;
  int64_t cols = 0;
  int64_t matrices = 0;         // of this kind per token
  int64_t bytes_per_token = 0;  // theirs
  int64_t slice_bytes = 0;      // the slice timed
  double gbs = 0;               // its best pass, one core
};

struct KernelCeiling {
  std::vector<KernelRate> kinds;  // largest share of the bytes first
  double core_tok_s = 0;          // kernel_ceiling_tok_s(kinds)
  std::string method;             // how it was measured, for the bench footer
};

// 1 / sum over kinds of bytes_per_token / (gbs * 1e9): tokens per second if the matmuls ran at
// those rates one after the other; 0 when a kind has no rate.
double kernel_ceiling_tok_s(const std::vector<KernelRate>& kinds) noexcept;

struct KernelCeilingOptions {
  int64_t slice_bytes = 192 << 10;  // per kind, at least one 16-row group
  int passes = 5;                   // best of
  double pass_s = 0.004;            // calls per pass: enough for this long
};

// Times every kind of the decode matmuls of `w` (each layer's q, k, v, o, gate, up, down and the
// output matrix) with `kernels` on the calling thread.
KernelCeiling measure_kernel_ceiling(const loader::Weights& w, const ops::KernelSet& kernels,
                                     const KernelCeilingOptions& opts = {});

}  // namespace pacer::runtime
