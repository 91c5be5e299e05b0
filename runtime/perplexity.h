#pragma once
// Perplexity and KL divergence over a text, computed the way llama.cpp's `llama-perplexity` does,
// so the two tools' figures can be held side by side:
//   - the tokens are cut into chunks of n_ctx; each chunk runs from an empty cache, its first token
//     replaced by BOS where the vocabulary adds one;
//   - the second half of a chunk is scored: positions first = n_ctx/2 .. n_ctx-2 predict the next
//     token (n_ctx - 1 - first per chunk);
//   - PPL = exp(mean NLL), its error exp(mean) * standard error of the NLLs.
// With a base file (logprob_file.h) being written, every scored position's log-probabilities go
// into it; with one being read, the text comes from the base file and every position is compared
// with it (KL divergence, Δp, same top token), as `llama-perplexity --kl-divergence`.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "runtime/logprob_file.h"
#include "runtime/session.h"

namespace pacer::runtime {

struct PerplexityOptions {
  int64_t n_ctx = 512;     // tokens per chunk (the session's context must hold them)
  int64_t n_batch = 2048;  // tokens per forward pass (capped at n_ctx and the session's max_batch)
  int64_t n_chunks = -1;   // at most this many chunks (-1: every whole chunk of the text)
  std::filesystem::path kld_base_out{};  // write a llama.cpp-format base file here
};

struct ChunkProgress {
  int64_t chunk = 0;  // 1-based
  int64_t n_chunks = 0;
  double ppl = 0;                 // running PPL over the chunks so far
  double seconds = 0;             // this chunk's forward passes and scoring
  std::optional<KldSummary> kld;  // running KLD figures (KL-divergence mode only)
};
using ChunkCallback = std::function<void(const ChunkProgress&)>;

struct PerplexityResult {
  int64_t n_ctx = 0, n_chunks = 0, n_tokens = 0;  // n_tokens: of the whole text
  int64_t count = 0;                              // scored positions
  double ppl = 0, ppl_error = 0;                  // Final estimate: PPL = ppl +/- ppl_error
  double nll_mean = 0;
  std::vector<double> chunk_ppl;  // running PPL after each chunk ([i] lines)
  std::optional<KldSummary> kld;  // KL-divergence mode
  double seconds = 0;             // forward passes and scoring, all chunks
  double tokens_per_second = 0;   // evaluated tokens per second of forward passes
};

// The session needs a context of at least n_ctx and max_logits >= the scored rows of a batch
// (perplexity_session_options sets both). Throws std::invalid_argument when the text has fewer
// than 2 * n_ctx tokens (as llama.cpp requires).
PerplexityResult perplexity(Session& session, std::span<const int32_t> tokens,
                            const PerplexityOptions& opts, const ChunkCallback& on_chunk = nullptr);

// KL-divergence mode: the text and base log-probabilities from `base` (its n_ctx is the chunk
// size; n_vocab must match the model's: loader::LoadError otherwise).
PerplexityResult kl_divergence(Session& session, LogprobReader& base, const PerplexityOptions& opts,
                               const ChunkCallback& on_chunk = nullptr);

// Session options for a perplexity run over chunks of n_ctx with batches of n_batch.
void perplexity_session_options(SessionOptions& so, int64_t n_ctx, int64_t n_batch);

}  // namespace pacer::runtime
