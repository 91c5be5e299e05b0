#pragma once
// Compile-time unrolled loops for the SIMD kernels (internal to ops/, no ISA code): unroll<N>(f)
// calls f(std::integral_constant<int, 0>{}) .. f(std::integral_constant<int, N - 1>{}), so shift
// counts, register-array indices and layout offsets inside f are constants. (Left to the compiler,
// GCC 12 kept such loops rolled and the accumulator arrays they index in memory.)
#include <type_traits>
#include <utility>

namespace pacer::ops {

template <int N, class F>
inline void unroll(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>{}), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

}  // namespace pacer::ops
