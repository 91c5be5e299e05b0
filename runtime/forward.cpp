// The forward pass, top to bottom like the models' math. Decode (one token) streams every weight
// once: the matmuls are where the time goes, everything else is bookkeeping around them.
//
// Per layer (llama / qwen2; gemma3 additions in brackets):
//   h = x + Wo · attention(rope(Wq·norm(x) [+bq]), rope(Wk·norm(x) [+bk]), Wv·norm(x) [+bv])
//   x' = h + W_down · (act(W_gate·norm(h)) * W_up·norm(h))
// with gemma3 normalising q and k per head before RoPE, normalising each branch's output before
// its residual add (post norms), using GeGLU, scaling embeddings by sqrt(n_embd), and giving
// sliding-window layers their own RoPE base.
#include "runtime/forward.h"

#include <cmath>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>

#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"

namespace pacer::runtime {
namespace {

// Below this many tokens a per-token op runs on the caller; above, rows spread over the workers.
constexpr int64_t kParallelTokens = 8;

// fn(t) for every token row of the batch.
template <typename Fn>
void for_each_token(const ops::Parallel& par, int64_t n, const Fn& fn) {
  if (n < kParallelTokens) {
    for (int64_t t = 0; t < n; ++t) fn(t);
    return;
  }
  par.run_chunks(n, 1, [&](int, int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) fn(t);
  });
}

OpInfo matmul_info(std::string_view name, int layer, std::span<const ops::MatmulOutput> outs,
                   int64_t n_tokens) {
  OpInfo info{.name = name, .layer = layer, .kind = OpKind::Matmul, .wtype = outs[0].w.type};
  info.cols = outs[0].w.cols;
  info.tokens = n_tokens;
  for (const ops::MatmulOutput& o : outs) {
    info.rows += o.w.rows;
    info.weight_bytes += o.w.bytes();
  }
  return info;
}

// The KV-cache bytes an attention over the tokens at [pos0, pos0 + n) reads, each cache row once:
// the K and V rows of the positions its last token sees, back to those its first token sees. And
// over a float cache its fp32 flops: per query token, key it sees and query head, a head_dim dot
// with K and a head_dim multiply-add of V.
OpInfo attention_info(int layer, const ops::AttentionParams& ap, int64_t pos0, int64_t n) {
  const int64_t end = pos0 + n;
  const int64_t first =
      ap.sliding_window > 0 ? std::max<int64_t>(0, pos0 - ap.sliding_window + 1) : 0;
  OpInfo info{.name = "attention", .layer = layer, .kind = OpKind::Attention};
  info.kv_bytes = (end - first) * 2 * ops::kv_row_bytes(ap.kv_type, ap.n_kv_heads * ap.head_dim);
  if (ap.kv_type != ops::WeightType::Q8_0) {
    int64_t keys = 0;  // over the n query tokens
    for (int64_t pos = pos0; pos < end; ++pos) {
      keys += ap.sliding_window > 0 ? std::min<int64_t>(pos + 1, ap.sliding_window) : pos + 1;
    }
    info.attention_flops = keys * 4 * ap.n_heads * ap.head_dim;
  }
  return info;
}

void add_bias(std::span<float> y, std::span<const float> bias, int64_t n,
              const ops::KernelSet& ks) {
  const int64_t width = static_cast<int64_t>(bias.size());
  for (int64_t t = 0; t < n; ++t) {
    ops::add(y.subspan(t * width, width), bias, y.subspan(t * width, width), ks);
  }
}

// Decode only: names the weights of the matmul after the one about to run, so that the workers
// waiting through the norms, rope and adds in between (and those done early with this one)
// prefetch their share of them (ops::Parallel::prefetch_next).
void prefetch_next_matmul(const ops::Parallel& par, const ops::KernelSet& ks, int64_t n,
                          std::initializer_list<ops::WeightMatrix> next) {
  if (n != 1) return;
  par.prefetch_next(ops::matmul_prefetch_plan(std::span(next.begin(), next.size()), ks));
}

}  // namespace

void forward(const Model& model, KvCache& kv, RunState& s, std::span<const int32_t> tokens,
             int64_t pos0, int64_t n_logits, const ops::Parallel& par, Recorder& rec) {
  const loader::ModelConfig& c = model.config();
  const loader::Weights& w = model.weights();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n <= 0 || n > s.max_batch || pos0 < 0 || pos0 + n > kv.capacity()) {
    throw std::invalid_argument("forward: batch of " + std::to_string(n) + " tokens at position " +
                                std::to_string(pos0) + " does not fit (max batch " +
                                std::to_string(s.max_batch) + ", context " +
                                std::to_string(kv.capacity()) + ")");
  }
  if (n_logits < 0 || n_logits > n || n_logits > s.max_logits) {
    throw std::invalid_argument("forward: logits of " + std::to_string(n_logits) +
                                " tokens asked of a batch of " + std::to_string(n) + " (at most " +
                                std::to_string(s.max_logits) + " logit rows)");
  }
  for (int32_t id : tokens) {
    if (id < 0 || id >= c.n_vocab) {
      throw std::invalid_argument("forward: token id " + std::to_string(id) + " outside [0, " +
                                  std::to_string(c.n_vocab) + ")");
    }
  }

  // Shared values.
  const int64_t dim = c.n_embd, head_dim = c.head_dim;
  const int64_t q_dim = c.n_heads * head_dim, kv_dim = c.n_kv_heads * head_dim, ff = c.n_ff;
  const float eps = c.norm_eps;
  const ops::KernelSet& ks = s.kernels;  // resolved once per session
  auto rows = [n](std::vector<float>& buf, int64_t width) {
    return std::span<float>(buf.data(), static_cast<size_t>(n * width));
  };
  auto row = [](std::span<float> m, int64_t width, int64_t t) {
    return m.subspan(static_cast<size_t>(t * width), static_cast<size_t>(width));
  };
  const std::span<float> x = rows(s.x, dim), xb = rows(s.xb, dim), proj = rows(s.proj, dim);
  const std::span<float> q = rows(s.q, q_dim), att = rows(s.att, q_dim);
  const std::span<float> k = rows(s.k, kv_dim), v = rows(s.v, kv_dim);
  const std::span<float> gate = rows(s.gate, ff), up = rows(s.up, ff), hb = rows(s.hb, ff);
  const int li = -1;  // layer index of ops outside the blocks
  // RoPE frequency factors (llama3 rope_freqs, phi3 LongRoPE for this context), or none.
  const float* rope_factors = w.rope_factors(c, kv.capacity());
  // Each token's rotation angles depend only on its position and the layer's RoPE parameters (one
  // set for full-attention layers, one for sliding-window ones): the first rope op of each set
  // computes them for the batch, every later layer reuses them (the trig, computed again for q
  // and k in every layer, was half the rope op: ~67 us a token over Qwen2.5-0.5B's 24 layers).
  bool rope_angles_ready[2] = {false, false};
  auto angles_of = [&](int set, int64_t t) {
    return s.rope_angles.data() + (set * s.max_batch + t) * head_dim;  // cos, then sin
  };

  // Embedding: x[t] = token_embd[tokens[t]]   (gemma3: times sqrt(n_embd))
  {
    auto op = rec.op({.name = "embed", .layer = li, .kind = OpKind::Embed});
    for (int64_t t = 0; t < n; ++t) ops::embedding_row(w.token_embd, tokens[t], row(x, dim, t));
    if (c.embed_scale) ops::scale(x, std::sqrt(static_cast<float>(dim)), ks);
  }

  for (int64_t il = 0; il < c.n_layers; ++il) {
    const loader::LayerWeights& L = w.layers[static_cast<size_t>(il)];
    const int layer = static_cast<int>(il);
    const bool swa = c.is_swa_layer(il);
    ops::AttentionParams ap = kv.params();
    ap.scale = c.attn_scale;
    ap.sliding_window = swa ? c.sliding_window : 0;
    // Sliding-window layers (gemma3) rotate with the local base and no context scaling.
    const ops::RopeParams rp{.head_dim = static_cast<int>(head_dim),
                             .n_rot = static_cast<int>(head_dim),
                             .base = swa ? c.rope_base_local : c.rope_base,
                             .freq_scale = swa ? 1.0f : 1.0f / c.rope_scale,
                             .layout = c.rope_layout,
                             .freq_factors = swa ? nullptr : rope_factors,
                             .mscale = c.rope_attn_factor};

    // A decode step's kv_store writes one lane of every line of the current K block (128 lines a
    // layer for TinyLlama's F16 cache), lines the step's weight streaming evicted since the last
    // step's attention read them: missed one after another on the calling thread, between two
    // matmuls, they took 1.5-2.9 us a layer. Prefetched here, they arrive during attn_norm and
    // the qkv matmul: 0.4-0.6 us (Zen 5 dev VM, TinyLlama Q4_0, 2 threads). Prefill's stores
    // are a small part of its ops.
    if (n == 1) ops::kv_store_prefetch(ap, pos0, n, kv.k(il), kv.v(il));
    // attn_norm: xb = rmsnorm(x) * attn_norm
    {
      auto op = rec.op({.name = "attn_norm", .layer = layer, .kind = OpKind::Norm});
      for_each_token(par, n, [&](int64_t t) {
        ops::rmsnorm(row(x, dim, t), L.attn_norm, eps, row(xb, dim, t), ks);
      });
    }
    // attn_qkv: q = xb Wq^T, k = xb Wk^T, v = xb Wv^T in one parallel pass   (qwen2: + biases)
    {
      const ops::MatmulOutput outs[] = {{L.wq, q}, {L.wk, k}, {L.wv, v}};
      auto op = rec.op(matmul_info("attn_qkv", layer, outs, n));
      prefetch_next_matmul(par, ks, n, {L.wo});
      ops::matmul(outs, xb, n, s.packed, par, ks);
      if (c.qkv_bias) {
        add_bias(q, L.bq, n, ks);
        add_bias(k, L.bk, n, ks);
        add_bias(v, L.bv, n, ks);
      }
    }
    // qk_norm (gemma3, qwen3): every head of q and k = rmsnorm(head) * q_norm / k_norm
    if (c.qk_norm) {
      auto op = rec.op({.name = "qk_norm", .layer = layer, .kind = OpKind::Norm});
      for_each_token(par, n, [&](int64_t t) {
        for (int64_t h = 0; h < c.n_heads; ++h) {
          const auto qh = row(row(q, q_dim, t), head_dim, h);
          ops::rmsnorm(qh, L.q_norm, eps, qh, ks);
        }
        for (int64_t h = 0; h < c.n_kv_heads; ++h) {
          const auto kh = row(row(k, kv_dim, t), head_dim, h);
          ops::rmsnorm(kh, L.k_norm, eps, kh, ks);
        }
      });
    }
    // rope: rotate q and k of token t by its position pos0 + t
    {
      auto op = rec.op({.name = "rope", .layer = layer, .kind = OpKind::Elementwise});
      const int set = swa ? 1 : 0;
      const int64_t half = head_dim / 2;
      if (!rope_angles_ready[set]) {
        for_each_token(par, n, [&](int64_t t) {
          float* a = angles_of(set, t);
          ops::rope_angles(pos0 + t, rp, a, a + half);
        });
        rope_angles_ready[set] = true;
      }
      for_each_token(par, n, [&](int64_t t) {
        const float* a = angles_of(set, t);
        ops::rope_rotate(row(q, q_dim, t), static_cast<int>(c.n_heads), rp, a, a + half);
        ops::rope_rotate(row(k, kv_dim, t), static_cast<int>(c.n_kv_heads), rp, a, a + half);
      });
    }
    // kv_store: cache rows [pos0, pos0 + n) = k, v
    {
      auto op = rec.op({.name = "kv_store", .layer = layer, .kind = OpKind::Other});
      ops::kv_store(ap, k, v, pos0, n, kv.k(il), kv.v(il), ks);
    }
    // attention: att = softmax(scale * q K^T, causal [+ window]) V, per query head
    {
      auto op = rec.op(attention_info(layer, ap, pos0, n));
      ops::attention(ap, q, pos0, n, kv.k(il), kv.v(il), att, par, ks, s.attn_scratch);
    }
    // attn_out: proj = att Wo^T
    {
      const ops::MatmulOutput outs[] = {{L.wo, proj}};
      auto op = rec.op(matmul_info("attn_out", layer, outs, n));
      prefetch_next_matmul(par, ks, n, {L.w_gate, L.w_up});
      ops::matmul(outs, att, n, s.packed, par, ks);
    }
    // post_attn_norm (gemma3): proj = rmsnorm(proj) * post_attn_norm
    if (c.post_norms) {
      auto op = rec.op({.name = "post_attn_norm", .layer = layer, .kind = OpKind::Norm});
      for_each_token(par, n, [&](int64_t t) {
        ops::rmsnorm(row(proj, dim, t), L.post_attn_norm, eps, row(proj, dim, t), ks);
      });
    }
    // residual: x = x + proj
    {
      auto op = rec.op({.name = "residual", .layer = layer, .kind = OpKind::Elementwise});
      ops::add(x, proj, x, ks);
    }
    // ffn_norm: xb = rmsnorm(x) * ffn_norm
    {
      auto op = rec.op({.name = "ffn_norm", .layer = layer, .kind = OpKind::Norm});
      for_each_token(par, n, [&](int64_t t) {
        ops::rmsnorm(row(x, dim, t), L.ffn_norm, eps, row(xb, dim, t), ks);
      });
    }
    // ffn_gate_up: gate = xb Wgate^T, up = xb Wup^T in one parallel pass
    {
      const ops::MatmulOutput outs[] = {{L.w_gate, gate}, {L.w_up, up}};
      auto op = rec.op(matmul_info("ffn_gate_up", layer, outs, n));
      prefetch_next_matmul(par, ks, n, {L.w_down});
      ops::matmul(outs, xb, n, s.packed, par, ks);
    }
    // ffn_act: hb = silu(gate) * up   (gemma3: gelu_tanh(gate) * up)
    {
      auto op = rec.op({.name = "ffn_act", .layer = layer, .kind = OpKind::Elementwise});
      for_each_token(par, n, [&](int64_t t) {
        if (c.geglu) {
          ops::geglu(row(gate, ff, t), row(up, ff, t), row(hb, ff, t), ks);
        } else {
          ops::swiglu(row(gate, ff, t), row(up, ff, t), row(hb, ff, t), ks);
        }
      });
    }
    // ffn_down: proj = hb Wdown^T
    {
      const ops::MatmulOutput outs[] = {{L.w_down, proj}};
      auto op = rec.op(matmul_info("ffn_down", layer, outs, n));
      if (il + 1 < c.n_layers) {
        const loader::LayerWeights& next = w.layers[static_cast<size_t>(il + 1)];
        prefetch_next_matmul(par, ks, n, {next.wq, next.wk, next.wv});
      } else {
        prefetch_next_matmul(par, ks, n, {w.output});
      }
      ops::matmul(outs, hb, n, s.packed, par, ks);
    }
    // post_ffn_norm (gemma3): proj = rmsnorm(proj) * post_ffn_norm
    if (c.post_norms) {
      auto op = rec.op({.name = "post_ffn_norm", .layer = layer, .kind = OpKind::Norm});
      for_each_token(par, n, [&](int64_t t) {
        ops::rmsnorm(row(proj, dim, t), L.post_ffn_norm, eps, row(proj, dim, t), ks);
      });
    }
    // residual: x = x + proj
    {
      auto op = rec.op({.name = "residual", .layer = layer, .kind = OpKind::Elementwise});
      ops::add(x, proj, x, ks);
    }
  }

  if (n_logits == 0) return;
  // output_norm: the last n_logits tokens, into xb rows [0, n_logits) (free scratch now)
  const int64_t first = n - n_logits;
  const std::span<float> last = xb.subspan(0, static_cast<size_t>(n_logits * dim));
  {
    auto op = rec.op({.name = "output_norm", .layer = li, .kind = OpKind::Norm});
    for (int64_t t = 0; t < n_logits; ++t) {
      ops::rmsnorm(row(x, dim, first + t), w.output_norm, eps, row(last, dim, t), ks);
    }
  }
  // output: logits = last W_out^T   (tied models: W_out is token_embd)   [soft-capped if asked]
  {
    const std::span<float> logits(s.logits.data(), static_cast<size_t>(n_logits * c.n_vocab));
    const ops::MatmulOutput outs[] = {{w.output, logits}};
    auto op = rec.op(matmul_info("output", li, outs, n_logits));
    if (c.n_layers > 0) {  // the next decode step's first matmul
      const loader::LayerWeights& first_layer = w.layers.front();
      prefetch_next_matmul(par, ks, n, {first_layer.wq, first_layer.wk, first_layer.wv});
    }
    ops::matmul(outs, last, n_logits, s.packed, par, ks);
    if (c.final_logit_softcap > 0.0f) {
      const float cap = c.final_logit_softcap;
      for (float& l : logits) l = cap * std::tanh(l / cap);
    }
  }
}

std::vector<std::vector<ops::WeightMatrix>> matmul_groups(const loader::Weights& w) {
  std::vector<std::vector<ops::WeightMatrix>> groups;
  for (const loader::LayerWeights& L : w.layers) {
    groups.push_back({L.wq, L.wk, L.wv});
    groups.push_back({L.wo});
    groups.push_back({L.w_gate, L.w_up});
    groups.push_back({L.w_down});
  }
  groups.push_back({w.output});
  return groups;
}

}  // namespace pacer::runtime
