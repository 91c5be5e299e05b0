// quantize_row / dequantize_row: scalar, byte-identical to ggml's reference quantizers for the
// legacy 32-element block types (IQ4_NL and the K-quants have pacer's own quantizers). The
// loader's `pacer gguf quantize` and the embedding lookup use these.
#include <cstring>
#include <string>

#include "ops/fp16.h"
#include "ops/iq4_nl.h"
#include "ops/iq4_xs.h"
#include "ops/q2_k.h"
#include "ops/q3_k.h"
#include "ops/q4_0.h"
#include "ops/q4_1.h"
#include "ops/q4_k.h"
#include "ops/q5_0.h"
#include "ops/q5_1.h"
#include "ops/q5_k.h"
#include "ops/q6_k.h"
#include "ops/q8_0.h"
#include "ops/q8_k.h"
#include "ops/quantize.h"
#include "ops/weight_matrix.h"

namespace pacer::ops {
namespace {

void check_row_length(const char* what, WeightType t, int64_t n) {
  const int64_t block = type_info(t).block_elems;
  if (n < 0 || n % block != 0) {
    throw MatmulError(std::string(what) + ": " + std::to_string(n) +
                      " elements is not a multiple of " + std::string(type_name(t)) +
                      "'s block of " + std::to_string(block));
  }
}

[[noreturn]] void throw_unsupported(const char* what, WeightType t) {
  throw MatmulError(std::string(what) + ": type " + std::string(type_name(t)) +
                    " not supported yet");
}

}  // namespace

void dequantize_row(WeightType t, const std::byte* src, float* dst, int64_t n) {
  check_row_length("dequantize_row", t, n);
  switch (t) {
    case WeightType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case WeightType::F16:
      for (int64_t i = 0; i < n; ++i) {
        fp16_t h;
        std::memcpy(&h, src + 2 * i, sizeof h);
        dst[i] = fp16_to_fp32(h);
      }
      return;
    case WeightType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        bf16_t h;
        std::memcpy(&h, src + 2 * i, sizeof h);
        dst[i] = bf16_to_fp32(h);
      }
      return;
    case WeightType::Q8_0:
      dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(src), dst, n);
      return;
    case WeightType::Q4_0:
      dequantize_row_q4_0(reinterpret_cast<const BlockQ4_0*>(src), dst, n);
      return;
    case WeightType::Q4_1:
      dequantize_row_q4_1(reinterpret_cast<const BlockQ4_1*>(src), dst, n);
      return;
    case WeightType::Q5_0:
      dequantize_row_q5_0(reinterpret_cast<const BlockQ5_0*>(src), dst, n);
      return;
    case WeightType::Q5_1:
      dequantize_row_q5_1(reinterpret_cast<const BlockQ5_1*>(src), dst, n);
      return;
    case WeightType::IQ4_NL:
      dequantize_row_iq4_nl(reinterpret_cast<const BlockIQ4_NL*>(src), dst, n);
      return;
    // K-quants (q4_k.h, q6_k.h, q8_k.h).
    case WeightType::Q4_K:
      dequantize_row_q4_K(reinterpret_cast<const BlockQ4_K*>(src), dst, n);
      return;
    case WeightType::IQ4_XS:
      dequantize_row_iq4_xs(reinterpret_cast<const BlockIQ4_XS*>(src), dst, n);
      return;
    case WeightType::Q2_K:
      dequantize_row_q2_K(reinterpret_cast<const BlockQ2_K*>(src), dst, n);
      return;
    case WeightType::Q3_K:
      dequantize_row_q3_K(reinterpret_cast<const BlockQ3_K*>(src), dst, n);
      return;
    case WeightType::Q5_K:
      dequantize_row_q5_K(reinterpret_cast<const BlockQ5_K*>(src), dst, n);
      return;
    case WeightType::Q6_K:
      dequantize_row_q6_K(reinterpret_cast<const BlockQ6_K*>(src), dst, n);
      return;
    case WeightType::Q8_K:
      dequantize_row_q8_K(reinterpret_cast<const BlockQ8_K*>(src), dst, n);
      return;
  }
  throw_unsupported("dequantize_row", t);
}

void quantize_row(WeightType t, const float* src, std::byte* dst, int64_t n) {
  check_row_length("quantize_row", t, n);
  switch (t) {
    case WeightType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case WeightType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const fp16_t h = fp32_to_fp16(src[i]);
        std::memcpy(dst + 2 * i, &h, sizeof h);
      }
      return;
    case WeightType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const bf16_t h = fp32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, sizeof h);
      }
      return;
    case WeightType::Q8_0:
      quantize_row_q8_0_ref(src, reinterpret_cast<BlockQ8_0*>(dst), n);
      return;
    case WeightType::Q4_0:
      quantize_row_q4_0_ref(src, reinterpret_cast<BlockQ4_0*>(dst), n);
      return;
    // Q4_1 / Q5_0 / Q5_1 follow ggml's reference rules; IQ4_NL is pacer's own (iq4_nl.h).
    case WeightType::Q4_1:
      quantize_row_q4_1_ref(src, reinterpret_cast<BlockQ4_1*>(dst), n);
      return;
    case WeightType::Q5_0:
      quantize_row_q5_0_ref(src, reinterpret_cast<BlockQ5_0*>(dst), n);
      return;
    case WeightType::Q5_1:
      quantize_row_q5_1_ref(src, reinterpret_cast<BlockQ5_1*>(dst), n);
      return;
    case WeightType::IQ4_NL:
      quantize_row_iq4_nl_ref(src, reinterpret_cast<BlockIQ4_NL*>(dst), n);
      return;
    // K-quants (q4_k.h, q6_k.h, q8_k.h): our own quantizers, not byte-identical to ggml's.
    case WeightType::Q4_K:
      quantize_row_q4_K_ref(src, reinterpret_cast<BlockQ4_K*>(dst), n);
      return;
    case WeightType::IQ4_XS:
      quantize_row_iq4_xs_ref(src, reinterpret_cast<BlockIQ4_XS*>(dst), n);
      return;
    case WeightType::Q2_K:
      quantize_row_q2_K_ref(src, reinterpret_cast<BlockQ2_K*>(dst), n);
      return;
    case WeightType::Q3_K:
      quantize_row_q3_K_ref(src, reinterpret_cast<BlockQ3_K*>(dst), n);
      return;
    case WeightType::Q5_K:
      quantize_row_q5_K_ref(src, reinterpret_cast<BlockQ5_K*>(dst), n);
      return;
    case WeightType::Q6_K:
      quantize_row_q6_K_ref(src, reinterpret_cast<BlockQ6_K*>(dst), n);
      return;
    case WeightType::Q8_K:
      quantize_row_q8_K_ref(src, dst, n);
      return;
  }
  throw_unsupported("quantize_row", t);
}

}  // namespace pacer::ops
