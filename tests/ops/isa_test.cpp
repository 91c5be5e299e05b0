// Run-time ISA selection: the list of supported ISAs, the PACER_ISA override, and the names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ops/isa.h"

namespace pacer::ops {
namespace {

// Sets PACER_ISA for one scope and restores the previous value (tests run single-threaded).
class ScopedIsaEnv {
 public:
  explicit ScopedIsaEnv(const char* value) {
    if (const char* old = std::getenv("PACER_ISA")) saved_ = old, had_ = true;
    setenv("PACER_ISA", value, 1);
  }
  ~ScopedIsaEnv() {
    if (had_) {
      setenv("PACER_ISA", saved_.c_str(), 1);
    } else {
      unsetenv("PACER_ISA");
    }
  }

 private:
  std::string saved_;
  bool had_ = false;
};

TEST(Isa, SupportedListStartsWithScalarAndIsConsistent) {
  const std::vector<Isa> isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::Scalar);
  for (Isa isa : isas) EXPECT_TRUE(isa_supported(isa)) << isa_name(isa);
  const CpuFeatures f = detect_cpu_features();
  EXPECT_EQ(isa_supported(Isa::Avx2), f.avx2);
  EXPECT_EQ(isa_supported(Isa::Avx512), f.avx512);
  if (f.avx512) {
    EXPECT_TRUE(f.avx2);  // AVX-512 is only claimed on top of AVX2
  }
  if (f.avx512_vnni) {
    EXPECT_TRUE(f.avx512);
  }
}

TEST(Isa, PacerIsaOverridesTheChoice) {
  {
    ScopedIsaEnv env("scalar");
    EXPECT_EQ(detect_isa(), Isa::Scalar);
  }
  {
    ScopedIsaEnv env("no-such-isa");
    EXPECT_EQ(detect_isa(), supported_isas().back());  // unknown: the best supported
  }
  for (Isa isa : supported_isas()) {
    ScopedIsaEnv env(std::string(isa_name(isa)).c_str());
    EXPECT_EQ(detect_isa(), isa);
  }
}

TEST(Isa, Names) {
  EXPECT_EQ(isa_name(Isa::Scalar), "scalar");
  EXPECT_EQ(isa_name(Isa::Avx2), "avx2");
  EXPECT_EQ(isa_name(Isa::Avx512), "avx512");
}

}  // namespace
}  // namespace pacer::ops
