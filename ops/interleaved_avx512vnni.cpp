// The x16 layouts (interleaved.h) x act-Q8 on AVX-512 VNNI: the decode GEMVs of the 32-element
// block types (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL), their few-token GEMMs, and the Q4_0/Q8_0
// prefill GEMMs through the hex tiles of repacked_gemm_avx512.h.
//
// GEMV, per group of 16 rows and block b: 8 vectors of unsigned quants, vector j holding quants
// 4j..4j+3 of the 16 rows (Q8_0: the chunks as stored, q + 128; Q4_0: chunk m's low nibbles are
// vector m and its high nibbles vector m + 4, split by AND and shift-AND; Q4_1 the same; Q5_0 /
// Q5_1 with their fifth bits OR-ed in; IQ4_NL looked up in its table + 128), each dotted with
// dword j of the activation block broadcast (vpdpbusd; 4 products per dword, exact). The
// accumulator starts at -offset * sum_b(x) (offset 128, 16, 8 or 0), which removes the offset
// exactly, so its 16 dwords end as the 16 rows' integer block dots; one conversion, one multiply
// (d_w of the 16 rows times d_x) and one FMA then serve all 16 rows (Q4_1 / Q5_1: one more FMA
// adds m_w * d_x * sum_b(x)). Per row: sum_b d_w * d_x * isum_b in block order, as the scalar
// references compute it (the FMA rounds once where they round twice).
#include "ops/gemv_streams.h"
#include "ops/interleaved.h"
#include "ops/iq4_nl.h"
#include "ops/isa.h"
#include "ops/matmul_simd_avx512.h"  // first: wraps <immintrin.h>
#include "ops/q8_0.h"
#include "ops/repacked_gemm_avx512.h"
#include "ops/unroll.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace pacer::ops {
namespace {

// Block pairs each stream prefetches ahead (Q4_0: 2.3 KiB). Twice as far for a matmul on one
// worker (gemv_q4_0x16_q8_0_avx512vnni_lone): Zen 5 dev VM, TinyLlama Q4_0 decode, the two
// alternating step by step (ABBA, 300-400 pairs): 1 thread 0.936-0.979x the step time with 8 (5
// of 5 runs; 12 gave 0.96-1.01x), 2 threads 0.986x in a fast hour and 1.064x in a slow one;
// 2 pairs were slower at both (1.06x and 1.04x). One core's lines in flight are what bounds it
// alone, and a further prefetch adds to them; two cores share DRAM, where reaching further only
// queues more. The lone GEMV's page touch (x16_gemv_plan) reaches twice as far as well: on top of
// the 8 pairs, a 16 KiB touch against the plan's 8 KiB ran 0.950, 0.986 and 0.990x the 1-thread
// step time (24 and 32 KiB 0.982 and 0.986, 4 KiB 1.023; A/A 0.998).
constexpr int64_t kPrefetchPairs = 4;
constexpr int64_t kLonePrefetchPairs = 8;

// A layout: its type, a block's bytes after the pair's header (kQsBytes), the header's bytes
// (d of both blocks, and Q4_1's / Q5_1's m), the quant offset the accumulator starts from,
// whether an m term follows (Q4_1, Q5_1), and load(): the 8 unsigned quant vectors of one block
// of 16 rows.
struct Q4_0x16 {
  static constexpr WeightType kType = WeightType::Q4_0;
  static constexpr int64_t kQsBytes = 256;
  static constexpr int64_t kHeaderBytes = 64;
  static constexpr int32_t kOffset = 8;
  static constexpr bool kHasMin = false;
  // The 8 unsigned quant vectors of one block of 16 rows.
  static void load(const std::byte* qs, __m512i* v) {
    const __m512i mask = _mm512_set1_epi8(0x0F);
    for (int m = 0; m < 4; ++m) {
      const __m512i q = _mm512_load_si512(qs + 64 * m);
      v[m] = _mm512_and_si512(q, mask);
      v[m + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
    }
  }
};

struct Q8_0x16 {
  static constexpr WeightType kType = WeightType::Q8_0;
  static constexpr int64_t kQsBytes = 512;
  static constexpr int64_t kHeaderBytes = 64;
  static constexpr int32_t kOffset = 128;
  static constexpr bool kHasMin = false;
  static void load(const std::byte* qs, __m512i* v) {
    for (int j = 0; j < 8; ++j) v[j] = _mm512_load_si512(qs + 64 * j);
  }
};

// Q4_1: Q4_0's nibbles as they are (offset 0), its m after the d.
struct Q4_1x16 {
  static constexpr WeightType kType = WeightType::Q4_1;
  static constexpr int64_t kQsBytes = 256;
  static constexpr int64_t kHeaderBytes = 128;
  static constexpr int32_t kOffset = 0;
  static constexpr bool kHasMin = true;
  static void load(const std::byte* qs, __m512i* v) { Q4_0x16::load(qs, v); }
};

// IQ4_NL: Q4_0's layout and nibbles, each looked up in the table shifted by +128 (vpshufb, the
// same 16 bytes in every lane): unsigned values in [1, 241], offset 128 as Q8_0's.
struct IQ4_NLx16 {
  static constexpr WeightType kType = WeightType::IQ4_NL;
  static constexpr int64_t kQsBytes = 256;
  static constexpr int64_t kHeaderBytes = 64;
  static constexpr int32_t kOffset = 128;
  static constexpr bool kHasMin = false;
  static constexpr std::array<uint8_t, 16> kTable = [] {
    std::array<uint8_t, 16> t{};
    for (size_t k = 0; k < t.size(); ++k) t[k] = static_cast<uint8_t>(kIq4NlValues[k] + 128);
    return t;
  }();
  static void load(const std::byte* qs, __m512i* v) {
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kTable.data())));
    Q4_0x16::load(qs, v);
    for (int j = 0; j < 8; ++j) v[j] = _mm512_shuffle_epi8(lut, v[j]);
  }
};

// Q5_0 / Q5_1: Q4_0's nibbles with the fifth bit of each quant OR-ed into bit 4. The block's
// first vector holds, in byte b of dword i, the fifth bits of elements 4m + b (bit m) and
// 16 + 4m + b (bit 4 + m) of row i: a 16-bit shift by 4 - m (left) or m (right) brings them to
// bit 4 of every byte (no bit crosses a byte boundary into bit 4), and one vpternlogd keeps bit
// 4 of it over the nibble: 3-4 ops per quant vector where Q4_0 takes 1-2.
template <WeightType T>
struct Q5x16 {
  static constexpr WeightType kType = T;
  static constexpr int64_t kQsBytes = 320;
  static constexpr int64_t kHeaderBytes = T == WeightType::Q5_1 ? 128 : 64;
  static constexpr int32_t kOffset = T == WeightType::Q5_1 ? 0 : 16;
  static constexpr bool kHasMin = T == WeightType::Q5_1;
  static void load(const std::byte* blk, __m512i* v) {
    const __m512i mask = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
    const __m512i h = _mm512_load_si512(blk);
    // A | (B & C): imm 0xF8.
    const auto with_fifth = [&](__m512i nibbles, __m512i shifted) {
      return _mm512_ternarylogic_epi32(nibbles, shifted, bit4, 0xF8);
    };
    const __m512i h_lo[4] = {_mm512_slli_epi16(h, 4), _mm512_slli_epi16(h, 3),
                             _mm512_slli_epi16(h, 2), _mm512_slli_epi16(h, 1)};
    const __m512i h_hi[4] = {h, _mm512_srli_epi16(h, 1), _mm512_srli_epi16(h, 2),
                             _mm512_srli_epi16(h, 3)};
    for (int m = 0; m < 4; ++m) {
      const __m512i q = _mm512_load_si512(blk + 64 + 64 * m);
      v[m] = with_fifth(_mm512_and_si512(q, mask), h_lo[m]);
      v[m + 4] = with_fifth(_mm512_and_si512(_mm512_srli_epi16(q, 4), mask), h_hi[m]);
    }
  }
};
using Q5_0x16 = Q5x16<WeightType::Q5_0>;
using Q5_1x16 = Q5x16<WeightType::Q5_1>;

inline int32_t act_dword(const int8_t* q, int j) {
  int32_t v;
  std::memcpy(&v, q + 4 * j, 4);
  return v;
}

// Block b of one group (16 rows) against T tokens into acc[0..T): its weight vectors loaded (and
// for Q4_0 unpacked) once for all T tokens. xb: token 0's activation dwords of block b broadcast
// (T == 1; unused for T > 1).
template <class Layout, int T>
[[gnu::always_inline]] inline void group_block(const std::byte* group, int64_t b, const ActQ8Row* x,
                                               const __m512i* xb, __m512* acc) {
  constexpr int64_t kPairBytes = Layout::kHeaderBytes + 2 * Layout::kQsBytes;
  const std::byte* pair = group + b / 2 * kPairBytes;
  __m512i w[8];
  Layout::load(pair + Layout::kHeaderBytes + Layout::kQsBytes * (b % 2), w);
  const __m512 dw =
      _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pair + 32 * (b % 2))));
  __m512 mw = _mm512_setzero_ps();
  if constexpr (Layout::kHasMin) {
    mw = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(pair + 64 + 32 * (b % 2))));
  }
  for (int t = 0; t < T; ++t) {
    auto xj = [&](int j) {
      if constexpr (T == 1) return xb[j];
      return _mm512_set1_epi32(act_dword(x[t].q + 32 * b, j));
    };
    // Two chains (vpdpbusd latency ~5), joined at the end.
    __m512i even = _mm512_set1_epi32(-Layout::kOffset * x[t].sum[b]), odd = _mm512_setzero_si512();
    for (int j = 0; j < 8; j += 2) {
      even = _mm512_dpbusd_epi32(even, w[j], xj(j));
      odd = _mm512_dpbusd_epi32(odd, w[j + 1], xj(j + 1));
    }
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)),
                             _mm512_mul_ps(dw, _mm512_set1_ps(x[t].d[b])), acc[t]);
    if constexpr (Layout::kHasMin) {  // + m_w * d_x * sum_b(x)
      acc[t] =
          _mm512_fmadd_ps(mw, _mm512_set1_ps(x[t].d[b] * static_cast<float>(x[t].sum[b])), acc[t]);
    }
  }
}

// S groups (16 rows each) at once against T tokens: the S groups are S sequential streams, read
// kRun blocks of one stream, then of the next (kRun == 1: block by block). Every (row, token)
// takes the same steps whatever S, T and kRun are, so the few-token GEMM equals the GEMV per
// token bit for bit. out[s] + t * out_stride: group s's 16 outputs of token t. The GEMV reads
// runs of kX16LongRunBlocks where this CPU takes long runs (ops/isa.h x16_gemv_long_runs): one
// Zen 4 core, 448000 x 2048 weights (0.5-1 GB), old and new kernels in one process, the same
// bits: Q4_0 30.1-30.6 -> 32.4 GB/s (1.07-1.11x), Q4_1 1.07x, Q5_0 1.07-1.11x, Q5_1 1.10x, IQ4_NL
// 1.12x; from L2 0.95-0.97x (the activation broadcasts are made once per stream, not once for
// both). Q8_0 reads one stream there (x16_gemv_plan), where runs change nothing.
template <class Layout, int S, int T, int64_t kAheadPairs = kPrefetchPairs, int64_t kRun = 1>
void gemv_groups(int64_t nb, const std::byte* const* group, const ActQ8Row* x, float* const* out,
                 int64_t out_stride, bool prefetch, int64_t page_touch) {
  constexpr int64_t kPairBytes = Layout::kHeaderBytes + 2 * Layout::kQsBytes;
  __m512 acc[S][T];
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < T; ++t) acc[s][t] = _mm512_setzero_ps();
  }
  // The touch and prefetch ahead of stream s at block b.
  const auto ahead = [&](int s, int64_t b) [[gnu::always_inline]] {
    if (page_touch > 0)
      touch_pages_ahead(group[s] + b * (kPairBytes / 2), kPairBytes / 2, page_touch);
    if (prefetch && b % 2 == 0) {
      const char* p =
          reinterpret_cast<const char*>(group[s]) + b / 2 * kPairBytes + kAheadPairs * kPairBytes;
      for (int64_t line = 0; line < kPairBytes; line += 64) _mm_prefetch(p + line, _MM_HINT_T0);
    }
  };
  if constexpr (kRun <= 1) {
    for (int64_t b = 0; b < nb; ++b) {
      for (int s = 0; s < S; ++s) ahead(s, b);
      // One token: its activation block broadcast once for all S groups (the GEMV's case).
      __m512i xb[8];
      if constexpr (T == 1) {
        for (int j = 0; j < 8; ++j) xb[j] = _mm512_set1_epi32(act_dword(x[0].q + 32 * b, j));
      }
      for (int s = 0; s < S; ++s) group_block<Layout, T>(group[s], b, x, xb, acc[s]);
    }
  } else {
    static_assert(T == 1, "runs are the GEMV's");
    for (int64_t b0 = 0; b0 < nb; b0 += kRun) {
      const int64_t end = std::min(nb, b0 + kRun);
      unroll<S>([&](auto s) {
        for (int64_t b = b0; b < end; ++b) {
          ahead(s, b);
          __m512i xb[8];
          for (int j = 0; j < 8; ++j) xb[j] = _mm512_set1_epi32(act_dword(x[0].q + 32 * b, j));
          group_block<Layout, 1>(group[s], b, x, xb, acc[s]);
        }
      });
    }
  }
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(out[s] + t * out_stride, acc[s][t]);
  }
}

template <class Layout, int64_t kAheadPairs = kPrefetchPairs>
void gemv_x16(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
              float* out) {
  const int64_t nb = n / 32;
  const int64_t group_bytes = x16_group_bytes(Layout::kType, n);
  const ActQ8Row x = act_q8_row(act, n);
  // Groups from 1, 2 or 4 far-apart stretches at a time (ops/gemv_streams.h), prefetched and
  // touched ahead as this CPU's plan for the type says (x16_gemv_plan() in ops/isa.h).
  const X16GemvPlan plan = x16_gemv_plan(x16_gemv_kind(Layout::kType));
  const int64_t page_touch =
      kAheadPairs == kLonePrefetchPairs ? 2 * plan.page_touch : plan.page_touch;
  // Runs of kX16LongRunBlocks blocks per stream where this CPU takes long runs (ops/isa.h).
  const bool long_runs = x16_gemv_long_runs();
  x16_gemv_stream_groups(plan.streams, groups, n_groups, group_bytes, out,
                         [&](auto streams, const std::byte* const* group, float* const* outs) {
                           constexpr int kS = decltype(streams)::value;
                           // (Runs only where there are streams to take turns.)
                           if constexpr (kS > 1) {
                             if (long_runs) {
                               gemv_groups<Layout, kS, 1, kAheadPairs, kX16LongRunBlocks>(
                                   nb, group, &x, outs, 0, plan.prefetch, page_touch);
                               return;
                             }
                           }
                           gemv_groups<Layout, kS, 1, kAheadPairs>(nb, group, &x, outs, 0,
                                                                   plan.prefetch, page_touch);
                         });
}

// A few tokens (2 .. kX16FewTokensMax - 1): the GEMV's stream order and prefetch, up to 4 tokens
// per pass over the same groups; the first pass reads them from DRAM, the next ones (tokens
// 5 ..) find the S groups (<= 4 x 96 KiB for rows of 5632) in L2.
template <class Layout>
void gemm_few_x16(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
                  int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  const int64_t nb = n / 32;
  const int64_t group_bytes = x16_group_bytes(Layout::kType, n);
  const X16GemvPlan plan = x16_gemv_plan(x16_gemv_kind(Layout::kType));
  // Meant for nt < kX16FewTokensMax; a longer call (a direct caller's) runs in such slices.
  for (int64_t t0 = 0; t0 < nt; t0 += kX16FewTokensMax - 1) {
    const int64_t slice = std::min(nt - t0, kX16FewTokensMax - 1);
    ActQ8Row x[kX16FewTokensMax];
    for (int64_t t = 0; t < slice; ++t) x[t] = act_q8_row(act + (t0 + t) * act_stride, n);
    x16_gemv_stream_groups(plan.streams, groups, n_groups, group_bytes, out + t0 * out_stride,
                           [&](auto streams, const std::byte* const* group, float* const* outs) {
                             constexpr int kS = decltype(streams)::value;
                             int64_t t = 0;
                             auto pass = [&](auto tokens) {
                               constexpr int kT = decltype(tokens)::value;
                               float* ot[kS];
                               for (int s = 0; s < kS; ++s) ot[s] = outs[s] + t * out_stride;
                               gemv_groups<Layout, kS, kT>(nb, group, x + t, ot, out_stride,
                                                           plan.prefetch && t == 0,
                                                           t == 0 ? plan.page_touch : 0);
                               t += kT;
                             };
                             while (slice - t >= 4) pass(std::integral_constant<int, 4>{});
                             if (slice - t == 3) pass(std::integral_constant<int, 3>{});
                             if (slice - t == 2) pass(std::integral_constant<int, 2>{});
                             if (slice - t == 1) pass(std::integral_constant<int, 1>{});
                           });
  }
}

// The prefill GEMM: hex tiles unpacked from the groups (unsigned quants, VNNI).
template <class Layout>
void gemm_x16(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
              int64_t act_stride, int64_t nt, float* out, int64_t out_stride) {
  avx512::X16Tiles<Layout::kType, false> src{groups, x16_group_bytes(Layout::kType, n)};
  avx512::hex_gemm<Layout::kOffset>(n, src, n_groups * kX16Rows, act, act_stride, nt, out,
                                    out_stride);
}

template <class Layout>
void gemm_x16_prepared(int64_t n, const std::byte* groups, int64_t n_groups,
                       const std::byte* prepared, int64_t nt, float* out, int64_t out_stride) {
  avx512::X16Tiles<Layout::kType, false> src{groups, x16_group_bytes(Layout::kType, n)};
  avx512::hex_gemm_prepared(n, src, n_groups * kX16Rows, prepared, nt, out, out_stride);
}

}  // namespace

void gemv_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  gemv_x16<Q4_0x16>(n, groups, n_groups, act, out);
}

void gemv_q4_0x16_q8_0_avx512vnni_lone(int64_t n, const std::byte* groups, int64_t n_groups,
                                       const std::byte* act, float* out) {
  gemv_x16<Q4_0x16, kLonePrefetchPairs>(n, groups, n_groups, act, out);
}

void gemm_few_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride) {
  gemm_few_x16<Q4_0x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemv_q5_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  gemv_x16<Q5_0x16>(n, groups, n_groups, act, out);
}

void gemv_q5_1x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  gemv_x16<Q5_1x16>(n, groups, n_groups, act, out);
}

void gemv_q4_1x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  gemv_x16<Q4_1x16>(n, groups, n_groups, act, out);
}

void gemm_few_q4_1x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride) {
  gemm_few_x16<Q4_1x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemv_iq4_nlx16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                    const std::byte* act, float* out) {
  gemv_x16<IQ4_NLx16>(n, groups, n_groups, act, out);
}

void gemm_few_iq4_nlx16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                        const std::byte* act, int64_t act_stride, int64_t nt,
                                        float* out, int64_t out_stride) {
  gemm_few_x16<IQ4_NLx16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemm_few_q5_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride) {
  gemm_few_x16<Q5_0x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemm_few_q5_1x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride) {
  gemm_few_x16<Q5_1x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemm_few_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                      const std::byte* act, int64_t act_stride, int64_t nt,
                                      float* out, int64_t out_stride) {
  gemm_few_x16<Q8_0x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

void gemv_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, float* out) {
  gemv_x16<Q8_0x16>(n, groups, n_groups, act, out);
}

void gemm_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  gemm_x16<Q4_0x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

int64_t gemm_prepare_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* act, int64_t act_stride,
                                             int64_t nt, std::byte* dst, int64_t part,
                                             int64_t parts) {
  return avx512::hex_prepare<Q4_0x16::kOffset>(n, act, act_stride, nt, dst, part, parts);
}

void gemm_prepared_q4_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                           const std::byte*, int64_t, const std::byte* prepared,
                                           int64_t nt, float* out, int64_t out_stride) {
  gemm_x16_prepared<Q4_0x16>(n, groups, n_groups, prepared, nt, out, out_stride);
}

void gemm_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                  const std::byte* act, int64_t act_stride, int64_t nt, float* out,
                                  int64_t out_stride) {
  gemm_x16<Q8_0x16>(n, groups, n_groups, act, act_stride, nt, out, out_stride);
}

int64_t gemm_prepare_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* act, int64_t act_stride,
                                             int64_t nt, std::byte* dst, int64_t part,
                                             int64_t parts) {
  return avx512::hex_prepare<Q8_0x16::kOffset>(n, act, act_stride, nt, dst, part, parts);
}

void gemm_prepared_q8_0x16_q8_0_avx512vnni(int64_t n, const std::byte* groups, int64_t n_groups,
                                           const std::byte*, int64_t, const std::byte* prepared,
                                           int64_t nt, float* out, int64_t out_stride) {
  gemm_x16_prepared<Q8_0x16>(n, groups, n_groups, prepared, nt, out, out_stride);
}

}  // namespace pacer::ops
