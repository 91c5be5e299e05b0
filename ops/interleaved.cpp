// The x16 layouts (interleaved.h): repack from row-major Q4_0/Q8_0/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K/
// F16/BF16, the
// scalar reference GEMVs and the InterleavedMatrix owner (matmul.h).
#include "ops/interleaved.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "ops/bf16.h"
#include "ops/f16.h"
#include "ops/gemv_streams.h"
#include "ops/iq4_nl.h"
#include "ops/iq4_xs.h"
#include "ops/isa.h"
#include "ops/matmul.h"
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
#include "ops/tbb_for.h"

namespace pacer::ops {
namespace {

// Byte offsets of row i's fields in a Q4_K or Q5_K super-block of 16 rows (interleaved.h).
constexpr int64_t q4k_d_at(int64_t i) {
  return 2 * i;
}
constexpr int64_t q4k_dmin_at(int64_t i) {
  return 32 + 2 * i;
}
constexpr int64_t q4k_scale_at(int64_t i, int byte) {  // byte of scales[12]
  return 64 + 64 * (byte / 4) + 4 * i + byte % 4;
}
constexpr int64_t q4k_qs_at(int64_t i, int byte) {  // byte of qs[128]
  return 256 + 512 * (byte / 32) + 64 * (byte % 32 / 4) + 4 * i + byte % 4;
}
// Q5_K: chunk c's quad k (quant vectors 4k..4k+3) starts with its fifth-bit vector.
constexpr int64_t q5k_quad_at(int c, int k) {
  return 256 + 640 * c + 320 * k;
}
constexpr int64_t q5k_qs_at(int64_t i, int byte) {  // byte of qs[128]
  const int c = byte / 32, m = byte % 32 / 4;
  return q5k_quad_at(c, m / 4) + 64 + 64 * (m % 4) + 4 * i + byte % 4;
}
// The fifth bits of qs bytes 32c + 16k + 4j + b (j = 0..3) of row i: bits 2j (low nibble,
// qh[16k + 4j + b] bit 2c) and 2j + 1 (high nibble, bit 2c + 1) of this byte.
constexpr int64_t q5k_fifth_bits_at(int64_t i, int c, int k, int b) {
  return q5k_quad_at(c, k) + 4 * i + b;
}

// Row i of one Q4_K or Q5_K super-block of 16 rows: d, dmin and the scale bytes.
template <class Block>
void get_affine_k_header(const std::byte* sb, int64_t i, Block* blk) {
  std::memcpy(&blk->d, sb + q4k_d_at(i), 2);
  std::memcpy(&blk->dmin, sb + q4k_dmin_at(i), 2);
  for (int k = 0; k < 12; ++k) blk->scales[k] = static_cast<uint8_t>(sb[q4k_scale_at(i, k)]);
}

// Row i of one Q4_K super-block of 16 rows, as the file's block (the inverse of the repack).
BlockQ4_K q4k_gather(const std::byte* sb, int64_t i) {
  BlockQ4_K blk;
  get_affine_k_header(sb, i, &blk);
  for (int k = 0; k < 128; ++k) blk.qs[k] = static_cast<uint8_t>(sb[q4k_qs_at(i, k)]);
  return blk;
}

// Row i of one Q5_K super-block of 16 rows, as the file's block.
BlockQ5_K q5k_gather(const std::byte* sb, int64_t i) {
  BlockQ5_K blk;
  get_affine_k_header(sb, i, &blk);
  for (int k = 0; k < 128; ++k) blk.qs[k] = static_cast<uint8_t>(sb[q5k_qs_at(i, k)]);
  std::memset(blk.qh, 0, sizeof blk.qh);
  for (int c = 0; c < 4; ++c) {
    for (int quad = 0; quad < 2; ++quad) {
      for (int byte = 0; byte < 4; ++byte) {
        const auto bits = static_cast<unsigned>(sb[q5k_fifth_bits_at(i, c, quad, byte)]);
        for (int j = 0; j < 4; ++j) {
          const unsigned lo = bits >> (2 * j) & 1, hi = bits >> (2 * j + 1) & 1;
          blk.qh[16 * quad + 4 * j + byte] |=
              static_cast<uint8_t>(lo << (2 * c) | hi << (2 * c + 1));
        }
      }
    }
  }
  return blk;
}

// put(block, i, b) for super-block b of each real row i of group g (padding rows stay zero: d,
// and dmin, = 0, so they dot to 0).
template <class Block, class Put>
void for_each_group_block(WeightType t, const std::byte* src, int64_t rows, int64_t cols, int64_t g,
                          Put put) {
  const int64_t stride = row_bytes(t, cols);
  for (int64_t i = 0; i < kX16Rows; ++i) {
    const int64_t r = g * kX16Rows + i;
    if (r >= rows) break;
    const auto* row = reinterpret_cast<const Block*>(src + r * stride);
    for (int64_t b = 0; b < cols / 256; ++b) put(row[b], i, b);
  }
}

// d, dmin and the scale bytes of row i of a Q4_K or Q5_K super-block of 16 rows.
template <class Block>
void put_affine_k_header(const Block& blk, int64_t i, std::byte* sb) {
  std::memcpy(sb + q4k_d_at(i), &blk.d, 2);
  std::memcpy(sb + q4k_dmin_at(i), &blk.dmin, 2);
  for (int k = 0; k < 12; k += 4) std::memcpy(sb + q4k_scale_at(i, k), blk.scales + k, 4);
}

void q4k_repack_group(const std::byte* src, int64_t rows, int64_t cols, int64_t g, std::byte* dst) {
  for_each_group_block<BlockQ4_K>(WeightType::Q4_K, src, rows, cols, g,
                                  [&](const BlockQ4_K& blk, int64_t i, int64_t b) {
                                    std::byte* sb = dst + b * kX16Q4KBlockBytes;
                                    put_affine_k_header(blk, i, sb);
                                    for (int k = 0; k < 128; k += 4)
                                      std::memcpy(sb + q4k_qs_at(i, k), blk.qs + k, 4);
                                  });
}

void q5k_repack_group(const std::byte* src, int64_t rows, int64_t cols, int64_t g, std::byte* dst) {
  for_each_group_block<BlockQ5_K>(
      WeightType::Q5_K, src, rows, cols, g, [&](const BlockQ5_K& blk, int64_t i, int64_t b) {
        std::byte* sb = dst + b * kX16Q5KBlockBytes;
        put_affine_k_header(blk, i, sb);
        for (int k = 0; k < 128; k += 4) std::memcpy(sb + q5k_qs_at(i, k), blk.qs + k, 4);
        for (int c = 0; c < 4; ++c) {
          for (int quad = 0; quad < 2; ++quad) {
            for (int byte = 0; byte < 4; ++byte) {
              unsigned bits = 0;
              for (int j = 0; j < 4; ++j) {
                const unsigned qh = blk.qh[16 * quad + 4 * j + byte];
                bits |= (qh >> (2 * c) & 1) << (2 * j) | (qh >> (2 * c + 1) & 1) << (2 * j + 1);
              }
              sb[q5k_fifth_bits_at(i, c, quad, byte)] = static_cast<std::byte>(bits);
            }
          }
        }
      });
}

// Byte offsets of row i's fields in a Q6_K pair of super-blocks of 16 rows (interleaved.h),
// super-block b % 2 of the pair.
constexpr int64_t q6k_d_at(int64_t b, int64_t i) {
  return 32 * (b % 2) + 2 * i;
}
constexpr int64_t q6k_block_at(int64_t b) {
  return 64 + kX16Q6KBlockBytes * (b % 2);
}
constexpr int64_t q6k_scale_at(int64_t b, int64_t i, int g) {  // scales[g]
  return q6k_block_at(b) + 16 * g + i;
}
// Byte `byte` (0..3) of row i's dword in vector j (0, 1, 2: A, B, C) of triple 8h + v.
constexpr int64_t q6k_triple_at(int64_t b, int64_t i, int h, int v, int j, int byte) {
  return q6k_block_at(b) + 256 + 192 * (8 * h + v) + 64 * j + 4 * i + byte;
}

// The 6-bit quants q[k] (0..63) of elements 128h + 32k + l (k = 0..3) of a Q6_K block, read as
// q6_k.h describes ql and qh.
void q6k_quads(const BlockQ6_K& blk, int h, int l, int q[4]) {
  const int lo0 = blk.ql[64 * h + l], lo1 = blk.ql[64 * h + 32 + l], hi = blk.qh[32 * h + l];
  q[0] = (lo0 & 15) | (hi & 3) << 4;
  q[1] = (lo1 & 15) | (hi >> 2 & 3) << 4;
  q[2] = (lo0 >> 4) | (hi >> 4 & 3) << 4;
  q[3] = (lo1 >> 4) | (hi >> 6 & 3) << 4;
}
// The inverse: q[k] back into ql and qh.
void q6k_put_quads(const int q[4], int h, int l, BlockQ6_K& blk) {
  blk.ql[64 * h + l] = static_cast<uint8_t>((q[0] & 15) | (q[2] & 15) << 4);
  blk.ql[64 * h + 32 + l] = static_cast<uint8_t>((q[1] & 15) | (q[3] & 15) << 4);
  blk.qh[32 * h + l] =
      static_cast<uint8_t>(q[0] >> 4 | (q[1] >> 4) << 2 | (q[2] >> 4) << 4 | (q[3] >> 4) << 6);
}

BlockQ6_K q6k_gather(const std::byte* pair, int64_t b, int64_t i) {
  BlockQ6_K blk;
  std::memcpy(&blk.d, pair + q6k_d_at(b, i), 2);
  for (int g = 0; g < 16; ++g) std::memcpy(&blk.scales[g], pair + q6k_scale_at(b, i, g), 1);
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      int abc[3];
      for (int j = 0; j < 3; ++j) {
        abc[j] = static_cast<int>(pair[q6k_triple_at(b, i, h, l / 4, j, l % 4)]);
      }
      int q[4];
      for (int k = 0; k < 3; ++k) q[k] = abc[k] & 63;
      q[3] = (abc[0] >> 6) | (abc[1] >> 6) << 2 | (abc[2] >> 6) << 4;
      q6k_put_quads(q, h, l, blk);
    }
  }
  return blk;
}

void q6k_repack_group(const std::byte* src, int64_t rows, int64_t cols, int64_t g, std::byte* dst) {
  for_each_group_block<BlockQ6_K>(
      WeightType::Q6_K, src, rows, cols, g, [&](const BlockQ6_K& blk, int64_t i, int64_t b) {
        std::byte* pair = dst + b / 2 * kX16Q6KPairBytes;
        std::memcpy(pair + q6k_d_at(b, i), &blk.d, 2);
        for (int g = 0; g < 16; ++g) {
          pair[q6k_scale_at(b, i, g)] = static_cast<std::byte>(blk.scales[g]);
        }
        for (int h = 0; h < 2; ++h) {
          for (int l = 0; l < 32; ++l) {
            int q[4];
            q6k_quads(blk, h, l, q);
            for (int j = 0; j < 3; ++j) {  // q_j, and bits 2j, 2j + 1 of q_3 on top
              pair[q6k_triple_at(b, i, h, l / 4, j, l % 4)] =
                  static_cast<std::byte>(q[j] | (q[3] >> (2 * j) & 3) << 6);
            }
          }
        }
      });
}

// Byte offsets of row i's fields in a Q3_K pair of super-blocks of 16 rows (interleaved.h),
// super-block b % 2 of the pair.
constexpr int64_t q3k_d_at(int64_t b, int64_t i) {
  return 32 * (b % 2) + 2 * i;
}
constexpr int64_t q3k_block_at(int64_t b) {
  return 64 + kX16Q3KBlockBytes * (b % 2);
}
constexpr int64_t q3k_scale_at(int64_t b, int64_t i, int k) {  // scales[k], k = 0..11
  return q3k_block_at(b) + 64 * (k / 4) + 4 * i + k % 4;
}
// Byte `byte` (0..3) of row i's dword in vector j (N0, N1, N2) of triple 4h + v.
constexpr int64_t q3k_triple_at(int64_t b, int64_t i, int h, int v, int j, int byte) {
  return q3k_block_at(b) + 192 + 192 * (4 * h + v) + 64 * j + 4 * i + byte;
}
// The layout's byte of vector j from u[s], the unsigned quants (0..7) of sets s = 0..7.
constexpr uint8_t q3k_triple_byte(const int u[8], int j) {
  return static_cast<uint8_t>(u[2 * j] | (u[6] >> j & 1) << 3 | u[2 * j + 1] << 4 |
                              (u[7] >> j & 1) << 7);
}
// u = q + 4 of element e of a Q3_K block, read as q3_k.h describes qs and hmask; and back.
int q3k_quant(const BlockQ3_K& blk, int e) {
  const int low = blk.qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3;
  return low | (blk.hmask[e % 32] >> (e / 32) & 1) << 2;
}
void q3k_put_quant(int u, int e, BlockQ3_K& blk) {
  blk.qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((u & 3) << (2 * (e % 128 / 32)));
  blk.hmask[e % 32] |= static_cast<uint8_t>((u >> 2 & 1) << (e / 32));
}

BlockQ3_K q3k_gather(const std::byte* pair, int64_t b, int64_t i) {
  BlockQ3_K blk{};
  std::memcpy(&blk.d, pair + q3k_d_at(b, i), 2);
  for (int k = 0; k < 12; ++k) std::memcpy(&blk.scales[k], pair + q3k_scale_at(b, i, k), 1);
  for (int h = 0; h < 2; ++h) {
    for (int v = 0; v < 4; ++v) {
      for (int byte = 0; byte < 4; ++byte) {
        int n[3];
        for (int j = 0; j < 3; ++j) {
          n[j] = static_cast<int>(pair[q3k_triple_at(b, i, h, v, j, byte)]);
        }
        for (int s = 0; s < 8; ++s) {
          int u;
          if (s < 6) {
            u = n[s / 2] >> (4 * (s % 2)) & 7;
          } else {  // bit 3 (set 6) or 7 (set 7) of N0, N1, N2
            const int bit = s == 6 ? 3 : 7;
            u = (n[0] >> bit & 1) | (n[1] >> bit & 1) << 1 | (n[2] >> bit & 1) << 2;
          }
          q3k_put_quant(u, 128 * h + 16 * s + 4 * v + byte, blk);
        }
      }
    }
  }
  return blk;
}

void q3k_repack_group(const std::byte* src, int64_t rows, int64_t cols, int64_t g, std::byte* dst) {
  for_each_group_block<BlockQ3_K>(
      WeightType::Q3_K, src, rows, cols, g, [&](const BlockQ3_K& blk, int64_t i, int64_t b) {
        std::byte* pair = dst + b / 2 * kX16Q3KPairBytes;
        std::memcpy(pair + q3k_d_at(b, i), &blk.d, 2);
        for (int k = 0; k < 12; ++k) {
          pair[q3k_scale_at(b, i, k)] = static_cast<std::byte>(blk.scales[k]);
        }
        for (int h = 0; h < 2; ++h) {
          for (int v = 0; v < 4; ++v) {
            for (int byte = 0; byte < 4; ++byte) {
              int u[8];
              for (int s = 0; s < 8; ++s) u[s] = q3k_quant(blk, 128 * h + 16 * s + 4 * v + byte);
              for (int j = 0; j < 3; ++j) {
                pair[q3k_triple_at(b, i, h, v, j, byte)] =
                    static_cast<std::byte>(q3k_triple_byte(u, j));
              }
            }
          }
        }
      });
}

// Q2_K super-block of 16 rows at sb: byte `byte` of row i's dword in quant vector 4k + v.
constexpr int64_t q2k_quants_at(int64_t i, int k, int v, int byte) {
  return 320 + 64 * (4 * k + v) + 4 * i + byte;
}
// The quant (0..3) of element e of a Q2_K block, read as q2_k.h describes qs; and back.
int q2k_quant(const BlockQ2_K& blk, int e) {
  return blk.qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3;
}

BlockQ2_K q2k_gather(const std::byte* sb, int64_t i) {
  BlockQ2_K blk{};
  std::memcpy(&blk.d, sb + 2 * i, 2);
  std::memcpy(&blk.dmin, sb + 32 + 2 * i, 2);
  for (int k = 0; k < 4; ++k) std::memcpy(blk.scales + 4 * k, sb + 64 + 64 * k + 4 * i, 4);
  for (int k = 0; k < 4; ++k) {
    for (int v = 0; v < 4; ++v) {
      for (int byte = 0; byte < 4; ++byte) {
        const auto bits = static_cast<int>(sb[q2k_quants_at(i, k, v, byte)]);
        for (int s = 0; s < 4; ++s) {
          const int e = 16 * (4 * k + s) + 4 * v + byte;
          blk.qs[32 * (e / 128) + e % 32] |=
              static_cast<uint8_t>((bits >> (2 * s) & 3) << (2 * (e % 128 / 32)));
        }
      }
    }
  }
  return blk;
}

void q2k_repack_group(const std::byte* src, int64_t rows, int64_t cols, int64_t g, std::byte* dst) {
  for_each_group_block<BlockQ2_K>(
      WeightType::Q2_K, src, rows, cols, g, [&](const BlockQ2_K& blk, int64_t i, int64_t b) {
        std::byte* sb = dst + b * kX16Q2KBlockBytes;
        std::memcpy(sb + 2 * i, &blk.d, 2);
        std::memcpy(sb + 32 + 2 * i, &blk.dmin, 2);
        for (int k = 0; k < 4; ++k) std::memcpy(sb + 64 + 64 * k + 4 * i, blk.scales + 4 * k, 4);
        for (int k = 0; k < 4; ++k) {
          for (int v = 0; v < 4; ++v) {
            for (int byte = 0; byte < 4; ++byte) {
              int bits = 0;
              for (int s = 0; s < 4; ++s) {
                bits |= q2k_quant(blk, 16 * (4 * k + s) + 4 * v + byte) << (2 * s);
              }
              sb[q2k_quants_at(i, k, v, byte)] = static_cast<std::byte>(bits);
            }
          }
        }
      });
}

// IQ4_XS super-block of 16 rows at sb: where row i's fields go (interleaved.h).
constexpr int64_t iq4xs_qs_at(int64_t i, int k) {  // qs[k..k+3], k a multiple of 4
  return 128 + 256 * (k / 16) + 64 * (k % 16 / 4) + 4 * i;
}

BlockIQ4_XS iq4xs_gather(const std::byte* sb, int64_t i) {
  BlockIQ4_XS blk;
  std::memcpy(&blk.d, sb + 2 * i, 2);
  std::memcpy(&blk.scales_h, sb + 32 + 2 * i, 2);
  std::memcpy(blk.scales_l, sb + 64 + 4 * i, 4);
  for (int k = 0; k < 128; k += 4) std::memcpy(blk.qs + k, sb + iq4xs_qs_at(i, k), 4);
  return blk;
}

void iq4xs_repack_group(const std::byte* src, int64_t rows, int64_t cols, int64_t g,
                        std::byte* dst) {
  for_each_group_block<BlockIQ4_XS>(WeightType::IQ4_XS, src, rows, cols, g,
                                    [&](const BlockIQ4_XS& blk, int64_t i, int64_t b) {
                                      std::byte* sb = dst + b * kX16IQ4XSBlockBytes;
                                      std::memcpy(sb + 2 * i, &blk.d, 2);
                                      std::memcpy(sb + 32 + 2 * i, &blk.scales_h, 2);
                                      std::memcpy(sb + 64 + 4 * i, blk.scales_l, 4);
                                      for (int k = 0; k < 128; k += 4)
                                        std::memcpy(sb + iq4xs_qs_at(i, k), blk.qs + k, 4);
                                    });
}

}  // namespace

void x16_repack_group(WeightType t, const std::byte* src, int64_t rows, int64_t cols, int64_t g,
                      std::byte* dst) {
  if (x16_float(t)) {  // padding rows (and BF16's padding column) stay zero
    std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(t, cols)));
    // Element c of row i goes to 16-bit slot c * 16 + i (F16) or (c / 2) * 32 + 2 i + c % 2
    // (BF16's pairs): x16_float_at / 2, written column by column over the 16 rows.
    const int64_t n_rows = std::min<int64_t>(kX16Rows, rows - g * kX16Rows);
    const auto* src16 = reinterpret_cast<const uint16_t*>(src) + g * kX16Rows * cols;
    auto* dst16 = reinterpret_cast<uint16_t*>(dst);
    if (t == WeightType::F16) {
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t i = 0; i < n_rows; ++i) dst16[c * 16 + i] = src16[i * cols + c];
      }
    } else {
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t i = 0; i < n_rows; ++i) {
          dst16[c / 2 * 32 + 2 * i + c % 2] = src16[i * cols + c];
        }
      }
    }
    return;
  }
  if (t == WeightType::Q4_K) {
    std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(t, cols)));
    q4k_repack_group(src, rows, cols, g, dst);
    return;
  }
  if (t == WeightType::Q5_K) {
    std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(t, cols)));
    q5k_repack_group(src, rows, cols, g, dst);
    return;
  }
  if (t == WeightType::Q6_K) {
    std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(t, cols)));
    q6k_repack_group(src, rows, cols, g, dst);
    return;
  }
  if (t == WeightType::Q3_K) {
    std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(t, cols)));
    q3k_repack_group(src, rows, cols, g, dst);
    return;
  }
  if (t == WeightType::IQ4_XS) {
    std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(t, cols)));
    iq4xs_repack_group(src, rows, cols, g, dst);
    return;
  }
  if (t == WeightType::Q2_K) {
    std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(t, cols)));
    q2k_repack_group(src, rows, cols, g, dst);
    return;
  }
  const int64_t nb = cols / 32;
  const int64_t stride = row_bytes(t, cols);
  const int64_t qs_bytes = x16_block_qs_bytes(t);
  const int64_t header_bytes = x16_pair_header_bytes(t);
  std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(t, cols)));
  for (int64_t i = 0; i < kX16Rows; ++i) {
    const int64_t r = g * kX16Rows + i;
    if (r >= rows) break;  // padding rows stay zero: d (and m) = 0
    const std::byte* row = src + r * stride;
    for (int64_t b = 0; b < nb; ++b) {
      std::byte* pair = dst + (b / 2) * x16_pair_bytes(t);
      std::byte* qs = pair + header_bytes + qs_bytes * (b % 2);
      if (t == WeightType::Q4_0 || t == WeightType::IQ4_NL) {  // the same block layout
        static_assert(sizeof(BlockQ4_0) == sizeof(BlockIQ4_NL));
        const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
        std::memcpy(pair + 32 * (b % 2) + 2 * i, &blk.d, 2);
        for (int m = 0; m < 4; ++m) std::memcpy(qs + 64 * m + 4 * i, blk.qs + 4 * m, 4);
      } else if (t == WeightType::Q4_1) {  // Q4_0's chunks, m beside d
        const auto& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
        std::memcpy(pair + 32 * (b % 2) + 2 * i, &blk.d, 2);
        std::memcpy(pair + 64 + 32 * (b % 2) + 2 * i, &blk.m, 2);
        for (int m = 0; m < 4; ++m) std::memcpy(qs + 64 * m + 4 * i, blk.qs + 4 * m, 4);
      } else if (t == WeightType::Q5_0 || t == WeightType::Q5_1) {
        const uint8_t* blk_qh;
        const uint8_t* blk_qs;
        if (t == WeightType::Q5_0) {
          const auto& blk = reinterpret_cast<const BlockQ5_0*>(row)[b];
          std::memcpy(pair + 32 * (b % 2) + 2 * i, &blk.d, 2);
          blk_qh = blk.qh;
          blk_qs = blk.qs;
        } else {
          const auto& blk = reinterpret_cast<const BlockQ5_1*>(row)[b];
          std::memcpy(pair + 32 * (b % 2) + 2 * i, &blk.d, 2);
          std::memcpy(pair + 64 + 32 * (b % 2) + 2 * i, &blk.m, 2);
          blk_qh = blk.qh;
          blk_qs = blk.qs;
        }
        uint32_t qh;
        std::memcpy(&qh, blk_qh, 4);
        for (int byte = 0; byte < 4; ++byte) {
          unsigned bits = 0;
          for (int m = 0; m < 4; ++m) {
            bits |= (qh >> (4 * m + byte) & 1) << m | (qh >> (16 + 4 * m + byte) & 1) << (4 + m);
          }
          qs[4 * i + byte] = static_cast<std::byte>(bits);
        }
        for (int m = 0; m < 4; ++m) std::memcpy(qs + 64 + 64 * m + 4 * i, blk_qs + 4 * m, 4);
      } else {
        const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
        std::memcpy(pair + 32 * (b % 2) + 2 * i, &blk.d, 2);
        for (int j = 0; j < 8; ++j) std::memcpy(qs + 64 * j + 4 * i, blk.qs + 4 * j, 4);
      }
    }
  }
  if (t == WeightType::Q8_0) {  // q -> q + 128, one pass over the group's quants (vectorizes)
    for (int64_t p = 0; p < (nb + 1) / 2; ++p) {
      auto* q = reinterpret_cast<uint8_t*>(dst + p * x16_pair_bytes(t) + 64);
      const int64_t blocks = std::min<int64_t>(2, nb - 2 * p);  // an odd last block is alone
      for (int64_t k = 0; k < blocks * qs_bytes; ++k) q[k] ^= 0x80;
    }
  }
}

namespace {

// Row i of every group: sum over blocks of fp16(d) * d_x * isum (Q4_1, Q5_1: + fp16(m) * d_x *
// sum_b(x)), in block order, as the row-major references compute it; `block_isum(qs, i, q)` is
// the integer dot of row i's quants (at qs, the block's bytes after the pair's header) with the
// activation quants q.
template <class BlockIsum>
void gemv_x16_ref(WeightType t, int64_t n, const std::byte* groups, int64_t n_groups,
                  const std::byte* act, float* out, BlockIsum block_isum) {
  const int64_t nb = n / 32;
  const ActQ8Row x = act_q8_row(act, n);
  for (int64_t g = 0; g < n_groups; ++g) {
    const std::byte* grp = groups + g * x16_group_bytes(t, n);
    for (int64_t i = 0; i < kX16Rows; ++i) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* pair = grp + (b / 2) * x16_pair_bytes(t);
        fp16_t d;
        std::memcpy(&d, pair + 32 * (b % 2) + 2 * i, 2);
        const auto* qs = reinterpret_cast<const uint8_t*>(pair + x16_pair_header_bytes(t) +
                                                          x16_block_qs_bytes(t) * (b % 2));
        acc += fp16_to_fp32(d) * x.d[b] * static_cast<float>(block_isum(qs, i, x.q + 32 * b));
        if (t == WeightType::Q5_1 || t == WeightType::Q4_1) {
          fp16_t m;
          std::memcpy(&m, pair + 64 + 32 * (b % 2) + 2 * i, 2);
          acc += fp16_to_fp32(m) * x.d[b] * static_cast<float>(x.sum[b]);
        }
      }
      out[g * kX16Rows + i] = acc;
    }
  }
}

// Row i's integer dot of one Q4_0/IQ4_NL block of 16 rows (Q4_0's nibble chunks) with the
// activation quants q, each nibble's value value_of(nibble).
template <class ValueOf>
int32_t nibble_block_isum(const uint8_t* qs, int64_t i, const int8_t* q, ValueOf value_of) {
  int32_t isum = 0;
  for (int e = 0; e < 16; ++e) {  // element e (low nibble) and e + 16 (high)
    const uint8_t byte = qs[64 * (e / 4) + 4 * i + e % 4];
    isum += value_of(byte & 0x0F) * q[e] + value_of(byte >> 4) * q[e + 16];
  }
  return isum;
}

// Row i's integer dot of one Q5_0/Q5_1 block of 16 rows (fifth bits, then Q4_0's nibble chunks)
// with the activation quants q, each quant minus `offset` (Q5_0: 16, Q5_1: 0).
int32_t q5x16_block_isum(const uint8_t* blk, int64_t i, const int8_t* q, int offset) {
  int32_t isum = 0;
  for (int e = 0; e < 16; ++e) {  // element e (low nibble) and e + 16 (high)
    const int m = e / 4, byte = e % 4;
    const unsigned fifth = blk[4 * i + byte];
    const unsigned nibbles = blk[64 + 64 * m + 4 * i + byte];
    const int lo = static_cast<int>((nibbles & 0x0F) | (fifth >> m & 1) << 4);
    const int hi = static_cast<int>((nibbles >> 4) | (fifth >> (4 + m) & 1) << 4);
    isum += (lo - offset) * q[e] + (hi - offset) * q[e + 16];
  }
  return isum;
}

}  // namespace

void gemv_q4_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_x16_ref(WeightType::Q4_0, n, groups, n_groups, act, out,
               [](const uint8_t* qs, int64_t i, const int8_t* q) {
                 return nibble_block_isum(qs, i, q, [](int nib) { return nib - 8; });
               });
}

void gemv_iq4_nlx16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                             const std::byte* act, float* out) {
  gemv_x16_ref(WeightType::IQ4_NL, n, groups, n_groups, act, out,
               [](const uint8_t* qs, int64_t i, const int8_t* q) {
                 return nibble_block_isum(qs, i, q, [](int nib) { return int{kIq4NlValues[nib]}; });
               });
}

void gemv_q4_1x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_x16_ref(WeightType::Q4_1, n, groups, n_groups, act, out,
               [](const uint8_t* qs, int64_t i, const int8_t* q) {
                 return nibble_block_isum(qs, i, q, [](int nib) { return nib; });
               });
}

void gemv_q5_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_x16_ref(WeightType::Q5_0, n, groups, n_groups, act, out,
               [](const uint8_t* blk, int64_t i, const int8_t* q) {
                 return q5x16_block_isum(blk, i, q, 16);
               });
}

void gemv_q5_1x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_x16_ref(WeightType::Q5_1, n, groups, n_groups, act, out,
               [](const uint8_t* blk, int64_t i, const int8_t* q) {
                 return q5x16_block_isum(blk, i, q, 0);
               });
}

void gemv_q8_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_x16_ref(WeightType::Q8_0, n, groups, n_groups, act, out,
               [](const uint8_t* qs, int64_t i, const int8_t* q) {
                 int32_t isum = 0;
                 for (int e = 0; e < 32; ++e) {
                   isum += (static_cast<int32_t>(qs[64 * (e / 4) + 4 * i + e % 4]) - 128) * q[e];
                 }
                 return isum;
               });
}

namespace {

// The F16 / BF16 references: each row gathered back and dotted by the row-major reference.
void gemv_float_x16_ref(WeightType t, int64_t n, const std::byte* groups, int64_t n_groups,
                        const std::byte* act, float* out,
                        float (*dot)(int64_t, const std::byte*, const std::byte*)) {
  std::vector<std::byte> row(static_cast<size_t>(2 * n));
  for (int64_t g = 0; g < n_groups; ++g) {
    const std::byte* grp = groups + g * x16_group_bytes(t, n);
    for (int64_t i = 0; i < kX16Rows; ++i) {
      for (int64_t c = 0; c < n; ++c) {
        std::memcpy(&row[static_cast<size_t>(2 * c)], grp + x16_float_at(t, i, c), 2);
      }
      out[g * kX16Rows + i] = dot(n, row.data(), act);
    }
  }
}

}  // namespace

void gemv_f16x16_f32_ref(int64_t n, const std::byte* groups, int64_t n_groups, const std::byte* act,
                         float* out) {
  gemv_float_x16_ref(WeightType::F16, n, groups, n_groups, act, out, dot_f16_f32_ref);
}

void gemv_bf16x16_f32_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                          const std::byte* act, float* out) {
  gemv_float_x16_ref(WeightType::BF16, n, groups, n_groups, act, out, dot_bf16_f32_ref);
}

namespace {

// The K-quant references: each row of every group gathered back into the file's blocks
// (gather(group, b, i) = row i's super-block b) and dotted by the row-major reference `dot`.
template <class Block, class Gather>
void gemv_kquant_x16_ref(WeightType t, int64_t n, const std::byte* groups, int64_t n_groups,
                         const std::byte* act, float* out, Gather gather,
                         float (*dot)(int64_t, const std::byte*, const std::byte*)) {
  const int64_t nb = n / 256;
  std::vector<Block> row(static_cast<size_t>(nb));
  for (int64_t g = 0; g < n_groups; ++g) {
    const std::byte* grp = groups + g * x16_group_bytes(t, n);
    for (int64_t i = 0; i < kX16Rows; ++i) {
      for (int64_t b = 0; b < nb; ++b) row[static_cast<size_t>(b)] = gather(grp, b, i);
      out[g * kX16Rows + i] = dot(n, reinterpret_cast<const std::byte*>(row.data()), act);
    }
  }
}

}  // namespace

void gemv_q4_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_kquant_x16_ref<BlockQ4_K>(
      WeightType::Q4_K, n, groups, n_groups, act, out,
      [](const std::byte* grp, int64_t b, int64_t i) {
        return q4k_gather(grp + b * kX16Q4KBlockBytes, i);
      },
      dot_q4_K_q8_K_ref);
}

void gemv_q5_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_kquant_x16_ref<BlockQ5_K>(
      WeightType::Q5_K, n, groups, n_groups, act, out,
      [](const std::byte* grp, int64_t b, int64_t i) {
        return q5k_gather(grp + b * kX16Q5KBlockBytes, i);
      },
      dot_q5_K_q8_K_ref);
}

void gemv_q6_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_kquant_x16_ref<BlockQ6_K>(
      WeightType::Q6_K, n, groups, n_groups, act, out,
      [](const std::byte* grp, int64_t b, int64_t i) {
        return q6k_gather(grp + b / 2 * kX16Q6KPairBytes, b, i);
      },
      dot_q6_K_q8_K_ref);
}

void gemv_q3_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_kquant_x16_ref<BlockQ3_K>(
      WeightType::Q3_K, n, groups, n_groups, act, out,
      [](const std::byte* grp, int64_t b, int64_t i) {
        return q3k_gather(grp + b / 2 * kX16Q3KPairBytes, b, i);
      },
      dot_q3_K_q8_K_ref);
}

void gemv_iq4_xsx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                             const std::byte* act, float* out) {
  gemv_kquant_x16_ref<BlockIQ4_XS>(
      WeightType::IQ4_XS, n, groups, n_groups, act, out,
      [](const std::byte* grp, int64_t b, int64_t i) {
        return iq4xs_gather(grp + b * kX16IQ4XSBlockBytes, i);
      },
      dot_iq4_xs_q8_K_ref);
}

void gemv_q2_Kx16_q8_K_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_kquant_x16_ref<BlockQ2_K>(
      WeightType::Q2_K, n, groups, n_groups, act, out,
      [](const std::byte* grp, int64_t b, int64_t i) {
        return q2k_gather(grp + b * kX16Q2KBlockBytes, i);
      },
      dot_q2_K_q8_K_ref);
}

void InterleavedMatrix::Free::operator()(std::byte* p) const noexcept {
  std::free(p);
}

bool InterleavedMatrix::pays(const WeightMatrix& w, Isa isa) {
  return pays(w, isa, detect_cpu_features());
}

bool InterleavedMatrix::pays(const WeightMatrix& w, Isa isa, const CpuFeatures& cpu) {
  if (!x16_supported(w.type) || w.layout != WeightLayout::RowMajor || !isa_supported(isa)) {
    return false;
  }
  // Every type on AVX2: interleaved_avx2.cpp, interleaved_q45_k_avx2.cpp,
  // interleaved_q6_k_avx2.cpp, interleaved_iq4_xs_avx2.cpp, interleaved_q3_k_avx2.cpp,
  // interleaved_q2_k_avx2.cpp, and for F16/BF16 interleaved_float_avx2.cpp (TinyLlama on the
  // AVX2-only Zen 4 guest, 1 thread, against the file's layout, alternating: F16 decode 1.10-1.31x
  // (85-91 % of the roofline against 65-71 %), pp64 level at 1 thread and 1.04-1.08x at 2; BF16
  // decode 1.16-1.17x, pp64 1.02-1.16x).
  if (isa == Isa::Avx2) return true;
  if (isa != Isa::Avx512) return false;
  if (x16_float(w.type) || cpu.avx512_vnni) return true;  // F16/BF16: AVX-512 F/BW is enough
  // AVX-512 without VNNI (Skylake-SP): the AVX2 x16 kernels against the row-major AVX-512 ones,
  // TinyLlama with PACER_VNNI=0 on a Sapphire Rapids VM, 2 rounds at 1 and 2 threads: Q4_0 pp64
  // 1.17-1.35x and tg32 1.11-1.14x in every cell; Q8_0 (pp64 0.86-1.14x, tg32 0.86-1.23x) and the
  // K-quants of Q4_K_M (pp64 0.92-1.68x, tg32 0.70-1.18x) went either way, so they keep the file's
  // layout. Q4_1, Q5_0, Q5_1 and IQ4_NL (PACER_ISA=avx2 against PACER_VNNI=0 on the Zen 5 dev VM,
  // TinyLlama, 2 rounds at 1 and 2 threads): tg32 1.16-1.97x in every cell, pp64 0.96-1.46x;
  // IQ4_XS (TinyLlama and Llama-3.2-1B, likewise): tg32 1.38-2.14x, pp64 0.81-1.11x; Q3_K (their
  // Q3_K_M files): tg32 1.27-1.62x, pp64 0.87-0.98x: decode's gain taken over prefill's loss. Q2_K
  // (their Q2_K files) went either way (tg32 0.85-1.39x, pp64 0.81-1.07x): the file's layout.
  return w.type == WeightType::Q4_0 || w.type == WeightType::Q4_1 || w.type == WeightType::Q5_0 ||
         w.type == WeightType::Q5_1 || w.type == WeightType::IQ4_NL ||
         w.type == WeightType::IQ4_XS || w.type == WeightType::Q3_K;
}

InterleavedMatrix InterleavedMatrix::repack(const WeightMatrix& w) {
  check_matrix(w);
  if (!x16_supported(w.type) || w.layout != WeightLayout::RowMajor) {
    throw MatmulError(
        "repack: weight " + std::string(type_name(w.type)) + " [cols=" + std::to_string(w.cols) +
        ", rows=" + std::to_string(w.rows) +
        "] is not a row-major q4_0, q8_0, q4_1, q5_0, q5_1, iq4_nl, q2_K, q3_K, q4_K, q5_K, "
        "q6_K, iq4_xs, f16 or bf16 matrix");
  }
  const int64_t group_bytes = x16_group_bytes(w.type, w.cols);
  const int64_t n_groups = x16_groups(w.rows);
  InterleavedMatrix m;
  m.storage_bytes_ = group_bytes * n_groups;
  // 2 MiB-aligned and asked for transparent huge pages: the repack writes the copy with ~500x
  // fewer page faults, and the decode GEMVs stream it with fewer TLB misses. (Advice only: where
  // THP is off, this is plain memory.)
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t alloc_bytes =
      (static_cast<size_t>(m.storage_bytes_) + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, alloc_bytes);
  if (p == nullptr) throw std::bad_alloc();
  ::madvise(p, alloc_bytes, MADV_HUGEPAGE);
  m.data_.reset(static_cast<std::byte*>(p));
  std::byte* dst = m.data_.get();
  tbb_for_each_index(int64_t{0}, n_groups, [&](int64_t g) {
    x16_repack_group(w.type, w.data, w.rows, w.cols, g, dst + g * group_bytes);
  });
  m.view_ = w;
  m.view_.data = dst;
  m.view_.layout = WeightLayout::Interleaved16;
  return m;
}

int64_t x16_gemv_run_bytes(WeightType t, Isa isa) noexcept {
  const bool long_runs = x16_gemv_long_runs(x16_gemv_kind(t));
  const bool avx512 = isa == Isa::Avx512;
  if (t == WeightType::F16 || t == WeightType::BF16) {
    const int64_t columns = long_runs ? kX16LongRunColumns : avx512 ? 8 : 128;
    return kX16Rows * 2 * columns;
  }
  const TypeInfo& ti = type_info(t);
  const int64_t block = kX16Rows * ti.block_bytes;
  if (ti.block_elems == 32) {
    const bool runs = long_runs && (avx512 || t != WeightType::IQ4_NL);
    return block * (runs ? kX16LongRunBlocks : 1);
  }
  if (!avx512) return block;
  switch (t) {
    case WeightType::Q6_K:
    case WeightType::Q2_K:
    case WeightType::IQ4_XS:
    case WeightType::Q3_K:
      return long_runs ? block : block / 4;
    case WeightType::Q5_K:
      return long_runs ? block / 2 : block / 4;
    default:  // Q4_K
      return block / 4;
  }
}

}  // namespace pacer::ops
