#pragma once
// One forward pass of a batch of tokens through the model (llama, qwen2, gemma3).
#include <cstdint>
#include <span>
#include <vector>

#include "ops/parallel.h"
#include "runtime/kv_cache.h"
#include "runtime/model.h"
#include "runtime/recorder.h"
#include "runtime/run_state.h"

namespace pacer::runtime {

// Runs tokens at positions [pos0, pos0 + tokens.size()) through every layer, appending their K
// and V to the cache. Afterwards state.logits holds the logits of the batch's last n_logits
// tokens, row by row (n_vocab floats each; 1: the last token only, as generation needs; 0: none).
// tokens.size() <= state.max_batch, pos0 + tokens.size() <= kv.capacity(), ids < n_vocab,
// n_logits <= min(tokens.size(), state.max_logits) (std::invalid_argument otherwise). Every op is
// bracketed by `rec` (inert when recording is off).
void forward(const Model& model, KvCache& kv, RunState& state, std::span<const int32_t> tokens,
             int64_t pos0, int64_t n_logits, const ops::Parallel& par, Recorder& rec);

// The matrices forward() multiplies in one parallel region each (rows concatenated, one static
// partition: ops::matmul), in the order it runs them: per layer {wq, wk, wv}, {wo},
// {w_gate, w_up}, {w_down}, then {output}. Memory placement (runtime/numa.h) derives which
// worker streams which rows from this, so it must match the calls in forward().
std::vector<std::vector<ops::WeightMatrix>> matmul_groups(const loader::Weights& w);

}  // namespace pacer::runtime
