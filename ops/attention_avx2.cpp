// AVX2 attention: the algorithm of attention_avx512.cpp on 8 lanes (F16C vcvtph2ps converts K/V
// rows in registers). AVX2 has no masked 16-bit load, so a head_dim tail (head_dim % 8 != 0,
// which no supported model has) is staged through a zero-padded 8-element buffer.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/attention_kernels.h"
#include "ops/q8_0.h"
#include "ops/softmax_math_avx2.h"

namespace pacer::ops {
namespace {

// All-ones in the first `rem` lanes, rem in [0, 8].
__m256i tail_mask(int64_t rem) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rem < 8 ? rem : 8)), lane);
}

// 8 elements of a cache row from element d as fp32.
template <typename Elem>
__m256 load_row(const std::byte* row, int d) {
  if constexpr (std::is_same_v<Elem, BlockQ8_0>) {
    // 8 elements of one block (d % 8 == 0, head_dim % 32 == 0): w = d * q.
    const auto* block = reinterpret_cast<const BlockQ8_0*>(row) + d / kQ8_0BlockElems;
    const __m128i q8 =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block->qs + d % kQ8_0BlockElems));
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(block->d)),
                         _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)));
  } else if constexpr (std::is_same_v<Elem, fp16_t>) {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const fp16_t*>(row) + d)));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
  }
}

// The last `rem` (< 8) elements of a row from element d; other lanes 0.
template <typename Elem>
__m256 load_row_tail(const std::byte* row, int d, int rem) {
  if constexpr (std::is_same_v<Elem, BlockQ8_0>) {
    static_cast<void>(row), static_cast<void>(d), static_cast<void>(rem);
    return _mm256_setzero_ps();  // unreachable: Q8_0 rows have no tail (head_dim % 32 == 0)
  } else if constexpr (std::is_same_v<Elem, fp16_t>) {
    alignas(16) fp16_t buf[8] = {};
    std::memcpy(buf, reinterpret_cast<const fp16_t*>(row) + d, rem * sizeof(fp16_t));
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
  } else {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(row) + d, tail_mask(rem));
  }
}

template <typename Elem>
__m256 load_row_any(const std::byte* row, int d, int dim) {
  return d + 8 <= dim ? load_row<Elem>(row, d) : load_row_tail<Elem>(row, d, dim - d);
}

// s[g][j] = qs[g] . k_j for `nt` keys; qs rows are zero-padded to a multiple of 8.
template <typename Elem, int G>
void score_tile(const float (*qs)[kMaxHeadDim], int dim, const std::byte* krow, int64_t row_bytes,
                int nt, float (*s)[kKeyTile]) {
  const int full = dim / 8 * 8;
  for (int j = 0; j < nt; ++j, krow += row_bytes) {
    __m256 a[G];
    for (int g = 0; g < G; ++g) a[g] = _mm256_setzero_ps();
    int d = 0;
    for (; d < full; d += 8) {
      const __m256 k = load_row<Elem>(krow, d);
      for (int g = 0; g < G; ++g) a[g] = _mm256_fmadd_ps(_mm256_load_ps(qs[g] + d), k, a[g]);
    }
    if (d < dim) {
      const __m256 k = load_row_tail<Elem>(krow, d, dim - d);
      for (int g = 0; g < G; ++g) a[g] = _mm256_fmadd_ps(_mm256_load_ps(qs[g] + d), k, a[g]);
    }
    for (int g = 0; g < G; ++g) s[g][j] = avx2::hsum_ps(a[g]);
  }
}

// acc[g] += sum_j p[g][j] * v_j, 8 dims at a time with the G accumulators in registers.
template <typename Elem, int G>
void accumulate_tile(const float (*p)[kKeyTile], const std::byte* vrow0, int64_t row_bytes, int nt,
                     int dim, float (*acc)[kMaxHeadDim]) {
  for (int d = 0; d < dim; d += 8) {
    __m256 a[G];
    for (int g = 0; g < G; ++g) a[g] = _mm256_load_ps(acc[g] + d);
    const std::byte* vrow = vrow0;
    for (int j = 0; j < nt; ++j, vrow += row_bytes) {
      const __m256 v = load_row_any<Elem>(vrow, d, dim);
      for (int g = 0; g < G; ++g) a[g] = _mm256_fmadd_ps(_mm256_set1_ps(p[g][j]), v, a[g]);
    }
    for (int g = 0; g < G; ++g) _mm256_store_ps(acc[g] + d, a[g]);
  }
}

template <typename Elem, int G>
void attend(const AttentionTask& t) {
  const int dim = t.head_dim;
  const int padded = (dim + 7) / 8 * 8;
  alignas(32) float qs[G][kMaxHeadDim];
  alignas(32) float acc[G][kMaxHeadDim];
  alignas(32) float s[G][kKeyTile];
  float m[G], l[G];
  for (int g = 0; g < G; ++g) {
    for (int d = 0; d < dim; ++d) qs[g][d] = t.q[g * dim + d] * t.scale;
    std::fill(qs[g] + dim, qs[g] + padded, 0.0f);
    std::fill(acc[g], acc[g] + padded, 0.0f);
    m[g] = -std::numeric_limits<float>::infinity();
    l[g] = 0.0f;
  }
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  for (int64_t j0 = t.key_begin; j0 < t.key_end; j0 += kKeyTile) {
    const int nt = static_cast<int>(std::min<int64_t>(kKeyTile, t.key_end - j0));
    score_tile<Elem, G>(qs, dim, t.k + j0 * t.row_bytes, t.row_bytes, nt, s);
    for (int g = 0; g < G; ++g) {
      __m256 vmax = neg_inf;
      for (int j = 0; j < nt; j += 8) {
        const __m256i mk = tail_mask(nt - j);
        __m256 v = _mm256_maskload_ps(s[g] + j, mk);
        if (t.softcap > 0.0f) {
          v = avx2::softcap_ps(v, t.softcap);
          _mm256_maskstore_ps(s[g] + j, mk, v);
        }
        vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, v, _mm256_castsi256_ps(mk)));
      }
      const float m_new = std::max(m[g], avx2::hmax_ps(vmax));
      const float corr = std::isinf(m[g]) ? 0.0f : std::exp(m[g] - m_new);
      const __m256 mv = _mm256_set1_ps(m_new);
      __m256 sum = _mm256_setzero_ps();
      for (int j = 0; j < nt; j += 8) {
        const __m256i mk = tail_mask(nt - j);
        const __m256 e = avx2::exp_ps(_mm256_sub_ps(_mm256_maskload_ps(s[g] + j, mk), mv));
        sum = _mm256_add_ps(sum, _mm256_and_ps(e, _mm256_castsi256_ps(mk)));
        _mm256_maskstore_ps(s[g] + j, mk, e);
      }
      l[g] = l[g] * corr + avx2::hsum_ps(sum);
      if (corr != 1.0f) {
        const __m256 cv = _mm256_set1_ps(corr);
        for (int d = 0; d < padded; d += 8) {
          _mm256_store_ps(acc[g] + d, _mm256_mul_ps(_mm256_load_ps(acc[g] + d), cv));
        }
      }
      m[g] = m_new;
    }
    accumulate_tile<Elem, G>(s, t.v + j0 * t.row_bytes, t.row_bytes, nt, dim, acc);
  }
  for (int g = 0; g < G; ++g) {
    const __m256 inv = _mm256_set1_ps(1.0f / l[g]);
    for (int d = 0; d < dim; d += 8) {
      _mm256_maskstore_ps(t.out + g * dim + d, tail_mask(dim - d),
                          _mm256_mul_ps(_mm256_load_ps(acc[g] + d), inv));
    }
  }
}

template <typename Elem>
void attend_any(const AttentionTask& t) {
  with_group_size(t.n_q, [&](auto g) { attend<Elem, decltype(g)::value>(t); });
}

void to_f16_avx2(const float* src, fp16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);  // same rounding as the vector path
}

constexpr AttentionKernels kAvx2Kernels{attend_any<fp16_t>, attend_any<float>, to_f16_avx2,
                                        attend_any<BlockQ8_0>};

}  // namespace

const AttentionKernels& attention_kernels_avx2() noexcept {
  return kAvx2Kernels;
}

}  // namespace pacer::ops
