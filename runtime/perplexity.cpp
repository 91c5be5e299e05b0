#include "runtime/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "loader/error.h"

namespace pacer::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Per scored position of one chunk: what the scoring of each batch leaves behind.
struct ChunkScores {
  std::vector<double> nll;        // (scored)
  std::vector<KldPosition> kld;   // (scored), KL-divergence mode
  std::vector<uint16_t> records;  // (scored * nv), when writing a base file
};

// Runs one chunk (n_ctx tokens from an empty cache, BOS first where the vocabulary adds one) in
// batches, and scores positions first..n_ctx-2 against the next token as each batch's logits
// arrive. `base` (KL-divergence mode) holds the chunk's base records; `records` (base writing)
// receives them.
class ChunkEvaluator {
 public:
  ChunkEvaluator(Session& s, int64_t n_ctx, int64_t n_batch)
      : s_(s),
        n_ctx_(n_ctx),
        n_batch_(n_batch),
        first_(n_ctx / 2),
        n_vocab_(s.model().config().n_vocab),
        nv_(logprob_record_u16(n_vocab_)) {}

  void run(std::span<const int32_t> chunk, ChunkScores& out, bool write_records,
           const std::vector<uint16_t>* base) {
    const int64_t scored = scored_per_chunk(n_ctx_);
    out.nll.assign(static_cast<size_t>(scored), 0.0);
    out.kld.assign(base ? static_cast<size_t>(scored) : 0, KldPosition{});
    out.records.assign(write_records ? static_cast<size_t>(scored * nv_) : 0, 0);
    batch_.assign(chunk.begin(), chunk.end());
    const loader::Tokenizer& tok = s_.model().tokenizer();
    if (tok.add_bos() && tok.bos() >= 0) batch_[0] = tok.bos();

    s_.reset();
    for (int64_t b0 = 0; b0 < n_ctx_; b0 += n_batch_) {
      const int64_t len = std::min(n_batch_, n_ctx_ - b0);
      const int64_t from = std::max(first_, b0);  // first position whose logits this batch needs
      const int64_t n_logits = std::max<int64_t>(0, b0 + len - from);
      auto score = [&](std::span<const float> logits, const ops::Parallel& par) {
        // Rows of positions from..n_ctx-2 (the last position predicts nothing inside the chunk).
        const int64_t rows = std::min(n_logits, n_ctx_ - 1 - from);
        if (rows <= 0) return;
        par.run_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            const int64_t pos = from + r, i = pos - first_;
            const std::span<const float> row =
                logits.subspan(static_cast<size_t>(r * n_vocab_), static_cast<size_t>(n_vocab_));
            const int32_t next = chunk[static_cast<size_t>(pos + 1)];
            const auto ui = static_cast<size_t>(i);
            if (base) {
              out.kld[ui] = compare_logprobs(
                  row, std::span(*base).subspan(ui * nv_, static_cast<size_t>(nv_)), next);
              out.nll[ui] = out.kld[ui].nll;
            } else if (write_records) {
              out.nll[ui] = encode_logprobs(
                  row, next, std::span(out.records).subspan(ui * nv_, static_cast<size_t>(nv_)));
            } else {
              out.nll[ui] = token_nll(row, next);
            }
          }
        });
      };
      s_.eval(std::span<const int32_t>(batch_).subspan(static_cast<size_t>(b0),
                                                       static_cast<size_t>(len)),
              n_logits, score);
    }
  }

 private:
  Session& s_;
  int64_t n_ctx_, n_batch_, first_, n_vocab_, nv_;
  std::vector<int32_t> batch_;
};

void check_session(const Session& s, int64_t n_ctx) {
  if (s.ctx() < n_ctx) {
    throw std::invalid_argument(fmt::format(
        "perplexity: the session's context ({}) is smaller than -c {}", s.ctx(), n_ctx));
  }
}

int64_t batch_size(const Session& s, const PerplexityOptions& o, int64_t n_ctx) {
  const int64_t b = std::min({o.n_batch, n_ctx, s.options().max_batch});
  const int64_t max_logits = std::min(s.options().max_logits, s.options().max_batch);
  // A batch's scored rows: at most min(b, n_ctx - n_ctx/2).
  if (b < 1 || max_logits < std::min(b, n_ctx - n_ctx / 2)) {
    throw std::invalid_argument(
        fmt::format("perplexity: the session returns {} logit rows per batch of {}, fewer than "
                    "the {} a chunk of {} needs (use perplexity_session_options)",
                    max_logits, b, std::min(b, n_ctx - n_ctx / 2), n_ctx));
  }
  return b;
}

void finish_ppl(PerplexityResult& r, double nll, double nll2) {
  const double n = static_cast<double>(r.count);
  r.nll_mean = nll / n;
  r.ppl = std::exp(r.nll_mean);
  double var = nll2 / n - r.nll_mean * r.nll_mean;
  r.ppl_error = var > 0 && r.count > 1 ? std::sqrt(var / (n - 1)) * r.ppl : 0.0;
}

}  // namespace

void perplexity_session_options(SessionOptions& so, int64_t n_ctx, int64_t n_batch) {
  so.ctx = n_ctx;
  so.max_batch = std::max<int64_t>(1, std::min(n_batch, n_ctx));
  so.max_logits = std::min(so.max_batch, n_ctx - n_ctx / 2);
}

PerplexityResult perplexity(Session& session, std::span<const int32_t> tokens,
                            const PerplexityOptions& opts, const ChunkCallback& on_chunk) {
  const int64_t n_ctx = opts.n_ctx;
  if (n_ctx < 4) throw std::invalid_argument(fmt::format("-c {}: must be at least 4", n_ctx));
  const auto n_tok = static_cast<int64_t>(tokens.size());
  if (n_tok < 2 * n_ctx) {
    throw std::invalid_argument(
        fmt::format("the text has {} tokens; perplexity with -c {} needs at least {} (2 chunks)",
                    n_tok, n_ctx, 2 * n_ctx));
  }
  check_session(session, n_ctx);
  const int64_t n_batch = batch_size(session, opts, n_ctx);
  const int64_t max_chunks = n_tok / n_ctx;
  const int64_t n_chunks = opts.n_chunks < 0 ? max_chunks : std::min(opts.n_chunks, max_chunks);
  if (n_chunks < 1) throw std::invalid_argument("--chunks: at least 1 chunk");

  const int64_t n_vocab = session.model().config().n_vocab;
  std::optional<LogprobWriter> writer;
  if (!opts.kld_base_out.empty()) {
    writer.emplace(opts.kld_base_out, n_ctx, n_vocab,
                   tokens.subspan(0, static_cast<size_t>(n_chunks * n_ctx)));
  }

  PerplexityResult r;
  r.n_ctx = n_ctx;
  r.n_chunks = n_chunks;
  r.n_tokens = n_tok;
  ChunkEvaluator eval(session, n_ctx, n_batch);
  ChunkScores scores;
  double nll = 0, nll2 = 0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const auto t0 = Clock::now();
    eval.run(tokens.subspan(static_cast<size_t>(c * n_ctx), static_cast<size_t>(n_ctx)), scores,
             writer.has_value(), nullptr);
    for (double v : scores.nll) nll += v, nll2 += v * v;  // in position order: reproducible
    r.count += static_cast<int64_t>(scores.nll.size());
    if (writer) writer->write_chunk(scores.records);
    const double secs = seconds_since(t0);
    r.seconds += secs;
    r.chunk_ppl.push_back(std::exp(nll / static_cast<double>(r.count)));
    if (on_chunk) on_chunk({c + 1, n_chunks, r.chunk_ppl.back(), secs, std::nullopt});
  }
  if (writer) writer->finish();
  finish_ppl(r, nll, nll2);
  r.tokens_per_second = r.seconds > 0 ? static_cast<double>(n_chunks * n_ctx) / r.seconds : 0;
  return r;
}

PerplexityResult kl_divergence(Session& session, LogprobReader& base, const PerplexityOptions& opts,
                               const ChunkCallback& on_chunk) {
  const int64_t n_ctx = base.n_ctx();
  const int64_t n_vocab = session.model().config().n_vocab;
  if (base.n_vocab() != n_vocab) {
    throw loader::LoadError(base.path().string(), "n_vocab", 12,
                            fmt::format("the base was computed with a vocabulary of {} tokens, "
                                        "the model has {}",
                                        base.n_vocab(), n_vocab));
  }
  check_session(session, n_ctx);
  const int64_t n_batch = batch_size(session, opts, n_ctx);
  const int64_t n_chunks =
      opts.n_chunks < 0 ? base.n_chunk() : std::min(opts.n_chunks, base.n_chunk());

  PerplexityResult r;
  r.n_ctx = n_ctx;
  r.n_chunks = n_chunks;
  r.n_tokens = static_cast<int64_t>(base.tokens().size());
  ChunkEvaluator eval(session, n_ctx, n_batch);
  ChunkScores scores;
  std::vector<uint16_t> records;
  KldSums sums;
  std::vector<float> kld_values, p_diff_values;
  double nll = 0, nll2 = 0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const auto t0 = Clock::now();
    base.read_chunk(records);
    eval.run(std::span(base.tokens())
                 .subspan(static_cast<size_t>(c * n_ctx), static_cast<size_t>(n_ctx)),
             scores, false, &records);
    for (const KldPosition& p : scores.kld) {
      sums.add(p);
      nll += p.nll, nll2 += p.nll * p.nll;
      kld_values.push_back(static_cast<float>(p.kld));
      p_diff_values.push_back(p.p_diff);
    }
    r.count += static_cast<int64_t>(scores.kld.size());
    const double secs = seconds_since(t0);
    r.seconds += secs;
    r.chunk_ppl.push_back(std::exp(nll / static_cast<double>(r.count)));
    if (on_chunk) {
      // Per-chunk lines use the running sums only (the percentiles are for the final summary).
      on_chunk({c + 1, n_chunks, r.chunk_ppl.back(), secs, summarize_kld(sums, {}, {})});
    }
  }
  finish_ppl(r, nll, nll2);
  r.kld = summarize_kld(sums, std::move(kld_values), std::move(p_diff_values));
  r.tokens_per_second = r.seconds > 0 ? static_cast<double>(n_chunks * n_ctx) / r.seconds : 0;
  return r;
}

}  // namespace pacer::runtime
