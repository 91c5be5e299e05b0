#pragma once
// Shared helpers of the tests of the second K-quant set (Q5_K, Q3_K, Q2_K, IQ4_XS): each block
// layout decoded a second time straight from the bytes at ggml's field offsets, independently of
// ops/ (no block structs, no ops/ decoders), and random valid blocks.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/fp16.h"
#include "ops/q8_k.h"
#include "ops/types.h"

namespace pacer::ops::testing {

// The new weight types, in the order they were added (each one's kernels, quantizer and matmul
// tests iterate over this list).
inline std::vector<WeightType> kquant2_types() {
  return {WeightType::Q5_K, WeightType::Q3_K, WeightType::Q2_K, WeightType::IQ4_XS};
}

// ggml's kvalues_iq4nl: the 16 IQ4_NL / IQ4_XS levels.
constexpr int kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                1,    13,   25,  38,  53,  69,  89,  113};

inline double fp16_at(const uint8_t* p) {
  fp16_t h;
  std::memcpy(&h, p, sizeof h);
  return fp16_to_fp32(h);
}

// One decoded element e of a block: w = scale_part - offset, where the two parts are what the
// kernels sum separately in integers (Q5_K, Q2_K: d sc q and dmin m; Q3_K with q + 4 in [0, 7]:
// d sc (q + 4) and 4 d sc; IQ4_XS: d sc level and 0). Also the integer fields, for bounds.
struct Decoded {
  double value, scale_part, offset;
  int q;      // the quant as the format defines it (Q3_K: in [-4, 3]; IQ4_XS: the level index)
  int scale;  // the sub-block scale code as used (Q3_K, IQ4_XS: already minus 32)
  int min;    // Q5_K, Q2_K: the min code; else 0
  double d, dmin;
};

// Q5_K (176 bytes): d @0, dmin @2, scales[12] @4 (the Q4_K 6-bit packing), qh[32] @16,
// qs[128] @48.
inline Decoded decode_q5_K(const uint8_t* b, int e) {
  const uint8_t* s = b + 4;
  const int j = e / 32, l = e % 32;
  int sc, m;
  if (j < 4) {
    sc = s[j] % 64, m = s[j + 4] % 64;
  } else {
    sc = s[j + 4] % 16 + 16 * (s[j - 4] / 64), m = s[j + 4] / 16 + 16 * (s[j] / 64);
  }
  const uint8_t byte = b[48 + 32 * (e / 64) + l];
  const int q = ((e % 64) < 32 ? byte % 16 : byte / 16) + 16 * ((b[16 + l] >> j) % 2);
  Decoded out;
  out.d = fp16_at(b), out.dmin = fp16_at(b + 2);
  out.q = q, out.scale = sc, out.min = m;
  out.scale_part = out.d * sc * q, out.offset = out.dmin * m;
  out.value = out.scale_part - out.offset;
  return out;
}

// Q3_K (110 bytes): hmask[32] @0, qs[64] @32, scales[12] @96, d @108. Group g = e/16 has the
// 6-bit scale (low 4 bits: nibble g%8 of bytes 0-7 -- low nibbles for g < 8; top 2 bits: bits
// 2(g/4), +1 of byte 8 + g%4) minus 32. Element e: half h = e/128, run r = (e%128)/32, l = e%32;
// low 2 bits are bits 2r, 2r+1 of qs[32h + l], and q = low - 4 + 4 * (bit e/32 of hmask[l]).
inline Decoded decode_q3_K(const uint8_t* b, int e) {
  const uint8_t* s = b + 96;
  const int g = e / 16, h = e / 128, r = (e % 128) / 32, l = e % 32;
  const int low4 = g < 8 ? s[g] % 16 : s[g - 8] / 16;
  const int sc = low4 + 16 * ((s[8 + g % 4] >> (2 * (g / 4))) % 4) - 32;
  const int q = (b[32 + 32 * h + l] >> (2 * r)) % 4 - 4 + 4 * ((b[l] >> (e / 32)) % 2);
  Decoded out;
  out.d = fp16_at(b + 108), out.dmin = 0;
  out.q = q, out.scale = sc, out.min = 0;
  out.scale_part = out.d * sc * (q + 4), out.offset = 4 * out.d * sc;
  out.value = out.d * sc * q;
  return out;
}

// Q2_K (84 bytes): scales[16] @0 (group g = e/16: scale = low nibble, min = high nibble),
// qs[64] @16 (q = bits 2r, 2r+1 of qs[32h + l], as Q3_K's low bits), d @80, dmin @82.
inline Decoded decode_q2_K(const uint8_t* b, int e) {
  const int g = e / 16, h = e / 128, r = (e % 128) / 32, l = e % 32;
  const int sc = b[g] % 16, m = b[g] / 16;
  const int q = (b[16 + 32 * h + l] >> (2 * r)) % 4;
  Decoded out;
  out.d = fp16_at(b + 80), out.dmin = fp16_at(b + 82);
  out.q = q, out.scale = sc, out.min = m;
  out.scale_part = out.d * sc * q, out.offset = out.dmin * m;
  out.value = out.scale_part - out.offset;
  return out;
}

// IQ4_XS (136 bytes): d @0, scales_h (uint16) @2, scales_l[4] @4, qs[128] @8. Sub-block j = e/32
// has scale (nibble j%2 of scales_l[j/2]) + 16 * (bits 2j, 2j+1 of scales_h) - 32; element e is
// level kIq4Levels[nibble] of qs[16j + e%16], low nibble for e%32 < 16, high nibble otherwise.
inline Decoded decode_iq4_xs(const uint8_t* b, int e) {
  const int j = e / 32;
  const int scales_h = b[2] + 256 * b[3];
  const int sc = (b[4 + j / 2] >> (4 * (j % 2))) % 16 + 16 * ((scales_h >> (2 * j)) % 4) - 32;
  const uint8_t byte = b[8 + 16 * j + e % 16];
  const int k = (e % 32) < 16 ? byte % 16 : byte / 16;
  Decoded out;
  out.d = fp16_at(b), out.dmin = 0;
  out.q = k, out.scale = sc, out.min = 0;
  out.scale_part = out.d * sc * kIq4Levels[k], out.offset = 0;
  out.value = out.scale_part;
  return out;
}

// Element e (0..255) of the block at `block`, of type t.
inline Decoded decode(WeightType t, const std::byte* block, int e) {
  const auto* b = reinterpret_cast<const uint8_t*>(block);
  switch (t) {
    case WeightType::Q5_K:
      return decode_q5_K(b, e);
    case WeightType::Q3_K:
      return decode_q3_K(b, e);
    case WeightType::Q2_K:
      return decode_q2_K(b, e);
    default:
      return decode_iq4_xs(b, e);
  }
}

// Offsets of the fp16 factors of each type's block (d, and dmin where it has one; -1 if not).
inline void factor_offsets(WeightType t, int* d_at, int* dmin_at) {
  switch (t) {
    case WeightType::Q5_K:
      *d_at = 0, *dmin_at = 2;
      return;
    case WeightType::Q3_K:
      *d_at = 108, *dmin_at = -1;
      return;
    case WeightType::Q2_K:
      *d_at = 80, *dmin_at = 82;
      return;
    default:
      *d_at = 0, *dmin_at = -1;
      return;
  }
}

// n/256 blocks of uniformly random bytes (every scale / min / quant bit pattern), except the fp16
// factors: positive in [2^-14, 2^-10).
inline std::vector<std::byte> random_kquant2_row(WeightType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t bb = type_info(t).block_bytes;
  std::vector<std::byte> out(static_cast<size_t>(n / kQK_K * bb));
  for (std::byte& v : out) v = static_cast<std::byte>(rng());
  int d_at, dmin_at;
  factor_offsets(t, &d_at, &dmin_at);
  std::uniform_real_distribution<float> f(0x1p-14f, 0x1p-10f);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    for (int at : {d_at, dmin_at}) {
      if (at < 0) continue;
      const fp16_t h = fp32_to_fp16(f(rng));
      std::memcpy(out.data() + b * bb + at, &h, sizeof h);
    }
  }
  return out;
}

// sum_i (|scale part| + |offset|) |x_i| over one row: the magnitude the kernels' float sums of
// the two integer parts are rounded against.
inline double abs_part_sum(WeightType t, const std::byte* row, int64_t n,
                           const std::vector<double>& xs) {
  const int64_t bb = type_info(t).block_bytes;
  double sum = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    for (int e = 0; e < kQK_K; ++e) {
      const Decoded v = decode(t, row + b * bb, e);
      sum += (std::abs(v.scale_part) + std::abs(v.offset)) *
             std::abs(xs[static_cast<size_t>(b * kQK_K + e)]);
    }
  }
  return sum;
}

}  // namespace pacer::ops::testing
