// The idle workers' prefetch of the next matmul (ops::PrefetchPlan, ChunkPrefetcher,
// matmul_prefetch_plan): each chunk walks exactly the bytes its kernel calls will read, in the
// order the x16 GEMV loop reads its groups, and stops at its byte budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/matmul_rows.h"
#include "ops/parallel.h"

namespace pacer::ops {
namespace {

// Every line the prefetcher would ask for, as byte offsets from `base`.
std::vector<int64_t> walk(ChunkPrefetcher p, const std::byte* base) {
  std::vector<int64_t> out;
  for (const std::byte* line = p.next_line(); line != nullptr; line = p.next_line()) {
    out.push_back(line - base);
    p.advance();
  }
  return out;
}

// A fake address range: the prefetcher only computes addresses (the walk never dereferences).
alignas(64) std::byte g_arena[1 << 19];

TEST(ChunkPrefetcher, StretchOrderByHand) {
  // 10 groups of 2 lines, 4 streams: 2 groups a stretch, stretches at groups 0, 2, 4, 6, read
  // j-th group of each in turn (0 2 4 6, then 1 3 5 7), then groups 8 and 9 one at a time.
  PrefetchPlan plan;
  plan.total_units = 160;
  plan.align = 16;
  plan.n_segments = 1;
  plan.segments[0] = {g_arena, 160, 16, 128, 4};
  const std::vector<int64_t> expect = {0,   64,  256, 320, 512, 576, 768,  832,  128,  192,
                                       384, 448, 640, 704, 896, 960, 1024, 1088, 1152, 1216};
  EXPECT_EQ(walk(ChunkPrefetcher(plan, 1, 0, 1 << 20), g_arena), expect);
  // The budget cuts the same order short: 5 lines.
  EXPECT_EQ(walk(ChunkPrefetcher(plan, 1, 0, 5 * 64), g_arena),
            std::vector<int64_t>(expect.begin(), expect.begin() + 5));
  // step() reports the end.
  ChunkPrefetcher p(plan, 1, 0, 1 << 20);
  EXPECT_TRUE(p.step(19));
  EXPECT_FALSE(p.step(2));
  EXPECT_EQ(p.next_line(), nullptr);
}

TEST(ChunkPrefetcher, GroupOrderIsTheGemvLoops) {
  // The order x16_gemv_stream_groups (the kernels' loop) visits groups in, for 1-40 groups and
  // 2 or 4 streams, group_bytes of one line so each line is one group.
  for (int streams : {2, 4}) {
    for (int64_t n_groups = 1; n_groups <= 40; ++n_groups) {
      std::vector<int64_t> kernel;
      auto record = [&](auto k, const std::byte* const* group, float* const*) {
        for (int s = 0; s < decltype(k)::value; ++s) kernel.push_back((group[s] - g_arena) / 64);
      };
      std::vector<float> out(static_cast<size_t>(n_groups * 16));
      x16_gemv_stream_groups(streams, g_arena, n_groups, 64, out.data(), record);
      PrefetchPlan plan;
      plan.total_units = n_groups * 16;
      plan.align = 16;
      plan.n_segments = 1;
      plan.segments[0] = {g_arena, n_groups * 16, 16, 64, streams};
      std::vector<int64_t> pf = walk(ChunkPrefetcher(plan, 1, 0, 1 << 20), g_arena);
      for (int64_t& v : pf) v /= 64;
      EXPECT_EQ(pf, kernel) << n_groups << " groups, " << streams << " streams";
    }
  }
}

TEST(ChunkPrefetcher, ChunksOfAFusedMatmulCoverTheirRowsBytes) {
  // Q (x16 Q4_K, 256 rows), K (x16 Q6_K, 32 rows) and V (row-major Q8_0, 48 rows of 544 bytes,
  // not line-aligned) as matmul() fuses them: over 1-5 workers, the cache lines each chunk walks
  // are exactly those holding row_byte_range of the rows its share of the StreamPartition runs
  // (the bytes its kernels read), and the x16 lines come once each.
  const int64_t cols = 512;
  std::vector<WeightMatrix> ws(3);
  ws[0] = {WeightType::Q4_K, g_arena, 256, cols, WeightLayout::Interleaved16};
  ws[1] = {WeightType::Q6_K, g_arena + (1 << 17), 32, cols, WeightLayout::Interleaved16};
  ws[2] = {WeightType::Q8_0, g_arena + (1 << 18) + 8, 48, cols, WeightLayout::RowMajor};
  const PrefetchPlan plan = matmul_prefetch_plan(ws, KernelSet::for_isa(detect_isa()));
  const StreamPartition part(ws);
  ASSERT_EQ(plan.total_units, part.total_units());
  ASSERT_EQ(plan.align, part.align());
  ASSERT_EQ(plan.n_segments, 3);
  for (int workers = 1; workers <= 5; ++workers) {
    std::set<int64_t> seen, expect;  // line indices
    int64_t x16_lines = 0;
    std::set<int64_t> x16_seen;
    for (int c = 0; c < workers; ++c) {
      const auto [b, e] = static_chunk(part.total_units(), part.align(), workers, c);
      for (size_t i = 0; i < ws.size(); ++i) {
        const auto [rb, re] = part.rows(i, b, e);
        if (rb >= re) continue;
        const auto [lo, hi] = row_byte_range(ws[i], rb, re);
        const int64_t at = ws[i].data - g_arena;
        for (int64_t line = (at + lo) / 64; line <= (at + hi - 1) / 64; ++line) expect.insert(line);
      }
      for (int64_t v : walk(ChunkPrefetcher(plan, workers, c, 1 << 20), g_arena)) {
        EXPECT_EQ(v % 64, 0);
        seen.insert(v / 64);
        if (v < (1 << 18)) {
          ++x16_lines;
          x16_seen.insert(v / 64);
        }
      }
    }
    EXPECT_EQ(seen, expect) << workers << " workers";
    EXPECT_EQ(static_cast<int64_t>(x16_seen.size()), x16_lines) << workers << " workers";
  }
}

// The same three matrices split by hand: blocks of 16 rows cost 4608 (Q4_K group: 2 super-blocks
// of 16 x 144), 6720 (Q6_K: one pair, 16 x 2 x 210) and 8704 bytes (16 Q8_0 rows of 544), over
// their divisor 64: 72, 105 and 136 units, 16 + 2 + 3 blocks = 1770 units, cut at multiples of 72.
// 2 workers: 25 cuts, 13 and 12; the first share [0, 936) holds Q4_K blocks 0-12 (59904 bytes),
// the second the rest (53376 bytes). Split by rows (176 and 160) they held 50688 and 62592.
TEST(StreamPartition, MixedTypesSplitByTheirBytesByHand) {
  std::vector<WeightMatrix> ws(3);
  ws[0] = {WeightType::Q4_K, g_arena, 256, 512, WeightLayout::Interleaved16};
  ws[1] = {WeightType::Q6_K, g_arena, 32, 512, WeightLayout::Interleaved16};
  ws[2] = {WeightType::Q8_0, g_arena, 48, 512, WeightLayout::RowMajor};
  const StreamPartition part(ws);
  EXPECT_EQ(part.block_units(0), 72);
  EXPECT_EQ(part.block_units(1), 105);
  EXPECT_EQ(part.block_units(2), 136);
  EXPECT_EQ(part.total_units(), 1770);
  EXPECT_EQ(part.align(), 72);
  const auto [b0, e0] = static_chunk(part.total_units(), part.align(), 2, 0);
  const auto [b1, e1] = static_chunk(part.total_units(), part.align(), 2, 1);
  EXPECT_EQ(b0, 0);
  EXPECT_EQ(e0, 936);
  EXPECT_EQ(b1, 936);
  EXPECT_EQ(e1, 1770);
  using Rows = std::pair<int64_t, int64_t>;
  EXPECT_EQ(part.rows(0, b0, e0), Rows(0, 208));
  EXPECT_EQ(part.rows(1, b0, e0), Rows(0, 0));
  EXPECT_EQ(part.rows(2, b0, e0), Rows(0, 0));
  EXPECT_EQ(part.rows(0, b1, e1), Rows(208, 256));
  EXPECT_EQ(part.rows(1, b1, e1), Rows(0, 32));
  EXPECT_EQ(part.rows(2, b1, e1), Rows(0, 48));
}

// Over 1-16 workers and fused sets of one or mixed types (a short last block included): every
// row runs in exactly one share, and no share holds more bytes than the mean plus its largest
// block (the one starting last in it) plus the cuts' rounding (at most two cheapest blocks). With
// one type the shares are the row split matmul() used before bytes: static_chunk(total rows, 16,
// workers, c).
TEST(StreamPartition, EveryRowOnceAndSharesWithinABlockOfTheMean) {
  const std::vector<std::vector<WeightMatrix>> sets = {
      {{WeightType::Q4_K, g_arena, 2048, 2048, WeightLayout::Interleaved16},
       {WeightType::Q4_K, g_arena, 256, 2048, WeightLayout::Interleaved16},
       {WeightType::Q6_K, g_arena, 256, 2048, WeightLayout::Interleaved16}},
      {{WeightType::Q2_K, g_arena, 2048, 2048, WeightLayout::Interleaved16},
       {WeightType::Q2_K, g_arena, 256, 2048, WeightLayout::Interleaved16},
       {WeightType::Q4_K, g_arena, 256, 2048, WeightLayout::Interleaved16}},
      {{WeightType::Q8_0, g_arena, 100, 256, WeightLayout::RowMajor},
       {WeightType::F16, g_arena, 40, 256, WeightLayout::RowMajor}},
      {{WeightType::Q4_0, g_arena, 5632, 2048, WeightLayout::Interleaved16},
       {WeightType::Q4_0, g_arena, 5632, 2048, WeightLayout::Interleaved16}},
  };
  for (size_t si = 0; si < sets.size(); ++si) {
    const auto& ws = sets[si];
    const StreamPartition part(ws);
    const bool one_type = ws.front().type == ws.back().type && ws.size() == 2;
    int64_t total_rows = 0, total_bytes = 0, largest = 0, cheapest = INT64_MAX;
    for (const WeightMatrix& w : ws) {
      total_rows += w.rows;
      total_bytes += row_byte_range(w, 0, w.rows).second;
      const int64_t block = row_byte_range(w, 0, 16).second;
      largest = std::max(largest, block);
      cheapest = std::min(cheapest, block);
    }
    for (int workers = 1; workers <= 16; ++workers) {
      std::vector<std::vector<int>> runs(ws.size());
      for (size_t i = 0; i < ws.size(); ++i) runs[i].assign(static_cast<size_t>(ws[i].rows), 0);
      for (int c = 0; c < workers; ++c) {
        const auto [b, e] = static_chunk(part.total_units(), part.align(), workers, c);
        int64_t bytes = 0, first = 0;
        for (size_t i = 0; i < ws.size(); ++i) {
          const auto [rb, re] = part.rows(i, b, e);
          for (int64_t r = rb; r < re; ++r) ++runs[i][static_cast<size_t>(r)];
          if (rb < re) {
            const auto [lo, hi] = row_byte_range(ws[i], rb, re);
            bytes += hi - lo;
          }
          if (one_type) {
            const auto [ob, oe] = static_chunk(total_rows, 16, workers, c);
            EXPECT_EQ(rb, std::clamp(ob - first, int64_t{0}, ws[i].rows)) << si << " " << c;
            EXPECT_EQ(re, std::clamp(oe - first, int64_t{0}, ws[i].rows)) << si << " " << c;
          }
          first += ws[i].rows;
        }
        EXPECT_LE(bytes, total_bytes / workers + largest + 2 * cheapest)
            << "set " << si << ", " << workers << " workers, share " << c;
      }
      for (size_t i = 0; i < ws.size(); ++i) {
        for (int v : runs[i]) ASSERT_EQ(v, 1) << "set " << si << ", " << workers << " workers";
      }
    }
  }
}

// The plan walks an x16 matrix in as many stretches as the GEMV the kernel set runs reads:
// the scalar reference 1, the AVX2 quant GEMVs 2, the VNNI ones and the AVX2 and AVX-512 float
// ones this CPU's x16_gemv_plan(); a row-major matrix 1.
TEST(ChunkPrefetcher, PlanStreamsFollowTheKernelSetsGemv) {
  const WeightMatrix q4{WeightType::Q4_0, g_arena, 256, 512, WeightLayout::Interleaved16};
  const WeightMatrix f16{WeightType::F16, g_arena, 256, 512, WeightLayout::Interleaved16};
  const WeightMatrix rows{WeightType::Q4_0, g_arena, 256, 512, WeightLayout::RowMajor};
  auto streams = [](const WeightMatrix& w, Isa isa) {
    return matmul_prefetch_plan(std::span(&w, 1), KernelSet::for_isa(isa)).segments[0].streams;
  };
  EXPECT_EQ(streams(q4, Isa::Scalar), 1);
  EXPECT_EQ(streams(f16, Isa::Scalar), 1);
  EXPECT_EQ(streams(rows, Isa::Scalar), 1);
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 here";
  EXPECT_EQ(streams(q4, Isa::Avx2), kX16Avx2GemvStreams);
  EXPECT_EQ(streams(f16, Isa::Avx2), x16_gemv_plan(X16Gemv::F16).streams);
  if (!isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 here";
  EXPECT_EQ(streams(f16, Isa::Avx512), x16_gemv_plan(X16Gemv::F16).streams);
  EXPECT_EQ(streams(rows, Isa::Avx512), 1);
  EXPECT_EQ(streams(q4, Isa::Avx512), detect_cpu_features().avx512_vnni
                                          ? x16_gemv_plan(X16Gemv::Q4_0).streams
                                          : kX16Avx2GemvStreams);
}

TEST(ChunkPrefetcher, NothingForAnEmptyPlanOrAnotherWorkersSlot) {
  PrefetchPlan plan;
  EXPECT_EQ(ChunkPrefetcher(plan, 4, 1, 1 << 20).next_line(), nullptr);
  plan.total_units = 32;
  plan.align = 16;
  plan.n_segments = 1;
  plan.segments[0] = {g_arena, 32, 16, 64, 4};
  EXPECT_EQ(ChunkPrefetcher(plan, 4, 2, 1 << 20).next_line(), nullptr);  // 2 chunks of 4 are empty
  EXPECT_EQ(ChunkPrefetcher(plan, 4, 4, 1 << 20).next_line(), nullptr);  // no such slot
  EXPECT_EQ(ChunkPrefetcher(plan, 4, 1, 0).next_line(), nullptr);        // no budget
  EXPECT_EQ(ChunkPrefetcher(plan, 4, 1, 1 << 20).next_line(), g_arena + 64);
}

// The page touch (gemv_streams.h for_pages_entered): a stream stepping from an unaligned start
// passes each 4 KiB page start ahead of it once, in order, whatever its step: Q4_0's half pair
// (288 B), Q4_K's super-block (2304 B), Q6_K's block (3360 B), an F16 step (256 B), a page, and a
// step longer than a page.
TEST(PageTouch, EveryPageStartAheadOnceAndInOrder) {
  constexpr uintptr_t kDistance = 8192;
  for (const uintptr_t start : {uintptr_t{0x10000}, uintptr_t{0x10000 + 1000}}) {
    for (const uintptr_t step : {256u, 288u, 2304u, 3360u, 4096u, 9000u}) {
      std::vector<uintptr_t> got;
      uintptr_t last = 0;
      for (uintptr_t pos = start; pos < start + 100 * 4096; pos += step) {
        for_pages_entered(pos + kDistance, step, [&](uintptr_t p) { got.push_back(p); });
        last = pos;
      }
      // Every multiple of 4096 in (start + kDistance - step, last + kDistance], counted one by
      // one.
      std::vector<uintptr_t> want;
      for (uintptr_t p = 0; p <= last + kDistance; p += 4096) {
        if (p > start + kDistance - step) want.push_back(p);
      }
      EXPECT_EQ(got, want) << "start " << start << ", step " << step;
      EXPECT_GE(want.size(), 100u) << "start " << start << ", step " << step;
    }
  }
}

// A block's prefetch spread over a kernel's steps (prefetch_part): the parts ask for each line
// prefetch_lines(p, bytes) asks for exactly once, in address order, and split the lines as
// evenly as integers allow. By hand: Q4_K's 2304-byte super-block of 16 rows is 36 lines, 9 a
// quarter; half a Q6_K pair (3360 bytes) 52.5, so 53 lines: 13, 13, 13, 14.
TEST(PrefetchPart, PartsTileTheBlocksLinesOnceAndEvenly) {
  EXPECT_EQ(prefetch_part_lines(2304, 0, 4).first, 0);
  EXPECT_EQ(prefetch_part_lines(2304, 0, 4).end, 9);
  EXPECT_EQ(prefetch_part_lines(2304, 3, 4).first, 27);
  EXPECT_EQ(prefetch_part_lines(2304, 3, 4).end, 36);
  const int64_t half_q6 = 3360;
  int64_t sizes[4];
  for (int i = 0; i < 4; ++i) {
    sizes[i] = prefetch_part_lines(half_q6, i, 4).end - prefetch_part_lines(half_q6, i, 4).first;
  }
  EXPECT_EQ(std::vector<int64_t>(sizes, sizes + 4), (std::vector<int64_t>{13, 13, 13, 14}));
  for (int64_t bytes : {1, 63, 64, 65, 576, 2304, 2816, 3360, 6720, 100000}) {
    for (int parts : {1, 2, 3, 4, 7, 8, 16, 32}) {  // Q5_K 16 parts, Q6_K 32
      SCOPED_TRACE(bytes);
      SCOPED_TRACE(parts);
      const int64_t lines = (bytes + 63) / 64;  // prefetch_lines: offsets 0, 64, .. < bytes
      int64_t next = 0;
      for (int part = 0; part < parts; ++part) {
        const LineRange r = prefetch_part_lines(bytes, part, parts);
        EXPECT_EQ(r.first, next);
        EXPECT_GE(r.end, r.first);
        EXPECT_LE(r.end - r.first, lines / parts + 1);
        EXPECT_GE(r.end - r.first, lines / parts);
        next = r.end;
      }
      EXPECT_EQ(next, lines);
    }
  }
}

}  // namespace
}  // namespace pacer::ops
