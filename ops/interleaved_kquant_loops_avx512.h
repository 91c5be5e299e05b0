#pragma once
// The decode GEMV and the prefill GEMM over K-quant layouts read a quarter super-block at a time
// (interleaved.h: Q6_K, Q3_K, IQ4_XS, Q2_K), shared by their AVX-512 VNNI files. A Layout type
// supplies one super-block's integer arithmetic and where things are:
//   kBlockStep                 bytes per super-block of 16 rows, on average (Q6_K and Q3_K go in
//                              pairs of super-blocks)
//   block_at(grp, b)           super-block b of a group
//   Offsets, offsets(x, o)     what the accumulators start at, per activation block
//   Sum, zero()                a token's integer sums of one super-block (OneSum: one vector)
//   quarter_isums<T, Q>(blk, h, x, off, sum)
//                              sum[t] += the integer sums of quarter (half h, Q = 0, 1) of the
//                              super-block at blk against T activation blocks (T = 1..4)
//   accumulate(grp, b, sum, d_x, acc)
//                              acc + the super-block's 16 row dots, from its sums and factors
//   d_at(grp, b)               super-block b's fp16 factors (d; Q2_K: d, then dmin)
//   kLoadInOrder (optional)    true: the GEMV touches each super-block's lines in order before
//                              its quarters (load_lines_in_order, gemv_streams.h), where it
//                              reads the streams a quarter a turn
//   kLeadBytes (optional)      bytes at block_at(grp, b) (the scales, ahead of the quants) that
//                              the GEMV reads line by line, in order, when it starts a
//                              super-block: where a quarter takes its scales' line after its
//                              quants, each quarter's stream steps back (why at gemv_groups)
//   kWholeTurnsOnLongRuns (optional)
//                              true: with long runs (ops/isa.h x16_gemv_long_runs) the GEMV
//                              reads each stream a super-block a turn, not a quarter
// Internal to ops/; include after ops/matmul_simd_avx512.h (it wraps <immintrin.h>), from
// translation units compiled for AVX-512 VNNI only.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/isa.h"
#include "ops/q8_k.h"
#include "ops/unroll.h"

namespace pacer::ops::kquant_x16 {

// The activation dword at q + at (4 quants) in every lane: vpdpbusd's operand against the 4
// quants of each of the 16 rows.
inline __m512i act_dword(const int8_t* q, int64_t at) {
  int32_t v;
  std::memcpy(&v, q + at, 4);
  return _mm512_set1_epi32(v);
}

// The Sum, zero() and accumulate() of a layout with one integer sum per super-block and one fp16
// factor d per row (Derived::d_at(grp, b): the 16 of super-block b): acc + d * d_x * isum.
template <class Derived>
struct OneSum {
  using Sum = __m512i;
  static __m512i zero() { return _mm512_setzero_si512(); }
  static __m512 accumulate(const std::byte* grp, int64_t b, __m512i isum, float dx, __m512 acc) {
    const __m512 d =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(Derived::d_at(grp, b))));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc);
  }
};

// kBlockStep, block_at() and d_at() of the layouts in pairs of super-blocks (Q6_K, Q3_K): kPair
// bytes a pair, the 16 fp16 d of both super-blocks first (64 bytes), then each super-block's
// kBlock bytes.
template <class Derived, int64_t kPair, int64_t kBlock>
struct SuperBlockPairs : OneSum<Derived> {
  static constexpr int64_t kBlockStep = kPair / 2;  // on average
  static const std::byte* block_at(const std::byte* grp, int64_t b) {
    return grp + b / 2 * kPair + 64 + kBlock * (b % 2);
  }
  static const std::byte* d_at(const std::byte* grp, int64_t b) {
    return grp + b / 2 * kPair + 32 * (b % 2);
  }
};

// Layout::kLoadInOrder, false where the layout does not say.
template <class Layout>
constexpr bool loads_in_order() {
  if constexpr (requires { Layout::kLoadInOrder; }) {
    return Layout::kLoadInOrder;
  } else {
    return false;
  }
}

// Layout::kWholeTurnsOnLongRuns, false where the layout does not say: whether the GEMV reads a
// whole super-block of one stream before the next stream's turn where this CPU takes long runs
// (ops/isa.h x16_gemv_long_runs), rather than a quarter.
template <class Layout>
constexpr bool whole_turns_on_long_runs() {
  if constexpr (requires { Layout::kWholeTurnsOnLongRuns; }) {
    return Layout::kWholeTurnsOnLongRuns;
  } else {
    return false;
  }
}

// Layout::kLeadBytes, 0 where the layout does not say.
template <class Layout>
constexpr int64_t lead_bytes() {
  if constexpr (requires { Layout::kLeadBytes; }) {
    return Layout::kLeadBytes;
  } else {
    return 0;
  }
}

// isum[t] = the integer sums of one super-block, quarter by quarter.
template <class Layout, int T>
inline void block_isums(const std::byte* blk, const BlockQ8_K* const* x,
                        const typename Layout::Offsets* const* off, typename Layout::Sum* isum) {
  typename Layout::Sum sum[T];  // local, so the sums stay in registers (isum may alias the reads)
  for (int t = 0; t < T; ++t) sum[t] = Layout::zero();
  for (int h = 0; h < 2; ++h) {
    Layout::template quarter_isums<T, 0>(blk, h, x, off, sum);
    Layout::template quarter_isums<T, 1>(blk, h, x, off, sum);
  }
  for (int t = 0; t < T; ++t) isum[t] = sum[t];
}

// S groups at once (S far-apart streams), super-block by super-block and within one quarter by
// quarter (Q6_K: half h, triples 4Q..4Q+3, 768 bytes; Q3_K: half h, sets 4Q..4Q+3 of its 4
// triples; IQ4_XS: sub-blocks 4h + 2Q, +1): quarter Q of every stream, then quarter Q + 1, so the
// loads in flight come from all S streams at once (as the Q4_K / Q5_K chunk order), and with
// `prefetch` each stream's bytes one super-block further on are prefetched a quarter at a time,
// with the quarter read. Q6_K on one Sapphire Rapids core, cold 2048x5632 and 32000x2048, 4
// streams, against a super-block at a time and the whole next pair at once: 1.34-1.42x (11 and 7
// alternations over 700 MB); 2 or 3 pairs ahead: 0.86-0.95x of 1. One Zen 5 core (1 stream, the
// page touch, BM_gemv q6_kx16 cold TinyLlama shapes): one super-block ahead against one pair (6.6
// KiB) ahead 1.22x over 5 alternating rounds, then ahead in 7 of 10 rounds of builds alternating
// (mean 1.06x); 1.5 super-blocks no better. It is also about as far ahead as the Q4_0 and Q4_K
// GEMVs prefetch (2.3 KiB). Not measured on Intel (the AVX2 tier still prefetches a pair ahead).
// Prefetching on into the next group of the stretch rather than stopping at this one's end: cold
// 32000x2048 1.11x, 2048x5632 1.08x. kWholeTurns: a whole super-block of one stream, then of the
// next, where the layout asks for it under long runs (ops/isa.h x16_gemv_long_runs, AMD): one Zen
// 4 core, 448000 x 2048 weights (0.5-1 GB), old and new kernels in one process, the same bits:
// Q6_K 31.4 -> 33.8-34.0 GB/s (1.09-1.10x), Q2_K 1.09x, IQ4_XS 1.14-1.15x; Q3_K 0.86x while it
// touched its lines in order first, 1.42-1.47x without that touch (Q3KLayout). kLeadBytes: a
// quarter of Q2_K, Q3_K or IQ4_XS reads its quants, then its scales' line from the super-block's
// head, so the stream stepped back by 0.3-1.5 KiB four times a super-block; its scales' lines
// read in order with the factors' line, one Zen 4 core, old and new GEMVs alternating in one
// process (2 streams, super-block turns, 0.9 GB cold, the same bits): Q2_K 1.08-1.14x at 1536 to
// 14336 columns (31 -> 33.5 GB/s at 2048), Q3_K 0.99-1.07x (1.07 at 5632), IQ4_XS 1.05-1.09x at
// 1536-5632, level at 3072 and 8192-14336; Q6_K (256 bytes of scales) 0.98-0.99x, so not there.
// A quarter a turn (PACER_GEMV_RUNS=short): Q2_K 1.07-1.17x, IQ4_XS level.
template <class Layout, int S, bool kWholeTurns = false>
[[gnu::flatten]] void gemv_groups(int64_t nb, const std::byte* const* group, const BlockQ8_K* x,
                                  float* const* out, bool prefetch, int64_t page_touch) {
  constexpr int64_t kBlockStep = Layout::kBlockStep;
  constexpr int64_t kQuarter = kBlockStep / 4;
  // Flattened: GCC 12 left quarter_isums<1, *> out of line, a call per quarter and stream with
  // the sums through memory. Inlined, one Zen 5 core (BM_gemv q6_kx16 threads:1, alternating
  // builds) ran 2048x2048 in cache at 76-78 instead of 49-52 GB/s and cold TinyLlama shapes ~1.07x.
  // Per-stream indices are compile-time constants (ops/unroll.h), as in the Q4_K / Q5_K GEMV.
  __m512 acc[S];
  unroll<S>([&](auto s) { acc[s] = _mm512_setzero_ps(); });
  for (int64_t b = 0; b < nb; ++b) {
    if (page_touch > 0) {
      unroll<S>(
          [&](auto s) { touch_pages_ahead(group[s] + b * kBlockStep, kBlockStep, page_touch); });
    }
    // The line of the factors first, as the Q4_K GEMV reads its own (factors() there): they
    // lead the super-block (pair) in memory, and read where accumulate() takes them they were a
    // step back after ~3 KiB. Q6_K, one Zen 4 core, alternating calls, cold 5632x2048 and
    // 2048x5632 at 1 and 2 threads: 1.024-1.030x in 4 of 4 runs; IQ4_XS and Q2_K level.
    // (A layout that touches its lines in order reads the factors' line with them.)
    unroll<S>([&](auto s) {
      if constexpr (loads_in_order<Layout>() && !kWholeTurns) {
        load_lines_in_order(group[s] + b * kBlockStep, kBlockStep);
      } else {
        const auto line = reinterpret_cast<uintptr_t>(Layout::d_at(group[s], b)) & ~uintptr_t{63};
        avx512::load_line_here(reinterpret_cast<const void*>(line));
        const auto lead = reinterpret_cast<uintptr_t>(Layout::block_at(group[s], b));
        for (int64_t l = 0; l < lead_bytes<Layout>(); l += 64) {
          const uintptr_t at = (lead + l) & ~uintptr_t{63};
          if (at != line) avx512::load_line_here(reinterpret_cast<const void*>(at));
        }
      }
    });
    typename Layout::Offsets off;
    Layout::offsets(x[b], off);
    const typename Layout::Offsets* offp = &off;
    const BlockQ8_K* xb = x + b;
    typename Layout::Sum isum[S];
    unroll<S>([&](auto s) { isum[s] = Layout::zero(); });
    const auto quarter = [&]<int Q>(auto s, int h, std::integral_constant<int, Q>) {
      if (prefetch) {  // on past the group's end, as Q4_K's (why there)
        const int64_t at = b * kBlockStep + (2 * h + Q) * kQuarter;
        prefetch_lines(group[s] + at + kBlockStep, kQuarter);
      }
      Layout::template quarter_isums<1, Q>(Layout::block_at(group[s], b), h, &xb, &offp, &isum[s]);
    };
    if constexpr (kWholeTurns) {
      unroll<S>([&](auto s) {
        for (int h = 0; h < 2; ++h) {
          quarter(s, h, std::integral_constant<int, 0>{});
          quarter(s, h, std::integral_constant<int, 1>{});
        }
      });
    } else {
      for (int h = 0; h < 2; ++h) {
        unroll<2>([&](auto qc) { unroll<S>([&](auto s) { quarter(s, h, qc); }); });
      }
    }
    unroll<S>([&](auto s) { acc[s] = Layout::accumulate(group[s], b, isum[s], x[b].d, acc[s]); });
  }
  unroll<S>([&](auto s) { _mm512_storeu_ps(out[s], acc[s]); });
}

// T tokens against one group.
template <class Layout, int T>
void gemm_group(int64_t nb, const std::byte* grp, const BlockQ8_K* const* x, float* out,
                int64_t out_stride) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_K* xb[T];
    typename Layout::Offsets off[T];
    const typename Layout::Offsets* offp[T];
    for (int t = 0; t < T; ++t) {
      xb[t] = x[t] + b;
      Layout::offsets(*xb[t], off[t]);
      offp[t] = &off[t];
    }
    typename Layout::Sum isum[T];
    block_isums<Layout, T>(Layout::block_at(grp, b), xb, offp, isum);
    for (int t = 0; t < T; ++t) acc[t] = Layout::accumulate(grp, b, isum[t], xb[t]->d, acc[t]);
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

// The X16GemvFn and X16GemmFn bodies of weight type t (interleaved.h); the GEMV reads the streams
// of t's x16_gemv_plan().
template <class Layout>
void gemv(WeightType t, int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
          float* out) {
  const int64_t nb = n / 256;
  const auto* x = reinterpret_cast<const BlockQ8_K*>(act);
  const X16GemvPlan plan = x16_gemv_plan(x16_gemv_kind(t));
  const bool whole_turns = whole_turns_on_long_runs<Layout>() && x16_gemv_long_runs();
  x16_gemv_stream_groups(
      plan.streams, groups, n_groups, x16_group_bytes(t, n), out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        constexpr int kS = decltype(streams)::value;
        if (whole_turns) {
          gemv_groups<Layout, kS, true>(nb, group, x, outs, plan.prefetch, plan.page_touch);
        } else {
          gemv_groups<Layout, kS>(nb, group, x, outs, plan.prefetch, plan.page_touch);
        }
      });
}

template <class Layout>
void gemm(WeightType t, int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
          int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  const int64_t nb = n / 256;
  x16_gemm_token_quads(
      groups, n_groups, x16_group_bytes(t, n), act, act_stride, nt, out, out_stride,
      [&](auto tokens, const std::byte* grp, const std::byte* const* acts, float* o) {
        constexpr int T = decltype(tokens)::value;
        const BlockQ8_K* x[T];
        for (int i = 0; i < T; ++i) x[i] = reinterpret_cast<const BlockQ8_K*>(acts[i]);
        gemm_group<Layout, T>(nb, grp, x, o, out_stride);
      });
}

}  // namespace pacer::ops::kquant_x16
