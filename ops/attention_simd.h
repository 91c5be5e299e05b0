#pragma once
// The attention kernel behind ops/attention_kernels.h, written once over a vector wrapper V
// (ops/vec_avx2.h: 8 lanes, ops/vec_avx512.h: 16) and an element policy (ops/widen_simd.h: F16,
// F32 or Q8_0 convert to fp32 in registers). Instantiated per tier by attention_avx2.cpp and
// attention_avx512.cpp; include ONLY from there, after V's header.
//
// Tiled online softmax: per tile of kKeyTile keys, scores for the G query heads that share this
// KV head (keys in the lanes from the transposed K blocks, each loaded once for all G), a new
// running max and a rescale of what was accumulated, then the tile's V rows added in (each V
// chunk loaded once for all G, the G accumulators in registers).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/attention_kernels.h"
#include "ops/widen_simd.h"

namespace pacer::ops::attention_simd {
namespace {  // internal to each tier's translation unit, which lets GCC inline across the helpers

// Asks for the first `bytes` of n rows from `row` (row_bytes apart) into L2 (L1 holds the tile
// being computed): a tile asks for the next tile's K blocks and V rows while it computes (at depth
// 16384 the cache is far larger than the LLC).
inline void prefetch_rows(const std::byte* row, int64_t row_bytes, int n, int64_t bytes) {
  for (int j = 0; j < n; ++j, row += row_bytes) {
    for (int64_t b = 0; b < bytes; b += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(row + b), _MM_HINT_T1);
    }
  }
}

// prefetch_rows of n rows of a Row type (bytes: Row::bytes of the head, the whole row). Q8_0 rows
// are not whole lines (a head of 64: 68 bytes) and lie back to back: each line that starts among
// them is asked for once. Asking for each row's first 64 bytes and its next 64 asked for two lines
// a row, one of them the next row's, and a task's first tile then stalled on 256 prefetches where
// 136 lines do (BM_attention q8_0, one Zen 5 core: ~10 % of the time). F16/F32 rows keep the loop
// above: one version with both branches made the F16 kernel 1.5x slower from DRAM (BM_attention at
// depth 16384, one Zen 5 core), for no reason visible without a PMU.
template <class Row>
void prefetch_whole_rows(const std::byte* row, int64_t row_bytes, int n, int64_t bytes) {
  if constexpr (Row::kBytes == 0) {
    const auto end = reinterpret_cast<uintptr_t>(row + n * row_bytes);
    for (auto p = (reinterpret_cast<uintptr_t>(row) + 63) & ~uintptr_t{63}; p < end; p += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
    }
  } else {
    prefetch_rows(row, row_bytes, n, bytes);
  }
}

// Whether a Q8_0 K's block sums are kept apart (exact integers, then times both scales) or each
// product is scaled (QueryQ8's qf dequantized): 16 registers (AVX2) cannot hold the sums next to
// the accumulators of 8 heads, and spilling them cost 12-15 % (BM_attention, one Zen 5 core).
template <class V>
constexpr bool kQ8ExactSums = V::kRegisters >= 32;

// A V with kAllHeadsOnePass (attention_avx2.cpp's table for CPUs whose 256-bit FMAs and F16
// conversions take both halves of 128-bit pipes, isa.h attention_one_pass) takes all of a KV
// head's query heads in one pass: there converting each F16 key and value vector once per pass of
// 4 costs more than the broadcasts the passes share (one Zen 1 core, BM_attention f16_avx2 at
// TinyLlama's shape: 1.05-1.07x; docs/long-context.md, session 60).
template <class V>
constexpr bool kTakesAllHeadsAtOnce = requires {
  V::kAllHeadsOnePass;
};

// Heads per pass of the score and value loops: G, or where half the registers cannot hold 2
// groups of keys (or 2 chunks of a value row) for all G heads, the largest G / 2^n that can, the
// passes taking the heads in turns. Each broadcast of q (of p) then feeds 2 key groups (value
// chunks), not one: on AVX2 with 8 heads per KV head, 9 loads per 8 FMAs became 6 (BM_attention
// f16_avx2 at TinyLlama's shape, one Zen 4 core, best of 6-8 reps, 3 alternations: depth 512 in
// cache 70.4 -> 66.8 us, 32 layers of 2048 from DRAM 10.10-10.31 -> 9.72-9.79 ms). Every score
// and every (g, dim) sum is formed as before, whatever the passes. Not for a Q8_0 cache: with 32
// registers its query's block figures are laid out per task, and on AVX2 the passes dequantize
// each K block and V row twice (BM_attention q8_0_avx2, TinyLlama shape: 0.89x in cache and from
// DRAM). On 16 registers with F16/F32 rows: at most 4 heads, whatever G (the passes 4 + 3 at
// Qwen2.5's groups of 7, 4 + 2 at 6). A pass of all 7 heads had room for one key group and one
// value chunk: 7 FMA chains and a load per FMA; 4 heads take 2 key groups (8 chains) and 3 value
// chunks (12, value_chunks_per_step). Qwen2.5-0.5B's shape on one Zen 4 core: 1.08x from cache,
// 1.13x from DRAM (docs/long-context.md, session 48).
//
// Where V has kAllHeadsOnePass (kTakesAllHeadsAtOnce above): all G in one pass.
template <class V, class Row, int G>
constexpr int heads_per_pass() {
  if constexpr (Row::kBytes == 0 || kTakesAllHeadsAtOnce<V>) {
    return G;
  } else if constexpr (V::kRegisters == 16) {
    return std::min(G, 4);
  } else {
    int h = G;
    while (h % 2 == 0 && V::kRegisters / 2 / h < 2) h /= 2;
    return h;
  }
}

// s[g][j + b * L + i] = qs[g] . k_(j0 + j + b * L + i) for KB groups of L keys (j0 + j a multiple
// of L) from a K cache transposed in blocks of kKvBlock keys (ops/attention.h; k: the head's
// first block), keys in the lanes: one FMA per dimension, head and group, no reduction. A Q8_0 K
// meets the Q8_0 query q8 (qs holds its values): per block of 32 dimensions an integer sum (Row's
// VNNI block_sums, or exact fp32 FMAs), then times both scales; or, without the registers for
// that, each product scaled. Each lane adds its dimensions in order 0..dim-1 whatever G and KB
// are, so a score does not depend on how heads are grouped into tasks (nor the result on the
// worker count); KB groups at once keep KB * G FMA chains in flight when G is small and share
// each broadcast of q when it is not. pf_blocks[0..n_pf) (F16/F32 rows; n_pf <= the blocks a
// step covers): K blocks to ask for into L2 as the dimensions go, one line of each at a time
// (see score_tile_lanes; AVX2 only). Forced inline: once the 4 + 3 head passes added
// instantiations, GCC left the 1- and 2-head steps out of line (groups of 2: 0.91x).
template <class V, class Row, int G, int KB>
[[gnu::always_inline]] inline void score_key_groups(const float* qs, int64_t q_row, int dim,
                                                    const std::byte* k, int64_t row_bytes,
                                                    int64_t j0, int j, float (*s)[kKeyTile],
                                                    const QueryQ8& q8,
                                                    const std::byte* const* pf_blocks = nullptr,
                                                    int n_pf = 0) {
  constexpr int L = V::kLanes;
  const std::byte* block[KB];
  int64_t lane[KB];
  for (int b = 0; b < KB; ++b) {
    const int64_t key = j0 + j + b * L;
    block[b] = k + key / kKvBlock * kKvBlock * row_bytes;
    lane[b] = key % kKvBlock;
  }
  typename V::Reg acc[KB][G];
  for (int b = 0; b < KB; ++b) {
    for (int g = 0; g < G; ++g) acc[b][g] = V::zero();
  }
  if constexpr (Row::kBytes > 0) {  // F16, F32: dimension d of the block's keys at d * kKvBlock
    constexpr int64_t dim_bytes = kKvBlock * Row::kBytes;
    constexpr int kMaxPf = std::max<int>(1, KB * L / kKvBlock);
    const std::byte* pf[kMaxPf];
    for (int i = 0; i < kMaxPf; ++i) pf[i] = i < n_pf ? pf_blocks[i] : nullptr;
    for (int d = 0; d < dim; ++d) {
      // The line holding dimension d, of each block (AVX-512 passes none: its loop as it was).
      if (V::kRegisters == 16 && d * dim_bytes % 64 == 0) {
        for (int i = 0; i < kMaxPf; ++i) {
          if (pf[i] != nullptr) {
            _mm_prefetch(reinterpret_cast<const char*>(pf[i] + d * dim_bytes), _MM_HINT_T1);
          }
        }
      }
      for (int b = 0; b < KB; ++b) {
        const auto kd = Row::load(block[b] + lane[b] * Row::kBytes + d * dim_bytes, 0);
        for (int g = 0; g < G; ++g) acc[b][g] = V::fmadd(V::set1(qs[g * q_row + d]), kd, acc[b][g]);
      }
    }
  } else if constexpr (!kQ8ExactSums<V>) {  // Q8_0, each product scaled: qs is q8.qf, dequantized
    for (int c = 0; c < dim / kQ8_0BlockElems; ++c) {
      const std::byte* chunk[KB];
      typename V::Reg scale[KB];
      for (int b = 0; b < KB; ++b) {
        chunk[b] = block[b] + c * kQ8KeyChunkBytes;
        scale[b] = V::load_f16(reinterpret_cast<const fp16_t*>(chunk[b]) + lane[b]);
      }
      for (int e = 0; e < kQ8_0BlockElems; ++e) {
        const int d = c * kQ8_0BlockElems + e;
        for (int b = 0; b < KB; ++b) {
          const auto* i8 =
              reinterpret_cast<const int8_t*>(chunk[b] + kQ8KeyScaleBytes + e * kKvBlock) + lane[b];
          const auto kd = V::load_q8(i8, scale[b]);
          for (int g = 0; g < G; ++g)
            acc[b][g] = V::fmadd(V::set1(qs[g * q_row + d]), kd, acc[b][g]);
        }
      }
    }
  } else {  // Q8_0: per 32 dimensions the block's 16 scales, then 32 x 16 int8
    // Each block's int8 x int8 sum first (exact), then times both scales (QueryQ8).
    const int64_t block_row = q8.row / kQ8_0BlockElems;
    for (int c = 0; c < dim / kQ8_0BlockElems; ++c) {
      const std::byte* chunk[KB];
      for (int b = 0; b < KB; ++b) chunk[b] = block[b] + c * kQ8KeyChunkBytes;
      typename V::Reg sum[KB][G];
      if constexpr (requires { Row::kInt8Dot; }) {
        Row::template block_sums<G, KB>(chunk, q8.qi + c * kQ8_0BlockElems, q8.row, q8.bias + c,
                                        block_row, sum);
      } else {
        for (int b = 0; b < KB; ++b) {
          for (int g = 0; g < G; ++g) sum[b][g] = V::zero();
        }
        for (int e = 0; e < kQ8_0BlockElems; ++e) {
          const int d = c * kQ8_0BlockElems + e;
          for (int b = 0; b < KB; ++b) {
            const auto* i8 =
                reinterpret_cast<const int8_t*>(chunk[b] + kQ8KeyScaleBytes + e * kKvBlock) +
                lane[b];
            const auto kd = V::load_i8(i8);
            for (int g = 0; g < G; ++g)
              sum[b][g] = V::fmadd(V::set1(q8.qf[g * q8.row + d]), kd, sum[b][g]);
          }
        }
      }
      for (int b = 0; b < KB; ++b) {
        const auto dk = V::load_f16(reinterpret_cast<const fp16_t*>(chunk[b]) + lane[b]);
        for (int g = 0; g < G; ++g) {
          const auto scale = V::mul(dk, V::set1(q8.dq_scaled[g * block_row + c]));
          acc[b][g] = V::fmadd(sum[b][g], scale, acc[b][g]);
        }
      }
    }
  }
  for (int b = 0; b < KB; ++b) {
    for (int g = 0; g < G; ++g) V::store(s[g] + j + b * L, acc[b][g]);
  }
}

// s[g][0..nt) for the keys [j0, j0 + nt) (j0 a multiple of kKvBlock), in whole
// groups of L (the lanes past nt hold whatever the cache holds there; softmax_step overwrites
// them). Asks for the blocks of pf_keys keys from the K block at pf_k (the next tile's, or the
// next task's first) into L2 as it goes.
template <class V, class Row, int G>
void score_tile_lanes(const float* qs, int64_t q_row, int dim, const std::byte* k,
                      int64_t row_bytes, int64_t j0, int nt, float (*s)[kKeyTile],
                      const std::byte* pf_k, int pf_keys, const QueryQ8& q8) {
  constexpr int H = heads_per_pass<V, Row, G>();
  if constexpr (H < G) {  // H heads, then the other G - H in passes of their own
    score_tile_lanes<V, Row, H>(qs, q_row, dim, k, row_bytes, j0, nt, s, pf_k, pf_keys, q8);
    score_tile_lanes<V, Row, G - H>(qs + H * q_row, q_row, dim, k, row_bytes, j0, nt, s + H, pf_k,
                                    0, q8);
    return;
  }
  constexpr int L = V::kLanes;
  // Half the registers as accumulators: with 8 heads on AVX-512 two groups share each broadcast
  // of q (BM_attention, TinyLlama shape, one Zen 5 core, 5 alternating rounds: 13.2 -> 14.1
  // GB/s; one group per 8 accumulators before). A Q8_0 K needs as many again for the block sums.
  constexpr int sums = Row::kBytes == 0 && kQ8ExactSums<V> ? 2 : 1;
  constexpr int KB = std::clamp(V::kRegisters / 2 / sums / G, 1, kKeyTile / L);
  const int64_t block_bytes = kKvBlock * row_bytes;
  const int groups = (nt + L - 1) / L;
  for (int grp = 0; grp < groups;) {
    const int n = grp + KB <= groups ? KB : 1;
    // The next tile's blocks at the same place (see attend). A full step of F16/F32 keys asks
    // for them one line of each per line of its own reads: a block's 32 lines asked for at once
    // (2-4 blocks a step at 1-2 heads per KV head) filled the core's miss buffers, and the step's
    // first loads waited behind them. One Zen 4 core, 22 caches of 4096 positions from DRAM,
    // alternating in one process: groups of 8 1.015x (on top of the interleaved exp), of 2
    // 1.33-1.48x, of 1 (no GQA) 1.24-1.35x. AVX2 only: AVX-512 (2 blocks a step at 8 heads) is
    // not measured and keeps the burst.
    const std::byte* pf_blocks[kKeyTile / kKvBlock];
    int n_pf = 0;
    for (int key = grp * L; key < (grp + n) * L; key += L) {
      if (key % kKvBlock == 0 && key < pf_keys) {
        if (Row::kBytes > 0 && n == KB && V::kRegisters == 16) {
          pf_blocks[n_pf++] = pf_k + key / kKvBlock * block_bytes;
        } else {
          prefetch_rows(pf_k + key / kKvBlock * block_bytes, block_bytes, 1, block_bytes);
        }
      }
    }
    if (n == KB) {
      score_key_groups<V, Row, G, KB>(qs, q_row, dim, k, row_bytes, j0, grp * L, s, q8, pf_blocks,
                                      n_pf);
    } else {
      score_key_groups<V, Row, G, 1>(qs, q_row, dim, k, row_bytes, j0, grp * L, s, q8);
    }
    grp += n;
  }
}

// acc[g] += sum_j p[g][j] * v_j over `nt` value rows from `vrow0`; asks for pf_rows rows from
// pf_v (the next tile's, or the next task's first) as it goes. DC chunks of kLanes dims at
// a time (DC * G accumulators, half the registers), so each value row's DC chunks feed DC * G
// independent FMAs: one chunk at a time left G chains of one FMA per row each, and the FMA
// latency, not the loads, set the pace. Every (g, dim) sums its rows in order, whatever DC is.
template <class V, class Row, int G, int DC>
void accumulate_chunks(const float (*p)[kKeyTile], const std::byte* vrow, int64_t row_bytes,
                       int j_begin, int nt, int d0, float (*acc)[kMaxHeadDim],
                       const std::byte* pf_v, int pf_rows, int64_t pf_bytes) {
  constexpr int L = V::kLanes;
  typename V::Reg a[DC][G];
  for (int c = 0; c < DC; ++c) {
    for (int g = 0; g < G; ++g) a[c][g] = V::load(acc[g] + d0 + c * L);
  }
  vrow += j_begin * row_bytes;
  for (int j = j_begin; j < nt; ++j, vrow += row_bytes) {
    if (j < pf_rows) prefetch_whole_rows<Row>(pf_v + j * row_bytes, row_bytes, 1, pf_bytes);
    // The DC chunks first, then one broadcast of p per head for its DC FMAs: DC * G accumulators,
    // DC chunks and one broadcast in registers (value_chunks_per_step). With the G broadcasts
    // first, 3 chunks of 4 heads needed 17 of AVX2's 16 and an accumulator spilled; keeping that
    // order wherever it fits was 0.86-0.92x (session 48).
    typename V::Reg v[DC];
    for (int c = 0; c < DC; ++c) v[c] = Row::load(vrow, d0 + c * L);
    for (int g = 0; g < G; ++g) {
      const auto pj = V::set1(p[g][j]);
      for (int c = 0; c < DC; ++c) a[c][g] = V::fmadd(pj, v[c], a[c][g]);
    }
  }
  for (int c = 0; c < DC; ++c) {
    for (int g = 0; g < G; ++g) V::store(acc[g] + d0 + c * L, a[c][g]);
  }
}

// Value chunks per pass over a tile's rows (accumulate_chunks' DC): half the registers as
// accumulators, at most 4 chunks. On 16 registers with F16/F32 rows, as many as fit with their
// chunks and one broadcast, (16 - 1) / (G + 1): 3 at 4 heads, 12 FMA chains instead of 8. At the
// FMA's 4 cycles and 2 a cycle, 8 chains leave the pipes idle whenever a load is late (a tile in
// L1 on one Zen 4 core: 91 -> 97 % of the FMA peak; with the interleaved exp and the spread K
// prefetch, TinyLlama's shape from DRAM 1.03-1.05x -> 1.08x, same bits). With one head per KV
// head (no GQA) that rule gave 4 chunks, 4 chains: one FMA a cycle. There, 8 (8 accumulators,
// 7 chunks in registers and one through the stack; loading each chunk just before its FMA ran
// 0.96-1.01x): 8 heads of 64 dims, one Zen 4 core, old and new in one process, the same bits:
// depth 512 in L2 1.09-1.10x, 4096 in L3 1.08-1.12x, 22 caches of 4096 from DRAM 1.14-1.20x
// (17.6-19.6 -> 21.2-23.4 GB/s). AVX-512 keeps 4 (16 lanes: 64 dimensions in one pass; not
// measured).
template <class V, class Row, int G>
constexpr int value_chunks_per_step() {
  constexpr int half = std::clamp(V::kRegisters / 2 / G, 1, 4);
  if constexpr (V::kRegisters == 16 && Row::kBytes > 0 && G == 1) {
    return 8;
  } else if constexpr (V::kRegisters == 16 && Row::kBytes > 0) {
    return std::max(half, std::min((V::kRegisters - 1) / (G + 1), 4));
  } else {
    return half;
  }
}

// f(std::integral_constant<int, n>{}) for n in [1, N]: the pass over the whole chunks that are
// left after the passes of DC.
template <int N, class F>
void with_chunk_count(int n, F&& f) {
  static_assert(N >= 1);
  if constexpr (N > 1) {
    if (n == N) return f(std::integral_constant<int, N>{});
    return with_chunk_count<N - 1>(n, f);
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

template <class V, class Row, int G>
void accumulate_tile(const float (*p)[kKeyTile], const std::byte* vrow0, int64_t row_bytes,
                     int j_begin, int nt, int dim, float (*acc)[kMaxHeadDim], const std::byte* pf_v,
                     int pf_rows, int64_t pf_bytes) {
  constexpr int H = heads_per_pass<V, Row, G>();
  if constexpr (H < G) {  // as score_tile_lanes
    accumulate_tile<V, Row, H>(p, vrow0, row_bytes, j_begin, nt, dim, acc, pf_v, pf_rows, pf_bytes);
    accumulate_tile<V, Row, G - H>(p + H, vrow0, row_bytes, j_begin, nt, dim, acc + H, pf_v, 0,
                                   pf_bytes);
    return;
  }
  constexpr int L = V::kLanes;
  constexpr int DC = value_chunks_per_step<V, Row, G>();
  int d = 0;
  for (; d + DC * L <= dim; d += DC * L) {  // the next tile's rows asked for in the first pass
    accumulate_chunks<V, Row, G, DC>(p, vrow0, row_bytes, j_begin, nt, d, acc, pf_v,
                                     d == 0 ? pf_rows : 0, pf_bytes);
  }
  // The whole chunks left, fewer than DC, in one more pass (64 dimensions at DC = 3: 3 + 3 + 2).
  if constexpr (DC > 1) {
    const int rest = (dim - d) / L;
    if (rest > 0) {
      const int pf = d == 0 ? pf_rows : 0;
      with_chunk_count<DC - 1>(rest, [&](auto chunks) {
        accumulate_chunks<V, Row, G, decltype(chunks)::value>(p, vrow0, row_bytes, j_begin, nt, d,
                                                              acc, pf_v, pf, pf_bytes);
      });
      d += rest * L;
    }
  }
  if (d == 0 && pf_rows > 0) {
    prefetch_whole_rows<Row>(pf_v, row_bytes, pf_rows, pf_bytes);
  }
  for (; d < dim; d += L) {
    typename V::Reg a[G];
    for (int g = 0; g < G; ++g) a[g] = V::load(acc[g] + d);
    const std::byte* vrow = vrow0 + j_begin * row_bytes;
    if (d + L <= dim) {
      for (int j = j_begin; j < nt; ++j, vrow += row_bytes) {
        const auto v = Row::load(vrow, d);
        for (int g = 0; g < G; ++g) a[g] = V::fmadd(V::set1(p[g][j]), v, a[g]);
      }
    } else {
      for (int j = j_begin; j < nt; ++j, vrow += row_bytes) {
        const auto v = Row::load_first(vrow, d, dim - d);
        for (int g = 0; g < G; ++g) a[g] = V::fmadd(V::set1(p[g][j]), v, a[g]);
      }
    }
    for (int g = 0; g < G; ++g) V::store(acc[g] + d, a[g]);
  }
}

// One online-softmax step over a tile of nt scores per head (s[g][0..nt)), in place: s becomes
// e^(s - m_new), l and acc are rescaled from the old running max m to the new. Scores before
// `lead` (keys before the first visible one, read with its block) and past nt are set to -inf:
// they leave the max alone and their e^(s - m) is exactly 0, so every loop runs over whole
// vectors.
template <class V, int G>
void softmax_step(float (*s)[kKeyTile], int lead, int nt, int padded, float softcap, float* m,
                  float* l, float (*acc)[kMaxHeadDim]) {
  constexpr int L = V::kLanes;
  // Heads at a time in the max and exp loops: HC independent chains per key vector instead of
  // one head's loop after another, whose max reduction, exp polynomial and sum each waited on the
  // previous step (a quarter of the registers: the HC maxima, or the HC sums and maxima, plus
  // the exps' temporaries). Each head still takes its vectors in order 0, L, 2L, ..., so the
  // results are those of one head at a time.
  constexpr int HC = std::min(G, V::kRegisters / 4);
  const int nt_padded = (nt + L - 1) / L * L;
  alignas(64) float m_step[L] = {};  // m - m_new per head, then e^ of it
  float m_new[G];
  for (int g = 0; g < G; ++g) {
    if (softcap > 0.0f) {
      for (int j = 0; j < nt_padded; j += L) {  // the pads are overwritten below
        V::store(s[g] + j, V::softcap(V::load_first(s[g] + j, nt - j), softcap));
      }
    }
    std::fill(s[g], s[g] + lead, -std::numeric_limits<float>::infinity());
    std::fill(s[g] + nt, s[g] + nt_padded, -std::numeric_limits<float>::infinity());
  }
  for (int g0 = 0; g0 < G; g0 += HC) {
    typename V::Reg vmax[HC];
    for (int h = 0; h < HC; ++h) vmax[h] = V::set1(-std::numeric_limits<float>::infinity());
    for (int j = 0; j < nt_padded; j += L) {
      for (int h = 0; h < HC && g0 + h < G; ++h) vmax[h] = V::max(vmax[h], V::load(s[g0 + h] + j));
    }
    for (int h = 0; h < HC && g0 + h < G; ++h) {
      const int g = g0 + h;
      m_new[g] = std::max(m[g], V::hmax(vmax[h]));
      m_step[g] = m[g] - m_new[g];  // -inf before the first tile: e^ of it is 0
    }
  }
  // The G rescale factors in one vector exp: std::exp per head was a call, across which the
  // compiler spilled the vector registers (BM_attention from cache, one Zen 5 core:
  // 1.00-1.07x).
  V::store(m_step, V::exp_nonpositive(V::load(m_step)));
  for (int g0 = 0; g0 < G; g0 += HC) {
    typename V::Reg mv[HC], sum[HC];
    for (int h = 0; h < HC; ++h) {
      mv[h] = V::set1(g0 + h < G ? m_new[g0 + h] : 0.0f);
      sum[h] = V::zero();
    }
    // The HC exps of a key vector side by side (V::exp_nonpositive_n: the same bits as one at a
    // time). Past the last head (G = 7 on AVX2: the second pass has 3) a vector repeats head
    // g0's scores and is dropped.
    for (int j = 0; j < nt_padded; j += L) {
      typename V::Reg e[HC];
      for (int h = 0; h < HC; ++h) e[h] = V::sub(V::load(s[g0 + h < G ? g0 + h : g0] + j), mv[h]);
      V::template exp_nonpositive_n<HC>(e);
      for (int h = 0; h < HC && g0 + h < G; ++h) {
        sum[h] = V::add(sum[h], e[h]);
        V::store(s[g0 + h] + j, e[h]);
      }
    }
    for (int h = 0; h < HC && g0 + h < G; ++h) {
      const int g = g0 + h;
      const float corr = m[g] == m_new[g] ? 1.0f : m_step[g];
      l[g] = l[g] * corr + V::hsum(sum[h]);
      if (corr != 1.0f) {
        const auto cv = V::set1(corr);
        for (int d = 0; d < padded; d += L) V::store(acc[g] + d, V::mul(V::load(acc[g] + d), cv));
      }
      m[g] = m_new[g];
    }
  }
}

// A Q8_0 K's quantized query heads (QueryQ8): N elements of int8 and N / 32 block figures.
template <int N>
struct QueryQ8Store {
  alignas(64) int8_t qi[N];
  float dq_scaled[N / kQ8_0BlockElems];
  int32_t bias[N / kQ8_0BlockElems];
};

// Nothing for the other rows: their stack frames stay as they were.
struct NoQueryQ8Store {};

template <class Row, int N>
using QueryQ8StoreFor = std::conditional_t<Row::kBytes == 0, QueryQ8Store<N>, NoQueryQ8Store>;

// What the tile at j0 of a task reading keys up to key_end asks for as it goes: the next tile's
// K blocks and V rows, or after the last tile the first tile of the worker's next task.
struct NextRows {
  const std::byte* k = nullptr;
  const std::byte* v = nullptr;
  int keys = 0;
};
inline NextRows next_rows(const AttentionTask& t, int64_t j0, int64_t key_end) {
  const int64_t left = key_end - j0 - kKeyTile;
  if (left <= 0) return {t.next_k, t.next_v, t.next_k != nullptr ? t.next_keys : 0};
  // j0 + kKeyTile is a multiple of kKvBlock: its K block starts at that many rows.
  const int64_t at = (j0 + kKeyTile) * t.row_bytes;
  return {t.k + at, t.v + at, static_cast<int>(std::min<int64_t>(left, kKeyTile))};
}

template <class V, class Row, int G>
void attend(const AttentionTask& t) {
  constexpr int L = V::kLanes;
  static_assert(kKeyTile % L == 0 && kMaxHeadDim % L == 0 && kMaxGroup <= L);
  const int dim = t.head_dim;
  const int padded = (dim + L - 1) / L * L;
  alignas(64) float qs[G][kMaxHeadDim];
  alignas(64) float acc[G][kMaxHeadDim];
  alignas(64) float s[G][kKeyTile];
  float m[G], l[G];
  [[maybe_unused]] QueryQ8StoreFor<Row, G * kMaxHeadDim> q8_store;
  QueryQ8 q8;
  if constexpr (Row::kBytes == 0) {  // a Q8_0 K: q as llama.cpp dots it (QueryQ8)
    quantize_query_q8_0(t.q, dim, G, dim, t.scale, kMaxHeadDim, q8_store.qi, qs[0],
                        q8_store.dq_scaled, q8_store.bias, !kQ8ExactSums<V>);
    q8 = {q8_store.qi, qs[0], q8_store.dq_scaled, q8_store.bias, kMaxHeadDim};
  }
  for (int g = 0; g < G; ++g) {
    if constexpr (Row::kBytes > 0) {
      for (int d = 0; d < dim; ++d) qs[g][d] = t.q[g * dim + d] * t.scale;
      std::fill(qs[g] + dim, qs[g] + padded, 0.0f);
    }
    std::fill(acc[g], acc[g] + padded, 0.0f);
    m[g] = -std::numeric_limits<float>::infinity();
    l[g] = 0.0f;
  }
  // K is read in whole blocks: the tiles start at the block of key_begin, and the keys before it
  // in that block (`lead`) score -inf.
  const int64_t start = t.key_begin / kKvBlock * kKvBlock;
  const int64_t pf_bytes = Row::bytes(dim);
  // The first tile's rows, asked for together up front: each tile asks for the next one's as it
  // goes, but nothing asked for the first, whose rows then came in one demand miss at a time (a
  // decode segment is 8 tiles). One Zen 5 core, 32 caches of 2048 positions from DRAM, 4 rounds:
  // 1.08-1.11x at 4 heads per KV head, 0.99-1.22x at 8.
  const int first = static_cast<int>(std::min<int64_t>(kKeyTile, t.key_end - start));
  prefetch_whole_rows<Row>(t.k + start * t.row_bytes, t.row_bytes, first, pf_bytes);
  prefetch_whole_rows<Row>(t.v + start * t.row_bytes, t.row_bytes, first, pf_bytes);
  for (int64_t j0 = start; j0 < t.key_end; j0 += kKeyTile) {
    const int nt = static_cast<int>(std::min<int64_t>(kKeyTile, t.key_end - j0));
    const int lead = static_cast<int>(std::max<int64_t>(0, t.key_begin - j0));
    // The next tile's rows: asked for one or a few at a time as this tile's rows are read (a
    // burst of them at the tile's start stalled on the core's miss buffers). The last tile asks
    // for the first tile of the task the worker runs next (AttentionTask::next_k).
    const NextRows next = next_rows(t, j0, t.key_end);
    score_tile_lanes<V, Row, G>(qs[0], kMaxHeadDim, dim, t.k, t.row_bytes, j0, nt, s, next.k,
                                next.keys, q8);
    softmax_step<V, G>(s, lead, nt, padded, t.softcap, m, l, acc);
    accumulate_tile<V, Row, G>(s, t.v + j0 * t.row_bytes, t.row_bytes, lead, nt, dim, acc, next.v,
                               next.keys, pf_bytes);
  }
  if (t.m_out != nullptr) {
    for (int g = 0; g < G; ++g) t.m_out[g] = m[g], t.l_out[g] = l[g];
  }
  for (int g = 0; g < G; ++g) {
    const auto inv = V::set1(1.0f / l[g]);
    float* out = t.out + g * dim;
    int d = 0;
    for (; d + L <= dim; d += L) V::store(out + d, V::mul(V::load(acc[g] + d), inv));
    if (d < dim) V::store(out + d, V::first(dim - d), V::mul(V::load(acc[g] + d), inv));
  }
}

// Prefill: the task's n_tokens query tokens (G heads each) go through each key tile together:
// the first token's scores bring the tile's K blocks into L1 for the others; per token, the
// scores, the softmax step and the value accumulation are the decode kernel's. Token i sees keys
// up to key_end + i: in the tiles past its last key it takes no part.
template <class V, class Row, int G>
void attend_tokens(const AttentionTask& t) {
  constexpr int L = V::kLanes;
  constexpr int TB = kPrefillTokens;
  const int dim = t.head_dim, n_tok = t.n_tokens;
  const int padded = (dim + L - 1) / L * L;
  alignas(64) float qs[TB][G * kMaxHeadDim];  // token i's head g at qs[i] + g * padded
  alignas(64) float acc[TB][G][kMaxHeadDim];
  alignas(64) float s[TB][G][kKeyTile];
  float m[TB][G], l[TB][G];
  [[maybe_unused]] QueryQ8StoreFor<Row, G * kMaxHeadDim> q8_store[TB];
  QueryQ8 q8[TB];
  for (int i = 0; i < n_tok; ++i) {
    if constexpr (Row::kBytes == 0) {  // a Q8_0 K (padded == dim, a multiple of 32)
      auto& st = q8_store[i];
      quantize_query_q8_0(t.q + i * t.token_stride, dim, G, dim, t.scale, padded, st.qi, qs[i],
                          st.dq_scaled, st.bias, !kQ8ExactSums<V>);
      q8[i] = {st.qi, qs[i], st.dq_scaled, st.bias, padded};
    }
    for (int g = 0; g < G; ++g) {
      const float* q = t.q + i * t.token_stride + g * dim;
      float* qg = qs[i] + g * padded;
      if constexpr (Row::kBytes > 0) {
        for (int d = 0; d < dim; ++d) qg[d] = q[d] * t.scale;
        std::fill(qg + dim, qg + padded, 0.0f);
      }
      std::fill(acc[i][g], acc[i][g] + padded, 0.0f);
      m[i][g] = -std::numeric_limits<float>::infinity();
      l[i][g] = 0.0f;
    }
  }
  const int64_t key_end = t.key_end + n_tok - 1;  // the last token's
  const int64_t pf_bytes = Row::bytes(dim);
  // As in attend: K from the block of key_begin, the keys before it masked.
  const int64_t start = t.key_begin / kKvBlock * kKvBlock;
  const int first = static_cast<int>(std::min<int64_t>(kKeyTile, key_end - start));
  prefetch_whole_rows<Row>(t.k + start * t.row_bytes, t.row_bytes, first, pf_bytes);
  prefetch_whole_rows<Row>(t.v + start * t.row_bytes, t.row_bytes, first, pf_bytes);
  for (int64_t j0 = start; j0 < key_end; j0 += kKeyTile) {
    const int nt = static_cast<int>(std::min<int64_t>(kKeyTile, key_end - j0));
    const int lead = static_cast<int>(std::max<int64_t>(0, t.key_begin - j0));
    const NextRows next = next_rows(t, j0, key_end);
    // Tokens [i0, n_tok) see some of this tile's keys (the earlier ones' keys may end before it).
    int i0 = 0;
    while (t.key_end + i0 <= j0) ++i0;
    // Each token scores the tile's blocks from L1 after the first brought them in.
    for (int i = i0; i < n_tok; ++i) {
      score_tile_lanes<V, Row, G>(qs[i], padded, dim, t.k, t.row_bytes, j0, nt, s[i], next.k,
                                  i == i0 ? next.keys : 0, q8[i]);
    }
    for (int i = i0; i < n_tok; ++i) {
      const int nt_i = static_cast<int>(std::min<int64_t>(nt, t.key_end + i - j0));
      softmax_step<V, G>(s[i], lead, nt_i, padded, t.softcap, m[i], l[i], acc[i]);
      accumulate_tile<V, Row, G>(s[i], t.v + j0 * t.row_bytes, t.row_bytes, lead, nt_i, dim, acc[i],
                                 next.v, i == n_tok - 1 ? next.keys : 0, pf_bytes);
    }
  }
  for (int i = 0; i < n_tok; ++i) {
    for (int g = 0; g < G; ++g) {
      const auto inv = V::set1(1.0f / l[i][g]);
      float* out = t.out + i * t.token_stride + g * dim;
      int d = 0;
      for (; d + L <= dim; d += L) V::store(out + d, V::mul(V::load(acc[i][g] + d), inv));
      if (d < dim) V::store(out + d, V::first(dim - d), V::mul(V::load(acc[i][g] + d), inv));
    }
  }
}

template <class V, class Row>
void attend_any(const AttentionTask& t) {
  with_group_size(t.n_q, [&](auto g) {
    if (t.n_tokens > 1) {
      attend_tokens<V, Row, decltype(g)::value>(t);
    } else {
      attend<V, Row, decltype(g)::value>(t);
    }
  });
}

// Whole vectors through the tier's conversion, the tail through the scalar one (same rounding).
template <class V>
void to_f16(const float* src, fp16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) V::store_f16(dst + i, V::load(src + i));
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

template <class V>
constexpr AttentionKernels kernel_table() {
  return AttentionKernels{attend_any<V, WidenF16<V>>, attend_any<V, WidenF32<V>>, to_f16<V>,
                          attend_any<V, WidenQ8_0Blocks<V>>};
}

}  // namespace
}  // namespace pacer::ops::attention_simd
