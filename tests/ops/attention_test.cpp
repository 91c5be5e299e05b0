// Attention: every Isa's kernels and attention_ref against softmax(QK^T)V computed here in double,
// over decode and prefill, GQA ratios, sliding windows, softcap, F16, F32 and Q8_0 caches, head_dim
// tails; the F16 cache against exact fp32 math within a bound derived from fp16 rounding; and
// bit-identical results for any worker count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "ops/attention.h"
#include "ops/attention_kernels.h"
#include "ops/fp16.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/parallel.h"
#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

// Kernels vs double math on the same (already rounded) cache values: only fp32 summation order
// and the kernels' own exp (~1 ulp) differ. Outputs are convex combinations of V rows in [-1, 1].
constexpr double kFp32AbsTol = 2e-5;

struct Case {
  const char* name;
  int n_heads, n_kv_heads, head_dim;
  int64_t pos0, n_tokens, window;
  float softcap;
  WeightType kv_type;
};

const Case kCases[] = {
    {"decode_mha", 4, 4, 64, 150, 1, 0, 0.0f, WeightType::F16},
    {"decode_gqa2", 4, 2, 64, 200, 1, 0, 0.0f, WeightType::F16},
    {"decode_gqa7_qwen", 14, 2, 64, 130, 1, 0, 0.0f, WeightType::F16},
    {"decode_gqa16", 16, 1, 32, 70, 1, 0, 0.0f, WeightType::F16},
    {"decode_d256_gemma", 4, 1, 256, 90, 1, 0, 0.0f, WeightType::F16},
    {"decode_f32", 8, 2, 128, 100, 1, 0, 0.0f, WeightType::F32},
    {"decode_first_token", 4, 2, 64, 0, 1, 0, 0.0f, WeightType::F16},
    {"decode_window", 4, 2, 64, 300, 1, 40, 0.0f, WeightType::F16},
    {"decode_window1", 4, 2, 64, 20, 1, 1, 0.0f, WeightType::F16},
    {"decode_softcap", 4, 2, 64, 100, 1, 0, 5.0f, WeightType::F16},
    {"decode_dim40_tail", 6, 3, 40, 80, 1, 0, 0.0f, WeightType::F16},
    {"decode_dim20_tail_f32", 6, 3, 20, 80, 1, 0, 0.0f, WeightType::F32},
    {"decode_dim4", 2, 1, 4, 10, 1, 0, 0.0f, WeightType::F16},
    {"prefill_mha", 4, 4, 64, 0, 37, 0, 0.0f, WeightType::F16},
    {"prefill_gqa7", 14, 2, 64, 5, 19, 0, 0.0f, WeightType::F16},
    {"prefill_continued_gqa2_f32", 4, 2, 64, 60, 25, 0, 0.0f, WeightType::F32},
    {"prefill_window", 4, 1, 32, 0, 90, 16, 0.0f, WeightType::F16},
    {"prefill_window_softcap_f32", 4, 2, 48, 10, 30, 12, 3.0f, WeightType::F32},
    {"decode_q8_0", 8, 2, 64, 150, 1, 0, 0.0f, WeightType::Q8_0},
    {"decode_gqa7_q8_0", 14, 2, 64, 130, 1, 0, 0.0f, WeightType::Q8_0},
    {"decode_d128_window_q8_0", 4, 1, 128, 300, 1, 40, 0.0f, WeightType::Q8_0},
    {"decode_softcap_q8_0", 4, 2, 32, 100, 1, 0, 5.0f, WeightType::Q8_0},
    // Longer than several key tiles (kKeyTile): the online softmax rescales across tiles.
    {"decode_long_q8_0", 8, 2, 64, 1000, 1, 0, 0.0f, WeightType::Q8_0},
    {"decode_long_f16", 8, 2, 64, 1000, 1, 0, 0.0f, WeightType::F16},
    {"prefill_q8_0", 4, 2, 64, 60, 90, 0, 0.0f, WeightType::Q8_0},
    // No GQA takes 8 value chunks a pass on AVX2: 128 dims in two passes, 80 and 96 with 2 and 4
    // chunks left, 44 with 5 left and a 4-dim tail.
    {"decode_mha_d128_long", 2, 2, 128, 300, 1, 0, 0.0f, WeightType::F16},
    {"decode_mha_dim80", 3, 3, 80, 140, 1, 0, 0.0f, WeightType::F16},
    {"prefill_mha_dim96_f32", 2, 2, 96, 20, 9, 0, 0.0f, WeightType::F32},
    {"decode_mha_dim44_tail", 3, 3, 44, 70, 1, 0, 0.0f, WeightType::F16},
    // Groups of 8 (TinyLlama), 6 and 5: on AVX2 passes of 4 + 4, 4 + 2 and 4 + 1 heads, or one
    // pass of all of them (attention_kernels_avx2_one_pass).
    {"decode_gqa8_long", 16, 2, 64, 700, 1, 0, 0.0f, WeightType::F16},
    {"decode_gqa6_f32", 12, 2, 64, 300, 1, 0, 0.0f, WeightType::F32},
    {"decode_gqa5_dim40_tail", 10, 2, 40, 260, 1, 0, 0.0f, WeightType::F16},
    {"prefill_gqa8", 8, 1, 64, 30, 21, 0, 0.0f, WeightType::F16},
};

// Inputs of one case: q, fp32 K/V for every position up to the last query, and the cache.
struct Inputs {
  AttentionParams p;
  std::vector<float> q, k, v;  // k, v: (positions, n_kv_heads * head_dim)
  std::vector<std::byte> k_cache, v_cache;
  int64_t positions = 0;
};

Inputs make_inputs(const Case& c, Isa store_isa = Isa::Scalar) {
  Inputs in;
  in.p = {.n_heads = c.n_heads,
          .n_kv_heads = c.n_kv_heads,
          .head_dim = c.head_dim,
          .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
          .sliding_window = c.window,
          .softcap = c.softcap,
          .kv_type = c.kv_type,
          .kv_positions = c.pos0 + c.n_tokens};
  in.positions = c.pos0 + c.n_tokens;
  const int64_t row = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  std::mt19937 rng(static_cast<uint32_t>(c.n_heads * 1000 + c.head_dim + c.pos0));
  // q ~ N(0, 2) makes the softmax peaked enough that a wrong mask or scale shows.
  std::normal_distribution<float> qd(0.0f, 2.0f);
  std::uniform_real_distribution<float> kvd(-1.0f, 1.0f);
  in.q.resize(static_cast<size_t>(c.n_tokens) * c.n_heads * c.head_dim);
  for (float& x : in.q) x = qd(rng);
  in.k.resize(static_cast<size_t>(in.positions * row));
  in.v.resize(in.k.size());
  for (float& x : in.k) x = kvd(rng);
  for (float& x : in.v) x = kvd(rng);
  in.k_cache.resize(static_cast<size_t>(kv_cache_bytes(in.p)));
  in.v_cache.resize(in.k_cache.size());
  // Stored in two calls (a prompt, then the rest) the way the runtime appends.
  const int64_t first = in.positions / 2;
  const KernelSet store = KernelSet::for_isa(store_isa);
  kv_store(in.p, std::span(in.k).first(first * row), std::span(in.v).first(first * row), 0, first,
           in.k_cache.data(), in.v_cache.data(), store);
  kv_store(in.p, std::span(in.k).subspan(first * row), std::span(in.v).subspan(first * row), first,
           in.positions - first, in.k_cache.data(), in.v_cache.data(), store);
  return in;
}

// What the cache holds for k or v, as fp32: F16 rounding where the cache is F16; where it is
// Q8_0, ggml's quantize_row_q8_0 per 32 consecutive values (d = max|x| / 127 stored as fp16,
// q = round(x / d) computed as x * (1/d)) and w = fp16(d) * q.
std::vector<float> as_cached(const std::vector<float>& x, WeightType t) {
  std::vector<float> r(x.size());
  if (t == WeightType::Q8_0) {
    for (size_t b = 0; b < x.size(); b += 32) {
      float amax = 0.0f;
      for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::abs(x[j]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      const float d16 = fp16_to_fp32(fp32_to_fp16(d));
      for (size_t j = b; j < b + 32; ++j) r[j] = d16 * std::round(x[j] * id);
    }
    return r;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    r[i] = t == WeightType::F16 ? fp16_to_fp32(fp32_to_fp16(x[i])) : x[i];
  }
  return r;
}

// The query as the kernels dot it with a cache of type t: against a Q8_0 K, Q8_0 values too
// (llama.cpp converts q to K's dot type); otherwise q itself.
std::vector<float> as_dotted_query(const std::vector<float>& q, WeightType t) {
  return t == WeightType::Q8_0 ? as_cached(q, t) : q;
}

// softmax(scale * q k^T (softcapped), masked) V in double, straight from the definition, for the
// query values `qv` ((n_tokens, n_heads * head_dim), as in.q).
std::vector<double> naive_attention(const Inputs& in, const Case& c, const std::vector<float>& qv,
                                    const std::vector<float>& k, const std::vector<float>& v) {
  const int dim = c.head_dim, group = c.n_heads / c.n_kv_heads;
  const int64_t row = static_cast<int64_t>(c.n_kv_heads) * dim;
  std::vector<double> out(in.q.size());
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    const int64_t pos = c.pos0 + t;
    for (int h = 0; h < c.n_heads; ++h) {
      const float* q = qv.data() + (t * c.n_heads + h) * dim;
      const int64_t kv_off = static_cast<int64_t>(h / group) * dim;
      std::vector<double> s(pos + 1, -INFINITY);
      double mx = -INFINITY;
      for (int64_t j = 0; j <= pos; ++j) {
        if (c.window > 0 && pos - j >= c.window) continue;  // outside the sliding window
        double dot = 0;
        for (int d = 0; d < dim; ++d) dot += static_cast<double>(q[d]) * k[j * row + kv_off + d];
        dot *= in.p.scale;
        if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
        s[j] = dot;
        mx = std::max(mx, dot);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int d = 0; d < dim; ++d) {
        double o = 0;
        for (int64_t j = 0; j <= pos; ++j) o += s[j] * v[j * row + kv_off + d];
        out[(t * c.n_heads + h) * dim + d] = o / sum;
      }
    }
  }
  return out;
}

void expect_close(std::span<const float> got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - want[i]) > worst || std::isnan(got[i])) {
      worst = std::isnan(got[i]) ? INFINITY : std::abs(got[i] - want[i]);
      worst_i = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": element " << worst_i << " got " << got[worst_i] << " want "
                        << want[worst_i];
}

class AttentionIsa : public ::testing::TestWithParam<Isa> {};

TEST_P(AttentionIsa, MatchesDoubleSoftmaxOnCachedValues) {
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(c, GetParam());
    const auto want = naive_attention(in, c, as_dotted_query(in.q, c.kv_type),
                                      as_cached(in.k, c.kv_type), as_cached(in.v, c.kv_type));
    std::vector<float> out(in.q.size(), NAN);
    attention(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), out,
              SerialParallel(1), KernelSet::for_isa(GetParam()));
    expect_close(out, want, kFp32AbsTol, c.name);
  }
}

TEST_P(AttentionIsa, SameResultForAnyWorkerCount) {
  // Each (token, head) is computed the same way whichever chunk it lands in: bit-identical.
  for (const Case& c : {kCases[2], kCases[3], kCases[14], kCases[16]}) {
    const Inputs in = make_inputs(c);
    std::vector<float> base(in.q.size());
    attention(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), base,
              SerialParallel(1), KernelSet::for_isa(GetParam()));
    for (int workers : {2, 3, 5, 16}) {
      std::vector<float> out(in.q.size());
      attention(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), out,
                SerialParallel(workers), KernelSet::for_isa(GetParam()));
      EXPECT_EQ(out, base) << c.name << " workers=" << workers;
    }
    std::vector<float> tbb_out(in.q.size());
    attention(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), tbb_out,
              TbbParallel(2), KernelSet::for_isa(GetParam()));
    EXPECT_EQ(tbb_out, base) << c.name << " tbb";
  }
}

// Cuts a balanced job into pieces of one `align` unit, last piece first, as work stealing may
// (runtime's executor); plain run_chunks jobs run in one piece.
class PiecewiseParallel final : public Parallel {
 public:
  int workers() const noexcept override { return 4; }
  void run_chunks(int64_t n, int64_t /*align*/, const ChunkFn& body) const override {
    if (n > 0) body(0, 0, n);
  }
  void run_chunks_balanced(int64_t n, int64_t align, const ChunkFn& body) const override {
    ++balanced_jobs;
    for (int64_t b = (n - 1) / align * align; b >= 0; b -= align)
      body(0, b, std::min(n, b + align));
  }
  mutable int balanced_jobs = 0;
};

TEST_P(AttentionIsa, PrefillSameResultInBalancedPieces) {
  // A causal prefill is arithmetic on cached keys: it runs as a balanced job (pieces as small as
  // one head group), and any cut on those boundaries gives the same bits.
  for (const Case& c : {kCases[13], kCases[14], kCases[15], kCases[24]}) {
    const Inputs in = make_inputs(c);
    std::vector<float> base(in.q.size()), out(in.q.size());
    attention(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), base,
              SerialParallel(1), KernelSet::for_isa(GetParam()));
    const PiecewiseParallel pieces;
    attention(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), out, pieces,
              KernelSet::for_isa(GetParam()));
    EXPECT_EQ(pieces.balanced_jobs, 1) << c.name;
    EXPECT_EQ(out, base) << c.name;
  }
}

TEST_P(AttentionIsa, KvStoreRoundsLikeScalarFp16Conversion) {
  // Values around every fp16 regime: normal, subnormal, underflow to 0, overflow to inf, ties.
  std::vector<float> vals = {0.0f,           -0.0f,    1.0f,     -2.5f,         65504.0f,
                             65520.0f,       1e6f,     -1e6f,    6.1e-5f,       3.0e-5f,
                             5.96e-8f,       2.0e-8f,  1e-10f,   1.0009765625f, 1.00048828125f,
                             1.00146484375f, INFINITY, -INFINITY};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  while (vals.size() < 4 * 37) vals.push_back(d(rng) * (vals.size() % 3 == 0 ? 1e-7f : 1.0f));
  AttentionParams p{
      .n_heads = 1, .n_kv_heads = 1, .head_dim = 37, .scale = 1.0f, .kv_positions = 4};
  // One block of 16 positions (4 written), 37 halves each.
  std::vector<std::byte> kc(16 * 37 * 2), vc(kc.size());
  ASSERT_EQ(kv_cache_bytes(p), static_cast<int64_t>(kc.size()));
  kv_store(p, vals, vals, 0, 4, kc.data(), vc.data(), KernelSet::for_isa(GetParam()));
  for (int pos = 0; pos < 4; ++pos) {
    for (int d = 0; d < 37; ++d) {
      const float x = vals[static_cast<size_t>(pos * 37 + d)];
      fp16_t h;
      std::memcpy(&h, kc.data() + 2 * (d * 16 + pos), 2);  // K: dimension-major in the block
      ASSERT_EQ(h, fp32_to_fp16(x)) << x;
      std::memcpy(&h, vc.data() + 2 * (pos * 37 + d), 2);  // V: rows
      ASSERT_EQ(h, fp32_to_fp16(x)) << x;
    }
  }
}

TEST(Attention, KvStorePlacesEachHeadsPositionsPerTheLayout) {
  // 2 KV heads of 32 dims, 20 positions written in two calls into a cache of 21: each head's
  // slice is 32 positions (2 blocks) long. Element (pos, head, d) holds 1000 pos + 100 head + d.
  const int heads = 2, dim = 32, n = 20;
  std::vector<float> kv(static_cast<size_t>(n * heads * dim));
  for (int pos = 0; pos < n; ++pos) {
    for (int h = 0; h < heads; ++h) {
      for (int d = 0; d < dim; ++d) kv[(pos * heads + h) * dim + d] = 1000.0f * pos + 100 * h + d;
    }
  }
  const KernelSet ks = KernelSet::for_isa(Isa::Scalar);
  AttentionParams p{.n_heads = 4,
                    .n_kv_heads = heads,
                    .head_dim = dim,
                    .scale = 1.0f,
                    .kv_type = WeightType::F32,
                    .kv_positions = 21};
  auto store = [&](std::vector<std::byte>& k, std::vector<std::byte>& v) {
    const std::span<const float> all(kv);
    kv_store(p, all.first(7 * heads * dim), all.first(7 * heads * dim), 0, 7, k.data(), v.data(),
             ks);
    kv_store(p, all.subspan(7 * heads * dim), all.subspan(7 * heads * dim), 7, n - 7, k.data(),
             v.data(), ks);
  };
  {
    ASSERT_EQ(kv_cache_bytes(p), heads * 32 * dim * 4);
    std::vector<std::byte> k(static_cast<size_t>(kv_cache_bytes(p))), v(k.size());
    store(k, v);
    for (int pos = 0; pos < n; ++pos) {
      for (int h = 0; h < heads; ++h) {
        for (int d = 0; d < dim; ++d) {
          const float want = 1000.0f * pos + 100 * h + d;
          float got;
          // K: head h's 2 blocks of 16 x 32 floats, dimension-major within a block.
          std::memcpy(&got, k.data() + 4 * (h * 32 * dim + pos / 16 * 16 * dim + d * 16 + pos % 16),
                      4);
          ASSERT_EQ(got, want) << "K pos " << pos << " head " << h << " d " << d;
          std::memcpy(&got, v.data() + 4 * (h * 32 * dim + pos * dim + d), 4);
          ASSERT_EQ(got, want) << "V pos " << pos << " head " << h << " d " << d;
        }
      }
    }
  }
  {
    // Q8_0: V in rows of one 34-byte block per head; K in blocks of 16 positions: their 16
    // fp16 scales, then 32 dimensions x 16 positions of int8.
    p.kv_type = WeightType::Q8_0;
    ASSERT_EQ(kv_cache_bytes(p), heads * 32 * 34);
    std::vector<std::byte> k(static_cast<size_t>(kv_cache_bytes(p))), v(k.size());
    store(k, v);
    for (int pos = 0; pos < n; ++pos) {
      for (int h = 0; h < heads; ++h) {
        // ggml's rounding: d = max|x| / 127 (stored as fp16), q = round(x * (1 / d)).
        const float amax = 1000.0f * pos + 100 * h + 31, d = amax / 127, id = 1.0f / d;
        const std::byte* v_row = v.data() + (h * 32 + pos) * 34;
        const std::byte* k_block = k.data() + h * 32 * 34 + pos / 16 * 16 * 34;
        fp16_t vd, kd;
        std::memcpy(&vd, v_row, 2);
        std::memcpy(&kd, k_block + 2 * (pos % 16), 2);
        ASSERT_EQ(vd, fp32_to_fp16(d)) << "V pos " << pos << " head " << h;
        ASSERT_EQ(kd, fp32_to_fp16(d)) << "K pos " << pos << " head " << h;
        for (int e = 0; e < dim; ++e) {
          const auto want = static_cast<int8_t>(std::round((1000.0f * pos + 100 * h + e) * id));
          ASSERT_EQ(static_cast<int8_t>(v_row[2 + e]), want) << "V pos " << pos << " e " << e;
          ASSERT_EQ(static_cast<int8_t>(k_block[32 + e * 16 + pos % 16]), want)
              << "K pos " << pos << " head " << h << " e " << e;
        }
      }
    }
  }
  p.kv_type = WeightType::F16;
  std::vector<std::byte> small(static_cast<size_t>(kv_cache_bytes(p)));
  EXPECT_THROW(kv_store(p, std::span<const float>(kv).first(2 * heads * dim),
                        std::span<const float>(kv).first(2 * heads * dim), 20, 2, small.data(),
                        small.data(), ks),
               std::invalid_argument);  // positions 20, 21: past the cache's 21
}

TEST(Attention, KvStoreRangesCoverEveryByteTheStoreWritesAndLittleMore) {
  // kv_store_prefetch warms these ranges for the store a decode step makes after its qkv matmul:
  // what the store writes must lie inside them, and they must not reach past the lines it writes.
  // Every cache byte starts as 0xA5 and "written" means changed: a byte the store happened to
  // write as 0xA5 would go unseen, which can only weaken the checks, never fail them.
  const KernelSet ks = KernelSet::for_isa(Isa::Scalar);
  for (const WeightType type : {WeightType::F32, WeightType::F16, WeightType::Q8_0}) {
    for (const auto& [pos0, n_tokens] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 1}, {5, 1}, {15, 1}, {16, 1}, {14, 3}, {3, 17}}) {
      const int heads = 3, dim = 32;
      const AttentionParams p{.n_heads = 6,
                              .n_kv_heads = heads,
                              .head_dim = dim,
                              .scale = 1.0f,
                              .kv_type = type,
                              .kv_positions = 40};
      std::vector<float> kv(static_cast<size_t>(n_tokens * heads * dim));
      for (size_t i = 0; i < kv.size(); ++i) kv[i] = 1.0f + 0.37f * static_cast<float>(i % 29);
      // One buffer for K and V, 64-byte aligned, so that lines are the buffer's 64-byte runs.
      const int64_t layer = kv_cache_bytes(p);
      std::vector<std::byte> storage(static_cast<size_t>(2 * layer + 64), std::byte{0xA5});
      std::byte* k = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
      std::byte* v = k + layer;
      std::vector<char> in_range(static_cast<size_t>(2 * layer), 0);
      int64_t ranges = 0;
      for_each_kv_store_range(p, pos0, n_tokens, k, v, [&](const std::byte* b, int64_t bytes) {
        ++ranges;
        ASSERT_GT(bytes, 0);
        ASSERT_GE(b, k);
        ASSERT_LE(b + bytes, k + 2 * layer);
        for (int64_t i = 0; i < bytes; ++i) in_range[static_cast<size_t>(b - k + i)] = 1;
      });
      kv_store(p, kv, kv, pos0, n_tokens, k, v, ks);
      std::vector<char> line_written(static_cast<size_t>(2 * layer / 64 + 1), 0);
      int64_t changed = 0;
      for (int64_t i = 0; i < 2 * layer; ++i) {
        if (k[i] == std::byte{0xA5}) continue;
        ++changed;
        line_written[static_cast<size_t>(i / 64)] = 1;
        ASSERT_TRUE(in_range[static_cast<size_t>(i)])
            << type_name(type) << " pos0 " << pos0 << " n " << n_tokens << ": byte " << i << " ("
            << (i < layer ? "K" : "V") << ") written outside every range";
      }
      ASSERT_GT(changed, 0);
      EXPECT_EQ(ranges, 2 * heads);  // one V run and one K block run per head
      for (int64_t i = 0; i < 2 * layer; ++i) {
        if (!in_range[static_cast<size_t>(i)]) continue;
        ASSERT_TRUE(line_written[static_cast<size_t>(i / 64)])
            << type_name(type) << " pos0 " << pos0 << " n " << n_tokens << ": byte " << i
            << " is in a range, but the store wrote nothing in its line";
      }
      int64_t none = 0;
      for_each_kv_store_range(p, pos0, 0, k, v, [&](const std::byte*, int64_t) { ++none; });
      EXPECT_EQ(none, 0) << "no tokens, no ranges";
      EXPECT_THROW(for_each_kv_store_range(p, 39, 2, k, v, [](const std::byte*, int64_t) {}),
                   std::invalid_argument)
          << "positions 39, 40: past the cache's 40, as kv_store";
    }
  }
}

std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

INSTANTIATE_TEST_SUITE_P(Isas, AttentionIsa, ::testing::ValuesIn(supported_isas()), IsaParamName);

TEST(Attention, ReferenceMatchesDoubleSoftmax) {
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(c);
    const auto want = naive_attention(in, c, as_dotted_query(in.q, c.kv_type),
                                      as_cached(in.k, c.kv_type), as_cached(in.v, c.kv_type));
    std::vector<float> out(in.q.size(), NAN);
    attention_ref(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), out);
    expect_close(out, want, kFp32AbsTol, c.name);
  }
}

TEST(Attention, F16CacheStaysWithinTheFp16RoundingBound) {
  const KernelSet ks = KernelSet::for_isa(detect_isa());
  // Against exact math on the unrounded fp32 K/V. fp16 keeps 11 significant bits: each cached
  // value is off by at most u = 2^-11 relative. A score moves by at most
  // ds = scale * u * sum_d |q_d k_d|; softmax weights then move by at most a factor e^(2 ds) - 1
  // in total variation, and V rounding adds u * max|v|. So |dout| <= max|v| (e^(2 ds) - 1 + u)
  // (+ the fp32 tolerance).
  const double u = std::ldexp(1.0, -11);
  for (const Case& c : kCases) {
    if (c.kv_type != WeightType::F16 || c.softcap > 0) continue;
    const Inputs in = make_inputs(c);
    const auto exact = naive_attention(in, c, in.q, in.k, in.v);
    std::vector<float> out(in.q.size());
    attention(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), out,
              SerialParallel(1), ks);
    double max_qk = 0;  // max over (query, key) of sum_d |q_d k_d|, with |k_d| <= 1
    for (size_t i = 0; i < in.q.size(); i += c.head_dim) {
      double s = 0;
      for (int d = 0; d < c.head_dim; ++d) s += std::abs(in.q[i + d]);
      max_qk = std::max(max_qk, s);
    }
    const double ds = in.p.scale * u * max_qk;
    const double bound = (std::exp(2 * ds) - 1) + u + kFp32AbsTol;
    expect_close(out, exact, bound, c.name);
  }
}

TEST(Attention, Q8_0CacheStaysWithinTheQuantizationBound) {
  const KernelSet ks = KernelSet::for_isa(detect_isa());
  // Against exact math on the unquantized fp32 q and K/V (|k|, |v| <= 1). A Q8_0 value is off by
  // at most d/2 = max|x|/254 from rounding, plus 127 * |fp16(d) - d| <= 127 * d * 2^-11 =
  // max|x| * 2^-11 from the fp16 scale: u * (its block's max|x|) with u = 1/254 + 2^-11. The
  // query is Q8_0 too, so a score moves by at most ds = scale * sum_d (u |q_d| + (1 + u) u
  // amax_d), amax_d the max |q| of d's block of 32. The same softmax argument as the F16 bound
  // gives |dout| <= (e^(2 ds) - 1) + u.
  const double u = 1.0 / 254 + std::ldexp(1.0, -11);
  for (const Case& c : kCases) {
    if (c.kv_type != WeightType::Q8_0 || c.softcap > 0) continue;
    const Inputs in = make_inputs(c);
    const auto exact = naive_attention(in, c, in.q, in.k, in.v);
    std::vector<float> out(in.q.size());
    attention(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), out,
              SerialParallel(1), ks);
    double max_q = 0;  // max over query heads of sum_d (u |q_d| + (1 + u) u amax_d)
    for (size_t i = 0; i < in.q.size(); i += c.head_dim) {
      double s = 0;
      for (int b = 0; b < c.head_dim; b += 32) {
        double amax = 0;
        for (int d = b; d < b + 32; ++d) amax = std::max<double>(amax, std::abs(in.q[i + d]));
        for (int d = b; d < b + 32; ++d) s += u * std::abs(in.q[i + d]) + (1 + u) * u * amax;
      }
      max_q = std::max(max_q, s);
    }
    const double ds = in.p.scale * max_q;
    expect_close(out, exact, (std::exp(2 * ds) - 1) + u + kFp32AbsTol, c.name);
  }
}

TEST(Attention, QueryQ8IsGgmlsQuantizeRowQ8_0) {
  // Random heads, plus a block with max|x| = 127 (d = 1) whose values are halves: roundf takes
  // ties away from zero, as ggml's reference does, and 0.49999997 must stay 0.
  constexpr int kDim = 96, kHeads = 3;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> q(kHeads * kDim);
  for (float& x : q) x = nd(rng);
  const float ties[] = {127.0f, 0.5f,    -0.5f,       1.5f,        -2.5f,
                        126.5f, -126.5f, 0.49999997f, -0.49999997f};
  std::copy(std::begin(ties), std::end(ties), q.begin() + kDim + 32);
  std::fill(q.begin() + 2 * kDim, q.begin() + 2 * kDim + 32, 0.0f);  // an all-zero block: d = 0
  constexpr int64_t kRow = 128;
  std::vector<int8_t> qi(kHeads * kRow);
  std::vector<float> qf(kHeads * kRow), dq(kHeads * kRow / 32);
  std::vector<int32_t> bias(dq.size());
  const float scale = 0.125f;
  quantize_query_q8_0(q.data(), kDim, kHeads, kDim, scale, kRow, qi.data(), qf.data(), dq.data(),
                      bias.data());
  for (int g = 0; g < kHeads; ++g) {
    BlockQ8_0 want[kDim / 32];
    quantize_row_q8_0_ref(q.data() + g * kDim, want, kDim);
    for (int c = 0; c < kDim / 32; ++c) {
      int32_t sum = 0;
      for (int e = 0; e < 32; ++e) {
        const int8_t got = qi[g * kRow + c * 32 + e];
        ASSERT_EQ(got, want[c].qs[e])
            << "head " << g << " dim " << c * 32 + e << " x " << q[g * kDim + c * 32 + e];
        ASSERT_EQ(qf[g * kRow + c * 32 + e], static_cast<float>(got));
        sum += got;
      }
      EXPECT_EQ(dq[g * kRow / 32 + c], fp16_to_fp32(want[c].d) * scale) << "head " << g;
      EXPECT_EQ(bias[g * kRow / 32 + c], 128 * sum) << "head " << g;
    }
  }
  EXPECT_EQ(qi[kRow + 32 + 1], 1);   // 0.5 -> 1
  EXPECT_EQ(qi[kRow + 32 + 4], -3);  // -2.5 -> -3
  EXPECT_EQ(qi[kRow + 32 + 7], 0);   // 0.49999997 -> 0
}

TEST(Attention, Q8_0VnniBlockSumsAreTheWidenedSumsBitForBit) {
  // The VNNI table dots 4 int8 dimensions at a time after regrouping the K block's bytes; the
  // plain AVX-512 table widens each dimension to fp32. A block's sum is an exact integer either
  // way, so the outputs must be the same bits; a wrong byte order or bias would not be.
  const CpuFeatures cpu = detect_cpu_features();
  if (!cpu.avx512 || !cpu.avx512_vnni) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  const AttentionKernels& widened = attention_kernels(Isa::Avx512, false);
  const AttentionKernels& vnni = attention_kernels(Isa::Avx512, true);
  ASSERT_NE(&widened, &vnni);
  for (const Case& c : kCases) {
    if (c.kv_type != WeightType::Q8_0) continue;
    const Inputs in = make_inputs(c);
    const int dim = c.head_dim;
    // KV head 0 (the first slice of each cache) and its query heads: a decode task over every
    // key of the last position, and a prefill task of up to kPrefillTokens tokens.
    for (int n_tokens : {1, kPrefillTokens}) {
      if (n_tokens > c.n_tokens + c.pos0) continue;
      AttentionTask t;
      t.q = in.q.data();
      t.n_q = std::min(c.n_heads / c.n_kv_heads, kMaxGroup);
      t.head_dim = dim;
      t.k = in.k_cache.data();
      t.v = in.v_cache.data();
      t.row_bytes = kv_row_bytes(WeightType::Q8_0, dim);
      t.key_begin = 0;
      t.key_end = in.positions - n_tokens + 1;
      t.scale = in.p.scale;
      t.softcap = c.softcap;
      t.n_tokens = n_tokens;
      t.token_stride = static_cast<int64_t>(c.n_heads) * dim;
      if (n_tokens > 1 && c.n_tokens < n_tokens) continue;  // q holds n_tokens tokens
      const size_t n_out = static_cast<size_t>(n_tokens) * c.n_heads * dim;
      std::vector<float> a(n_out, 0.0f), b(n_out, 0.0f);
      t.out = a.data();
      widened.attend_q8_0(t);
      t.out = b.data();
      vnni.attend_q8_0(t);
      for (int i = 0; i < n_tokens; ++i) {
        for (int j = 0; j < t.n_q * dim; ++j) {
          const size_t at = static_cast<size_t>(i * t.token_stride + j);
          ASSERT_EQ(std::memcmp(&a[at], &b[at], sizeof(float)), 0)
              << c.name << " tokens " << n_tokens << " token " << i << " element " << j << ": "
              << a[at] << " widened, " << b[at] << " VNNI";
        }
      }
    }
  }
}

TEST(Attention, OnePassAvx2TableGivesTheSameBitsAsPassesOfFour) {
  // The AVX2 table that takes all of a KV head's query heads in one pass (Zen 1 / Zen+'s,
  // isa.h attention_one_pass) forms every score, exp and (head, dim) sum as the table of passes
  // of 4 does: the same bits for every case, decode and prefill, F16 and F32 (a Q8_0 cache runs
  // one pass in both).
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  const AttentionKernels& passes = attention_kernels_avx2();
  const AttentionKernels& one = attention_kernels_avx2_one_pass();
  ASSERT_NE(passes.attend_f16, one.attend_f16);
  ASSERT_NE(passes.attend_f32, one.attend_f32);
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(c, Isa::Avx2);
    std::vector<float> scratch(
        static_cast<size_t>(attention_scratch_floats(in.p, c.n_tokens, in.positions)));
    auto run = [&](const AttentionKernels& k) {
      const AttendFn attend = c.kv_type == WeightType::F16   ? k.attend_f16
                              : c.kv_type == WeightType::F32 ? k.attend_f32
                                                             : k.attend_q8_0;
      std::vector<float> out(in.q.size(), NAN);
      attention_with_kernel(attend, in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(),
                            in.v_cache.data(), out, SerialParallel(2), scratch);
      return out;
    };
    const std::vector<float> a = run(passes), b = run(one);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
          << c.name << " element " << i << ": " << a[i] << " in passes of 4, " << b[i]
          << " in one pass";
    }
    // Not vacuous: the outputs are attention's (the double-precision softmax over the cache).
    const auto want = naive_attention(in, c, as_dotted_query(in.q, c.kv_type),
                                      as_cached(in.k, c.kv_type), as_cached(in.v, c.kv_type));
    expect_close(b, want, kFp32AbsTol, c.name);
  }
}

TEST(Attention, Q8_0StoreNeedsWholeBlocksPerHead) {
  const KernelSet ks = KernelSet::for_isa(detect_isa());
  std::vector<float> kv(2 * 48);
  std::vector<std::byte> cache(4096);
  const AttentionParams p{.n_heads = 2,
                          .n_kv_heads = 2,
                          .head_dim = 48,
                          .scale = 0.25f,
                          .kv_type = WeightType::Q8_0,
                          .kv_positions = 1};
  EXPECT_THROW(kv_store(p, kv, kv, 0, 1, cache.data(), cache.data(), ks), std::invalid_argument);
  EXPECT_EQ(kv_row_bytes(WeightType::Q8_0, 128), 4 * 34);
  EXPECT_THROW(kv_row_bytes(WeightType::Q8_0, 48), std::invalid_argument);
}

TEST(Attention, SlidingWindowOfOneReturnsOwnValueRow) {
  const KernelSet ks = KernelSet::for_isa(detect_isa());
  // Window 1: each query sees only itself, so the output is exactly its own V row (per KV head).
  const Case c{"w1", 4, 2, 16, 3, 5, 1, 0.0f, WeightType::F32};
  const Inputs in = make_inputs(c);
  std::vector<float> out(in.q.size());
  attention(in.p, in.q, c.pos0, c.n_tokens, in.k_cache.data(), in.v_cache.data(), out,
            SerialParallel(1), ks);
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    for (int h = 0; h < c.n_heads; ++h) {
      for (int d = 0; d < c.head_dim; ++d) {
        const float want =
            in.v[(c.pos0 + t) * c.n_kv_heads * c.head_dim + (h / 2) * c.head_dim + d];
        ASSERT_FLOAT_EQ(out[(t * c.n_heads + h) * c.head_dim + d], want);
      }
    }
  }
}

TEST(Attention, BadParametersThrow) {
  const KernelSet ks = KernelSet::for_isa(detect_isa());
  std::vector<float> q(64), out(64);
  std::vector<std::byte> cache(2 * 16 * 16 * 4);  // 2 KV heads x 16 positions x 16 floats
  AttentionParams p{
      .n_heads = 3, .n_kv_heads = 2, .head_dim = 16, .scale = 0.25f, .kv_positions = 1};
  EXPECT_THROW(attention(p, q, 0, 1, cache.data(), cache.data(), out, SerialParallel(1), ks),
               std::invalid_argument);  // 3 heads over 2 KV heads
  p = {.n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .scale = 0.25f, .kv_positions = 1};
  EXPECT_NO_THROW(attention(p, q, 0, 1, cache.data(), cache.data(), out, SerialParallel(1), ks));
  EXPECT_THROW(attention(p, q, 1, 1, cache.data(), cache.data(), out, SerialParallel(1), ks),
               std::invalid_argument);  // position 1 in a cache of 1
  std::vector<float> short_q(63);
  EXPECT_THROW(attention(p, short_q, 0, 1, cache.data(), cache.data(), out, SerialParallel(1), ks),
               std::invalid_argument);
  p.kv_type = WeightType::Q8_0;
  EXPECT_THROW(attention(p, q, 0, 1, cache.data(), cache.data(), out, SerialParallel(1), ks),
               std::invalid_argument);
  p = {.n_heads = 1,
       .n_kv_heads = 1,
       .head_dim = kMaxHeadDim + 1,
       .scale = 0.25f,
       .kv_positions = 1};
  EXPECT_THROW(attention(p, q, 0, 1, cache.data(), cache.data(), out, SerialParallel(1), ks),
               std::invalid_argument);
  p = {.n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .scale = 0.25f, .kv_positions = 2};
  EXPECT_THROW(kv_store(p, q, short_q, 0, 2, cache.data(), cache.data(), ks),
               std::invalid_argument);
}

// ---- Long decode: keys split into segments of kAttentionKeySegment and merged.

const Case kLongDecodeCases[] = {
    {"long_decode_gqa4_f16", 8, 2, 64, 1500, 1, 0, 0.0f, WeightType::F16},
    {"long_decode_gqa7_f32", 14, 2, 64, 1100, 1, 0, 0.0f, WeightType::F32},
    {"long_decode_window_f16", 4, 2, 64, 2000, 1, 700, 0.0f, WeightType::F16},
    {"long_decode_softcap_q8_0", 4, 1, 128, 1300, 1, 0, 5.0f, WeightType::Q8_0},
    {"long_decode_gqa16_tail", 16, 1, 40, 1030, 1, 0, 0.0f, WeightType::F16},
};

// Runs attention with a scratch filled with NaN; returns the scratch so a test can see the split
// ran (every segment's running max written).
std::vector<float> split_attention(const Inputs& in, const Case& c, std::span<float> out,
                                   const Parallel& par, Isa isa) {
  const int64_t keys = c.window > 0 ? std::min<int64_t>(c.window, c.pos0 + 1) : c.pos0 + 1;
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(in.p, 1, keys)), NAN);
  attention(in.p, in.q, c.pos0, 1, in.k_cache.data(), in.v_cache.data(), out, par,
            KernelSet::for_isa(isa), scratch);
  return scratch;
}

TEST_P(AttentionIsa, LongDecodeSplitsKeysAndMatchesDoubleSoftmax) {
  for (const Case& c : kLongDecodeCases) {
    const Inputs in = make_inputs(c, GetParam());
    const auto want = naive_attention(in, c, as_dotted_query(in.q, c.kv_type),
                                      as_cached(in.k, c.kv_type), as_cached(in.v, c.kv_type));
    std::vector<float> out(in.q.size(), NAN);
    const std::vector<float> scratch = split_attention(in, c, out, SerialParallel(1), GetParam());
    expect_close(out, want, kFp32AbsTol, c.name);
    // The m block follows segments * n_heads * head_dim outputs: every slot holds a finite max.
    const int64_t keys = c.window > 0 ? c.window : c.pos0 + 1;
    const int64_t slots = (keys + kAttentionKeySegment - 1) / kAttentionKeySegment * c.n_heads;
    ASSERT_GE(slots, 2 * c.n_heads) << c.name;
    for (int64_t i = 0; i < slots; ++i) {
      EXPECT_TRUE(std::isfinite(scratch[static_cast<size_t>(slots * c.head_dim + i)]))
          << c.name << " segment slot " << i;
    }
  }
}

TEST_P(AttentionIsa, LongDecodeSameResultForAnyWorkerCount) {
  for (const Case& c : kLongDecodeCases) {
    const Inputs in = make_inputs(c);
    std::vector<float> base(in.q.size());
    split_attention(in, c, base, SerialParallel(1), GetParam());
    for (int workers : {2, 3, 7, 64}) {
      std::vector<float> out(in.q.size());
      split_attention(in, c, out, SerialParallel(workers), GetParam());
      EXPECT_EQ(out, base) << c.name << " workers=" << workers;
    }
    std::vector<float> tbb_out(in.q.size());
    split_attention(in, c, tbb_out, TbbParallel(2), GetParam());
    EXPECT_EQ(tbb_out, base) << c.name << " tbb";
  }
}

TEST(Attention, ScratchFloatsCountSegmentsOfOneDecodeQuery) {
  AttentionParams p{.n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .scale = 0.125f};
  // ceil(1500 / 512) = 3 segments x 8 heads x (64 outputs + max + sum)
  EXPECT_EQ(attention_scratch_floats(p, 1, 1500), 3 * 8 * 66);
  EXPECT_EQ(attention_scratch_floats(p, 1, kAttentionKeySegment), 0);  // one segment: no split
  EXPECT_EQ(attention_scratch_floats(p, 4, 1500), 0);                  // prefill never splits
  p.sliding_window = 300;
  EXPECT_EQ(attention_scratch_floats(p, 1, 100000), 0);  // the window bounds the keys
}

TEST(Attention, TooSmallScratchThrows) {
  const Case c = kLongDecodeCases[0];
  const Inputs in = make_inputs(c);
  std::vector<float> out(in.q.size());
  std::vector<float> scratch(
      static_cast<size_t>(attention_scratch_floats(in.p, 1, c.pos0 + 1) - 1));
  EXPECT_THROW(attention(in.p, in.q, c.pos0, 1, in.k_cache.data(), in.v_cache.data(), out,
                         SerialParallel(1), KernelSet::for_isa(Isa::Scalar), scratch),
               std::invalid_argument);
}

// The tasks attention() hands its kernel, in the order one worker runs them (AttendFn is a plain
// function pointer, so the recording kernel writes to this file's list).
std::vector<AttentionTask> seen_tasks;

void record_task(const AttentionTask& t) {
  seen_tasks.push_back(t);
  std::fill_n(t.out, static_cast<size_t>(t.n_tokens) * t.n_q * t.head_dim, 0.0f);
  for (int g = 0; g < t.n_q && t.m_out != nullptr; ++g) t.m_out[g] = 0.0f, t.l_out[g] = 1.0f;
}

struct SeenDecode {
  AttentionParams p;
  std::vector<std::byte> k, v;  // the caches (contents unused)
  int64_t head_stride = 0, row_bytes = 0;
};

// One query at position pos0 (n_tokens 1) or a prefill of n_tokens, run through record_task.
SeenDecode run_recorded(int n_heads, int n_kv_heads, int64_t pos0, int64_t n_tokens, int chunks) {
  SeenDecode d;
  d.p = {.n_heads = n_heads,
         .n_kv_heads = n_kv_heads,
         .head_dim = 64,
         .scale = 0.125f,
         .kv_type = WeightType::F16,
         .kv_positions = pos0 + n_tokens};
  d.k.resize(static_cast<size_t>(kv_cache_bytes(d.p)));
  d.v.resize(d.k.size());
  d.row_bytes = kv_row_bytes(WeightType::F16, 64);
  d.head_stride = (d.p.kv_positions + kKvBlock - 1) / kKvBlock * kKvBlock * d.row_bytes;
  std::vector<float> q(static_cast<size_t>(n_tokens * n_heads * 64), 0.5f), out(q.size());
  std::vector<float> scratch(
      static_cast<size_t>(attention_scratch_floats(d.p, n_tokens, pos0 + n_tokens)));
  seen_tasks.clear();
  attention_with_kernel(record_task, d.p, q, pos0, n_tokens, d.k.data(), d.v.data(), out,
                        SerialParallel(chunks), scratch);
  return d;
}

// Each task's next_k / next_v / next_keys is the first K block, V row and up to one tile of keys
// of the task after it, or nothing where that task reads the same keys or none follows in the
// same chunk; returns how many tasks ask for nothing.
int expect_next_is_the_following_task(const SeenDecode& d, const char* what) {
  int none = 0;
  for (size_t i = 0; i < seen_tasks.size(); ++i) {
    const AttentionTask& t = seen_tasks[i];
    if (t.next_k == nullptr) {
      EXPECT_EQ(t.next_keys, 0) << what << " task " << i;
      ++none;
      continue;
    }
    EXPECT_NE(t.n_tokens > 1, true) << what << ": a prefill task asks for a next task";
    if (i + 1 == seen_tasks.size()) {
      ADD_FAILURE() << what << ": the last task asks for a next task";
      continue;
    }
    const AttentionTask& n = seen_tasks[i + 1];
    const int64_t start = n.key_begin / kKvBlock * kKvBlock;
    EXPECT_EQ(t.next_k, n.k + start * d.row_bytes) << what << " task " << i;
    EXPECT_EQ(t.next_v, n.v + start * d.row_bytes) << what << " task " << i;
    EXPECT_EQ(t.next_keys, std::min<int64_t>(kKeyTile, n.key_end - start)) << what << " task " << i;
    EXPECT_NE(n.k + start * d.row_bytes, t.k + t.key_begin / kKvBlock * kKvBlock * d.row_bytes)
        << what << " task " << i << " asks for the keys it reads itself";
  }
  return none;
}

TEST(Attention, SplitDecodeRunsEachKvHeadsSegmentsInOrderAndAsksForTheNextOnesFirstTile) {
  // 2000 keys: segments [0, 512), [512, 1024), [1024, 1536), [1536, 2000); 2 KV heads of 4
  // query heads each. One worker reads KV head 0's segments front to back, then KV head 1's.
  const SeenDecode d = run_recorded(8, 2, 1999, 1, 1);
  ASSERT_EQ(seen_tasks.size(), 8u);
  for (int kv = 0; kv < 2; ++kv) {
    for (int seg = 0; seg < 4; ++seg) {
      const AttentionTask& t = seen_tasks[static_cast<size_t>(kv * 4 + seg)];
      EXPECT_EQ(t.n_q, 4);
      EXPECT_EQ(t.k, d.k.data() + kv * d.head_stride) << "kv " << kv << " seg " << seg;
      EXPECT_EQ(t.key_begin, seg * 512);
      EXPECT_EQ(t.key_end, std::min(seg * 512 + 512, 2000));
    }
  }
  // Hand-computed for the first and the one crossing to KV head 1: the next segment's first
  // 128 keys, then KV head 1's first 128.
  EXPECT_EQ(seen_tasks[0].next_k, d.k.data() + 512 * d.row_bytes);
  EXPECT_EQ(seen_tasks[0].next_v, d.v.data() + 512 * d.row_bytes);
  EXPECT_EQ(seen_tasks[0].next_keys, kKeyTile);
  EXPECT_EQ(seen_tasks[3].next_k, d.k.data() + d.head_stride);
  EXPECT_EQ(seen_tasks[7].next_k, nullptr);
  EXPECT_EQ(expect_next_is_the_following_task(d, "1 worker"), 1);

  // Two chunks (one per KV head here): the last task of each asks for nothing.
  const SeenDecode two = run_recorded(8, 2, 1999, 1, 2);
  ASSERT_EQ(seen_tasks.size(), 8u);
  EXPECT_EQ(seen_tasks[3].next_k, nullptr);
  EXPECT_EQ(expect_next_is_the_following_task(two, "2 workers"), 2);
}

TEST(Attention, DecodeTasksOverTheSameKeysDoNotAskForThem) {
  // 16 query heads on one KV head: two tasks of kMaxGroup heads per segment read the same keys;
  // the first asks for nothing, the second for the next segment's first tile.
  const SeenDecode d = run_recorded(16, 1, 999, 1, 1);
  ASSERT_EQ(seen_tasks.size(), 4u);
  EXPECT_EQ(seen_tasks[0].next_k, nullptr);
  EXPECT_EQ(seen_tasks[1].next_k, d.k.data() + 512 * d.row_bytes);
  EXPECT_EQ(seen_tasks[1].next_keys, kKeyTile);
  EXPECT_EQ(expect_next_is_the_following_task(d, "16 heads per KV head"), 3);
}

TEST(Attention, ShortDecodeAsksForTheNextKvHeadsKeysAndPrefillForNone) {
  // 100 keys: one task per KV head, each asking for the next KV head's 100.
  const SeenDecode d = run_recorded(8, 2, 99, 1, 1);
  ASSERT_EQ(seen_tasks.size(), 2u);
  EXPECT_EQ(seen_tasks[0].next_k, d.k.data() + d.head_stride);
  EXPECT_EQ(seen_tasks[0].next_v, d.v.data() + d.head_stride);
  EXPECT_EQ(seen_tasks[0].next_keys, 100);
  EXPECT_EQ(expect_next_is_the_following_task(d, "short decode"), 1);

  const SeenDecode prefill = run_recorded(8, 2, 0, 9, 1);
  ASSERT_FALSE(seen_tasks.empty());
  EXPECT_EQ(expect_next_is_the_following_task(prefill, "prefill"),
            static_cast<int>(seen_tasks.size()));
}

}  // namespace
}  // namespace pacer::ops
