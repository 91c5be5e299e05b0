#include "ops/types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace pacer::ops {
namespace {
constexpr TypeInfo kF32{"f32", 1, 4};
constexpr TypeInfo kF16{"f16", 1, 2};
constexpr TypeInfo kBF16{"bf16", 1, 2};
constexpr TypeInfo kQ8_0{"q8_0", 32, 34};
constexpr TypeInfo kQ4_0{"q4_0", 32, 18};
constexpr TypeInfo kQ4_1{"q4_1", 32, 20};
constexpr TypeInfo kQ5_0{"q5_0", 32, 22};
constexpr TypeInfo kQ5_1{"q5_1", 32, 24};
constexpr TypeInfo kIQ4_NL{"iq4_nl", 32, 18};
constexpr TypeInfo kQ4_K{"q4_K", 256, 144};
constexpr TypeInfo kQ2_K{"q2_K", 256, 84};
constexpr TypeInfo kQ3_K{"q3_K", 256, 110};
constexpr TypeInfo kQ5_K{"q5_K", 256, 176};
constexpr TypeInfo kQ6_K{"q6_K", 256, 210};
constexpr TypeInfo kQ8_K{"q8_K", 256, 292};
constexpr TypeInfo kIQ4_XS{"iq4_xs", 256, 136};
constexpr std::array kAll = {
    WeightType::F32,  WeightType::F16,  WeightType::BF16,   WeightType::Q8_0,
    WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0,   WeightType::Q5_1,
    WeightType::Q4_K, WeightType::Q6_K, WeightType::IQ4_NL, WeightType::Q8_K,
    WeightType::Q5_K, WeightType::Q3_K, WeightType::Q2_K,   WeightType::IQ4_XS};
}  // namespace

const TypeInfo& type_info(WeightType t) noexcept {
  switch (t) {
    case WeightType::F32: return kF32;
    case WeightType::F16: return kF16;
    case WeightType::BF16: return kBF16;
    case WeightType::Q8_0: return kQ8_0;
    case WeightType::Q4_0: return kQ4_0;
    case WeightType::Q4_1: return kQ4_1;
    case WeightType::Q5_0: return kQ5_0;
    case WeightType::Q5_1: return kQ5_1;
    case WeightType::IQ4_NL: return kIQ4_NL;
    case WeightType::Q4_K: return kQ4_K;
    case WeightType::Q2_K: return kQ2_K;
    case WeightType::Q3_K: return kQ3_K;
    case WeightType::Q5_K: return kQ5_K;
    case WeightType::Q6_K: return kQ6_K;
    case WeightType::Q8_K: return kQ8_K;
    case WeightType::IQ4_XS: return kIQ4_XS;
  }
  return kF32;  // unreachable for valid enumerators
}

std::optional<WeightType> weight_type_from_id(uint32_t id) noexcept {
  for (WeightType t : kAll) {
    if (static_cast<uint32_t>(t) == id && t != WeightType::Q8_K) return t;
  }
  return std::nullopt;
}

std::string weight_type_names() {
  std::string out;
  for (WeightType t : kAll) {
    if (t == WeightType::Q8_K) continue;
    if (!out.empty()) out += ", ";
    out += type_info(t).name;
  }
  return out;
}

std::optional<WeightType> weight_type_from_name(std::string_view name) noexcept {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (WeightType t : kAll) {
    std::string n(type_info(t).name);
    std::transform(n.begin(), n.end(), n.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (n == lower && t != WeightType::Q8_K) return t;
  }
  return std::nullopt;
}

}  // namespace pacer::ops
