#pragma once
// A weight matrix as the loader binds it and the kernels read it: a non-owning view over GGUF
// bytes. In pacer_ops_types (no kernels) so the loader can bind weights without linking the SIMD
// code, TBB or the dispatch; ops/matmul.h runs matmuls over it.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "ops/types.h"

namespace pacer::ops {

// A shape or type the matmul and quantization entry points cannot take (the message names it).
class MatmulError : public std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// How a matrix's bytes are laid out: as in the file (rows one after another), or Q4_0/Q8_0
// repacked at load with 16 rows interleaved for decode (see InterleavedMatrix in ops/matmul.h).
enum class WeightLayout : uint8_t { RowMajor, Interleaved16 };

// Non-owning view of a weight matrix: as stored in the file (typically the mmap), or a repacked
// copy (layout Interleaved16, data owned by an InterleavedMatrix).
struct WeightMatrix {
  WeightType type = WeightType::F32;
  const std::byte* data = nullptr;  // RowMajor: rows * row_bytes(type, cols) bytes
  int64_t rows = 0;                 // output features (GGUF ne[1])
  int64_t cols = 0;                 // input features (GGUF ne[0])
  WeightLayout layout = WeightLayout::RowMajor;
  // Bytes a decode token streams: the type's bytes per row times rows, whatever the layout.
  int64_t bytes() const noexcept { return rows * row_bytes(type, cols); }
  // RowMajor only: the start of row r.
  const std::byte* row(int64_t r) const noexcept { return data + r * row_bytes(type, cols); }
};

}  // namespace pacer::ops
