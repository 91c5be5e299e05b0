#pragma once
// Weight and activation element types, numbered as GGUF/ggml number them (the numbers are part of
// the file format). Block sizes here are the single source the loader checks tensor extents with;
// each per-type header (q8_0.h, q4_0.h, q4_1.h, q5_0.h, q5_1.h, iq4_nl.h, q4_k.h, q5_k.h,
// q6_k.h, ...) static_asserts its block struct against them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pacer::ops {

enum class WeightType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q2_K = 10,
  Q3_K = 11,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,  // activation-only type (K-quant dot products); never a weight in pacer's files
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

struct TypeInfo {
  std::string_view name;  // as ggml/llama.cpp print it: "f32", "q4_0", "q4_K", ...
  int64_t block_elems;    // elements per block (1 for plain floats)
  int64_t block_bytes;    // bytes per block
};

// Returns nullopt for an id pacer does not support (the loader turns that into an error naming
// the tensor).
std::optional<WeightType> weight_type_from_id(uint32_t id) noexcept;
const TypeInfo& type_info(WeightType t) noexcept;
inline std::string_view type_name(WeightType t) noexcept {
  return type_info(t).name;
}
// Parses every name of type_info except q8_k: "f32", "f16", "bf16", "q8_0", "q4_0",
// "q4_1", "q5_0", "q5_1", "iq4_nl", "q4_k", "q5_k", "q6_k", ... (case-insensitive).
std::optional<WeightType> weight_type_from_name(std::string_view name) noexcept;
// Every weight type pacer reads, by name ("f32, f16, bf16, ..."), for error messages.
std::string weight_type_names();

// Bytes of a row of n elements; n must be a multiple of block_elems (checked by callers that take
// untrusted shapes: the loader and the kernels' shape checks).
inline int64_t row_bytes(WeightType t, int64_t n) noexcept {
  const TypeInfo& ti = type_info(t);
  return n / ti.block_elems * ti.block_bytes;
}

}  // namespace pacer::ops
