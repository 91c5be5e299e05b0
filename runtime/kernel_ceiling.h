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
// attention, norms or sampling). A bench row's is measured on the row's own workers (its threads
// on its CPUs), every worker running the same slice out of its own L2 at once: SMT siblings that
// share a core's multiply pipes, or cores that share a clock budget, show there. (Until session
// 58 a row of T threads quoted T times one core's rate. On the 2-vCPU Zen 1 guest the two threads
// together read 27.6 GB/s where one read 13.9 (Q4_0 x16 from L2): the same there, not so where
// threads share a core.)
#include <cstdint>
#include <string>
#include <vector>

#include "loader/weights.h"
#include "ops/kernel_set.h"
#include "ops/parallel.h"

namespace pacer::runtime {

struct KernelRate {
  ops::WeightType type = ops::WeightType::F32;
  ops::WeightLayout layout = ops::WeightLayout::RowMajor;
  int64_t cols = 0;
  int64_t matrices = 0;         // of this kind per token
  int64_t bytes_per_token = 0;  // theirs
  int64_t slice_bytes = 0;      // the slice timed (by each worker)
  double gbs = 0;               // its best pass, all the workers together
};

struct KernelCeiling {
  std::vector<KernelRate> kinds;  // largest share of the bytes first
  int workers = 1;                // that ran each slice at once
  double tok_s = 0;               // kernel_ceiling_tok_s(kinds)
  std::string method;             // how it was measured, for the bench footer
};

// 1 / sum over kinds of bytes_per_token / (gbs * 1e9): tokens per second if the matmuls ran at
// those rates one after the other; 0 when a kind has no rate.
double kernel_ceiling_tok_s(const std::vector<KernelRate>& kinds) noexcept;

struct KernelCeilingOptions {
  int64_t slice_bytes = 192 << 10;  // per kind, at least one 16-row group
  int passes = 5;                   // best of
  double pass_s = 0.004;            // calls per pass (on the calling thread): enough for this long
  // Runs each pass on every worker at once (a session's executor); null: the calling thread.
  const ops::Parallel* workers = nullptr;
  std::string placement;  // how `workers` sit ("2 threads on CPUs 0,1"), for the method
};

// Times every kind of the decode matmuls of `w` (each layer's q, k, v, o, gate, up, down and the
// output matrix) with `kernels`, on opts.workers or the calling thread.
KernelCeiling measure_kernel_ceiling(const loader::Weights& w, const ops::KernelSet& kernels,
                                     const KernelCeilingOptions& opts = {});

}  // namespace pacer::runtime
