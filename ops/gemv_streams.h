#pragma once
// Row order of the GEMV kernels (internal to ops/, no ISA code).
//
// A GEMV kernel dots a tile of R rows at a time (sharing the activation loads). If those are R
// neighbouring rows, a tile of ~1 KiB rows reads R interleaved streams inside one or two 4 KiB
// pages, which the L2 streamer does not follow, and one core then pulls ~60 % of a plain read
// stream from DRAM. So the tile takes its rows from R far-apart stretches of the matrix instead,
// row j of each stretch in tile j: R sequential streams, each in its own pages. Each row gets
// exactly the same arithmetic, only the order changes (151936x896 Q8_0 on one Sapphire Rapids
// core: ~14 -> ~9 ms).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ops/isa.h"
#include "ops/types.h"

namespace pacer::ops {

// Which software-prefetch rule a weight type's GEMV follows (isa.h gemv_software_prefetch).
constexpr GemvKernelClass gemv_kernel_class(WeightType t) noexcept {
  return t == WeightType::Q8_0 || t == WeightType::F16 || t == WeightType::BF16 ||
                 t == WeightType::F32
             ? GemvKernelClass::Streaming
             : GemvKernelClass::Unpacking;
}

// A stretch must hold at least this many rows for the stream order to be used.
constexpr int64_t kGemvStreamMinRows = 4;
// The same for the 16-row interleaved GEMVs, in groups: one. A group is 8-100 KiB (TinyLlama's
// Q4_K rows of 2048: 18 KiB), so even a stretch of one spans pages of its own, and a worker's
// share of 4-15 groups -- 2048 rows on 8-32 threads, or any Qwen2.5-0.5B matrix from 4 threads on
// -- is read as S streams instead of one. One Sapphire Rapids core (dev VM), back-to-back cold Q4_K
// calls of 8 groups of 2048 columns: 11.9 -> 13.6 GB/s at 1 thread, 19.1 -> 21.5 at 2 (4 groups
// a call at 2 threads: 19.8 -> 21.5), where a stretch of 4 left such calls one stream.
constexpr int64_t kX16StreamMinGroups = 1;
// Kernels that prefetch by row prefetch the same bytes this many rows further on in a stream.
constexpr int64_t kGemvStreamPrefetchRows = 2;

// Brings [p, p + bytes) into L1 ahead of use (a software prefetch of each 64-byte line), for the
// GEMVs whose streams the hardware prefetchers alone keep too few lines of in flight
// (gemv_software_prefetch() in isa.h says where).
inline void prefetch_lines(const std::byte* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) __builtin_prefetch(p + line, 0, 3);
}

// Part `part` of `parts` of prefetch_lines(p, bytes): the lines [part n / parts, (part + 1) n /
// parts) of its n, so that a kernel can spread one block's prefetch over the steps that read the
// block before (a part before each). A burst of a whole K-quant super-block's lines (36-53) at
// once cost one Zen 1 core 27-35 % of its decode, where the same lines 1-3 a step gained 3-16 %
// (ops/isa.h, the Zen 1 row of x16_gemv_plan).
struct LineRange {
  int64_t first = 0, end = 0;  // 64-byte lines [first, end) from p
};
constexpr LineRange prefetch_part_lines(int64_t bytes, int part, int parts) noexcept {
  const int64_t lines = (bytes + 63) / 64;
  return {part * lines / parts, (part + 1) * lines / parts};
}
inline void prefetch_part(const std::byte* p, int64_t bytes, int part, int parts) {
  const LineRange r = prefetch_part_lines(bytes, part, parts);
  for (int64_t line = r.first; line < r.end; ++line) __builtin_prefetch(p + 64 * line, 0, 3);
}

// The x16_gemv_plan() entry of a 16-row interleaved GEMV's weight type. Q4_1, Q5_0, Q5_1 and
// IQ4_NL take Q4_0's: the same pairs of 32-element blocks, unpacked; Q2_K, Q3_K and IQ4_XS take
// Q6_K's, whose loop they run. (Not tuned apart: on the Zen 5 dev VM, whole-model variants of the
// plan for Qwen2.5-0.5B Q5_K_M moved with the host's probe more than between themselves; Q5_0
// alone without prefetch in its Q4_K_M file, 0.91-1.04x; TinyLlama IQ4_XS on 2 streams without the
// touch, 0.94-1.00x at 1 thread.)
constexpr X16Gemv x16_gemv_kind(WeightType t) noexcept {
  switch (t) {
    case WeightType::Q8_0:
      return X16Gemv::Q8_0;
    case WeightType::Q4_K:
      return X16Gemv::Q4_K;
    case WeightType::Q5_K:
      return X16Gemv::Q5_K;
    case WeightType::Q6_K:
    case WeightType::Q3_K:    // the same pairs of super-blocks and triples, unpacked
    case WeightType::IQ4_XS:  // the same loop (interleaved_kquant_loops_avx512.h)
    case WeightType::Q2_K:
      return X16Gemv::Q6_K;
    case WeightType::F16:
      return X16Gemv::F16;
    case WeightType::BF16:
      return X16Gemv::BF16;
    default:
      return X16Gemv::Q4_0;
  }
}

// Whether the AVX2 16-row GEMV of t prefetches as its kind's plan says (x16_gemv_plan(): the
// 32-element block types, Q4_K, Q5_K and Q6_K, whose plan differs from the class rule on Zen 1)
// or by the class rule (gemv_software_prefetch(): Q2_K, Q3_K, IQ4_XS, which prefetch a whole
// super-block at once; on Zen 1 their prefetch spread over the steps decoded 0.90-1.01x, so it
// stays off there with the rule).
constexpr bool avx2_gemv_follows_plan_prefetch(WeightType t) noexcept {
  return t != WeightType::Q2_K && t != WeightType::Q3_K && t != WeightType::IQ4_XS;
}

// Loads one byte of each 64-byte line of [p, p + bytes), in address order, here (volatile: the
// compiler keeps them where and as they are written). For a kernel whose own reads of a block
// jump about it (a row-half pass then the other, sets of lines 3 apart): one Zen 4 core's
// hardware prefetchers follow a stream read in strictly ascending order and lose it otherwise,
// and touching the block in order first leaves the kernel's own reads to L1 (the AVX2 Q6_K GEMV's
// two row-half passes, cold 1.7x; since session 43 it reads whole lines in one pass and needs no
// touch). Where a kernel already reads in order the touches only cost (13-17 % on Zen 4); the
// callers say where they pay.
inline void load_lines_in_order(const std::byte* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) {
    (void)*reinterpret_cast<const volatile unsigned char*>(p + line);
  }
}

// Calls page(start) for each 4 KiB page start in (a - step, a]: the pages the point a entered in
// its last step. Over a stream's steps every page start is passed exactly once, in order.
template <class Page>
inline void for_pages_entered(uintptr_t a, uintptr_t step, Page&& page) {
  for (uintptr_t p = (a - step + 4096) & ~uintptr_t{4095}; p <= a; p += 4096) page(p);
}

// A stream's page touch (X16GemvPlan::page_touch, isa.h): after a step of `step` bytes that left
// the stream at `pos`, loads the first line of each 4 KiB page that the point `distance` bytes
// ahead entered during the step (a prefetch: it never faults, past the matrix included). The
// first line, not the line at the crossing: on the Zen 5 VM the latter gained a third as much.
inline void touch_pages_ahead(const std::byte* pos, int64_t step, int64_t distance) {
  for_pages_entered(reinterpret_cast<uintptr_t>(pos) + static_cast<uintptr_t>(distance),
                    static_cast<uintptr_t>(step), [](uintptr_t p) {
                      __builtin_prefetch(reinterpret_cast<const void*>(p), 0, 3);
                    });
}

// For GEMVs of nr rows in tiles of `rows_per_tile`: calls tile(j, per_stream) for j in
// [0, per_stream), where the tile's rows are j, j + per_stream, j + 2 per_stream, ... (row step
// per_stream, outputs likewise). Returns the first row it did not cover (0 when nr is too small
// for streams of min_rows rows); the caller runs rows [returned, nr) in its usual
// neighbouring-row order.
template <class Tile>
int64_t gemv_stream_tiles(int64_t nr, int64_t rows_per_tile, Tile&& tile,
                          int64_t min_rows = kGemvStreamMinRows) {
  if (nr < min_rows * rows_per_tile) return 0;
  const int64_t per_stream = nr / rows_per_tile;
  for (int64_t j = 0; j < per_stream; ++j) tile(j, per_stream);
  return rows_per_tile * per_stream;
}

// The same for kernels that take a table of row pointers and output pointers (R of each): fills
// rows[i] / outs[i] with tile j's rows of a row-major matrix at w (row stride `stride` bytes) and
// their outputs in out, then calls tile(). Returns the first row not covered, as above.
template <int R, class Tile>
int64_t gemv_stream_row_tables(const std::byte* w, int64_t stride, int64_t nr, float* out,
                               const std::byte** rows, float** outs, Tile&& tile) {
  return gemv_stream_tiles(nr, R, [&](int64_t j, int64_t per_stream) {
    for (int i = 0; i < R; ++i) {
      rows[i] = w + (i * per_stream + j) * stride;
      outs[i] = out + i * per_stream + j;
    }
    tile();
  });
}

// The GEMV loop of the 16-row interleaved layouts (interleaved.h): groups (group_bytes each, 16
// outputs each) from S far-apart stretches at a time, then the rest one at a time:
// run(std::integral_constant<int, K>{}, group, outs) with K = S or 1 and group[k] / outs[k] the
// K groups and their 16 outputs.
template <int S, class Run>
void x16_gemv_stream_groups(const std::byte* groups, int64_t n_groups, int64_t group_bytes,
                            float* out, const Run& run) {
  constexpr int64_t kRows = 16;
  const std::byte* group[S];
  float* outs[S];
  const int64_t g0 = gemv_stream_tiles(
      n_groups, S,
      [&](int64_t j, int64_t per_stream) {
        for (int s = 0; s < S; ++s) {
          group[s] = groups + (s * per_stream + j) * group_bytes;
          outs[s] = out + (s * per_stream + j) * kRows;
        }
        run(std::integral_constant<int, S>{}, group, outs);
      },
      kX16StreamMinGroups);
  for (int64_t g = g0; g < n_groups; ++g) {
    group[0] = groups + g * group_bytes;
    outs[0] = out + g * kRows;
    run(std::integral_constant<int, 1>{}, group, outs);
  }
}

// x16_gemv_stream_groups with S = `streams` (1, 2 or 4: X16GemvPlan::streams in isa.h) chosen at
// run time.
template <class Run>
void x16_gemv_stream_groups(int streams, const std::byte* groups, int64_t n_groups,
                            int64_t group_bytes, float* out, const Run& run) {
  if (streams == 1) {
    x16_gemv_stream_groups<1>(groups, n_groups, group_bytes, out, run);
  } else if (streams == 2) {
    x16_gemv_stream_groups<2>(groups, n_groups, group_bytes, out, run);
  } else {
    x16_gemv_stream_groups<4>(groups, n_groups, group_bytes, out, run);
  }
}

// The GEMM loop of the K-quant interleaved layouts: every group against the tokens, four at a
// time, then one at a time: run(std::integral_constant<int, T>{}, group, acts, out) with acts[t]
// token t's activation row and out the first token's 16 outputs (token stride out_stride).
template <class Run>
void x16_gemm_token_quads(const std::byte* groups, int64_t n_groups, int64_t group_bytes,
                          const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                          int64_t out_stride, const Run& run) {
  for (int64_t g = 0; g < n_groups; ++g) {
    const std::byte* grp = groups + g * group_bytes;
    const std::byte* acts[4];
    int64_t t = 0;
    for (; t + 4 <= nt; t += 4) {
      for (int k = 0; k < 4; ++k) acts[k] = act + (t + k) * act_stride;
      run(std::integral_constant<int, 4>{}, grp, acts, out + t * out_stride + g * 16);
    }
    for (; t < nt; ++t) {
      acts[0] = act + t * act_stride;
      run(std::integral_constant<int, 1>{}, grp, acts, out + t * out_stride + g * 16);
    }
  }
}

}  // namespace pacer::ops
