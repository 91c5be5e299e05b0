// pacer perplexity / KL divergence: the base-file encoding against hand-computed values, the
// reader's refusals, and the chunked perplexity against an independent computation from the plain
// fp32 reference forward pass (tests/runtime/reference_forward.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <vector>

#include "loader/error.h"
#include "reference_forward.h"
#include "runtime/logprob_file.h"
#include "runtime/perplexity.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace pacer::runtime {
namespace {

float record_float(const std::vector<uint16_t>& rec, int at) {
  float f;
  std::memcpy(&f, rec.data() + at, sizeof f);
  return f;
}

TEST(LogprobFile, RecordOfTwoLogitsIsTheHandComputedOne) {
  // logits {0, ln 3}: p = {1/4, 3/4}. min_logit = 0, scale = ln3 / 65535,
  // min_log_prob = 0 - ln3 - log(1/3 + 1) = -ln 4, q = {0, 65535}.
  const std::vector<float> logits = {0.0f, std::log(3.0f)};
  std::vector<uint16_t> rec(static_cast<size_t>(logprob_record_u16(2)));
  ASSERT_EQ(rec.size(), 6u);
  const double nll = encode_logprobs(logits, 0, rec);
  EXPECT_NEAR(nll, std::log(4.0), 1e-6);
  EXPECT_NEAR(record_float(rec, 0), std::log(3.0) / 65535, 1e-9);
  EXPECT_NEAR(record_float(rec, 2), -std::log(4.0), 1e-6);
  EXPECT_EQ(rec[4], 0);
  EXPECT_EQ(rec[5], 65535);
  // Decoded back: log p1 = 65535 * scale + min_log_prob = ln(3/4).
  const KldPosition same = compare_logprobs(logits, rec, 1);
  EXPECT_NEAR(same.nll, std::log(4.0 / 3.0), 1e-6);
  EXPECT_NEAR(same.nll_base, std::log(4.0 / 3.0), 1e-6);
  EXPECT_NEAR(same.kld, 0.0, 1e-6);
  EXPECT_TRUE(same.same_top);
}

TEST(LogprobFile, KldOfAShiftedDistributionIsTheDefinition) {
  // Base p = {1/4, 3/4}; the compared logits give q = {1/2, 1/2}:
  // KL(p||q) = 1/4 ln(1/2) + 3/4 ln(3/2); Δp(tok 1) = 1/2 - 3/4; the top tokens differ (0 vs 1:
  // a tie takes the first index, as llama.cpp's strict > does).
  std::vector<uint16_t> rec(6);
  encode_logprobs(std::vector<float>{0.0f, std::log(3.0f)}, 1, rec);
  const KldPosition k = compare_logprobs(std::vector<float>{1.0f, 1.0f}, rec, 1);
  EXPECT_NEAR(k.kld, 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-5);
  EXPECT_NEAR(k.p_diff, 0.5 - 0.75, 1e-5);
  EXPECT_NEAR(k.nll, std::log(2.0), 1e-6);
  EXPECT_FALSE(k.same_top);
}

TEST(LogprobFile, LogProbabilitiesBelowSixteenNatsAreDropped) {
  // A logit 20 below the max is clamped to the 16-nat floor (q = 0) and left out of the KLD sum.
  std::vector<uint16_t> rec(static_cast<size_t>(logprob_record_u16(3)));
  ASSERT_EQ(rec.size(), 8u);  // odd vocabulary: padded to an even count
  encode_logprobs(std::vector<float>{0.0f, -20.0f, -1.0f}, 0, rec);
  EXPECT_EQ(rec[5], 0);
  EXPECT_EQ(rec[7], 0);  // padding
  const KldPosition k = compare_logprobs(std::vector<float>{0.0f, -20.0f, -1.0f}, rec, 0);
  EXPECT_LT(std::fabs(k.kld), 1e-5);
}

TEST(LogprobFile, SummaryPercentilesAndErrorsFollowLlamaCpp) {
  KldSums s;
  std::vector<float> klds, dps;
  for (int i = 1; i <= 101; ++i) {
    KldPosition p;
    p.nll = 1.0 + 0.01 * i;
    p.nll_base = 1.0;
    p.kld = 0.001 * i;
    p.p_diff = static_cast<float>(0.01 * (i - 51));
    p.same_top = i % 4 != 0;
    s.add(p);
    klds.push_back(static_cast<float>(p.kld));
    dps.push_back(p.p_diff);
  }
  const KldSummary k = summarize_kld(s, klds, dps);
  EXPECT_EQ(k.count, 101);
  EXPECT_NEAR(k.kld.value, 0.051, 1e-9);  // mean of 0.001..0.101
  EXPECT_NEAR(k.kld_dist.median, 0.051, 1e-7);
  ASSERT_EQ(k.kld_dist.percentiles.size(), 8u);
  EXPECT_EQ(k.kld_dist.percentiles[3].first, 0.90);
  EXPECT_NEAR(k.kld_dist.percentiles[3].second, 0.001 * (1 + 0.9 * 100), 1e-7);  // rank 90
  // 99.9%: between ranks 99 and 100, 0.9 of the way.
  EXPECT_NEAR(k.kld_dist.percentiles[0].second, 0.001 * (1 + 99.9), 1e-7);
  EXPECT_NEAR(k.kld_dist.max, 0.101, 1e-7);
  EXPECT_NEAR(k.kld_dist.min, 0.001, 1e-7);
  EXPECT_EQ(k.p_diff_dist.percentiles.size(), 10u);
  EXPECT_NEAR(k.p_diff_dist.median, 0.0, 1e-7);
  EXPECT_NEAR(k.same_top.value, 76.0 / 101, 1e-12);  // 25 multiples of 4 in 1..101
  EXPECT_NEAR(k.ppl_base.value, std::exp(1.0), 1e-9);
  EXPECT_NEAR(k.ppl_base.error, 0.0, 1e-12);  // constant base NLL
  EXPECT_NEAR(k.ppl.value, std::exp(1.51), 1e-9);
  // Standard error of the NLLs 1.01..2.01: sd of 1..101 times 0.01 / sqrt(n - 1) (population
  // variance over n, divided by n - 1, as llama.cpp computes it).
  const double var = (101.0 * 101.0 - 1) / 12 * 1e-4;
  EXPECT_NEAR(k.ppl.error, std::exp(1.51) * std::sqrt(var / 100), 1e-9);
}

class TempDir {
 public:
  TempDir()
      : dir_(std::filesystem::temp_directory_path() /
             ("pacer-ppl-" + std::to_string(::getpid()) + "-" +
              std::to_string(reinterpret_cast<uintptr_t>(this)))) {
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::filesystem::path operator/(const std::string& name) const { return dir_ / name; }

 private:
  std::filesystem::path dir_;
};

void write_bytes(const std::filesystem::path& p, const std::vector<char>& bytes) {
  std::ofstream(p, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(LogprobFile, WriterAndReaderAgreeAndTheReaderRefusesDamage) {
  TempDir dir;
  const int64_t n_ctx = 8, n_vocab = 5;
  std::vector<int32_t> tokens(16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 5);
  const auto path = dir / "base.bin";
  {
    LogprobWriter w(path, n_ctx, n_vocab, tokens);
    std::vector<uint16_t> chunk(
        static_cast<size_t>(scored_per_chunk(n_ctx) * logprob_record_u16(n_vocab)), 7);
    w.write_chunk(chunk);
    w.write_chunk(chunk);
    EXPECT_FALSE(std::filesystem::exists(path)) << "renamed into place only when finished";
    w.finish();
  }
  // 20 header bytes + 16 tokens + 2 chunks x 3 records x 10 uint16.
  const std::vector<char> bytes = read_bytes(path);
  ASSERT_EQ(bytes.size(), 20u + 64u + 2u * 3u * 10u * 2u);
  EXPECT_EQ(std::string(bytes.data(), 8), "_logits_");
  int32_t head[3];
  std::memcpy(head, bytes.data() + 8, sizeof head);
  EXPECT_EQ(head[0], 8);
  EXPECT_EQ(head[1], 5);
  EXPECT_EQ(head[2], 2);
  {
    LogprobReader r(path);
    EXPECT_EQ(r.n_ctx(), 8);
    EXPECT_EQ(r.tokens(), tokens);
    std::vector<uint16_t> rec;
    r.read_chunk(rec);
    EXPECT_EQ(rec.size(), 30u);
    EXPECT_EQ(rec[29], 7);
  }

  auto refuses = [&](const std::vector<char>& b, const std::string& field) {
    const auto bad = dir / "bad.bin";
    write_bytes(bad, b);
    try {
      LogprobReader r(bad);
      ADD_FAILURE() << "accepted a damaged base (" << field << ")";
    } catch (const loader::LoadError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.bin"), std::string::npos) << e.what();
    }
  };
  refuses(std::vector<char>(bytes.begin(), bytes.end() - 1), "log-probs");     // truncated
  refuses(std::vector<char>(bytes.begin(), bytes.begin() + 50), "log-probs");  // in the tokens
  std::vector<char> longer = bytes;
  longer.push_back(0);
  refuses(longer, "file size");
  std::vector<char> magic = bytes;
  magic[0] = 'X';
  refuses(magic, "magic");
  std::vector<char> token = bytes;
  const int32_t big = 5;  // == n_vocab
  std::memcpy(token.data() + 20 + 4 * 3, &big, 4);
  refuses(token, "tokens[3]");
  std::vector<char> ctx = bytes;
  const int32_t zero = 0;
  std::memcpy(ctx.data() + 8, &zero, 4);
  refuses(ctx, "n_ctx");
  // Cut inside the header, the magic intact: the header is named, not the magic.
  refuses(std::vector<char>(bytes.begin(), bytes.begin() + 16), "header");
  // A NaN scale in chunk 2's second record (byte 20 + 64 + 60 + 20): found when that chunk is
  // read, with its offset, never averaged into the figures.
  std::vector<char> nan_scale = bytes;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan_scale.data() + 164, &nan, 4);
  const auto bad = dir / "nan.bin";
  write_bytes(bad, nan_scale);
  LogprobReader r(bad);
  std::vector<uint16_t> rec;
  r.read_chunk(rec);  // chunk 1 is sound
  try {
    r.read_chunk(rec);
    ADD_FAILURE() << "a NaN scale was read";
  } catch (const loader::LoadError& e) {
    EXPECT_EQ(e.field(), "chunk 2 token 1 scale") << e.what();
    EXPECT_EQ(e.offset(), 164) << e.what();
  }
}

TEST(LogprobFile, AnUnfinishedWriterLeavesNothing) {
  TempDir dir;
  const auto path = dir / "never.bin";
  {
    std::vector<int32_t> tokens(8, 1);
    LogprobWriter w(path, 8, 4, tokens);
  }
  EXPECT_TRUE(std::filesystem::is_empty(path.parent_path()));
}

// A deterministic text of token ids below n_vocab (no tokenizer involved).
std::vector<int32_t> random_tokens(int64_t n, int64_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& id : t) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
  return t;
}

// The chunked perplexity computed independently: the fp32 reference model run token by token
// over each chunk (BOS first where the vocabulary adds one), NLL of positions n_ctx/2..n_ctx-2.
double reference_ppl(const std::filesystem::path& file, const Model& model,
                     std::span<const int32_t> tokens, int64_t n_ctx, int64_t n_chunks) {
  const loader::GgufFile f = loader::GgufFile::open(file);
  double nll = 0;
  int64_t count = 0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    testref::ReferenceModel ref(f, {.f16_kv = true});
    for (int64_t pos = 0; pos < n_ctx - 1; ++pos) {
      int32_t tok = tokens[static_cast<size_t>(c * n_ctx + pos)];
      if (pos == 0 && model.tokenizer().add_bos()) tok = model.tokenizer().bos();
      const std::vector<float> logits = ref.step(tok, pos);
      if (pos < n_ctx / 2) continue;
      const int32_t next = tokens[static_cast<size_t>(c * n_ctx + pos + 1)];
      double mx = logits[0], sum = 0;
      for (float l : logits) mx = std::max<double>(mx, l);
      for (float l : logits) sum += std::exp(l - mx);
      nll += -(logits[static_cast<size_t>(next)] - mx - std::log(sum));
      ++count;
    }
  }
  return std::exp(nll / static_cast<double>(count));
}

TEST(Perplexity, MatchesTheReferenceModelForEveryBatchSize) {
  const test::SynthModel synth("tiny", ops::WeightType::F32);
  const int64_t n_ctx = 16;
  const auto tokens = random_tokens(3 * n_ctx + 5, synth.model().config().n_vocab, 7);
  const double want = reference_ppl(synth.path(), synth.model(), tokens, n_ctx, 3);
  for (int64_t batch : {16, 7, 3}) {
    SessionOptions so;
    so.threads = 2;
    perplexity_session_options(so, n_ctx, batch);
    Session s(synth.model(), so);
    int chunks_seen = 0;
    const PerplexityResult r =
        perplexity(s, tokens, {.n_ctx = n_ctx, .n_batch = batch},
                   [&](const ChunkProgress& p) { chunks_seen = static_cast<int>(p.chunk); });
    EXPECT_EQ(r.n_chunks, 3);
    EXPECT_EQ(chunks_seen, 3);
    EXPECT_EQ(r.count, 3 * (n_ctx - 1 - n_ctx / 2));
    // f16 KV cache on both sides; the rest is float summation order.
    EXPECT_NEAR(r.ppl, want, 1e-4 * want) << "batch " << batch;
    EXPECT_NEAR(r.chunk_ppl.back(), r.ppl, 1e-9 * r.ppl);
  }
}

TEST(Perplexity, RefusesATextShorterThanTwoChunks) {
  const test::SynthModel synth("tiny", ops::WeightType::F32);
  SessionOptions so;
  perplexity_session_options(so, 16, 16);
  Session s(synth.model(), so);
  const auto tokens = random_tokens(31, synth.model().config().n_vocab, 1);
  EXPECT_THROW(perplexity(s, tokens, {.n_ctx = 16, .n_batch = 16}), std::invalid_argument);
}

TEST(Perplexity, ABaseFromTheSameModelScoresZeroDivergenceAndAnotherModelDoesNot) {
  TempDir dir;
  const test::SynthModel f32("tiny", ops::WeightType::F32);
  const test::SynthModel q4("tiny", ops::WeightType::Q4_0);
  const int64_t n_ctx = 32;
  const auto tokens = random_tokens(4 * n_ctx, f32.model().config().n_vocab, 3);
  const auto base_path = dir / "base.bin";
  SessionOptions so;
  so.threads = 2;
  perplexity_session_options(so, n_ctx, 512);
  double base_ppl = 0;
  {
    Session s(f32.model(), so);
    base_ppl = perplexity(s, tokens, {.n_ctx = n_ctx, .kld_base_out = base_path}).ppl;
  }
  {
    Session s(f32.model(), so);
    LogprobReader base(base_path);
    EXPECT_EQ(base.n_chunk(), 4);
    const PerplexityResult r = kl_divergence(s, base, {});
    ASSERT_TRUE(r.kld.has_value());
    EXPECT_EQ(r.kld->count, 4 * (n_ctx - 1 - n_ctx / 2));
    // Only the base's 16-bit quantization of log-probabilities separates the two.
    EXPECT_LT(r.kld->kld.value, 1e-5);
    EXPECT_EQ(r.kld->same_top.value, 1.0);
    EXPECT_NEAR(r.kld->ppl_base.value, base_ppl, 1e-3 * base_ppl);
    EXPECT_NEAR(r.ppl, base_ppl, 1e-6 * base_ppl);
  }
  {
    Session s(q4.model(), so);
    LogprobReader base(base_path);
    const PerplexityResult r = kl_divergence(s, base, {});
    // Q4_0 weights and Q8 activations move the distribution measurably.
    EXPECT_GT(r.kld->kld.value, 1e-4);
    EXPECT_LT(r.kld->same_top.value, 1.0);
  }
}

TEST(Perplexity, KlDivergenceRefusesABaseOfAnotherVocabulary) {
  TempDir dir;
  const test::SynthModel tiny("tiny", ops::WeightType::F32);
  const test::SynthModel qwen("tiny-qwen2", ops::WeightType::F32);
  ASSERT_NE(tiny.model().config().n_vocab, qwen.model().config().n_vocab);
  const auto base_path = dir / "base.bin";
  SessionOptions so;
  perplexity_session_options(so, 16, 16);
  {
    Session s(tiny.model(), so);
    perplexity(s, random_tokens(32, tiny.model().config().n_vocab, 2),
               {.n_ctx = 16, .kld_base_out = base_path});
  }
  Session s(qwen.model(), so);
  LogprobReader base(base_path);
  try {
    kl_divergence(s, base, {});
    FAIL() << "accepted a base of another vocabulary";
  } catch (const loader::LoadError& e) {
    EXPECT_EQ(e.field(), "n_vocab");
  }
}

}  // namespace
}  // namespace pacer::runtime
