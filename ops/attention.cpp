#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/attention_kernels.h"
#include "ops/exp_range.h"
#include "ops/fp16.h"
#include "ops/kernel_set.h"
#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("ops::attention: " + what);
}

void check_params(const AttentionParams& p) {
  if (p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0) {
    fail("n_heads " + std::to_string(p.n_heads) + " must be a positive multiple of n_kv_heads " +
         std::to_string(p.n_kv_heads));
  }
  if (p.head_dim <= 0 || p.head_dim > kMaxHeadDim) {
    fail("head_dim " + std::to_string(p.head_dim) + " outside [1, " + std::to_string(kMaxHeadDim) +
         "]");
  }
  if (p.kv_type != WeightType::F16 && p.kv_type != WeightType::F32 &&
      p.kv_type != WeightType::Q8_0) {
    fail("kv_type " + std::string(type_name(p.kv_type)) + " unsupported (f16, f32 or q8_0)");
  }
  if (p.kv_type == WeightType::Q8_0 && p.head_dim % kQ8_0BlockElems != 0) {
    fail("kv_type q8_0 needs head_dim a multiple of 32, got " + std::to_string(p.head_dim));
  }
  if (p.sliding_window < 0) fail("sliding_window " + std::to_string(p.sliding_window) + " < 0");
  if (p.kv_positions < 0) fail("kv_positions " + std::to_string(p.kv_positions) + " < 0");
  if (!(p.softcap >= 0.0f)) fail("softcap must be >= 0");
}

void check_span(const char* name, size_t have, int64_t want) {
  if (static_cast<int64_t>(have) != want) {
    fail(std::string(name) + " has " + std::to_string(have) + " elements, expected " +
         std::to_string(want));
  }
}

// Positions [pos0, pos0 + n_tokens) must lie in the cache.
void check_positions(const AttentionParams& p, int64_t pos0, int64_t n_tokens) {
  if (pos0 + n_tokens > p.kv_positions) {
    fail("positions [" + std::to_string(pos0) + ", " + std::to_string(pos0 + n_tokens) +
         ") outside a cache of kv_positions " + std::to_string(p.kv_positions));
  }
}

// Bytes between one KV head's slice of the cache and the next (ops/attention.h).
int64_t head_stride(const AttentionParams& p) {
  const int64_t blocks = (p.kv_positions + kKvBlock - 1) / kKvBlock;
  return blocks * kKvBlock * kv_row_bytes(p.kv_type, p.head_dim);
}

// Element (pos, d) of one KV head's K (transposed blocks) or V (rows) as fp32, `head` the head's
// first byte: the layout of ops/attention.h, read one element at a time.
float cache_elem(WeightType type, bool key, const std::byte* head, int dim, int64_t pos, int d) {
  const int64_t row_bytes = kv_row_bytes(type, dim);
  if (type == WeightType::Q8_0) {
    const int64_t c = d / kQ8_0BlockElems, e = d % kQ8_0BlockElems;
    if (key) {
      const std::byte* chunk = head + pos / kKvBlock * kKvBlock * row_bytes + c * kQ8KeyChunkBytes;
      fp16_t scale;
      std::memcpy(&scale, chunk + 2 * (pos % kKvBlock), 2);
      const auto q = static_cast<int8_t>(chunk[kQ8KeyScaleBytes + e * kKvBlock + pos % kKvBlock]);
      return fp16_to_fp32(scale) * static_cast<float>(q);
    }
    BlockQ8_0 block;
    std::memcpy(&block, head + pos * row_bytes + c * sizeof(BlockQ8_0), sizeof(BlockQ8_0));
    return fp16_to_fp32(block.d) * static_cast<float>(block.qs[e]);
  }
  const int64_t elem = type == WeightType::F16 ? 2 : 4;
  const std::byte* at =
      key ? head + pos / kKvBlock * kKvBlock * row_bytes + (d * kKvBlock + pos % kKvBlock) * elem
          : head + pos * row_bytes + d * elem;
  if (type == WeightType::F16) {
    fp16_t h;
    std::memcpy(&h, at, 2);
    return fp16_to_fp32(h);
  }
  float f;
  std::memcpy(&f, at, 4);
  return f;
}

void check_call(const AttentionParams& p, size_t q_size, size_t out_size, int64_t pos0,
                int64_t n_tokens) {
  check_params(p);
  if (pos0 < 0 || n_tokens < 0) {
    fail("pos0 " + std::to_string(pos0) + " / n_tokens " + std::to_string(n_tokens) + " < 0");
  }
  const int64_t want = n_tokens * p.n_heads * p.head_dim;
  check_span("q", q_size, want);
  check_span("out", out_size, want);
  check_positions(p, pos0, n_tokens);
}

// The first key query position `pos` may see.
int64_t first_visible_key(int64_t pos, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
}

// Work items are (slot, head) with slot-major order; slot s maps to token (or prefill block of
// tokens) 0, n-1, 1, n-2, ... so any contiguous run of slots mixes cheap early tokens with
// expensive late ones and the static partition of a causal prefill stays balanced.
int64_t token_of_slot(int64_t s, int64_t n) {
  return (s % 2 == 0) ? s / 2 : n - 1 - s / 2;
}

// ---- Scalar kernel: the tiled online-softmax algorithm of the SIMD kernels in plain C++.

template <typename Elem>
float load_elem(const std::byte* row, int d) {
  Elem e;
  std::memcpy(&e, row + d * sizeof(Elem), sizeof(Elem));
  if constexpr (sizeof(Elem) == 2) {
    return fp16_to_fp32(e);
  } else {
    return e;
  }
}

// One cache row slice of `dim` elements as fp32. Elem BlockQ8_0: dim is a multiple of 32.
template <typename Elem>
void load_row(const std::byte* src, int dim, float* dst) {
  if constexpr (std::is_same_v<Elem, BlockQ8_0>) {
    for (int b = 0; b < dim / kQ8_0BlockElems; ++b) {
      BlockQ8_0 block;
      std::memcpy(&block, src + b * sizeof(BlockQ8_0), sizeof(BlockQ8_0));
      const float d = fp16_to_fp32(block.d);
      for (int j = 0; j < kQ8_0BlockElems; ++j) {
        dst[b * kQ8_0BlockElems + j] = d * static_cast<float>(block.qs[j]);
      }
    }
  } else {
    for (int d = 0; d < dim; ++d) dst[d] = load_elem<Elem>(src, d);
  }
}

// Key `key` of a task's F16/F32 KV head as fp32, gathered from its transposed block (a Q8_0 K is
// dotted in int8, attend_scalar_one). The block's address and lane once per key, not per
// element: this is the Scalar tier's inner loop.
template <typename Elem>
void load_key(const AttentionTask& t, int64_t key, float* dst) {
  const std::byte* block = t.k + key / kKvBlock * kKvBlock * t.row_bytes;
  const int64_t lane = key % kKvBlock;
  for (int d = 0; d < t.head_dim; ++d) {
    dst[d] = load_elem<Elem>(block, static_cast<int>(d * kKvBlock + lane));
  }
}

template <typename Elem>
void attend_scalar_one(const AttentionTask& t) {
  const int dim = t.head_dim, n_q = t.n_q;
  float qs[kMaxGroup][kMaxHeadDim], acc[kMaxGroup][kMaxHeadDim], s[kMaxGroup][kKeyTile];
  float row[kMaxHeadDim];
  float m[kMaxGroup], l[kMaxGroup];
  for (int g = 0; g < n_q; ++g) {
    for (int d = 0; d < dim; ++d) qs[g][d] = t.q[g * dim + d] * t.scale;  // (Q8_0: replaced)
    std::fill_n(acc[g], dim, 0.0f);
    m[g] = -std::numeric_limits<float>::infinity();
    l[g] = 0.0f;
  }
  constexpr bool kQ8 = std::is_same_v<Elem, BlockQ8_0>;
  [[maybe_unused]] int8_t q8_i[kQ8 ? kMaxGroup * kMaxHeadDim : 1];
  [[maybe_unused]] float q8_dq[kQ8 ? kMaxGroup * kMaxHeadDim / kQ8_0BlockElems : 1];
  [[maybe_unused]] int32_t q8_bias[kQ8 ? kMaxGroup * kMaxHeadDim / kQ8_0BlockElems : 1];
  if constexpr (kQ8) {  // a Q8_0 K: q as llama.cpp dots it (QueryQ8); qs holds its int8 values
    quantize_query_q8_0(t.q, dim, n_q, dim, t.scale, kMaxHeadDim, q8_i, qs[0], q8_dq, q8_bias);
  }
  for (int64_t j0 = t.key_begin; j0 < t.key_end; j0 += kKeyTile) {
    const int nt = static_cast<int>(std::min<int64_t>(kKeyTile, t.key_end - j0));
    for (int j = 0; j < nt; ++j) {
      if constexpr (kQ8) {  // per block the int8 sum, then times both scales (as the SIMD tiers)
        const int64_t key = j0 + j, lane = key % kKvBlock;
        const std::byte* block = t.k + key / kKvBlock * kKvBlock * t.row_bytes;
        for (int g = 0; g < n_q; ++g) {
          float dot = 0.0f;
          for (int c = 0; c < dim / kQ8_0BlockElems; ++c) {
            const std::byte* chunk = block + c * kQ8KeyChunkBytes;
            int32_t sum = 0;
            for (int e = 0; e < kQ8_0BlockElems; ++e) {
              const auto k8 = static_cast<int8_t>(chunk[kQ8KeyScaleBytes + e * kKvBlock + lane]);
              sum += q8_i[g * kMaxHeadDim + c * kQ8_0BlockElems + e] * k8;
            }
            fp16_t half;
            std::memcpy(&half, chunk + 2 * lane, 2);
            const float scale = fp16_to_fp32(half) * q8_dq[g * kMaxHeadDim / kQ8_0BlockElems + c];
            dot = std::fma(static_cast<float>(sum), scale, dot);
          }
          s[g][j] = t.softcap > 0.0f ? t.softcap * std::tanh(dot / t.softcap) : dot;
        }
      } else {
        load_key<Elem>(t, j0 + j, row);
        for (int g = 0; g < n_q; ++g) {
          float dot = 0.0f;
          for (int d = 0; d < dim; ++d) dot += qs[g][d] * row[d];
          s[g][j] = t.softcap > 0.0f ? t.softcap * std::tanh(dot / t.softcap) : dot;
        }
      }
    }
    for (int g = 0; g < n_q; ++g) {
      const float m_new = std::max(m[g], *std::max_element(s[g], s[g] + nt));
      const float corr = std::isinf(m[g]) ? 0.0f : exp_flushed(m[g] - m_new);
      float sum = 0.0f;
      for (int j = 0; j < nt; ++j) {
        s[g][j] = exp_flushed(s[g][j] - m_new);
        sum += s[g][j];
      }
      l[g] = l[g] * corr + sum;
      if (corr != 1.0f) {
        for (int d = 0; d < dim; ++d) acc[g][d] *= corr;
      }
      m[g] = m_new;
    }
    for (int j = 0; j < nt; ++j) {
      const std::byte* vrow = t.v + (j0 + j) * t.row_bytes;
      load_row<Elem>(vrow, dim, row);
      for (int g = 0; g < n_q; ++g) {
        for (int d = 0; d < dim; ++d) acc[g][d] += s[g][j] * row[d];
      }
    }
  }
  if (t.m_out != nullptr) {
    for (int g = 0; g < n_q; ++g) t.m_out[g] = m[g], t.l_out[g] = l[g];
  }
  for (int g = 0; g < n_q; ++g) {
    const float inv = 1.0f / l[g];
    for (int d = 0; d < dim; ++d) t.out[g * dim + d] = acc[g][d] * inv;
  }
}

// A prefill task's tokens one at a time (AttentionTask::n_tokens).
template <typename Elem>
void attend_scalar(const AttentionTask& t) {
  for (int i = 0; i < t.n_tokens; ++i) {
    AttentionTask one = t;
    one.n_tokens = 1;
    one.q = t.q + i * t.token_stride;
    one.out = t.out + i * t.token_stride;
    one.key_end = t.key_end + i;
    attend_scalar_one<Elem>(one);
  }
}

void to_f16_scalar(const float* src, fp16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

constexpr AttentionKernels kScalarKernels{attend_scalar<fp16_t>, attend_scalar<float>,
                                          to_f16_scalar, attend_scalar<BlockQ8_0>};

}  // namespace

int64_t kv_row_bytes(WeightType kv_type, int64_t n_elems) {
  switch (kv_type) {
    case WeightType::F16:
      return n_elems * 2;
    case WeightType::F32:
      return n_elems * 4;
    case WeightType::Q8_0:
      if (n_elems % kQ8_0BlockElems != 0) {
        fail("a q8_0 cache row needs a multiple of 32 elements, got " + std::to_string(n_elems));
      }
      return n_elems / kQ8_0BlockElems * static_cast<int64_t>(sizeof(BlockQ8_0));
    default:
      fail("kv_type " + std::string(type_name(kv_type)) + " unsupported (f16, f32 or q8_0)");
  }
}

const AttentionKernels& attention_kernels(Isa isa, bool avx512_vnni) noexcept {
  switch (isa) {
    case Isa::Avx512:
      return avx512_vnni ? attention_kernels_avx512vnni() : attention_kernels_avx512();
    case Isa::Avx2:
      return attention_kernels_avx2();
    case Isa::Scalar:
      break;
  }
  return kScalarKernels;
}

int64_t kv_cache_bytes(const AttentionParams& p) {
  check_params(p);
  return p.n_kv_heads * head_stride(p);
}

void for_each_kv_store_range(const AttentionParams& p, int64_t pos0, int64_t n_tokens,
                             const std::byte* k_cache, const std::byte* v_cache,
                             const std::function<void(const std::byte*, int64_t)>& visit) {
  check_params(p);
  if (pos0 < 0 || n_tokens < 0) fail("kv_store ranges: negative pos0 or n_tokens");
  check_positions(p, pos0, n_tokens);
  if (n_tokens == 0) return;
  const int64_t head_bytes = kv_row_bytes(p.kv_type, p.head_dim), stride = head_stride(p);
  const int64_t first_block = pos0 / kKvBlock, end_block = (pos0 + n_tokens - 1) / kKvBlock + 1;
  for (int h = 0; h < p.n_kv_heads; ++h) {
    // V: the rows, one after another.
    visit(v_cache + h * stride + pos0 * head_bytes, n_tokens * head_bytes);
    // K: all of each transposed block the positions fall in (a position writes one lane of
    // every line of its block).
    visit(k_cache + h * stride + first_block * kKvBlock * head_bytes,
          (end_block - first_block) * kKvBlock * head_bytes);
  }
}

void kv_store_prefetch(const AttentionParams& p, int64_t pos0, int64_t n_tokens,
                       const std::byte* k_cache, const std::byte* v_cache) {
  for_each_kv_store_range(
      p, pos0, n_tokens, k_cache, v_cache, [](const std::byte* b, int64_t bytes) {
        // Line by line from the line b is in: a range need not start on one.
        const auto end = reinterpret_cast<uintptr_t>(b) + bytes;
        for (auto a = reinterpret_cast<uintptr_t>(b) & ~uintptr_t{63}; a < end; a += 64) {
          __builtin_prefetch(reinterpret_cast<const void*>(a), 1, 3);
        }
      });
}

void kv_store(const AttentionParams& p, std::span<const float> k, std::span<const float> v,
              int64_t pos0, int64_t n_tokens, std::byte* k_cache, std::byte* v_cache,
              const KernelSet& kernels) {
  check_params(p);
  if (pos0 < 0 || n_tokens < 0) fail("kv_store: negative pos0 or n_tokens");
  const int dim = p.head_dim;
  const int64_t row = static_cast<int64_t>(p.n_kv_heads) * dim;
  check_span("kv_store k", k.size(), n_tokens * row);
  check_span("kv_store v", v.size(), n_tokens * row);
  check_positions(p, pos0, n_tokens);
  const int64_t head_bytes = kv_row_bytes(p.kv_type, dim), stride = head_stride(p);
  const ToF16Fn to_f16 = kernels.attention().to_f16;
  // One head's V row of `dim` values into its place.
  auto store_row = [&](const float* src, std::byte* dst) {
    switch (p.kv_type) {
      case WeightType::F32:
        std::memcpy(dst, src, static_cast<size_t>(dim) * sizeof(float));
        break;
      case WeightType::Q8_0:  // whole blocks: head_dim % 32 == 0
        quantize_row_q8_0_ref(src, reinterpret_cast<BlockQ8_0*>(dst), dim);
        break;
      default:
        to_f16(src, reinterpret_cast<fp16_t*>(dst), dim);
    }
  };
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t pos = pos0 + t;
    for (int h = 0; h < p.n_kv_heads; ++h) {
      const float* ks = k.data() + t * row + static_cast<int64_t>(h) * dim;
      const float* vs = v.data() + t * row + static_cast<int64_t>(h) * dim;
      store_row(vs, v_cache + h * stride + pos * head_bytes);
      // K: this position is lane pos % kKvBlock of its block's vectors.
      std::byte* block = k_cache + h * stride + pos / kKvBlock * kKvBlock * head_bytes;
      const int64_t lane = pos % kKvBlock;
      if (p.kv_type == WeightType::F32) {
        auto* dst = reinterpret_cast<float*>(block) + lane;
        for (int d = 0; d < dim; ++d) dst[d * kKvBlock] = ks[d];
      } else if (p.kv_type == WeightType::F16) {
        fp16_t half[kMaxHeadDim];
        to_f16(ks, half, dim);
        auto* dst = reinterpret_cast<fp16_t*>(block) + lane;
        for (int d = 0; d < dim; ++d) dst[d * kKvBlock] = half[d];
      } else {  // Q8_0: quantized as a row, then each 32 dimensions' scale and int8 to their lanes
        BlockQ8_0 blocks[kMaxHeadDim / kQ8_0BlockElems];
        quantize_row_q8_0_ref(ks, blocks, dim);
        for (int c = 0; c < dim / kQ8_0BlockElems; ++c) {
          std::byte* chunk = block + c * kQ8KeyChunkBytes;
          std::memcpy(chunk + 2 * lane, &blocks[c].d, 2);
          for (int e = 0; e < kQ8_0BlockElems; ++e) {
            chunk[kQ8KeyScaleBytes + e * kKvBlock + lane] = static_cast<std::byte>(blocks[c].qs[e]);
          }
        }
      }
    }
  }
}

namespace {

// Everything a chunk of (token, head) items needs, so the chunk lambda captures one pointer and
// std::function stores it inline: attention() allocates nothing per call.
struct AttentionJob {
  AttendFn attend;
  const AttentionParams* p;
  const float* q;
  float* out;
  int64_t pos0, n_tokens;
  const std::byte* k_cache;
  const std::byte* v_cache;
  int group;            // query heads per KV head
  int64_t head_stride;  // bytes from one KV head's slice of the cache to the next
  int64_t head_bytes;   // one position of one KV head
};

// The task of query heads [h, h + n_q) of one query over keys [key_begin, key_end): everything
// but where q, the output and the segment statistics live. n_q: the heads from h that share h's
// KV head and lie in this chunk (at most kMaxGroup), which go through the keys together.
AttentionTask head_task(const AttentionJob& job, int h, int64_t items_left, int64_t key_begin,
                        int64_t key_end) {
  const int group = job.group, kv_head = h / group;
  AttentionTask task;
  task.n_q = static_cast<int>(std::min<int64_t>({group - h % group, kMaxGroup, items_left}));
  task.head_dim = job.p->head_dim;
  task.k = job.k_cache + kv_head * job.head_stride;
  task.v = job.v_cache + kv_head * job.head_stride;
  task.row_bytes = job.head_bytes;
  task.key_begin = key_begin;
  task.key_end = key_end;
  task.scale = job.p->scale;
  task.softcap = job.p->softcap;
  return task;
}

// Points task.next_k / next_v at the first tile of a task of KV head kv_head over keys
// [key_begin, key_end), the one the same worker runs after `task` (nothing where that one reads
// the same keys: a KV head of more than kMaxGroup query heads).
void set_next_task(const AttentionJob& job, AttentionTask& task, int kv_head, int64_t key_begin,
                   int64_t key_end) {
  const int64_t start = key_begin / kKvBlock * kKvBlock;  // the kernels read whole K blocks
  const std::byte* k = job.k_cache + kv_head * job.head_stride + start * job.head_bytes;
  if (k == task.k + (task.key_begin / kKvBlock * kKvBlock) * job.head_bytes) return;
  task.next_k = k;
  task.next_v = job.v_cache + kv_head * job.head_stride + start * job.head_bytes;
  task.next_keys = static_cast<int>(std::min<int64_t>(key_end - start, kKeyTile));
}

// Query tokens per work item: a causal prefill's blocks of kPrefillTokens consecutive tokens
// (their keys share a start), else one (decode, or a sliding window, where each token's keys
// start elsewhere).
int64_t tokens_per_item(const AttentionParams& p, int64_t n_tokens) {
  return n_tokens > 1 && p.sliding_window == 0 ? kPrefillTokens : 1;
}

void run_items(const AttentionJob& job, int64_t begin, int64_t end) {
  const int n_heads = job.p->n_heads, dim = job.p->head_dim;
  const int64_t per_item = tokens_per_item(*job.p, job.n_tokens);
  const int64_t n_blocks = (job.n_tokens + per_item - 1) / per_item;
  for (int64_t item = begin; item < end;) {
    const int64_t t = token_of_slot(item / n_heads, n_blocks) * per_item;
    const int h = static_cast<int>(item % n_heads);
    const int64_t pos = job.pos0 + t;
    AttentionTask task =
        head_task(job, h, end - item, first_visible_key(pos, job.p->sliding_window), pos + 1);
    task.q = job.q + (t * n_heads + h) * dim;
    task.out = job.out + (t * n_heads + h) * dim;
    task.n_tokens = static_cast<int>(std::min(per_item, job.n_tokens - t));
    task.token_stride = static_cast<int64_t>(n_heads) * dim;
    if (job.n_tokens == 1 && item + task.n_q < end) {  // decode: the same keys of the next head
      set_next_task(job, task, (h + task.n_q) / job.group, task.key_begin, task.key_end);
    }
    job.attend(task);
    item += task.n_q;
  }
}

int64_t key_segments(int64_t n_keys) {
  return (n_keys + kAttentionKeySegment - 1) / kAttentionKeySegment;
}

// The one decode query's keys [lo, hi) in `segments` segments: per (segment, head) the normalized
// output o, running max m and sum l (scratch laid out as o[segments][n_heads][dim], m[segments]
// [n_heads], l[segments][n_heads]).
struct SplitDecode {
  const AttentionJob* job;
  int64_t lo, hi, segments;
  float *o, *m, *l;
};

// Item i of a split decode: KV head-major, then segment, then query head within the KV head's
// group, so that a worker's run of items reads each KV head's keys front to back and every task
// can ask for the next one's first tile as it ends (TinyLlama's shape, 32 caches of 2048
// positions from DRAM on one Zen 5 core: segment-major, each task started cold).
struct SegmentItem {
  int64_t seg;
  int h;
};
SegmentItem segment_item(const SplitDecode& sd, int64_t item) {
  const int group = sd.job->group;
  const int64_t per_kv_head = sd.segments * group, rest = item % per_kv_head;
  return {rest / group, static_cast<int>(item / per_kv_head * group + rest % group)};
}

void run_segment_items(const SplitDecode& sd, int64_t begin, int64_t end) {
  const AttentionJob& job = *sd.job;
  const int n_heads = job.p->n_heads, dim = job.p->head_dim;
  auto keys_of = [&sd](int64_t seg) {
    const int64_t lo = sd.lo + seg * kAttentionKeySegment;
    return std::pair{lo, std::min(lo + kAttentionKeySegment, sd.hi)};
  };
  for (int64_t item = begin; item < end;) {
    const auto [seg, h] = segment_item(sd, item);
    const int64_t slot = seg * n_heads + h;
    const auto [lo, hi] = keys_of(seg);
    AttentionTask task = head_task(job, h, end - item, lo, hi);
    task.q = job.q + static_cast<int64_t>(h) * dim;
    task.out = sd.o + slot * dim;
    task.m_out = sd.m + slot;
    task.l_out = sd.l + slot;
    if (item + task.n_q < end) {
      const SegmentItem next = segment_item(sd, item + task.n_q);
      const auto [next_lo, next_hi] = keys_of(next.seg);
      set_next_task(job, task, next.h / job.group, next_lo, next_hi);
    }
    job.attend(task);
    item += task.n_q;
  }
}

// out_h = sum_s w_s o_s / sum_s w_s with w_s = l_s e^(m_s - max m): each segment's softmax
// reweighted to the common max, i.e. the softmax over all keys.
void merge_segments(const SplitDecode& sd, int64_t h_begin, int64_t h_end, float* out) {
  const int64_t n_heads = sd.job->p->n_heads, dim = sd.job->p->head_dim;
  for (int64_t h = h_begin; h < h_end; ++h) {
    float m_max = -std::numeric_limits<float>::infinity();
    for (int64_t s = 0; s < sd.segments; ++s) m_max = std::max(m_max, sd.m[s * n_heads + h]);
    float* o = out + h * dim;
    std::fill_n(o, dim, 0.0f);
    float w_sum = 0.0f;
    for (int64_t s = 0; s < sd.segments; ++s) {
      // A segment more than 87.3 below the max weighs 0, as the SIMD exp has it (ops/exp_range.h):
      // a subnormal w would take an assist on each of the dim products below.
      const float w = sd.l[s * n_heads + h] * exp_flushed(sd.m[s * n_heads + h] - m_max);
      const float* os = sd.o + (s * n_heads + h) * dim;
      for (int64_t d = 0; d < dim; ++d) o[d] += w * os[d];
      w_sum += w;
    }
    const float inv = 1.0f / w_sum;
    for (int64_t d = 0; d < dim; ++d) o[d] *= inv;
  }
}

}  // namespace

int64_t attention_scratch_floats(const AttentionParams& p, int64_t n_tokens, int64_t max_keys) {
  check_params(p);
  if (p.sliding_window > 0) max_keys = std::min(max_keys, p.sliding_window);
  if (n_tokens != 1 || max_keys <= kAttentionKeySegment) return 0;
  return key_segments(max_keys) * p.n_heads * (static_cast<int64_t>(p.head_dim) + 2);
}

void attention(const AttentionParams& p, std::span<const float> q, int64_t pos0, int64_t n_tokens,
               const std::byte* k_cache, const std::byte* v_cache, std::span<float> out,
               const Parallel& par, const KernelSet& kernels, std::span<float> scratch) {
  const AttentionKernels& k = kernels.attention();
  AttendFn attend = k.attend_f32;
  if (p.kv_type == WeightType::F16) attend = k.attend_f16;
  if (p.kv_type == WeightType::Q8_0) attend = k.attend_q8_0;
  attention_with_kernel(attend, p, q, pos0, n_tokens, k_cache, v_cache, out, par, scratch);
}

void attention_with_kernel(AttendFn attend, const AttentionParams& p, std::span<const float> q,
                           int64_t pos0, int64_t n_tokens, const std::byte* k_cache,
                           const std::byte* v_cache, std::span<float> out, const Parallel& par,
                           std::span<float> scratch) {
  check_call(p, q.size(), out.size(), pos0, n_tokens);
  const AttentionJob job{
      .attend = attend,
      .p = &p,
      .q = q.data(),
      .out = out.data(),
      .pos0 = pos0,
      .n_tokens = n_tokens,
      .k_cache = k_cache,
      .v_cache = v_cache,
      .group = p.n_heads / p.n_kv_heads,
      .head_stride = head_stride(p),
      .head_bytes = kv_row_bytes(p.kv_type, p.head_dim),
  };
  const int64_t lo = first_visible_key(pos0, p.sliding_window), n_keys = pos0 + 1 - lo;
  if (n_tokens == 1 && n_keys > kAttentionKeySegment && !scratch.empty()) {
    const int64_t need = attention_scratch_floats(p, 1, n_keys);
    if (static_cast<int64_t>(scratch.size()) < need) {
      fail("scratch has " + std::to_string(scratch.size()) + " floats, a decode over " +
           std::to_string(n_keys) + " keys needs " + std::to_string(need));
    }
    const int64_t segments = key_segments(n_keys), slots = segments * p.n_heads;
    const SplitDecode sd{.job = &job,
                         .lo = lo,
                         .hi = pos0 + 1,
                         .segments = segments,
                         .o = scratch.data(),
                         .m = scratch.data() + slots * p.head_dim,
                         .l = scratch.data() + slots * p.head_dim + slots};
    // Balanced: the last segment holds what is left of the keys (1 to 512), so equal shares of
    // items are unequal shares of work, and an owner must leave room to steal from.
    par.run_chunks_balanced(
        slots, std::min(job.group, kMaxGroup),
        [&sd](int, int64_t begin, int64_t end) { run_segment_items(sd, begin, end); });
    float* o = out.data();
    par.run_chunks(p.n_heads, 1, [&sd, o](int, int64_t begin, int64_t end) {
      merge_segments(sd, begin, end, o);
    });
    return;
  }
  // A prefill's chunks are whole head groups: its tasks' scores depend on how many heads they
  // hold (the accumulator sets of score_keys_in_lanes), so a group cut by a chunk boundary would
  // round differently at another worker count. Decode's do not (its dot products add in the same
  // order for any group), and there a short context on many workers shares the heads finely.
  const int64_t per_item = tokens_per_item(p, n_tokens);
  const int64_t items = (n_tokens + per_item - 1) / per_item * p.n_heads;
  auto body = [&job](int, int64_t begin, int64_t end) { run_items(job, begin, end); };
  if (per_item > 1) {
    // A prefill's items are arithmetic on cached keys, not a byte stream: balanced pieces, so a
    // worker done early still finds items to take. With stream-length owner pieces an owner
    // takes the second half of a 32-piece share in one go, leaving nothing to steal (16 workers
    // of the Intel device at depth 4096: the op's imbal column read 23 %).
    par.run_chunks_balanced(items, std::min(job.group, kMaxGroup), body);
  } else {
    par.run_chunks(items, 1, body);
  }
}

void attention_ref(const AttentionParams& p, std::span<const float> q, int64_t pos0,
                   int64_t n_tokens, const std::byte* k_cache, const std::byte* v_cache,
                   std::span<float> out) {
  check_call(p, q.size(), out.size(), pos0, n_tokens);
  const int dim = p.head_dim, group = p.n_heads / p.n_kv_heads;
  const int64_t stride = head_stride(p);
  // Cache element (position, kv head, d) of K (key) or V as fp32.
  auto cache_at = [&](const std::byte* cache, bool key, int64_t pos, int kvh, int d) {
    return cache_elem(p.kv_type, key, cache + kvh * stride, dim, pos, d);
  };
  std::vector<float> scores;
  std::vector<BlockQ8_0> q_blocks;
  std::vector<float> q_dequant(static_cast<size_t>(dim));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t pos = pos0 + t;
    const int64_t lo = first_visible_key(pos, p.sliding_window);
    for (int h = 0; h < p.n_heads; ++h) {
      const float* qh = q.data() + (t * p.n_heads + h) * dim;
      if (p.kv_type == WeightType::Q8_0) {  // q as llama.cpp dots it with a Q8_0 K: Q8_0 too
        q_blocks.resize(static_cast<size_t>(dim / kQ8_0BlockElems));
        quantize_row_q8_0_ref(qh, q_blocks.data(), dim);
        dequantize_row_q8_0(q_blocks.data(), q_dequant.data(), dim);
        qh = q_dequant.data();
      }
      const int kvh = h / group;
      // scores_j = scale * q.k_j, optionally soft-capped
      scores.assign(pos - lo + 1, 0.0f);
      for (int64_t j = lo; j <= pos; ++j) {
        float dot = 0.0f;
        for (int d = 0; d < dim; ++d) dot += qh[d] * cache_at(k_cache, true, j, kvh, d);
        float s = p.scale * dot;
        if (p.softcap > 0.0f) s = p.softcap * std::tanh(s / p.softcap);
        scores[j - lo] = s;
      }
      // softmax
      const float max = *std::max_element(scores.begin(), scores.end());
      float sum = 0.0f;
      for (float& s : scores) {
        s = std::exp(s - max);
        sum += s;
      }
      // out = sum_j softmax_j * v_j
      float* oh = out.data() + (t * p.n_heads + h) * dim;
      for (int d = 0; d < dim; ++d) {
        float o = 0.0f;
        for (int64_t j = lo; j <= pos; ++j)
          o += scores[j - lo] * cache_at(v_cache, false, j, kvh, d);
        oh[d] = o / sum;
      }
    }
  }
}

}  // namespace pacer::ops
