// The committed malformed corpus (tests/data/malformed/*.gguf) is exactly what the generator in
// malformed_corpus.h produces, and each file fails to open with a LoadError naming its field and
// offset. PACER_REGENERATE_MALFORMED=1 rewrites the files from the generator.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "tests/loader/malformed_corpus.h"

namespace pacer::loader {
namespace {

const std::filesystem::path kDir = std::filesystem::path(PACER_TEST_DATA) / "malformed";

std::vector<std::byte> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

TEST(MalformedCorpus, BaseFileIsValid) {
  const auto base = testing::malformed_base();
  const GgufFile f = GgufFile::parse(base, "base");
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.metadata().size(), 5u);
}

TEST(MalformedCorpus, CommittedFilesMatchTheGenerator) {
  const char* regen = std::getenv("PACER_REGENERATE_MALFORMED");
  if (regen && std::string(regen) == "1") {
    std::filesystem::create_directories(kDir);
    for (const auto& c : testing::malformed_corpus()) {
      std::ofstream out(kDir / (c.name + ".gguf"), std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(c.bytes.data()),
                static_cast<std::streamsize>(c.bytes.size()));
    }
  }
  const auto corpus = testing::malformed_corpus();
  EXPECT_GE(corpus.size(), 13u);
  for (const auto& c : corpus) {
    const auto path = kDir / (c.name + ".gguf");
    ASSERT_TRUE(std::filesystem::exists(path))
        << path << " (regenerate with PACER_REGENERATE_MALFORMED=1)";
    EXPECT_TRUE(read_all(path) == c.bytes) << path << " differs from the generator";
  }
}

TEST(MalformedCorpus, EachFileIsALoadErrorAtItsField) {
  for (const auto& c : testing::malformed_corpus()) {
    SCOPED_TRACE(c.name);
    const auto path = kDir / (c.name + ".gguf");
    try {
      const GgufFile f = GgufFile::open(path);
      ModelConfig::from_gguf(f);
      ADD_FAILURE() << "opened without error";
    } catch (const LoadError& e) {
      EXPECT_EQ(e.file(), path.string());
      EXPECT_NE(e.field().find(c.field), std::string::npos) << e.what();
      EXPECT_EQ(e.offset(), c.offset) << e.what();
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find(" at offset " + std::to_string(c.offset)), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace pacer::loader
