// F16 and BF16 weights interleaved by 16 rows (interleaved.h) x fp32 activations, AVX-512 F/BW:
// the decode GEMV, a few-token GEMM bit-identical to it, and the prefill GEMM with the 16 rows
// of a group in the vector lanes.
//
// Why a layout of their own: in the file's row layout the GEMV reads 4 rows at once, each a
// stream of its own, against an activation row as long as the rows. For rows of 5632 halves
// (ffn_down) the 22 KiB activation row and 4 weight streams crowd the 32 KiB L1 of a Zen 4 core:
// one core read such a matrix at ~65 % of a plain read against ~88 % for rows of 2048. Interleaved,
// one 32-byte load holds column c of 16 rows, the activation is one broadcast per column for all
// of them, and every group is one sequential stream: every shape reads at ~30 GB/s on that core
// (a cold 2048x5632 F16: 1031 -> ~750 us). The copy also lives in 2 MiB pages, where the file's
// mapping has 4 KiB ones.
#include "ops/vec_avx512.h"  // first: wraps <immintrin.h>

#include <algorithm>
#include <vector>

#include "ops/float_rows_avx512.h"
#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/interleaved_float_entries.h"
#include "ops/isa.h"
#include "ops/unroll.h"

namespace pacer::ops {
namespace {

// Column c of a 16-row group as 16 fp32 (row i in lane i), for c % 2 == Parity (interleaved.h's
// layouts): F16 one column per 32 bytes, BF16 a column pair per 64 bytes (dword i = row i's
// elements 2p, 2p + 1), widened by a shift (even) or a mask (odd).
struct F16Columns {
  static constexpr X16Gemv kKind = X16Gemv::F16;
  static int64_t group_bytes(int64_t n) { return 32 * n; }
  template <int Parity>
  static __m512 load(const std::byte* group, int64_t c) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 32 * c)));
  }
};
struct BF16PairColumns {
  static constexpr X16Gemv kKind = X16Gemv::BF16;
  static int64_t group_bytes(int64_t n) { return 64 * ((n + 1) / 2); }
  template <int Parity>
  static __m512 load(const std::byte* group, int64_t c) {
    const __m512i v = _mm512_loadu_si512(group + 64 * (c / 2));
    if constexpr (Parity == 0) return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    return _mm512_castsi512_ps(
        _mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
};
template <class Columns>
__m512 load_column(const std::byte* group, int64_t c) {
  return c % 2 == 0 ? Columns::template load<0>(group, c) : Columns::template load<1>(group, c);
}

// Columns per step of the dot loop (each column goes to partial sum c % 4).
constexpr int64_t kColumnsPerStep = 8;
// How far ahead in each group the GEMV prefetches where gemv_software_prefetch() is on (isa.h):
// 64 F16 columns. One Sapphire Rapids core read a cold 5632x2048 / 2048x5632 F16 at 15.5-16 GB/s
// without it and 19-21.7 GB/s with 1-4 KiB (bench/matmul_bench.cpp, BM_gemv f16x16, cold:1), the
// quantized x16 GEMVs' rate; the hardware prefetchers alone keep too few lines in flight per core.
constexpr int64_t kPrefetchBytes = 2048;

// out[s][t][0..16) = the dots of group s's 16 rows with token t's activations x[t], for S groups
// and T tokens. Every (row, token) pair sums column c into partial sum c % 4 with one FMA, in
// column order, and returns (p0 + p1) + (p2 + p3): the same steps whatever S and T are, so the
// GEMV and the few-token GEMM agree bit for bit (and a scalar loop of fmaf in that order gives
// the same bits; tests/ops/interleaved_float_test.cpp).
// kRunColumns > 0: kRunColumns columns of one group, then of the next (the GEMV's long runs);
// each partial sum still takes its columns in order, so the bits are the same.
template <class Columns, int S, int T, bool Prefetch = false, int64_t kRunColumns = 0>
void x16_float_tile(int64_t n, const std::byte* const* group, const float* const* x,
                    float* const* out, int64_t out_stride, int64_t page_touch = 0) {
  __m512 acc[S][T][4];
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < T; ++t) {
      for (int q = 0; q < 4; ++q) acc[s][t][q] = _mm512_setzero_ps();
    }
  }
  auto column = [&](int64_t c, int q, auto load) {
    for (int s = 0; s < S; ++s) {
      const __m512 w = load(group[s], c);
      for (int t = 0; t < T; ++t) {
        acc[s][t][q] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[t][c]), acc[s][t][q]);
      }
    }
  };
  int64_t c = 0;
  if constexpr (kRunColumns > 0) {
    static_assert(kRunColumns % kColumnsPerStep == 0);
    // kRunColumns of one stream, then of the next.
    for (; c + kRunColumns <= n; c += kRunColumns) {
      unroll<S>([&](auto sc) {
        constexpr int s = decltype(sc)::value;
        for (int64_t cc = c; cc < c + kRunColumns; cc += kColumnsPerStep) {
          if (page_touch > 0) {
            touch_pages_ahead(group[s] + Columns::group_bytes(cc),
                              Columns::group_bytes(kColumnsPerStep), page_touch);
          }
          if constexpr (Prefetch) {
            const char* ahead =
                reinterpret_cast<const char*>(group[s]) + Columns::group_bytes(cc) + kPrefetchBytes;
            for (int64_t line = 0; line < Columns::group_bytes(kColumnsPerStep); line += 64) {
              _mm_prefetch(ahead + line, _MM_HINT_T0);
            }
          }
          unroll<kColumnsPerStep>([&](auto k) {
            const __m512 w = Columns::template load<decltype(k)::value % 2>(group[s], cc + k());
            for (int t = 0; t < T; ++t) {
              acc[s][t][k() % 4] =
                  _mm512_fmadd_ps(w, _mm512_set1_ps(x[t][cc + k()]), acc[s][t][k() % 4]);
            }
          });
        }
      });
    }
  }
  for (; c + kColumnsPerStep <= n; c += kColumnsPerStep) {  // c even: parity is k's
    if (page_touch > 0) {
      for (int s = 0; s < S; ++s) {
        touch_pages_ahead(group[s] + Columns::group_bytes(c), Columns::group_bytes(kColumnsPerStep),
                          page_touch);
      }
    }
    if constexpr (Prefetch) {
      // The lines of this step's columns kPrefetchBytes further on in each group (c is even, so
      // group_bytes(c) is where column c starts in both layouts).
      for (int s = 0; s < S; ++s) {
        const char* ahead =
            reinterpret_cast<const char*>(group[s]) + Columns::group_bytes(c) + kPrefetchBytes;
        for (int64_t line = 0; line < Columns::group_bytes(kColumnsPerStep); line += 64) {
          _mm_prefetch(ahead + line, _MM_HINT_T0);
        }
      }
    }
    unroll<kColumnsPerStep>([&](auto k) {
      column(c + k(), k() % 4, [](const std::byte* g, int64_t col) {
        return Columns::template load<decltype(k)::value % 2>(g, col);
      });
    });
  }
  for (; c < n; ++c) column(c, static_cast<int>(c % 4), load_column<Columns>);
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < T; ++t) {
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[s][t][0], acc[s][t][1]),
                                       _mm512_add_ps(acc[s][t][2], acc[s][t][3]));
      _mm512_storeu_ps(out[s] + t * out_stride, sum);
    }
  }
}

// The GEMV: far-apart groups per step (gemv_streams.h), software prefetch and the page touch as
// this CPU's plan says (x16_gemv_plan in isa.h): 4 streams everywhere but on AMD Zen 5 and later
// (one stream with the touch). On Zen 4, where the quantized layouts read best with 2 streams, 2
// were 0-10 % slower here: a group is a single stream and its 32 bytes per column are read at
// half a quantized group's rate per FMA.
template <class Columns>
void gemv(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act, float* out) {
  const auto* x = reinterpret_cast<const float*>(act);
  const X16GemvPlan plan = x16_gemv_plan(Columns::kKind);
  // Several streams take turns of kX16LongRunColumns columns each where this CPU takes long runs
  // (ops/isa.h x16_gemv_long_runs), else of a step's 8: one Zen 4 core, 4 streams, 192000 x 2048
  // weights (786 MB), old and new kernels in one process, the same bits: F16 30.7-31.0 -> 33.3-33.9
  // GB/s (1.09-1.11x), BF16 1.12-1.14x; from L2 F16 1.06x, BF16 0.83x (83 -> 69 GB/s).
  const bool long_runs = x16_gemv_long_runs();
  x16_gemv_stream_groups(plan.streams, groups, n_groups, Columns::group_bytes(n), out,
                         [&](auto streams, const std::byte* const* group, float* const* outs) {
                           constexpr int kS = decltype(streams)::value;
                           const auto tile = [&](auto prefetch, auto run) {
                             x16_float_tile<Columns, kS, 1, decltype(prefetch)::value,
                                            decltype(run)::value>(n, group, &x, outs, 0,
                                                                  plan.page_touch);
                           };
                           using Yes = std::true_type;
                           using No = std::false_type;
                           using Long = std::integral_constant<int64_t, kX16LongRunColumns>;
                           using Short = std::integral_constant<int64_t, 0>;
                           if (kS > 1 && long_runs) {
                             plan.prefetch ? tile(Yes{}, Long{}) : tile(No{}, Long{});
                           } else {
                             plan.prefetch ? tile(Yes{}, Short{}) : tile(No{}, Short{});
                           }
                         });
}

// Below kX16FewTokensMax tokens the GEMM is a GEMV over several tokens: it reads the weights from
// DRAM once like the GEMV (2 far-apart groups at a time, software prefetch where the GEMV has it)
// with 4 tokens per pass (2 x 4 x 4 accumulators take all 32 zmm registers, yet pp4 ran faster
// so than as 3 tokens plus a second pass for the fourth), then again from L2 for the next
// tokens of the same two groups. Every (row, token) runs the GEMV's steps, so the result is the
// GEMV's bit for bit. One Sapphire Rapids core, TinyLlama F16: pp2 8.4-9.1 -> 16-19 tok/s, pp4
// 18-20 -> 29-31, pp7 22 -> 33 against reading each group alone, 4 tokens a pass, without
// prefetch. Rows-in-lanes (below) only wins from 16 tokens (pp8: 24 vs 33-38, pp12: 28 vs 37):
// kX16FewTokensMax (interleaved.h).

template <class Columns>
void gemm_few_tokens(int64_t n, const std::byte* groups, int64_t n_groups, const float* x,
                     int64_t x_stride, int64_t nt, float* out, int64_t out_stride) {
  const bool prefetch = gemv_software_prefetch();
  x16_gemv_stream_groups<2>(groups, n_groups, Columns::group_bytes(n), out,
                            [&](auto streams, const std::byte* const* group, float* const* outs) {
                              constexpr int kS = decltype(streams)::value;
                              int64_t t = 0;
                              // Tokens [t, t + T) over the kS groups; the first pass streams them
                              // from DRAM.
                              auto pass = [&](auto tokens) {
                                constexpr int kT = decltype(tokens)::value;
                                const float* xs[kT];
                                float* ot[kS];
                                for (int k = 0; k < kT; ++k) xs[k] = x + (t + k) * x_stride;
                                for (int s = 0; s < kS; ++s) ot[s] = outs[s] + t * out_stride;
                                if (t == 0 && prefetch) {
                                  x16_float_tile<Columns, kS, kT, true>(n, group, xs, ot,
                                                                        out_stride);
                                } else {
                                  x16_float_tile<Columns, kS, kT>(n, group, xs, ot, out_stride);
                                }
                                t += kT;
                              };
                              while (nt - t >= 4) pass(std::integral_constant<int, 4>{});
                              if (nt - t == 3) pass(std::integral_constant<int, 3>{});
                              if (nt - t == 2) pass(std::integral_constant<int, 2>{});
                              if (nt - t == 1) pass(std::integral_constant<int, 1>{});
                            });
}

// Prefill from kX16FewTokensMax tokens on, with a group's 16 rows in the vector lanes: for S
// groups (group s at group + s * group_bytes) and T tokens (t0.. of one block of
// float_rows::gemm_prepare's transposed activations, tv vectors of 16 tokens), per column c one
// widened vector of 16 rows per group and S * T FMAs, each with one token's x[c] broadcast (the T
// values are contiguous in the block). Each weight vector is widened once per T tokens, and
// nothing but the FMAs and their loads is in the loop: with one group, on one Zen 4 core ~89 % of
// the FMA peak, where the row-major F16 GEMM (tokens in lanes, widened panels) reaches ~77 %
// (Llama-3.2-1B shape F16 pp64: 46.5 -> 54 tok/s). Each (row, token) sums chunks of kLanesChunk
// columns in order, then the chunk sums, like the row-major GEMM, whatever S and T are.
template <class Columns, int S, int T>
void rows_in_lanes(int64_t n, const std::byte* group, int64_t group_bytes, const float* xt,
                   int64_t tv, int64_t t0, float* out, int64_t out_stride) {
  alignas(64) float total[S * T * 16];
  for (int i = 0; i < S * T; ++i) _mm512_store_ps(total + 16 * i, _mm512_setzero_ps());
  const int64_t xs = tv * 16;
  for (int64_t k0 = 0; k0 < n; k0 += float_rows::kLanesChunk) {
    const int64_t k1 = std::min(n, k0 + float_rows::kLanesChunk);
    __m512 acc[S][T];
    unroll<S>([&](auto s) { unroll<T>([&](auto t) { acc[s()][t()] = _mm512_setzero_ps(); }); });
    for (int64_t k = k0; k < k1; ++k) {
      __m512 w[S];
      unroll<S>([&](auto s) { w[s()] = load_column<Columns>(group + s() * group_bytes, k); });
      const float* xk = xt + k * xs + t0;
      unroll<T>([&](auto t) {
        const __m512 x = _mm512_set1_ps(xk[t()]);
        unroll<S>([&](auto s) { acc[s()][t()] = _mm512_fmadd_ps(w[s()], x, acc[s()][t()]); });
      });
    }
    unroll<S>([&](auto s) {
      unroll<T>([&](auto t) {
        float* sum = total + 16 * (s() * T + t());
        _mm512_store_ps(sum, _mm512_add_ps(_mm512_load_ps(sum), acc[s()][t()]));
      });
    });
  }
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < T; ++t) {
      _mm512_storeu_ps(out + t * out_stride + 16 * s, _mm512_load_ps(total + 16 * (s * T + t)));
    }
  }
}

// S groups against a block of up to 64 tokens: tiles of T tokens, then 4, then 1 (T = 16 for a
// lone group, 12 for two: 16 and 24 independent FMA chains hide the latency).
template <class Columns, int S>
void rows_in_lanes_block(int64_t n, const std::byte* group, int64_t group_bytes, const float* xt,
                         int64_t tokens, float* out, int64_t out_stride) {
  const int64_t tv = (tokens + 15) / 16;
  int64_t t = 0;
  auto tiles = [&](auto tile_tokens) {
    constexpr int kT = decltype(tile_tokens)::value;
    for (; t + kT <= tokens; t += kT) {
      rows_in_lanes<Columns, S, kT>(n, group, group_bytes, xt, tv, t, out + t * out_stride,
                                    out_stride);
    }
  };
  constexpr int kTileTokens = S == 1 ? 16 : 12;
  tiles(std::integral_constant<int, kTileTokens>{});
  tiles(std::integral_constant<int, 4>{});
  tiles(std::integral_constant<int, 1>{});
}

// Two groups at a time: per column 2 weight vectors widened and 12 broadcasts for 24 FMAs (14
// loads per 24 FMAs, where a lone group takes 17 per 16). TinyLlama pp64 on a Zen 5 guest, against
// one group at a time, 3 alternations: F16 1.26-1.37x at 1 thread and 1.16-1.22x at 2, BF16
// (PACER_BF16_DOT=0) 1.23-1.37x at 1; 3 groups x 8 tokens ran as 2 x 12 did.
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
  for (int64_t g = 0; g < n_groups;) {
    const bool pair = g + 2 <= n_groups;
    const std::byte* group = groups + g * group_bytes;
    for (int64_t t0 = 0; t0 < nt; t0 += 64) {
      const int64_t tokens = std::min<int64_t>(64, nt - t0);
      float* o = out + t0 * out_stride + g * kX16Rows;
      if (pair) {
        rows_in_lanes_block<Columns, 2>(n, group, group_bytes, xt + t0 * n, tokens, o, out_stride);
      } else {
        rows_in_lanes_block<Columns, 1>(n, group, group_bytes, xt + t0 * n, tokens, o, out_stride);
      }
    }
    g += pair ? 2 : 1;
  }
}

}  // namespace

PACER_X16_FLOAT_ENTRIES(f16, F16Columns, avx512, float_rows::gemm_prepare)
PACER_X16_FLOAT_ENTRIES(bf16, BF16PairColumns, avx512, float_rows::gemm_prepare)

}  // namespace pacer::ops
