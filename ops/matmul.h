#pragma once
// GEMV (decode: one token) and GEMM (prefill: many tokens) over GGUF weight matrices.
//
// Decode streams every weight byte once per token, so these calls are where the time goes.
// Quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q6_K) are dotted in integers
// against activations quantized once per call (Q8_0 blocks for the 32-element types, Q8_K for the
// K-quants); F16/BF16 weights convert in registers against fp32 activations; F32 is a plain fp32
// dot.
//
// Shapes follow GGUF: a weight of ne = [cols, rows] is `rows` rows of `cols` elements each, and
// y[r] = sum_c W[r][c] * x[c]. cols must be a multiple of the type's block size (MatmulError
// otherwise, naming the shape).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "ops/isa.h"
#include "ops/parallel.h"
#include "ops/quantize.h"
#include "ops/types.h"
#include "ops/weight_matrix.h"

namespace pacer::ops {

class KernelSet;  // kernel_set.h: the kernels a call runs, resolved once per session

// An owned copy of a row-major matrix of a type with a 16-row layout (x16_supported(): every
// matmul weight type but F32) with 16 rows interleaved (ops/interleaved.h): decode GEMVs on it do
// 2-4x less work per byte on AVX-512 VNNI, where the row-major GEMVs cannot quite keep up with
// memory, and the F16/BF16 GEMV reads every shape at the same speed
// (interleaved_float_avx512.cpp, interleaved_float_avx2.cpp). Prefill GEMMs (VNNI, AMX for
// Q4_0/Q8_0, fp32 FMAs or vdpbf16ps for F16/BF16, 4-token passes for the other quantized types)
// read it as well. Built once at model load.
class InterleavedMatrix {
 public:
  // Whether repacking w pays on `isa`: row-major, and any quantized type of x16_supported() on an
  // AVX-512 VNNI machine; F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS or Q3_K on an AVX-512
  // one without VNNI; every type of x16_supported() on AVX2 (elsewhere the interleaved
  // matrix would run the scalar reference). This machine's CPU, or `cpu` (the rule alone, for any
  // CPU's features).
  static bool pays(const WeightMatrix& w, Isa isa);
  static bool pays(const WeightMatrix& w, Isa isa, const CpuFeatures& cpu);
  // Repacks w (a type above, RowMajor; MatmulError otherwise), in parallel over
  // row groups.
  static InterleavedMatrix repack(const WeightMatrix& w);

  const WeightMatrix& view() const noexcept { return view_; }
  int64_t storage_bytes() const noexcept { return storage_bytes_; }

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept;
  };
  std::unique_ptr<std::byte, Free> data_;
  WeightMatrix view_;
  int64_t storage_bytes_ = 0;
};

// Throws MatmulError unless cols is a positive multiple of the type's block and the data is set.
void check_matrix(const WeightMatrix& w);

// Regroups nt packed activation rows (token t at act + t * act_stride) into the layout one GEMM
// reads, at dst; returns the bytes (dst null: only the bytes). Writes share `part` of `parts`
// (0 <= part < parts) of that copy: for one (n, nt, parts) the shares are disjoint and together
// make the whole copy, so several workers can write them at once (parts = 1: the whole copy).
// Each layout splits along what it keeps contiguous (columns, blocks or tokens; static_chunk of
// them). See type_traits.h.
using GemmPrepareFn = int64_t (*)(int64_t n, const std::byte* act, int64_t act_stride, int64_t nt,
                                  std::byte* dst, int64_t part, int64_t parts);

// Activations packed for one weight type: quantized blocks, or the floats themselves. Owns its
// buffers; reuse one object across calls so decode allocates nothing (and prefill only grows
// them).
class PackedActivations {
 public:
  // x: (n_tokens, cols) row-major fp32. Quantizes for `wtype`'s activation type with `kernels`'
  // quantizer. With `par`, a prompt of kParallelPackMinTokens or more is packed by its workers,
  // tokens split between them (matmul() passes its own: on one thread the packing of 64 tokens
  // took 60-320 us per matmul, time every other worker spent waiting).
  void pack(WeightType wtype, std::span<const float> x, int64_t cols, int64_t n_tokens,
            const KernelSet& kernels, const Parallel* par = nullptr);
  static constexpr int64_t kParallelPackMinTokens = 16;
  WeightType weight_type() const noexcept { return wtype_; }
  int64_t cols() const noexcept { return cols_; }
  int64_t tokens() const noexcept { return tokens_; }
  // Start of token t's packed row; 64-byte aligned.
  const std::byte* token(int64_t t) const noexcept {
    return buf_.data() + offset_ + t * token_bytes_;
  }
  // Runs `prepare` over the packed tokens once (again only after the next pack()), keeping its
  // copy for prepared(): matmul() does this before its workers start, so they share one copy.
  // With `par`, from kParallelPackMinTokens tokens on, its workers write the copy's shares (on
  // one thread a 64 x 2048 transposition took 40-85 us per matmul, with every other worker
  // waiting: about a tenth of a 2048-column BF16 matmul of 64 tokens on 16 cores).
  void prepare(GemmPrepareFn prepare, const Parallel* par = nullptr);
  // Whether prepare(fn) ran since the last pack(); *data is then its copy (null if it was empty).
  bool prepared(GemmPrepareFn fn, const std::byte** data) const noexcept;

 private:
  WeightType wtype_ = WeightType::F32;
  int64_t cols_ = 0, tokens_ = 0, token_bytes_ = 0;
  int64_t offset_ = 0;  // from buf_.data() to the first 64-byte boundary
  std::vector<std::byte> buf_;
  struct Prepared {
    GemmPrepareFn fn = nullptr;  // null: free (buffers stay allocated for the next call)
    const std::byte* data = nullptr;
    std::vector<std::byte> buf;
  };
  std::vector<Prepared> prepared_;  // one per GEMM layout of this call (fused outputs share)
};

// One output of a fused matmul: several matrices that share the same input (Q,K,V or gate,up)
// run as one parallel region over their concatenated rows.
struct MatmulOutput {
  WeightMatrix w;
  std::span<float> y;  // (n_tokens, w.rows) row-major
};

// y[t][r] for rows [row_begin, row_end) of one matrix and every packed token; single thread.
// This is the unit a worker runs; the parallel entry points below only split rows.
void matmul_rows(const WeightMatrix& w, const PackedActivations& x, std::span<float> y,
                 int64_t row_begin, int64_t row_end, const KernelSet& kernels);

// How matmul() splits the rows of fused matrices (Q, K, V; gate, up) over workers: each
// matrix's rows in blocks of kMatmulRowAlign (one 16-row group of the interleaved layouts), each
// block as many units as it has bytes (over their common divisor), blocks end to end; shares are
// static_chunk(total_units(), align(), workers, c) and a share (or a piece of one) runs the
// blocks that start in it (blocks_starting_in, ops/parallel.h). Why bytes, not rows: a decode
// GEMV's time is its bytes, and fused matrices of different types (Q4_K_M: q and k Q4_K, v Q6_K
// at 1.46x the bytes a row) split by rows gave the worker holding v more: TinyLlama Q4_K_M on 16
// workers, the last share's qkv bytes 1.4x the mean. One type: the same shares as by rows. Shared
// by matmul(), matmul_prefetch_plan() and the NUMA placement (runtime/numa.h), so each worker
// prefetches and first-touches the rows it runs.
class StreamPartition {
 public:
  explicit StreamPartition(std::span<const WeightMatrix> ws);
  explicit StreamPartition(std::span<const MatmulOutput> outs);
  int64_t total_units() const noexcept { return total_; }
  int64_t align() const noexcept { return align_; }  // the cheapest block's units
  int64_t block_units(size_t i) const noexcept { return parts_[i].units; }
  // Matrix i's rows [begin, end) that units [b, e) run: its blocks starting in [b, e).
  std::pair<int64_t, int64_t> rows(size_t i, int64_t b, int64_t e) const noexcept;

 private:
  struct Part {
    int64_t rows = 0, blocks = 0, bytes = 0, units = 0, first = 0;
  };
  void add(const WeightMatrix& w);
  void finish();
  std::vector<Part> parts_;
  int64_t total_ = 0, align_ = 1;
};

// Packs x once and runs every output over `par` (rows of all outputs in a StreamPartition). x:
// (n_tokens, cols) with cols equal to every output's w.cols. n_tokens == 1 is the decode GEMV;
// n_tokens > 1 the prefill GEMM (weights stream once per tile of tokens, not once per token).
void matmul(std::span<const MatmulOutput> outs, std::span<const float> x, int64_t n_tokens,
            PackedActivations& scratch, const Parallel& par, const KernelSet& kernels);

// The bytes a decode matmul (n_tokens == 1) over these matrices, split as matmul() splits them
// (StreamPartition), reads: for Parallel::prefetch_next. At most PrefetchPlan::kMaxSegments
// matrices (the rest are left out).
PrefetchPlan matmul_prefetch_plan(std::span<const WeightMatrix> ws, const KernelSet& kernels);

// Convenience for one matrix.
void matmul(const WeightMatrix& w, std::span<const float> x, int64_t n_tokens, std::span<float> y,
            PackedActivations& scratch, const Parallel& par, const KernelSet& kernels);

}  // namespace pacer::ops
