#pragma once
// llama.cpp's KL-divergence base file (what `llama-perplexity --kl-divergence-base FILE` writes
// and `--kl-divergence` reads), and the statistics llama.cpp prints from it. pacer writes and
// reads the same bytes, so a base made by either tool scores the other.
//
// Layout (little endian, no padding):
//   bytes 0..7      "_logits_"
//   int32 n_ctx     tokens per chunk
//   int32 n_vocab
//   int32 n_chunk
//   int32 tokens[n_chunk * n_ctx]      the evaluated text (a chunk's first token as in the text,
//                                      not the BOS that replaces it during evaluation)
//   per chunk, n_ctx - 1 - n_ctx/2 records (the scored positions first..n_ctx-2, first = n_ctx/2),
//   each of nv = 2*((n_vocab+1)/2) + 4 uint16:
//     uint16[0..1]  float scale = (max_logit - min_logit) / 65535, min_logit clamped to max - 16
//     uint16[2..3]  float min_log_prob = min_logit - max_logit - log(sum exp(logit - max_logit))
//     uint16[4 + i] round((logit_i - min_logit) / scale), 0 for logits at or below min_logit
//   so log p_i ~ scale * q_i + min_log_prob (log-probabilities below max - 16 are not kept).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace pacer::runtime {

inline constexpr char kLogprobMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};

// uint16 values per scored position (record), as llama.cpp's nv.
inline int64_t logprob_record_u16(int64_t n_vocab) noexcept {
  return 2 * ((n_vocab + 1) / 2) + 4;
}
// Scored positions per chunk of n_ctx tokens: first = n_ctx/2 .. n_ctx-2.
inline int64_t scored_per_chunk(int64_t n_ctx) noexcept {
  return n_ctx - 1 - n_ctx / 2;
}

// Negative log-likelihood of token `tok` under softmax(logits), computed as llama.cpp does (max
// subtracted, sum of expf in double).
double token_nll(std::span<const float> logits, int32_t tok);

// Fills one record (logprob_record_u16(n_vocab) values) from a position's logits; returns the
// position's NLL of `tok`.
double encode_logprobs(std::span<const float> logits, int32_t tok, std::span<uint16_t> record);

// One scored position compared with its base record, as llama.cpp's kl-divergence does.
struct KldPosition {
  double nll = 0;       // -log p(tok) under the logits
  double nll_base = 0;  // -log p(tok) under the base record
  double kld = 0;       // sum_i p_base_i (log p_base_i - log p_i), over log p_base_i > -16
  float p_diff = 0;     // p(tok) - p_base(tok)
  bool same_top = false;
};
KldPosition compare_logprobs(std::span<const float> logits, std::span<const uint16_t> record,
                             int32_t tok);

// Running sums over positions (llama.cpp's kl_divergence_result).
struct KldSums {
  double sum_nll = 0, sum_nll2 = 0, sum_nll_base = 0, sum_nll_base2 = 0, sum_nll_nll_base = 0;
  double sum_kld = 0, sum_kld2 = 0, sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
  float max_p_diff = 0;
  int64_t n_same_top = 0, count = 0;
  void add(const KldPosition& p);
};

struct ValueAndError {
  double value = 0, error = 0;
};
// The figures llama.cpp prints per chunk and at the end, from the sums and the per-position
// values (kld and p_diff, any order: they are sorted here).
// A sorted sample's extremes, median and the percentiles llama.cpp prints, as (fraction, value)
// pairs from the highest fraction down.
struct Distribution {
  double max = 0, min = 0, median = 0;
  std::vector<std::pair<double, double>> percentiles;
};
// Percentiles llama.cpp prints: of KLD 99.9, 99, 95, 90, 10, 5, 1, 0.1; of Δp also 75 and 25.
inline constexpr double kKldFractions[] = {0.999, 0.99, 0.95, 0.90, 0.10, 0.05, 0.01, 0.001};
inline constexpr double kDeltaPFractions[] = {0.999, 0.99, 0.95, 0.90, 0.75,
                                              0.25,  0.10, 0.05, 0.01, 0.001};

// The figures llama.cpp prints per chunk and at the end, from the sums and the per-position
// values (kld and p_diff, any order: they are sorted here).
struct KldSummary {
  int64_t count = 0;
  ValueAndError ppl, ppl_base, log_ppl_ratio, ppl_ratio, ppl_diff, kld, p_diff, rms_p_diff,
      same_top;
  double log_ppl_correlation = 0;
  Distribution kld_dist, p_diff_dist;
};
KldSummary summarize_kld(const KldSums& s, std::vector<float> kld_values,
                         std::vector<float> p_diff_values);

// Reads a base file: the header and tokens at open (validated against the file's size: a
// truncated or padded file is refused before any work), then one chunk of records at a time.
// Errors are loader::LoadError naming the file, the field and the byte offset.
class LogprobReader {
 public:
  explicit LogprobReader(const std::filesystem::path& path);
  ~LogprobReader();
  LogprobReader(const LogprobReader&) = delete;
  LogprobReader& operator=(const LogprobReader&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  int64_t n_ctx() const noexcept { return n_ctx_; }
  int64_t n_vocab() const noexcept { return n_vocab_; }
  int64_t n_chunk() const noexcept { return n_chunk_; }
  const std::vector<int32_t>& tokens() const noexcept { return tokens_; }
  // The next chunk's records (scored_per_chunk(n_ctx) * logprob_record_u16(n_vocab) values).
  void read_chunk(std::vector<uint16_t>& records);

 private:
  std::filesystem::path path_;
  std::FILE* f_ = nullptr;
  int64_t n_ctx_ = 0, n_vocab_ = 0, n_chunk_ = 0, next_chunk_ = 0, offset_ = 0;
  std::vector<int32_t> tokens_;
};

// Writes a base file to a temporary file beside `path`, renamed into place by finish(); a writer
// destroyed before finish() removes the temporary (no half file is left).
class LogprobWriter {
 public:
  LogprobWriter(const std::filesystem::path& path, int64_t n_ctx, int64_t n_vocab,
                std::span<const int32_t> tokens);  // tokens: n_chunk * n_ctx
  ~LogprobWriter();
  LogprobWriter(const LogprobWriter&) = delete;
  LogprobWriter& operator=(const LogprobWriter&) = delete;
  void write_chunk(std::span<const uint16_t> records);
  void finish();

 private:
  void write(const void* p, size_t n);
  std::filesystem::path path_, tmp_;
  std::FILE* f_ = nullptr;
};

}  // namespace pacer::runtime
