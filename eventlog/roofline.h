#pragma once
// The decode roofline, the one place its formula lives: `pacer bench` (runtime) holds its tg rows
// against it, and the report (analysis) a recorded run's decode, from the same figures (the
// header's bandwidth_gbs and fma_gflops, the ops' weight_bytes, kv_bytes and attention_flops).
#include <algorithm>
#include <cstdint>

namespace pacer::eventlog {

// A decode token's ceiling (tokens/s) as the roofline of its ops in turn: the matmuls stream
// weight_bytes at bandwidth_gbs, and attention takes the longer of kv_bytes at bandwidth_gbs and
// attention_flops (fp32) at fma_gflops (1e9 flops/s; <= 0: bandwidth alone). On one AVX2 Zen 4
// core (~89 GFLOP/s, ~30 GB/s) a GQA-8 F16 cache's 8 flops a byte take 2.4x its bytes' time, so
// at depth a bandwidth-only ceiling is one no kernel running the ops one after another reaches.
// 0 for a bandwidth <= 0 or no bytes and flops at all.
inline double decode_ceiling_tok_s(double bandwidth_gbs, int64_t weight_bytes, int64_t kv_bytes,
                                   int64_t attention_flops, double fma_gflops) {
  if (bandwidth_gbs <= 0) return 0;
  const double bytes_s = bandwidth_gbs * 1e9;
  double attention_s = static_cast<double>(kv_bytes) / bytes_s;
  if (fma_gflops > 0) {
    attention_s = std::max(attention_s, static_cast<double>(attention_flops) / (fma_gflops * 1e9));
  }
  const double token_s = static_cast<double>(weight_bytes) / bytes_s + attention_s;
  return token_s > 0 ? 1.0 / token_s : 0;
}

}  // namespace pacer::eventlog
