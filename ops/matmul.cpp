// Matmul entry points: shape checks, activation packing, and the row/token loops that feed the
// per-type kernels of a KernelSet (kernel_set.h). No ISA-specific code here.
#include "ops/matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>

#include "ops/interleaved.h"
#include "ops/kernel_set.h"
#include "ops/matmul_rows.h"
#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

// Weight bytes one row tile of the GEMM keeps hot while every token passes over it: about half
// of a 48 KiB L1d, so the tile plus one token's activations stay in L1. Tiles are multiples of
// 8 rows, the kernels' row unroll. (GEMMs that tile themselves get the whole range.)
constexpr int64_t kGemmTileBytes = 24 * 1024;

std::string shape_of(const WeightMatrix& w) {
  return std::string(type_name(w.type)) + " [cols=" + std::to_string(w.cols) +
         ", rows=" + std::to_string(w.rows) + "]";
}

// Bytes of one token's packed activation row for weight type t (64-byte multiple).
int64_t packed_row_bytes(WeightType act_type, int64_t cols) {
  switch (act_type) {
    case WeightType::F32:
      return (cols * 4 + 63) / 64 * 64;
    case WeightType::Q8_0:
      return act_q8_row_bytes(cols);
    default:
      return (row_bytes(act_type, cols) + 63) / 64 * 64;
  }
}

// matmul_rows for an interleaved matrix (interleaved.h): whole 16-row groups, a group cut by
// the range computed into a scratch and copied.
void matmul_rows_x16(const WeightMatrix& w, const PackedActivations& x, std::span<float> y,
                     int64_t row_begin, int64_t row_end, const KernelSet& kernels) {
  const X16Kernels& k = kernels.x16(w.type);
  const X16GemvFn gemv = k.gemv;
  const bool few = k.few_tokens(x.tokens());
  const X16GemmFn gemm = few ? k.gemm_few : k.gemm;
  // The activations as the GEMM regroups them, if matmul() prepared them for all workers.
  const std::byte* prepared = nullptr;
  const bool shared =
      x.tokens() > 1 && !few && k.gemm_prepare != nullptr && x.prepared(k.gemm_prepare, &prepared);
  const int64_t group_bytes = x16_group_bytes(w.type, w.cols);
  const int64_t nt = x.tokens();
  const int64_t act_stride = nt > 1 ? x.token(1) - x.token(0) : 0;
  // Rows [16 g0, 16 g1) into out (row 16 g0 at out[0], token stride out_stride).
  auto run = [&](int64_t g0, int64_t g1, float* out, int64_t out_stride) {
    const std::byte* groups = w.data + g0 * group_bytes;
    if (nt == 1) {
      gemv(w.cols, groups, g1 - g0, x.token(0), out);
    } else if (shared) {
      k.gemm_prepared(w.cols, groups, g1 - g0, x.token(0), act_stride, prepared, nt, out,
                      out_stride);
    } else if (gemm != nullptr) {
      gemm(w.cols, groups, g1 - g0, x.token(0), act_stride, nt, out, out_stride);
    } else {
      for (int64_t t = 0; t < nt; ++t) {
        gemv(w.cols, groups, g1 - g0, x.token(t), out + t * out_stride);
      }
    }
  };
  if (row_begin >= row_end) return;
  const int64_t full_begin = (row_begin + kX16Rows - 1) / kX16Rows;
  const int64_t full_end = row_end / kX16Rows;
  if (full_begin < full_end) {
    run(full_begin, full_end, y.data() + full_begin * kX16Rows, w.rows);
  }
  // Groups the range cuts (at most the first and the last): all 16 rows into a scratch, the
  // wanted ones copied out.
  std::vector<float> scratch;
  const int64_t first = row_begin / kX16Rows, last = (row_end - 1) / kX16Rows;
  for (int64_t g : {first, last}) {
    if (g >= full_begin && g < full_end) continue;
    const int64_t lo = std::max(row_begin, g * kX16Rows),
                  hi = std::min(row_end, (g + 1) * kX16Rows);
    scratch.assign(static_cast<size_t>(kX16Rows * nt), 0.0f);
    run(g, g + 1, scratch.data(), kX16Rows);
    for (int64_t t = 0; t < nt; ++t) {
      std::copy(scratch.begin() + t * kX16Rows + (lo - g * kX16Rows),
                scratch.begin() + t * kX16Rows + (hi - g * kX16Rows), y.begin() + t * w.rows + lo);
    }
    if (last == first) break;
  }
}

}  // namespace

void check_matrix(const WeightMatrix& w) {
  const int64_t block = type_info(w.type).block_elems;
  if (w.rows <= 0 || w.cols <= 0 || w.cols % block != 0) {
    throw MatmulError("matmul: weight " + shape_of(w) + ": cols must be a positive multiple of " +
                      std::to_string(block) + " and rows positive");
  }
  if (w.data == nullptr) throw MatmulError("matmul: weight " + shape_of(w) + " has no data");
  if (w.type == WeightType::Q8_K) {
    throw MatmulError("matmul: weight " + shape_of(w) + ": q8_K is an activation-only type");
  }
}

void PackedActivations::pack(WeightType wtype, std::span<const float> x, int64_t cols,
                             int64_t n_tokens, const KernelSet& kernels, const Parallel* par) {
  const MatmulKernels& k = kernels.matmul(wtype);
  const int64_t block = type_info(wtype).block_elems;
  if (cols <= 0 || cols % block != 0 || n_tokens < 0) {
    throw MatmulError("matmul: activations of " + std::to_string(n_tokens) + " x " +
                      std::to_string(cols) + " cannot be packed for " +
                      std::string(type_name(wtype)) + " (cols must be a multiple of " +
                      std::to_string(block) + ")");
  }
  if (static_cast<int64_t>(x.size()) < cols * n_tokens) {
    throw MatmulError("matmul: activations hold " + std::to_string(x.size()) +
                      " floats, need n_tokens*cols = " + std::to_string(n_tokens) + "*" +
                      std::to_string(cols));
  }
  const QuantizeActFn quantize = k.quantize_act;  // null: stays fp32
  wtype_ = wtype;
  cols_ = cols;
  tokens_ = n_tokens;
  token_bytes_ = packed_row_bytes(k.act_type, cols);
  const size_t need = static_cast<size_t>(token_bytes_ * n_tokens + 64);
  if (buf_.size() < need) buf_.resize(need);
  offset_ = static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(buf_.data()) % 64) % 64);
  for (Prepared& p : prepared_) p.fn = nullptr;  // they regrouped the previous activations
  auto pack_tokens = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      std::byte* dst = buf_.data() + offset_ + t * token_bytes_;
      const float* src = x.data() + t * cols;
      if (quantize != nullptr) {
        quantize(src, dst, cols);
      } else {
        std::memcpy(dst, src, static_cast<size_t>(cols) * sizeof(float));
      }
    }
  };
  if (par != nullptr && par->workers() > 1 && n_tokens >= kParallelPackMinTokens) {
    par->run_chunks(n_tokens, 1, [&](int, int64_t t0, int64_t t1) { pack_tokens(t0, t1); });
  } else {
    pack_tokens(0, n_tokens);
  }
}

void PackedActivations::prepare(GemmPrepareFn prepare, const Parallel* par) {
  const std::byte* unused = nullptr;
  if (prepared(prepare, &unused)) return;
  Prepared* slot = nullptr;
  for (Prepared& p : prepared_) {
    if (p.fn == nullptr) slot = &p;
  }
  if (slot == nullptr) slot = &prepared_.emplace_back();
  const int64_t stride = tokens_ > 1 ? token_bytes_ : 0;
  const int64_t bytes = prepare(cols_, token(0), stride, tokens_, nullptr, 0, 1);
  slot->data = nullptr;
  if (bytes > 0) {
    if (slot->buf.size() < static_cast<size_t>(bytes + 64)) {
      slot->buf.resize(static_cast<size_t>(bytes + 64));
    }
    std::byte* dst =
        slot->buf.data() + (64 - reinterpret_cast<uintptr_t>(slot->buf.data()) % 64) % 64;
    if (par != nullptr && par->workers() > 1 && tokens_ >= kParallelPackMinTokens) {
      // A few shares per worker, so that one done early can take a slower one's (work stealing).
      const int64_t parts = 4 * static_cast<int64_t>(par->workers());
      par->run_chunks(parts, 1, [&](int, int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) prepare(cols_, token(0), stride, tokens_, dst, p, parts);
      });
    } else {
      prepare(cols_, token(0), stride, tokens_, dst, 0, 1);
    }
    slot->data = dst;
  }
  slot->fn = prepare;
}

bool PackedActivations::prepared(GemmPrepareFn fn, const std::byte** data) const noexcept {
  for (const Prepared& p : prepared_) {
    if (p.fn == fn) {
      *data = p.data;
      return true;
    }
  }
  return false;
}

void matmul_rows(const WeightMatrix& w, const PackedActivations& x, std::span<float> y,
                 int64_t row_begin, int64_t row_end, const KernelSet& kernels) {
  const MatmulKernels& k = kernels.matmul(w.type);
  if (x.cols() != w.cols || kernels.matmul(x.weight_type()).act_type != k.act_type) {
    throw MatmulError("matmul: activations packed for " + std::string(type_name(x.weight_type())) +
                      " with " + std::to_string(x.cols()) + " cols do not fit weight " +
                      shape_of(w));
  }
  if (row_begin < 0 || row_end > w.rows || row_begin > row_end ||
      static_cast<int64_t>(y.size()) < x.tokens() * w.rows) {
    throw MatmulError("matmul: rows [" + std::to_string(row_begin) + ", " +
                      std::to_string(row_end) + ") or output of " + std::to_string(y.size()) +
                      " floats do not fit weight " + shape_of(w) + " x " +
                      std::to_string(x.tokens()) + " tokens");
  }
  if (w.layout == WeightLayout::Interleaved16) {
    matmul_rows_x16(w, x, y, row_begin, row_end, kernels);
    return;
  }
  const DotFn dot = k.dot;
  const DotRowsFn dot_rows = k.dot_rows;
  const GemmFn gemm = x.tokens() > 1 ? k.gemm : nullptr;
  // The activations as the GEMM regroups them, if matmul() prepared them for all workers.
  const std::byte* prepared = nullptr;
  const bool shared =
      gemm != nullptr && k.gemm_prepare != nullptr && x.prepared(k.gemm_prepare, &prepared);
  const int64_t stride = row_bytes(w.type, w.cols);
  // GEMM: a tile of rows stays in L1 while every token passes over it, so each weight byte comes
  // from memory once per call (a GemmFn kernel also reuses each unpacked block across a few
  // tokens from registers). GEMV (one token) runs the whole range in one dot_rows call, so the
  // kernel's row tiles (and their next-tile prefetch) run back to back; so does a GEMM that
  // tiles itself (it repacks and regroups once per call).
  const bool whole_range = x.tokens() == 1 || (gemm != nullptr && k.gemm_whole_range);
  const int64_t tile_rows = whole_range ? std::max<int64_t>(1, row_end - row_begin)
                                        : std::max<int64_t>(8, kGemmTileBytes / stride / 8 * 8);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += tile_rows) {
    const int64_t r1 = std::min(row_end, r0 + tile_rows);
    if (shared) {
      k.gemm_prepared(w.cols, w.row(r0), stride, r1 - r0, x.token(0), x.token(1) - x.token(0),
                      prepared, x.tokens(), y.data() + r0, w.rows);
      continue;
    }
    if (gemm != nullptr) {
      gemm(w.cols, w.row(r0), stride, r1 - r0, x.token(0), x.token(1) - x.token(0), x.tokens(),
           y.data() + r0, w.rows);
      continue;
    }
    for (int64_t t = 0; t < x.tokens(); ++t) {
      float* yt = y.data() + t * w.rows;
      if (dot_rows != nullptr) {
        dot_rows(w.cols, w.row(r0), stride, r1 - r0, x.token(t), yt + r0);
      } else {
        for (int64_t r = r0; r < r1; ++r) yt[r] = dot(w.cols, w.row(r), x.token(t));
      }
    }
  }
}

void matmul(std::span<const MatmulOutput> outs, std::span<const float> x, int64_t n_tokens,
            PackedActivations& scratch, const Parallel& par, const KernelSet& kernels) {
  if (outs.empty()) return;
  const int64_t cols = outs[0].w.cols;
  for (const MatmulOutput& o : outs) {
    check_matrix(o.w);
    if (o.w.cols != cols) {
      throw MatmulError("matmul: fused outputs must share the input: weight " + shape_of(o.w) +
                        " vs cols=" + std::to_string(cols));
    }
    if (static_cast<int64_t>(o.y.size()) < n_tokens * o.w.rows) {
      throw MatmulError("matmul: output of " + std::to_string(o.y.size()) +
                        " floats is smaller than n_tokens*rows for weight " + shape_of(o.w));
    }
    kernels.matmul(o.w.type);  // throws for types without kernels
  }
  if (n_tokens <= 0) return;

  // One packing per activation type; fused outputs normally share one (mixed types are rare).
  scratch.pack(outs[0].w.type, x, cols, n_tokens, kernels, &par);
  const WeightType act0 = kernels.matmul(outs[0].w.type).act_type;
  std::vector<PackedActivations> extra;  // only for outputs whose act type differs from outs[0]
  std::vector<PackedActivations*> packed(outs.size(), &scratch);
  for (size_t i = 1; i < outs.size(); ++i) {
    const WeightType act = kernels.matmul(outs[i].w.type).act_type;
    if (act == act0) continue;
    for (size_t j = 1; j < i; ++j) {
      if (kernels.matmul(outs[j].w.type).act_type == act) packed[i] = packed[j];
    }
    if (packed[i] != &scratch) continue;
    extra.reserve(outs.size());  // pointers into `extra` must stay valid
    extra.emplace_back().pack(outs[i].w.type, x, cols, n_tokens, kernels, &par);
    packed[i] = &extra.back();
  }

  // GEMMs that regroup their activations (transposed, or by groups of tokens) do it here, once
  // per layout, instead of once in every worker's call (fused outputs share the copy).
  if (n_tokens > 1) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const WeightMatrix& w = outs[i].w;
      const bool x16 = w.layout == WeightLayout::Interleaved16;
      if (x16 && kernels.x16(w.type).few_tokens(n_tokens)) {
        continue;  // the few-token GEMM reads the packed rows as they are
      }
      const GemmPrepareFn prepare =
          x16 ? kernels.x16(w.type).gemm_prepare : kernels.matmul(w.type).gemm_prepare;
      if (prepare != nullptr) packed[i]->prepare(prepare, &par);
    }
  }

  // One parallel region over the rows of every output, split by their bytes. A GEMM over many
  // tokens is bound by its arithmetic, not its weight streams: short pieces there cost nothing
  // and let a worker done early help a slow one.
  const StreamPartition part(outs);
  const auto rows = [&](int, int64_t begin, int64_t end) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const auto [b, e] = part.rows(i, begin, end);
      if (b < e) matmul_rows(outs[i].w, *packed[i], outs[i].y, b, e, kernels);
    }
  };
  if (n_tokens >= kX16FewTokensMax) {
    par.run_chunks_balanced(part.total_units(), part.align(), rows);
  } else {
    par.run_chunks(part.total_units(), part.align(), rows);
  }
}

StreamPartition::StreamPartition(std::span<const WeightMatrix> ws) {
  parts_.reserve(ws.size());
  for (const WeightMatrix& w : ws) add(w);
  finish();
}

StreamPartition::StreamPartition(std::span<const MatmulOutput> outs) {
  parts_.reserve(outs.size());
  for (const MatmulOutput& o : outs) add(o.w);
  finish();
}

void StreamPartition::add(const WeightMatrix& w) {
  Part p;
  p.rows = std::max<int64_t>(w.rows, 0);
  p.blocks = (p.rows + kMatmulRowAlign - 1) / kMatmulRowAlign;
  if (p.rows > 0) {
    const auto [lo, hi] = row_byte_range(w, 0, std::min(p.rows, kMatmulRowAlign));
    p.bytes = std::max<int64_t>(hi - lo, 1);
  }
  parts_.push_back(p);
}

void StreamPartition::finish() {
  int64_t divisor = 0;
  for (const Part& p : parts_) divisor = std::gcd(divisor, p.bytes);
  int64_t cheapest = 0;
  for (Part& p : parts_) {
    p.units = divisor > 0 ? p.bytes / divisor : 0;
    p.first = total_;
    total_ += p.blocks * p.units;
    if (p.units > 0 && (cheapest == 0 || p.units < cheapest)) cheapest = p.units;
  }
  align_ = cheapest > 0 ? cheapest : 1;
}

std::pair<int64_t, int64_t> StreamPartition::rows(size_t i, int64_t b, int64_t e) const noexcept {
  const Part& p = parts_[i];
  const auto [k0, k1] = blocks_starting_in(p.first, p.units, p.blocks, b, e);
  return {k0 * kMatmulRowAlign, std::min(k1 * kMatmulRowAlign, p.rows)};
}

std::pair<int64_t, int64_t> row_byte_range(const WeightMatrix& w, int64_t row_begin,
                                           int64_t row_end) {
  if (row_end <= row_begin) return {0, 0};
  if (w.layout == WeightLayout::Interleaved16) {
    const int64_t group_bytes = x16_group_bytes(w.type, w.cols);
    return {row_begin / kX16Rows * group_bytes, x16_groups(row_end) * group_bytes};
  }
  const int64_t rb = row_bytes(w.type, w.cols);
  return {row_begin * rb, row_end * rb};
}

PrefetchPlan matmul_prefetch_plan(std::span<const WeightMatrix> ws, const KernelSet& kernels) {
  PrefetchPlan plan;
  const StreamPartition part(ws);
  plan.align = part.align();
  plan.total_units = part.total_units();
  for (size_t i = 0; i < ws.size(); ++i) {
    const WeightMatrix& w = ws[i];
    if (plan.n_segments == PrefetchPlan::kMaxSegments) break;
    PrefetchSegment& sg = plan.segments[static_cast<size_t>(plan.n_segments++)];
    sg.data = w.data;
    sg.rows = w.rows;
    sg.block_rows = kMatmulRowAlign;
    sg.block_units = part.block_units(i);
    if (w.layout == WeightLayout::Interleaved16) {
      sg.group_rows = kX16Rows;
      sg.group_bytes = x16_group_bytes(w.type, w.cols);
      sg.streams = kernels.x16(w.type).gemv_streams;
    } else {
      sg.group_rows = 1;
      sg.group_bytes = row_bytes(w.type, w.cols);
      sg.streams = 1;
    }
  }
  return plan;
}

void matmul(const WeightMatrix& w, std::span<const float> x, int64_t n_tokens, std::span<float> y,
            PackedActivations& scratch, const Parallel& par, const KernelSet& kernels) {
  const MatmulOutput out{w, y};
  matmul(std::span<const MatmulOutput>(&out, 1), x, n_tokens, scratch, par, kernels);
}

}  // namespace pacer::ops
