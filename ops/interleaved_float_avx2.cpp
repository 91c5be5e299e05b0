// F16 and BF16 weights interleaved by 16 rows (interleaved.h) x fp32 activations, AVX2 + FMA +
// F16C: the decode GEMV, a few-token GEMM bit-identical to it, and the prefill GEMM with the 16
// rows of a group in the vector lanes. The same steps per (row, token) as
// interleaved_float_avx512.cpp, so both tiers of a machine give the same bits.
//
// Why a layout of their own on AVX2 too: the file's row layout has the GEMV read 4 rows at once,
// each a stream of its own, against an activation row as long as the rows; from ~3072 columns on
// (ffn_down's 5632) the fp32 activation row leaves L1 between the 4-row tiles, and one Zen 4 core
// read such a matrix at 74-80 % of a plain read (2048 columns: 103-107 %). Interleaved, 32 bytes
// hold column c of 16 rows, one broadcast of x[c] serves all 16, and each group is one
// sequential stream: cold, 90-104 % of a plain read at either shape. Prefill reads the same copy
// (the file's pages leave memory) with the 16 rows in the lanes: each column widens 2 vectors for
// 12 FMAs, at least as fast as the row-major GEMM's 3-row x 4-token dot tiles.
#include "ops/vec_avx2.h"  // first: wraps <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/f32.h"
#include "ops/float_rows_simd.h"
#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/interleaved_float_entries.h"
#include "ops/isa.h"
#include "ops/parallel.h"
#include "ops/unroll.h"

namespace pacer::ops {
namespace {

// Rows 8h..8h + 7 of column c as 8 fp32 (row 8h + i in lane i), for c % 2 == Parity
// (interleaved.h's layouts): F16 one column per 32 bytes (16 per half), BF16 a column pair per 64
// bytes (32 per half: dword i = row 8h + i's elements 2p, 2p + 1), widened by a shift (even) or a
// mask (odd).
struct F16Columns {
  static constexpr X16Gemv kKind = X16Gemv::F16;
  static int64_t group_bytes(int64_t n) { return 32 * n; }
  template <int Parity>
  static __m256 load(const std::byte* group, int64_t c, int h) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 32 * c + 16 * h)));
  }
};
struct BF16PairColumns {
  static constexpr X16Gemv kKind = X16Gemv::BF16;
  static int64_t group_bytes(int64_t n) { return 64 * ((n + 1) / 2); }
  template <int Parity>
  static __m256 load(const std::byte* group, int64_t c, int h) {
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 64 * (c / 2) + 32 * h));
    if constexpr (Parity == 0) return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    return _mm256_castsi256_ps(
        _mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
};
// Columns per step of the dot loop (each column goes to partial sum c % 4).
constexpr int64_t kColumnsPerStep = 8;
// Columns per chunk where a tile's accumulators outnumber the registers (more than one group or
// token): every sub-tile (x16_float_chunks) runs the chunk with its accumulators in registers,
// kept in memory between chunks. 128 F16 columns are 4 KiB of each group, read from DRAM by the
// first sub-tile and from L1 by the others.
constexpr int64_t kChunkColumns = 128;
// The GEMV's chunk on AMD when its streams take turns (several groups, one token; ops/isa.h
// x16_gemv_long_runs): 64 columns, 2 KiB of a group a turn. Zen 4 guest without AVX-512, 4 streams
// (this CPU's plan), old and new kernels in one process, the same bits: 12000 groups x 2048
// columns (786 MB) 29.5-31.7 -> 30.8-33.2 GB/s (1.05-1.06x in 4 of 5 rounds; 32 columns
// 1.03-1.09x, 256 and 512 0.87-0.94x), from L2 0.96x. The K-quant GEMVs move on one super-block
// (1.3-3.3 KiB) a turn; the 32-element block ones 8 blocks (interleaved_avx2.cpp, gemv_groups).
// Other CPUs keep kChunkColumns.
constexpr int64_t kGemvChunkColumns = 64;
static_assert(kX16LongRunColumns == kGemvChunkColumns);
// How far ahead the GEMV prefetches where gemv_software_prefetch() is on (as the AVX-512 kernel).
constexpr int64_t kPrefetchBytes = 2048;
// Tokens one tile takes at most (the few-token GEMM's, below kX16FewTokensMax).
constexpr int kMaxTileTokens = static_cast<int>(kX16FewTokensMax) - 1;

// acc[h][c % 4] += rows 8h..8h + 7 of column c * x[c] over columns [c0, c1) of one group, in
// column order (the GEMV's steps: one token, both row halves, all 4 partial sums);
// c0 % kColumnsPerStep == 0.
template <class Columns>
inline void dot_columns(const std::byte* group, const float* x, int64_t c0, int64_t c1,
                        __m256 (&acc)[2][4]) {
  // Column c + k (k < kColumnsPerStep, c % kColumnsPerStep == 0).
  auto column = [&](int64_t c, auto k) {
    constexpr int q = decltype(k)::value % 4;
    const __m256 xc = _mm256_broadcast_ss(x + c + k());
    unroll<2>([&](auto h) {
      const __m256 w = Columns::template load<decltype(k)::value % 2>(group, c + k(), h());
      acc[h()][q] = _mm256_fmadd_ps(w, xc, acc[h()][q]);
    });
  };
  int64_t c = c0;
  for (; c + kColumnsPerStep <= c1; c += kColumnsPerStep) {
    unroll<kColumnsPerStep>([&](auto k) { column(c, k); });
  }
  // The last 1-7 columns, each with its partial sum and parity as constants: a partial sum picked
  // at run time had GCC keep the accumulators in memory, stored on every step of the loop above
  // (8-12 stores per 8 columns against one store a cycle).
  if (c < c1) {
    unroll<kColumnsPerStep>([&](auto k) {
      if (c + k() < c1) column(c, k);
    });
  }
}

// The partial sums' total, (p0 + p1) + (p2 + p3).
[[gnu::always_inline]] inline __m256 four_sum(const __m256 (&p)[4]) {
  return _mm256_add_ps(_mm256_add_ps(p[0], p[1]), _mm256_add_ps(p[2], p[3]));
}

// Before a step of `columns` columns from c: the page touch and the software prefetch of each of
// the S groups, as the GEMV's plan says.
template <class Columns, int S, bool Prefetch>
[[gnu::always_inline]] inline void ahead(const std::byte* const* group, int64_t c, int64_t columns,
                                         int64_t page_touch) {
  for (int s = 0; s < S; ++s) {
    const std::byte* at = group[s] + Columns::group_bytes(c);  // c even: column c's first byte
    if (page_touch > 0) touch_pages_ahead(at, Columns::group_bytes(columns), page_touch);
    if constexpr (Prefetch) {
      const char* p = reinterpret_cast<const char*>(at) + kPrefetchBytes;
      for (int64_t line = 0; line < Columns::group_bytes(columns); line += 64) {
        _mm_prefetch(p + line, _MM_HINT_T0);
      }
    }
  }
}

// One group and one token in registers (8 accumulators): the GEMV's tile of one stream.
// (Flattened, as the other tiles below: with dot_columns or unroll's steps called apart, GCC 12
// kept the accumulators in memory.)
template <class Columns, bool Prefetch>
[[gnu::flatten]] void x16_float_one(int64_t n, const std::byte* group, const float* x, float* out,
                                    int64_t page_touch) {
  __m256 acc[2][4];
  unroll<2>([&](auto h) { unroll<4>([&](auto q) { acc[h()][q()] = _mm256_setzero_ps(); }); });
  int64_t c = 0;
  if (page_touch > 0 || Prefetch) {
    for (; c + kColumnsPerStep <= n; c += kColumnsPerStep) {
      ahead<Columns, 1, Prefetch>(&group, c, kColumnsPerStep, page_touch);
      dot_columns<Columns>(group, x, c, c + kColumnsPerStep, acc);
    }
  }
  dot_columns<Columns>(group, x, c, n, acc);
  unroll<2>([&](auto h) { _mm256_storeu_ps(out + 8 * h(), four_sum(acc[h()])); });
}

// acc[t][p][h] += rows 8h.. of column c * x[t][c] for the columns c of [c0, c1) (c0 % 4 == 0)
// whose partial sum c % 4 is one of P: Q + p * (4 / P) for p < P (P = 1: one partial sum; 2: the
// two of Q's parity; 4: all), in column order, for T tokens and both row halves. Each partial sum
// is a chain of its own, so running the partial sums in separate passes leaves every sum and its
// order as they were; it only lets 2 P T accumulators, not 8 T, hold T tokens (12 of the 16
// registers: T = 6 with P = 1, T = 3 with P = 2).
template <class Columns, int T, int P, int Q>
[[gnu::always_inline]] inline void partial_columns(const std::byte* group, const float* const* x,
                                                   int64_t c0, int64_t c1, __m256 (&acc)[T][P][2]) {
  constexpr int kStep = 4 / P;
  auto column = [&](int64_t c, auto p) {
    constexpr int kParity = (Q + decltype(p)::value * kStep) % 2;
    const __m256 w0 = Columns::template load<kParity>(group, c, 0);
    const __m256 w1 = Columns::template load<kParity>(group, c, 1);
    unroll<T>([&](auto t) {
      const __m256 xc = _mm256_broadcast_ss(x[t()] + c);
      acc[t()][p()][0] = _mm256_fmadd_ps(w0, xc, acc[t()][p()][0]);
      acc[t()][p()][1] = _mm256_fmadd_ps(w1, xc, acc[t()][p()][1]);
    });
  };
  int64_t c = c0;
  for (; c + 4 <= c1; c += 4) {
    unroll<P>([&](auto p) { column(c + Q + p() * kStep, p); });
  }
  unroll<P>([&](auto p) {
    if (c + Q + p() * kStep < c1) column(c + Q + p() * kStep, p);
  });
}

// out[s][t * out_stride + 0..16) = the dots of group s's 16 rows with token t's activations x[t],
// for S groups and nt tokens (1 <= nt <= kMaxTileTokens), each group read from memory once: chunk
// by chunk of kChunk columns (kChunkColumns; the GEMV's kGemvChunkColumns), each sub-tile (group s,
// up to 6 tokens, one to four partial sums: partial_columns) loads its accumulators, runs the chunk
// and stores them back. Every (row, token) sums column c into partial sum c % 4 in column order and
// returns (p0 + p1) + (p2 + p3): the same steps whatever S and nt are, as the AVX-512 kernel's (and
// a scalar loop of fmaf in that order; tests/ops/interleaved_float_test.cpp). Against sub-tiles of
// one row half, 3 tokens and all 4 partial sums (a widened column and 3 broadcasts for 3 FMAs), one
// Zen 4 core, 16 groups of 2048 columns in L2, best of 4 alternations: 2 tokens 37 -> 52 GFLOP/s, 4
// tokens 51 -> 76, 8 tokens 49 -> 78, 15 tokens 57 -> 83.
template <class Columns, int S, bool Prefetch, int64_t kChunk = kChunkColumns>
[[gnu::flatten]] void x16_float_chunks(int64_t n, const std::byte* const* group,
                                       const float* const* x, int nt, float* const* out,
                                       int64_t out_stride, int64_t page_touch) {
  // [s][t][h][q]: 32-byte aligned accumulators of every sub-tile.
  alignas(32) __m256 mem[S][kMaxTileTokens][2][4];
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < nt; ++t) {
      for (int h = 0; h < 2; ++h) {
        for (int q = 0; q < 4; ++q) mem[s][t][h][q] = _mm256_setzero_ps();
      }
    }
  }
  // Tokens [t0, t0 + T), partial sums Q + p * 4 / P of group s over columns [c0, c1).
  auto sub_tile = [&](auto tokens, auto partials, auto first, int s, int t0, int64_t c0,
                      int64_t c1) {
    constexpr int kT = decltype(tokens)::value;
    constexpr int kP = decltype(partials)::value;
    constexpr int kQ = decltype(first)::value;
    __m256 acc[kT][kP][2];
    const float* xs[kT];
    unroll<kT>([&](auto t) {
      xs[t()] = x[t0 + t()];
      unroll<kP>([&](auto p) {
        unroll<2>([&](auto h) { acc[t()][p()][h()] = mem[s][t0 + t()][h()][kQ + p() * 4 / kP]; });
      });
    });
    partial_columns<Columns, kT, kP, kQ>(group[s], xs, c0, c1, acc);
    unroll<kT>([&](auto t) {
      unroll<kP>([&](auto p) {
        unroll<2>([&](auto h) { mem[s][t0 + t()][h()][kQ + p() * 4 / kP] = acc[t()][p()][h()]; });
      });
    });
  };
  // kT tokens from t0 with each of its passes: 4 of one partial sum (kT >= 4), 2 of two (2, 3),
  // or one of all four (1).
  auto tokens_at = [&](auto tokens, int s, int t0, int64_t c0, int64_t c1) {
    constexpr int kT = decltype(tokens)::value;
    constexpr int kP = kT >= 4 ? 1 : kT >= 2 ? 2 : 4;
    if constexpr (kT == 1) {  // the GEMV's steps: all 4 partial sums, 8 columns a step
      __m256 acc[2][4];
      unroll<2>([&](auto h) { unroll<4>([&](auto q) { acc[h][q] = mem[s][t0][h][q]; }); });
      dot_columns<Columns>(group[s], x[t0], c0, c1, acc);
      unroll<2>([&](auto h) { unroll<4>([&](auto q) { mem[s][t0][h][q] = acc[h][q]; }); });
    } else {
      unroll<4 / kP>(
          [&](auto q) { sub_tile(tokens, std::integral_constant<int, kP>{}, q, s, t0, c0, c1); });
    }
  };
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t c1 = std::min(n, c0 + kChunk);
    if (page_touch > 0 || Prefetch) ahead<Columns, S, Prefetch>(group, c0, c1 - c0, page_touch);
    for (int s = 0; s < S; ++s) {
      // The partial sums' passes read a chunk's lines out of order (the first only every other
      // line): one load of each line in order first keeps the hardware prefetchers on the
      // stream (TinyLlama F16 pp4 at 1 thread 11-14 -> 21-22 tok/s).
      if (nt > 1) {
        load_lines_in_order(group[s] + Columns::group_bytes(c0), Columns::group_bytes(c1 - c0));
      }
      int t = 0;
      for (; t + 6 <= nt; t += 6) tokens_at(std::integral_constant<int, 6>{}, s, t, c0, c1);
      switch (nt - t) {
        case 5:
          tokens_at(std::integral_constant<int, 5>{}, s, t, c0, c1);
          break;
        case 4:
          tokens_at(std::integral_constant<int, 4>{}, s, t, c0, c1);
          break;
        case 3:
          tokens_at(std::integral_constant<int, 3>{}, s, t, c0, c1);
          break;
        case 2:
          tokens_at(std::integral_constant<int, 2>{}, s, t, c0, c1);
          break;
        case 1:
          tokens_at(std::integral_constant<int, 1>{}, s, t, c0, c1);
          break;
        default:
          break;
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < nt; ++t) {
      for (int h = 0; h < 2; ++h) {
        _mm256_storeu_ps(out[s] + t * out_stride + 8 * h, four_sum(mem[s][t][h]));
      }
    }
  }
}

// The GEMV: far-apart groups per step (gemv_streams.h), software prefetch and the page touch as
// this CPU's plan says (x16_gemv_plan in isa.h). One stream keeps its 8 accumulators in
// registers over the whole row; more streams take turns by chunks.
template <class Columns>
void gemv(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act, float* out) {
  const auto* x = reinterpret_cast<const float*>(act);
  const X16GemvPlan plan = x16_gemv_plan(Columns::kKind);
  const bool chunks_64 = x16_gemv_long_runs();
  x16_gemv_stream_groups(
      plan.streams, groups, n_groups, Columns::group_bytes(n), out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        constexpr int kS = decltype(streams)::value;
        if constexpr (kS == 1) {
          if (plan.prefetch) {
            x16_float_one<Columns, true>(n, group[0], x, outs[0], plan.page_touch);
          } else {
            x16_float_one<Columns, false>(n, group[0], x, outs[0], plan.page_touch);
          }
        } else if (chunks_64) {
          if (plan.prefetch) {
            x16_float_chunks<Columns, kS, true, kGemvChunkColumns>(n, group, &x, 1, outs, 0,
                                                                   plan.page_touch);
          } else {
            x16_float_chunks<Columns, kS, false, kGemvChunkColumns>(n, group, &x, 1, outs, 0,
                                                                    plan.page_touch);
          }
        } else if (plan.prefetch) {
          x16_float_chunks<Columns, kS, true>(n, group, &x, 1, outs, 0, plan.page_touch);
        } else {
          x16_float_chunks<Columns, kS, false>(n, group, &x, 1, outs, 0, plan.page_touch);
        }
      });
}

// Below kX16FewTokensMax tokens the GEMM is a GEMV over several tokens: 2 far-apart groups at a
// time, all the tokens per chunk of columns, so the weights come from DRAM once and the chunk's
// other sub-tiles read them from L1. Every (row, token) runs the GEMV's steps, so the result is
// the GEMV's bit for bit.
template <class Columns>
void gemm_few_tokens(int64_t n, const std::byte* groups, int64_t n_groups, const float* x,
                     int64_t x_stride, int64_t nt, float* out, int64_t out_stride) {
  const bool prefetch = gemv_software_prefetch();
  x16_gemv_stream_groups<2>(
      groups, n_groups, Columns::group_bytes(n), out,
      [&](auto streams, const std::byte* const* group, float* const* outs) {
        constexpr int kS = decltype(streams)::value;
        for (int64_t t = 0; t < nt; t += kMaxTileTokens) {
          const int tokens = static_cast<int>(std::min<int64_t>(kMaxTileTokens, nt - t));
          const float* xs[kMaxTileTokens];
          float* ot[kS];
          for (int k = 0; k < tokens; ++k) xs[k] = x + (t + k) * x_stride;
          for (int s = 0; s < kS; ++s) ot[s] = outs[s] + t * out_stride;
          if (t == 0 && prefetch) {
            x16_float_chunks<Columns, kS, true>(n, group, xs, tokens, ot, out_stride, 0);
          } else {
            x16_float_chunks<Columns, kS, false>(n, group, xs, tokens, ot, out_stride, 0);
          }
        }
      });
}

// Prefill from kX16FewTokensMax tokens on, with a group's 16 rows in the lanes of 2 vectors:
// adds to total[t][0..16) the sums over columns [k0, k1) (k0 even) for T tokens (t0.. of one
// block of gemm_prepare_f32_avx2's transposed activations, xs floats a column): per column 2
// widened weight vectors and T broadcasts for 2T FMAs (T = 6: 12 accumulators, 2 weights and a
// broadcast in the 16 registers). The chunk's sums start from zero and are added to the running
// totals once, as the AVX-512 kernel sums its chunks of float_rows::kLanesChunk columns.
template <int T, class Source>
[[gnu::flatten]] void lanes_chunk(const Source& w, const float* xt, int64_t xs, int64_t t0,
                                  int64_t k0, int64_t k1, float* total) {
  __m256 acc[T][2];
  unroll<T>([&](auto t) { unroll<2>([&](auto h) { acc[t()][h()] = _mm256_setzero_ps(); }); });
  auto column = [&](int64_t k, auto parity) {
    constexpr int kParity = decltype(parity)::value;
    const __m256 w0 = w.template load<kParity>(k, 0), w1 = w.template load<kParity>(k, 1);
    const float* xk = xt + k * xs + t0;
    unroll<T>([&](auto t) {
      const __m256 xb = _mm256_broadcast_ss(xk + t());
      acc[t()][0] = _mm256_fmadd_ps(w0, xb, acc[t()][0]);
      acc[t()][1] = _mm256_fmadd_ps(w1, xb, acc[t()][1]);
    });
  };
  int64_t k = k0;  // k0 even: parity is k's
  for (; k + 2 <= k1; k += 2) {
    column(k, std::integral_constant<int, 0>{});
    column(k + 1, std::integral_constant<int, 1>{});
  }
  if (k < k1) column(k, std::integral_constant<int, 0>{});
  unroll<T>([&](auto t) {
    unroll<2>([&](auto h) {
      float* sum = total + 16 * t() + 8 * h();
      _mm256_store_ps(sum, _mm256_add_ps(_mm256_load_ps(sum), acc[t()][h()]));
    });
  });
}

// Where lanes_chunk's tiles take a group's columns from: F16 straight from the group (one
// vcvtph2ps per row half, nothing held in a register), BF16 from a panel widened to fp32 once per
// chunk for all the tiles (widen_chunk below): in the tiles' loop, BF16's widening mask took the
// register GCC then lacked for the accumulators (pp64 at ~55 % of F16's rate), while F16 from a
// panel lost at 16 tokens (3 tiles to share each chunk's widening: 83 -> 64 GFLOP/s).
template <class Columns>
struct GroupColumns {
  const std::byte* group;
  template <int Parity>
  __m256 load(int64_t k, int h) const {
    return Columns::template load<Parity>(group, k, h);
  }
};
struct PanelColumns {
  const float* panel;  // column k at panel + 16 (k - k0)
  int64_t k0;
  template <int Parity>
  __m256 load(int64_t k, int h) const {
    return _mm256_load_ps(panel + 16 * (k - k0) + 8 * h);
  }
};
template <class Columns>
constexpr bool kWidenOnce = std::is_same_v<Columns, BF16PairColumns>;

// Columns [k0, k1) of a group widened to fp32 (column k at panel + 16 (k - k0)).
template <class Columns>
[[gnu::flatten]] void widen_chunk(const std::byte* group, int64_t k0, int64_t k1, float* panel) {
  int64_t k = k0;  // k0 even: parity is k's
  for (; k + 2 <= k1; k += 2) {
    unroll<2>([&](auto parity) {
      unroll<2>([&](auto h) {
        _mm256_store_ps(panel + 16 * (k + parity() - k0) + 8 * h(),
                        Columns::template load<decltype(parity)::value>(group, k + parity(), h()));
      });
    });
  }
  if (k < k1) {
    unroll<2>([&](auto h) {
      _mm256_store_ps(panel + 16 * (k - k0) + 8 * h(), Columns::template load<0>(group, k, h()));
    });
  }
}

// Tokens and groups a pass of the prefill GEMM takes: chunk by chunk of float_rows::kLanesChunk
// columns, every token tile of every group of the pass runs the chunk, so the chunk's activations
// (128 columns x 64 tokens x 4 bytes) come from L2 once per pass rather than once per tile, and
// each group's chunk (4 KiB of F16) stays in L1 while its tiles take turns; the running totals
// are 4 x 4 KiB. The next group's chunk is prefetched meanwhile. Against tiles running the whole
// row each (12 per group for 64 tokens, every tile reading the group's weights and all the
// activations from L2 or further), on one Zen 4 core (best of 6 alternations, 64 tokens): 16
// groups of 2048 columns (in L2) 77.9 -> 83.2 GFLOP/s, 128 of 2048 71.5 -> 78.2, 48 of 5632
// 63.0 -> 77.4; passes of 32 tokens or of 2-16 groups ran within noise of these. (The FMA pattern
// alone, from L1: 1.9 of the 2 FMAs a cycle.)
constexpr int64_t kLanesPassTokens = 64;
constexpr int64_t kLanesPassGroups = 4;

// Up to kLanesPassGroups groups against up to kLanesPassTokens tokens (t0.. of a block of tokens
// whose transposed activations are xt, xs floats a column): chunk by chunk of columns, each group
// in tiles of 6 tokens (the last one or two of 3-5).
template <class Columns>
void lanes_pass(int64_t n, const std::byte* groups, int64_t group_bytes, int64_t n_groups,
                const float* xt, int64_t xs, int64_t t0, int64_t tokens, float* out,
                int64_t out_stride) {
  alignas(32) float total[kLanesPassGroups][kLanesPassTokens * 16];
  alignas(32) float panel[float_rows::kLanesChunk * kX16Rows];
  for (int64_t g = 0; g < n_groups; ++g) {
    for (int64_t i = 0; i < tokens * 2; ++i) _mm256_store_ps(total[g] + 8 * i, _mm256_setzero_ps());
  }
  for (int64_t k0 = 0; k0 < n; k0 += float_rows::kLanesChunk) {
    const int64_t k1 = std::min(n, k0 + float_rows::kLanesChunk);
    for (int64_t g = 0; g < n_groups; ++g) {
      const std::byte* group = groups + g * group_bytes;
      // The piece of the next visit (the next group's, or the first group's next chunk), asked
      // for a few lines before each tile (next_lines). Its 64 lines asked for at once at the
      // visit's start filled the core's miss buffers, and the first tile's loads queued behind
      // them: on the Zen 4 guest without AVX-512, a harness running lanes_chunk<6> over 16384
      // groups' chunks from DRAM: 80.7 -> 86-87.5 GFLOP/s spread (90 from L1); pp64 at 1 thread,
      // alternating builds, 3 rounds: TinyLlama F16 38.3-38.9 -> 41.0-41.2 t/s, BF16 36.3-36.5 ->
      // 39.5-39.6, Llama-3.2-1B F16 38.2-38.6 -> 40.2-40.6. (BM_gemm, weights from L3: level.)
      const char* next = nullptr;
      int64_t next_bytes = 0;
      {
        const bool last = g + 1 == n_groups;
        const int64_t kn = last ? k1 : k0;
        if (kn < n) {
          next = reinterpret_cast<const char*>(groups + (last ? 0 : g + 1) * group_bytes +
                                               Columns::group_bytes(kn));
          next_bytes = Columns::group_bytes(std::min(n, kn + float_rows::kLanesChunk) - kn);
        }
      }
      int64_t asked = 0;  // bytes of it asked for so far
      const int64_t tiles = (tokens + 5) / 6;
      const int64_t per_tile = (next_bytes / 64 + tiles - 1) / tiles * 64;
      auto next_lines = [&] {
        const int64_t end = std::min(next_bytes, asked + per_tile);
        for (; asked < end; asked += 64) _mm_prefetch(next + asked, _MM_HINT_T0);
      };
      if constexpr (kWidenOnce<Columns>) widen_chunk<Columns>(group, k0, k1, panel);
      using Source = std::conditional_t<kWidenOnce<Columns>, PanelColumns, GroupColumns<Columns>>;
      Source source;
      if constexpr (kWidenOnce<Columns>) {
        source = {panel, k0};
      } else {
        source = {group};
      }
      int64_t t = 0;
      auto tile = [&](int64_t tile_tokens) {  // 1..6
        next_lines();
        auto run = [&](auto kt) {
          lanes_chunk<decltype(kt)::value>(source, xt, xs, t0 + t, k0, k1, total[g] + 16 * t);
        };
        switch (tile_tokens) {
          case 6:
            run(std::integral_constant<int, 6>{});
            break;
          case 5:
            run(std::integral_constant<int, 5>{});
            break;
          case 4:
            run(std::integral_constant<int, 4>{});
            break;
          case 3:
            run(std::integral_constant<int, 3>{});
            break;
          case 2:
            run(std::integral_constant<int, 2>{});
            break;
          default:
            run(std::integral_constant<int, 1>{});
            break;
        }
        t += tile_tokens;
      };
      // Tiles of 6; 1-3 tokens left over take the last 6 with them in two tiles (7 = 4 + 3, 8 =
      // 4 + 4, 9 = 5 + 4): a tile of few tokens widens 2 weight vectors for few FMAs.
      int64_t full = tokens / 6, rest = tokens % 6;
      if (rest >= 1 && rest <= 3 && full >= 1) {
        --full;
        rest += 6;
      }
      for (; t < 6 * full; t += 6) {
        next_lines();
        lanes_chunk<6>(source, xt, xs, t0 + t, k0, k1, total[g] + 16 * t);
      }
      if (rest > 6) {
        tile((rest + 1) / 2);
        tile(rest / 2);
      } else if (rest > 0) {
        tile(rest);
      }
      for (; asked < next_bytes; asked += 64) _mm_prefetch(next + asked, _MM_HINT_T0);
    }
  }
  for (int64_t g = 0; g < n_groups; ++g) {
    for (int64_t t = 0; t < tokens; ++t) {
      float* o = out + t * out_stride + g * kX16Rows;
      _mm256_storeu_ps(o, _mm256_load_ps(total[g] + 16 * t));
      _mm256_storeu_ps(o + 8, _mm256_load_ps(total[g] + 16 * t + 8));
    }
  }
}

template <class Columns>
void gemm_prepared(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
                   int64_t act_stride, const std::byte* prepared, int64_t nt, float* out,
                   int64_t out_stride) {
  if (nt < kX16FewTokensMax || prepared == nullptr) {
    gemm_few_tokens<Columns>(n, groups, n_groups, reinterpret_cast<const float*>(act),
                             act_stride / static_cast<int64_t>(sizeof(float)), nt, out, out_stride);
    return;
  }
  const auto* xt = reinterpret_cast<const float*>(prepared);
  const int64_t group_bytes = Columns::group_bytes(n);
  for (int64_t b0 = 0; b0 < nt; b0 += 64) {  // gemm_prepare's blocks of 64 tokens
    const int64_t block = std::min<int64_t>(64, nt - b0);
    const int64_t xs = (block + 15) / 16 * 16;
    for (int64_t p0 = 0; p0 < block; p0 += kLanesPassTokens) {
      const int64_t tokens = std::min(kLanesPassTokens, block - p0);
      for (int64_t g = 0; g < n_groups; g += kLanesPassGroups) {
        lanes_pass<Columns>(n, groups + g * group_bytes, group_bytes,
                            std::min(kLanesPassGroups, n_groups - g), xt + b0 * n, xs, p0, tokens,
                            out + (b0 + p0) * out_stride + g * kX16Rows, out_stride);
      }
    }
  }
}

// 8 x 8 floats transposed in registers: r[i] (row i) -> r[j] holding column j.
inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

}  // namespace

// The layout of float_rows_avx512.h's gemm_prepare (blocks of up to 64 tokens at float offset 64
// * b * n, each n rows of tv = ceil(tokens / 16) vectors of 16 tokens, padding tokens zero), 8
// tokens x 8 columns at a time transposed in registers.
int64_t gemm_prepare_f32_avx2(int64_t n, const std::byte* act, int64_t act_stride, int64_t nt,
                              std::byte* dst, int64_t part, int64_t parts) {
  if (nt < float_rows::kLanesMinTokens) return 0;
  const int64_t bytes = ((nt + 63) / 64) * 64 * n * static_cast<int64_t>(sizeof(float));
  if (dst == nullptr) return bytes;
  const auto [k_begin, k_end] =
      static_chunk(n, 16, static_cast<int>(parts), static_cast<int>(part));
  const int64_t x_stride = act_stride / static_cast<int64_t>(sizeof(float));
  const auto* x = reinterpret_cast<const float*>(act);
  for (int64_t t0 = 0; t0 < nt; t0 += 64) {
    const int64_t tokens = std::min<int64_t>(64, nt - t0);
    const int64_t tv = (tokens + 15) / 16;
    float* xt = reinterpret_cast<float*>(dst) + t0 * n;
    for (int64_t v = 0; v < 2 * tv; ++v) {                             // 8 tokens at a time
      const int64_t rows = std::clamp<int64_t>(tokens - 8 * v, 0, 8);  // the rest are zero tokens
      const float* xv = rows > 0 ? x + (t0 + 8 * v) * x_stride : x;
      for (int64_t k0 = k_begin; k0 < k_end; k0 += 8) {
        const int64_t cols = std::min<int64_t>(8, n - k0);
        __m256 r[8];
        if (cols == 8) {
          for (int64_t i = 0; i < 8; ++i) {
            r[i] = i < rows ? _mm256_loadu_ps(xv + i * x_stride + k0) : _mm256_setzero_ps();
          }
        } else {
          alignas(32) float tail[8];
          for (int64_t i = 0; i < 8; ++i) {
            for (int64_t c = 0; c < 8; ++c)
              tail[c] = i < rows && c < cols ? xv[i * x_stride + k0 + c] : 0.0f;
            r[i] = _mm256_load_ps(tail);
          }
        }
        transpose8(r);
        float* o = xt + k0 * tv * 16 + 8 * v;
        for (int64_t c = 0; c < cols; ++c) _mm256_store_ps(o + c * tv * 16, r[c]);
      }
    }
  }
  return bytes;
}

PACER_X16_FLOAT_ENTRIES(f16, F16Columns, avx2, gemm_prepare_f32_avx2)
PACER_X16_FLOAT_ENTRIES(bf16, BF16PairColumns, avx2, gemm_prepare_f32_avx2)

}  // namespace pacer::ops
