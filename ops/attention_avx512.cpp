// AVX-512 attention: K/V rows convert F16 (vcvtph2ps) or Q8_0 (vpmovsxbd, scale) -> F32 in
// registers, q.k over head_dim in
// 16-lane FMAs, exp over the key tile in 16 lanes. The group size G (query heads sharing a KV
// head) is a template parameter so the G accumulators live in registers while each K/V row
// chunk is loaded once for all of them.
// GCC 12 warns inside its own AVX-512 intrinsics (-Wmaybe-uninitialized on the
// _mm512_undefined_ps() they pass through, GCC bug 105593); silence it for that header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/attention_kernels.h"
#include "ops/q8_0.h"
#include "ops/softmax_math_avx512.h"

namespace pacer::ops {
namespace {

__mmask16 tail_mask(int64_t rem) {
  return rem >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << rem) - 1u);
}

// 16 elements of a cache row starting at element d, as fp32; lanes outside `m` are 0.
template <typename Elem>
__m512 load_row(const std::byte* row, int d, __mmask16 m) {
  if constexpr (std::is_same_v<Elem, BlockQ8_0>) {
    // head_dim % 32 == 0 (checked by attention()), so m is full and the 16 elements are one half
    // of one block: w = d * q.
    (void)m;
    const auto* block = reinterpret_cast<const BlockQ8_0*>(row) + d / kQ8_0BlockElems;
    const __m128i q8 =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(block->qs + d % kQ8_0BlockElems));
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(block->d)),
                         _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q8)));
  } else if constexpr (std::is_same_v<Elem, fp16_t>) {
    const auto* h = reinterpret_cast<const fp16_t*>(row) + d;
    return _mm512_cvtph_ps(m == 0xffff ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h))
                                       : _mm256_maskz_loadu_epi16(m, h));
  } else {
    const auto* f = reinterpret_cast<const float*>(row) + d;
    return m == 0xffff ? _mm512_loadu_ps(f) : _mm512_maskz_loadu_ps(m, f);
  }
}

// Horizontal sums. Both helpers add a vector's 16 lanes in the same order -- within each 128-bit
// block (x0 + x2) + (x1 + x3), then (B0 + B1) + (B2 + B3) across blocks -- so a score does not
// depend on which helper produced it (that is what keeps results independent of how heads are
// grouped, i.e. of the worker count).

// Lane i of the result = sum of a[i]'s lanes, for 16 vectors at once: 30 shuffles instead of the
// 64 that 16 separate reductions take (all on the one shuffle port).
inline __m512 sum_lanes16(const __m512* a) {
  __m512 b[8], e[4];
  // Per 128-bit block: (A0+A2, B0+B2, A1+A3, B1+B3) for A = a[2i], B = a[2i+1].
  for (int i = 0; i < 8; ++i) {
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {  // per block: the block sums of a[4i .. 4i+3]
    e[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m512 g01 = _mm512_add_ps(_mm512_shuffle_f32x4(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 g23 = _mm512_add_ps(_mm512_shuffle_f32x4(e[2], e[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(e[2], e[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(g01, g23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(g01, g23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Sum of one vector's lanes, in sum_lanes16's order.
inline float sum_lanes1(__m512 v) {
  v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_cvtss_f32(v);
}

// acc[ks * G + g] += qs[g] . k_ks over head_dim for `KS` consecutive key rows from `krow`.
// qs rows are zero-padded to a multiple of 16, so the masked tail chunk adds nothing extra.
template <typename Elem, int G, int KS>
void dot_keys(const float (*qs)[kMaxHeadDim], int dim, const std::byte* krow, int64_t row_bytes,
              __m512* acc) {
  for (int i = 0; i < G * KS; ++i) acc[i] = _mm512_setzero_ps();
  for (int d = 0; d < dim; d += 16) {
    const __mmask16 m = tail_mask(dim - d);
    for (int ks = 0; ks < KS; ++ks) {
      const __m512 k = load_row<Elem>(krow + ks * row_bytes, d, m);
      for (int g = 0; g < G; ++g) {
        acc[ks * G + g] = _mm512_fmadd_ps(_mm512_load_ps(qs[g] + d), k, acc[ks * G + g]);
      }
    }
  }
}

// Scores of `nt` keys starting at row `krow` for G scaled queries: s[g][j] = qs[g] . k_j. Keys go
// KS at a time so that G * KS <= 16 accumulators reduce together.
template <typename Elem, int G>
void score_tile(const float (*qs)[kMaxHeadDim], int dim, const std::byte* krow, int64_t row_bytes,
                int nt, float (*s)[kKeyTile]) {
  constexpr int KS = 16 / G;
  int j = 0;
  if constexpr (KS > 1) {
    for (; j + KS <= nt; j += KS, krow += KS * row_bytes) {
      __m512 acc[16];
      dot_keys<Elem, G, KS>(qs, dim, krow, row_bytes, acc);
      for (int i = G * KS; i < 16; ++i) acc[i] = _mm512_setzero_ps();
      alignas(64) float sums[16];
      _mm512_store_ps(sums, sum_lanes16(acc));
      for (int ks = 0; ks < KS; ++ks) {
        for (int g = 0; g < G; ++g) s[g][j + ks] = sums[ks * G + g];
      }
    }
  }
  for (; j < nt; ++j, krow += row_bytes) {
    __m512 acc[G];
    dot_keys<Elem, G, 1>(qs, dim, krow, row_bytes, acc);
    for (int g = 0; g < G; ++g) s[g][j] = sum_lanes1(acc[g]);
  }
}

// acc[g] += sum_j p[g][j] * v_j over `nt` value rows starting at `vrow`, 16 dims at a time so the
// G accumulators for those dims stay in registers across the whole tile.
template <typename Elem, int G>
void accumulate_tile(const float (*p)[kKeyTile], const std::byte* vrow0, int64_t row_bytes, int nt,
                     int dim, float (*acc)[kMaxHeadDim]) {
  for (int d = 0; d < dim; d += 16) {
    const __mmask16 m = tail_mask(dim - d);
    __m512 a[G];
    for (int g = 0; g < G; ++g) a[g] = _mm512_load_ps(acc[g] + d);
    const std::byte* vrow = vrow0;
    for (int j = 0; j < nt; ++j, vrow += row_bytes) {
      const __m512 v = load_row<Elem>(vrow, d, m);
      for (int g = 0; g < G; ++g) a[g] = _mm512_fmadd_ps(_mm512_set1_ps(p[g][j]), v, a[g]);
    }
    for (int g = 0; g < G; ++g) _mm512_store_ps(acc[g] + d, a[g]);
  }
}

template <typename Elem, int G>
void attend(const AttentionTask& t) {
  const int dim = t.head_dim;
  const int padded = (dim + 15) / 16 * 16;
  alignas(64) float qs[G][kMaxHeadDim];
  alignas(64) float acc[G][kMaxHeadDim];
  alignas(64) float s[G][kKeyTile];
  float m[G], l[G];
  for (int g = 0; g < G; ++g) {
    for (int d = 0; d < dim; ++d) qs[g][d] = t.q[g * dim + d] * t.scale;
    std::fill(qs[g] + dim, qs[g] + padded, 0.0f);
    std::fill(acc[g], acc[g] + padded, 0.0f);
    m[g] = -std::numeric_limits<float>::infinity();
    l[g] = 0.0f;
  }
  for (int64_t j0 = t.key_begin; j0 < t.key_end; j0 += kKeyTile) {
    const int nt = static_cast<int>(std::min<int64_t>(kKeyTile, t.key_end - j0));
    score_tile<Elem, G>(qs, dim, t.k + j0 * t.row_bytes, t.row_bytes, nt, s);
    // Online softmax step: new running max, rescale what was accumulated under the old one.
    for (int g = 0; g < G; ++g) {
      __m512 vmax = _mm512_set1_ps(-INFINITY);
      for (int j = 0; j < nt; j += 16) {
        const __mmask16 mk = tail_mask(nt - j);
        __m512 v = _mm512_maskz_loadu_ps(mk, s[g] + j);
        if (t.softcap > 0.0f) {
          v = avx512::softcap_ps(v, t.softcap);
          _mm512_mask_storeu_ps(s[g] + j, mk, v);
        }
        vmax = _mm512_mask_max_ps(vmax, mk, vmax, v);
      }
      const float m_new = std::max(m[g], _mm512_reduce_max_ps(vmax));
      const float corr = std::isinf(m[g]) ? 0.0f : std::exp(m[g] - m_new);
      const __m512 mv = _mm512_set1_ps(m_new);
      __m512 sum = _mm512_setzero_ps();
      for (int j = 0; j < nt; j += 16) {
        const __mmask16 mk = tail_mask(nt - j);
        const __m512 e = avx512::exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s[g] + j), mv));
        sum = _mm512_mask_add_ps(sum, mk, sum, e);
        _mm512_mask_storeu_ps(s[g] + j, mk, e);
      }
      l[g] = l[g] * corr + _mm512_reduce_add_ps(sum);
      if (corr != 1.0f) {
        const __m512 cv = _mm512_set1_ps(corr);
        for (int d = 0; d < padded; d += 16) {
          _mm512_store_ps(acc[g] + d, _mm512_mul_ps(_mm512_load_ps(acc[g] + d), cv));
        }
      }
      m[g] = m_new;
    }
    accumulate_tile<Elem, G>(s, t.v + j0 * t.row_bytes, t.row_bytes, nt, dim, acc);
  }
  for (int g = 0; g < G; ++g) {
    const __m512 inv = _mm512_set1_ps(1.0f / l[g]);
    for (int d = 0; d < dim; d += 16) {
      _mm512_mask_storeu_ps(t.out + g * dim + d, tail_mask(dim - d),
                            _mm512_mul_ps(_mm512_load_ps(acc[g] + d), inv));
    }
  }
}

template <typename Elem>
void attend_any(const AttentionTask& t) {
  with_group_size(t.n_q, [&](auto g) { attend<Elem, decltype(g)::value>(t); });
}

void to_f16_avx512(const float* src, fp16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(dst + i, m, h);
  }
}

constexpr AttentionKernels kAvx512Kernels{attend_any<fp16_t>, attend_any<float>, to_f16_avx512,
                                          attend_any<BlockQ8_0>};

}  // namespace

const AttentionKernels& attention_kernels_avx512() noexcept {
  return kAvx512Kernels;
}

}  // namespace pacer::ops
