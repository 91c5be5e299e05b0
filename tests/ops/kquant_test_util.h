#pragma once
// Shared helpers of the K-quant tests: the block layouts decoded a second time, independently of
// ops/ (from the byte layout in q4_k.h / q6_k.h), random valid blocks, and Q8_K packing.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/fp16.h"
#include "ops/q4_k.h"
#include "ops/q6_k.h"
#include "ops/q8_k.h"
#include "ops/types.h"

namespace pacer::ops::testing {

// Sub-block j's 6-bit scale and min of a Q4_K block: the j < 4 values are the low 6 bits of
// bytes j and j+4; for j >= 4 the low 4 bits are the nibbles of byte j+4 and the top 2 bits the
// top bits of bytes j-4 (scale) and j (min).
inline void q4_K_scale_min(const BlockQ4_K& b, int j, int* sc, int* m) {
  const uint8_t* s = b.scales;
  if (j < 4) {
    *sc = s[j] % 64;
    *m = s[j + 4] % 64;
  } else {
    *sc = s[j + 4] % 16 + 16 * (s[j - 4] / 64);
    *m = s[j + 4] / 16 + 16 * (s[j] / 64);
  }
}

// q in [0, 15] of element e of a Q4_K block: chunk e/64, byte e%32 of it, low nibble for the
// first 32 elements of the chunk and high nibble for the next 32.
inline int q4_K_quant(const BlockQ4_K& b, int e) {
  const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
  return (e % 64) < 32 ? byte % 16 : byte / 16;
}

// q in [0, 63] of element e of a Q6_K block (see q6_k.h): half e/128; within it, run r = (e%128)/32
// of 32 elements takes its low 4 bits from ql byte 64h + 32*(r%2) + e%32 (low nibble for r < 2)
// and bits 4-5 from bits 2r, 2r+1 of qh byte 32h + e%32.
inline int q6_K_quant(const BlockQ6_K& b, int e) {
  const int h = e / 128, r = (e % 128) / 32, l = e % 32;
  const uint8_t low_byte = b.ql[64 * h + 32 * (r % 2) + l];
  const int low = r < 2 ? low_byte % 16 : low_byte / 16;
  const int high = (b.qh[32 * h + l] >> (2 * r)) % 4;
  return low + 16 * high;
}

// A positive fp16 value in [lo, hi) drawn from rng (a valid block factor).
inline fp16_t random_fp16(std::mt19937& rng, float lo, float hi) {
  return fp32_to_fp16(std::uniform_real_distribution<float>(lo, hi)(rng));
}

// n/256 Q4_K blocks of uniformly random bytes, except d and dmin: positive fp16 in [2^-12, 2^-8).
inline std::vector<std::byte> random_q4_K_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<BlockQ4_K> blocks(static_cast<size_t>(n / kQK_K));
  for (BlockQ4_K& b : blocks) {
    for (uint8_t& v : b.scales) v = static_cast<uint8_t>(rng());
    for (uint8_t& v : b.qs) v = static_cast<uint8_t>(rng());
    b.d = random_fp16(rng, 0x1p-12f, 0x1p-8f);
    b.dmin = random_fp16(rng, 0x1p-12f, 0x1p-8f);
  }
  std::vector<std::byte> out(blocks.size() * sizeof(BlockQ4_K));
  std::memcpy(out.data(), blocks.data(), out.size());
  return out;
}

// n/256 Q6_K blocks of uniformly random bytes (scales anywhere in [-128, 127]), except d: fp16
// in [2^-14, 2^-10).
inline std::vector<std::byte> random_q6_K_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<BlockQ6_K> blocks(static_cast<size_t>(n / kQK_K));
  for (BlockQ6_K& b : blocks) {
    for (uint8_t& v : b.ql) v = static_cast<uint8_t>(rng());
    for (uint8_t& v : b.qh) v = static_cast<uint8_t>(rng());
    for (int8_t& v : b.scales) v = static_cast<int8_t>(rng());
    b.d = random_fp16(rng, 0x1p-14f, 0x1p-10f);
  }
  std::vector<std::byte> out(blocks.size() * sizeof(BlockQ6_K));
  std::memcpy(out.data(), blocks.data(), out.size());
  return out;
}

// x packed into Q8_K blocks by the reference quantizer.
inline std::vector<std::byte> pack_q8_K(const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<std::byte> out(static_cast<size_t>(row_bytes(WeightType::Q8_K, n)));
  quantize_row_q8_K_ref(x.data(), out.data(), n);
  return out;
}

// The exact values d * q a Q8_K row stands for.
inline std::vector<double> q8_K_values(const std::vector<std::byte>& act) {
  std::vector<double> out;
  for (size_t off = 0; off + sizeof(BlockQ8_K) <= act.size(); off += sizeof(BlockQ8_K)) {
    BlockQ8_K b;
    std::memcpy(&b, act.data() + off, sizeof b);
    for (int j = 0; j < kQK_K; ++j) out.push_back(double(b.d) * b.qs[j]);
  }
  return out;
}

}  // namespace pacer::ops::testing
