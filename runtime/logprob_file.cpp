#include "runtime/logprob_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "loader/error.h"

namespace pacer::runtime {
namespace {

// Header: magic, n_ctx, n_vocab, n_chunk.
constexpr int64_t kHeaderBytes = 8 + 3 * 4;
// Far above any real model or context, low enough that every size below fits in 64 bits.
constexpr int64_t kMaxDim = int64_t{1} << 24;

float max_of(std::span<const float> x) {
  float m = x[0];
  for (float v : x) m = std::max(m, v);
  return m;
}

double sum_exp_minus(std::span<const float> x, float max_logit) {
  double s = 0;
  for (float v : x) s += std::exp(v - max_logit);
  return s;
}

// Linear interpolation between the two nearest ranks of sorted values (llama.cpp's percentile).
double percentile(const std::vector<float>& v, double fraction) {
  if (v.empty()) return 0;
  if (fraction <= 0) return v.front();
  if (fraction >= 1) return v.back();
  double p = fraction * static_cast<double>(v.size() - 1);
  const size_t ip = static_cast<size_t>(p);
  p -= static_cast<double>(ip);
  return (1 - p) * v[ip] + p * v[std::min(ip + 1, v.size() - 1)];
}

double median(const std::vector<float>& v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  return n % 2 == 0 ? 0.5 * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

// Mean and its standard error (llama.cpp reports no error below 11 samples).
ValueAndError mean_and_error(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const double f = sum / static_cast<double>(count);
  double var = sum2 / static_cast<double>(count) - f * f;
  var = var > 0 && count > 10 ? std::sqrt(var / static_cast<double>(count - 1)) : 0.0;
  return {f, var};
}

double covariance(double a, double b, double ab, int64_t count) {
  if (count < 10) return 0.0;
  const double n = static_cast<double>(count);
  return (ab / n - (a / n) * (b / n)) / (n - 1);
}

Distribution distribution(std::vector<float> v, std::span<const double> fractions) {
  Distribution d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  d.max = v.back();
  d.min = v.front();
  d.median = median(v);
  for (double f : fractions) d.percentiles.emplace_back(f, percentile(v, f));
  return d;
}

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

double token_nll(std::span<const float> logits, int32_t tok) {
  const float max_logit = max_of(logits);
  const double sum_exp = sum_exp_minus(logits, max_logit);
  return -(logits[static_cast<size_t>(tok)] - max_logit - std::log(sum_exp));
}

double encode_logprobs(std::span<const float> logits, int32_t tok, std::span<uint16_t> record) {
  float max_logit = logits[0], min_logit = logits[0];
  for (float v : logits) {
    max_logit = std::max(max_logit, v);
    min_logit = std::min(min_logit, v);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  const double sum_exp = sum_exp_minus(logits, max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.f;
  std::memcpy(record.data(), &scale, sizeof scale);
  std::memcpy(record.data() + 2, &min_log_prob, sizeof min_log_prob);
  uint16_t* q = record.data() + 4;
  const size_t n = logits.size();
  if (scale != 0) {
    const float inv_scale = 1 / scale;
    for (size_t i = 0; i < n; ++i) {
      // Round half to even, as llama.cpp's float trick does; clamp the top level.
      const float level = std::nearbyint(inv_scale * (logits[i] - min_logit));
      q[i] = logits[i] > min_logit ? static_cast<uint16_t>(std::min(level, 65535.f)) : 0;
    }
  } else {
    std::fill(q, q + n, uint16_t{0});
  }
  // Padding of an odd vocabulary stays zero.
  std::fill(q + n, record.data() + record.size(), uint16_t{0});
  return max_logit + log_sum_exp - logits[static_cast<size_t>(tok)];
}

KldPosition compare_logprobs(std::span<const float> logits, std::span<const uint16_t> record,
                             int32_t tok) {
  float max_logit = logits[0];
  size_t imax = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > max_logit) max_logit = logits[i], imax = i;
  }
  const double sum_exp = sum_exp_minus(logits, max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  float scale = 0, min_log_prob = 0;
  std::memcpy(&scale, record.data(), sizeof scale);
  std::memcpy(&min_log_prob, record.data() + 2, sizeof min_log_prob);
  const uint16_t* q = record.data() + 4;
  const auto t = static_cast<size_t>(tok);

  KldPosition r;
  const float nll = max_logit + log_sum_exp - logits[t];
  const float nll_base = -(scale * q[t] + min_log_prob);
  r.nll = nll;
  r.nll_base = nll_base;
  const float log_norm = max_logit + log_sum_exp;  // log p_i = logit_i - log_norm
  double kld = 0;
  size_t imax_base = 0;
  float best_base = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float log_p_base = scale * q[i] + min_log_prob;
    if (i == 0 || log_p_base > best_base) best_base = log_p_base, imax_base = i;
    if (log_p_base > -16.f) {
      kld += std::exp(log_p_base) * (log_p_base - logits[i] + log_norm);
    }
  }
  r.kld = kld;
  r.same_top = imax == imax_base;
  r.p_diff = std::exp(-nll) - std::exp(-nll_base);
  return r;
}

void KldSums::add(const KldPosition& p) {
  sum_nll += p.nll;
  sum_nll2 += p.nll * p.nll;
  sum_nll_base += p.nll_base;
  sum_nll_base2 += p.nll_base * p.nll_base;
  sum_nll_nll_base += p.nll * p.nll_base;
  sum_kld += p.kld;
  sum_kld2 += p.kld * p.kld;
  const double d = p.p_diff, d2 = d * d;
  sum_p_diff += d;
  sum_p_diff2 += d2;
  sum_p_diff4 += d2 * d2;
  max_p_diff = std::max(max_p_diff, std::fabs(p.p_diff));
  n_same_top += p.same_top ? 1 : 0;
  ++count;
}

KldSummary summarize_kld(const KldSums& s, std::vector<float> kld_values,
                         std::vector<float> p_diff_values) {
  KldSummary r;
  r.count = s.count;
  const ValueAndError log_ppl = mean_and_error(s.sum_nll, s.sum_nll2, s.count);
  const ValueAndError log_base = mean_and_error(s.sum_nll_base, s.sum_nll_base2, s.count);
  r.ppl = {std::exp(log_ppl.value), std::exp(log_ppl.value) * log_ppl.error};
  r.ppl_base = {std::exp(log_base.value), std::exp(log_base.value) * log_base.error};
  const double cov = covariance(s.sum_nll, s.sum_nll_base, s.sum_nll_nll_base, s.count);
  r.log_ppl_correlation =
      log_ppl.error > 0 && log_base.error > 0 ? cov / (log_ppl.error * log_base.error) : 0.0;
  const double ratio_var =
      log_ppl.error * log_ppl.error + log_base.error * log_base.error - 2.0 * cov;
  r.log_ppl_ratio = {log_ppl.value - log_base.value, std::sqrt(std::max(0.0, ratio_var))};
  r.ppl_ratio = {std::exp(r.log_ppl_ratio.value),
                 std::exp(r.log_ppl_ratio.value) * r.log_ppl_ratio.error};
  const double ppl_cov = r.ppl.value * r.ppl_base.value * cov;
  r.ppl_diff = {r.ppl.value - r.ppl_base.value,
                std::sqrt(std::max(0.0, r.ppl.error * r.ppl.error +
                                            r.ppl_base.error * r.ppl_base.error - 2.0 * ppl_cov))};
  r.kld = mean_and_error(s.sum_kld, s.sum_kld2, s.count);
  r.p_diff = mean_and_error(s.sum_p_diff, s.sum_p_diff2, s.count);
  const ValueAndError mse = mean_and_error(s.sum_p_diff2, s.sum_p_diff4, s.count);
  const double rms = std::sqrt(mse.value);
  r.rms_p_diff = {rms, rms > 0 ? 0.5 / rms * mse.error : 0.0};
  const double top = s.count > 0 ? static_cast<double>(s.n_same_top) / s.count : 0.0;
  r.same_top = {top,
                s.count > 1 ? std::sqrt(top * (1 - top) / static_cast<double>(s.count - 1)) : 0.0};

  r.kld_dist = distribution(std::move(kld_values), kKldFractions);
  r.p_diff_dist = distribution(std::move(p_diff_values), kDeltaPFractions);
  return r;
}

// ---- LogprobReader

LogprobReader::LogprobReader(const std::filesystem::path& path) : path_(path) {
  const std::string file = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw loader::LoadError(file, "file", -1, "is a directory, not a KL-divergence base file");
  }
  f_ = std::fopen(file.c_str(), "rb");
  if (!f_) throw loader::LoadError(file, "file", -1, "cannot open: " + errno_text());
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) throw loader::LoadError(file, "file", -1, "cannot stat: " + ec.message());

  char magic[8] = {};
  int32_t head[3] = {};
  if (size < 8 || std::fread(magic, 1, 8, f_) != 8 || std::memcmp(magic, kLogprobMagic, 8) != 0) {
    throw loader::LoadError(file, "magic", 0,
                            "not a KL-divergence base file (no \"_logits_\" magic; make one with "
                            "--kl-divergence-base)");
  }
  if (size < kHeaderBytes || std::fread(head, 4, 3, f_) != 3) {
    throw loader::LoadError(file, "header", 8,
                            fmt::format("truncated header: {} bytes, the header (magic, n_ctx, "
                                        "n_vocab, n_chunk) needs {}",
                                        size, kHeaderBytes));
  }
  const char* names[3] = {"n_ctx", "n_vocab", "n_chunk"};
  for (int i = 0; i < 3; ++i) {
    const int64_t min = i == 0 ? 4 : 1;
    if (head[i] < min || head[i] > kMaxDim) {
      throw loader::LoadError(file, names[i], 8 + 4 * i,
                              fmt::format("value {} out of range [{}, {}]", head[i], min, kMaxDim));
    }
  }
  n_ctx_ = head[0], n_vocab_ = head[1], n_chunk_ = head[2];
  const int64_t tokens_bytes = 4 * n_ctx_ * n_chunk_;
  const int64_t chunk_bytes = scored_per_chunk(n_ctx_) * logprob_record_u16(n_vocab_) * 2;
  const int64_t want = kHeaderBytes + tokens_bytes + n_chunk_ * chunk_bytes;
  if (size != want) {
    const int64_t data = size - kHeaderBytes - tokens_bytes;
    const std::string where =
        size < kHeaderBytes + tokens_bytes
            ? "in the token list"
            : fmt::format("in chunk {} of {}", data / chunk_bytes + 1, n_chunk_);
    throw loader::LoadError(
        file, size < want ? "log-probs" : "file size",
        size < want ? std::max<int64_t>(size, 0) : want,
        size < want
            ? fmt::format("truncated {}: {} bytes, but n_ctx {}, n_vocab {} and {} chunks need {}",
                          where, size, n_ctx_, n_vocab_, n_chunk_, want)
            : fmt::format("{} bytes, but n_ctx {}, n_vocab {} and {} chunks need exactly {}", size,
                          n_ctx_, n_vocab_, n_chunk_, want));
  }
  tokens_.resize(static_cast<size_t>(n_ctx_ * n_chunk_));
  if (std::fread(tokens_.data(), 4, tokens_.size(), f_) != tokens_.size()) {
    throw loader::LoadError(file, "tokens", kHeaderBytes, "read failed: " + errno_text());
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i] < 0 || tokens_[i] >= n_vocab_) {
      throw loader::LoadError(file, fmt::format("tokens[{}]", i),
                              kHeaderBytes + 4 * static_cast<int64_t>(i),
                              fmt::format("token id {} outside [0, {})", tokens_[i], n_vocab_));
    }
  }
  offset_ = kHeaderBytes + tokens_bytes;
}

LogprobReader::~LogprobReader() {
  if (f_) std::fclose(f_);
}

void LogprobReader::read_chunk(std::vector<uint16_t>& records) {
  if (next_chunk_ >= n_chunk_) {
    throw loader::LoadError(path_.string(), "log-probs", offset_,
                            fmt::format("all {} chunks were already read", n_chunk_));
  }
  records.resize(static_cast<size_t>(scored_per_chunk(n_ctx_) * logprob_record_u16(n_vocab_)));
  if (std::fread(records.data(), 2, records.size(), f_) != records.size()) {
    throw loader::LoadError(path_.string(), fmt::format("chunk {} log-probs", next_chunk_ + 1),
                            offset_, "read failed (file changed while reading?)");
  }
  // Each scored token's record starts with its float scale and min log-prob: a NaN, an infinity
  // or a negative scale there is a damaged file, not a figure to average.
  const int64_t record_u16 = logprob_record_u16(n_vocab_);
  for (int64_t r = 0; r < scored_per_chunk(n_ctx_); ++r) {
    float head[2];
    std::memcpy(head, records.data() + r * record_u16, sizeof head);
    for (int k = 0; k < 2; ++k) {
      if (std::isfinite(head[k]) && (k == 1 || head[k] >= 0)) continue;
      throw loader::LoadError(
          path_.string(),
          fmt::format("chunk {} token {} {}", next_chunk_ + 1, r,
                      k == 0 ? "scale" : "min log-prob"),
          offset_ + (r * record_u16 + 2 * k) * 2,
          fmt::format("{} is not a {} float", head[k], k == 0 ? "finite non-negative" : "finite"));
    }
  }
  offset_ += static_cast<int64_t>(records.size()) * 2;
  ++next_chunk_;
}

// ---- LogprobWriter

LogprobWriter::LogprobWriter(const std::filesystem::path& path, int64_t n_ctx, int64_t n_vocab,
                             std::span<const int32_t> tokens)
    : path_(path) {
  if (n_ctx < 4 || n_ctx > kMaxDim || n_vocab < 1 || n_vocab > kMaxDim || tokens.empty() ||
      tokens.size() % static_cast<size_t>(n_ctx) != 0) {
    throw std::invalid_argument(
        fmt::format("{}: bad base file shape (n_ctx {}, n_vocab {}, {} "
                    "tokens)",
                    path.string(), n_ctx, n_vocab, tokens.size()));
  }
  // A temporary beside the target, renamed over it when complete. Something that is not a
  // regular file (a device such as /dev/null, a FIFO) is written in place, never replaced.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  const bool in_place = std::filesystem::exists(st) && !std::filesystem::is_regular_file(st);
  if (std::filesystem::is_directory(st)) {
    throw std::runtime_error(path.string() + ": is a directory");
  }
  if (!in_place) tmp_ = path.string() + fmt::format(".partial-{}", ::getpid());
  const std::string open_path = in_place ? path.string() : tmp_.string();
  f_ = std::fopen(open_path.c_str(), "wb");
  if (!f_)
    throw std::runtime_error(fmt::format("{}: cannot create: {}", path.string(), errno_text()));
  const int32_t head[3] = {static_cast<int32_t>(n_ctx), static_cast<int32_t>(n_vocab),
                           static_cast<int32_t>(tokens.size() / static_cast<size_t>(n_ctx))};
  write(kLogprobMagic, 8);
  write(head, sizeof head);
  write(tokens.data(), tokens.size() * sizeof(int32_t));
}

LogprobWriter::~LogprobWriter() {
  if (f_) std::fclose(f_);
  if (!tmp_.empty()) {
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
  }
}

void LogprobWriter::write(const void* p, size_t n) {
  if (std::fwrite(p, 1, n, f_) != n) {
    throw std::runtime_error(fmt::format("{}: write failed: {}", path_.string(), errno_text()));
  }
}

void LogprobWriter::write_chunk(std::span<const uint16_t> records) {
  write(records.data(), records.size() * sizeof(uint16_t));
}

void LogprobWriter::finish() {
  const int rc = std::fflush(f_) == 0 ? std::fclose(f_) : (std::fclose(f_), -1);
  f_ = nullptr;
  if (rc != 0) {
    throw std::runtime_error(fmt::format("{}: write failed: {}", path_.string(), errno_text()));
  }
  if (!tmp_.empty()) {
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) {
      throw std::runtime_error(fmt::format("{}: cannot rename the finished file into place: {}",
                                           path_.string(), ec.message()));
    }
    tmp_.clear();
  }
}

}  // namespace pacer::runtime
