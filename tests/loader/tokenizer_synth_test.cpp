// Synthetic vocabularies: exact size, consistent merges, usable for English (multi-character
// tokens, fewer tokens than bytes), lossless round trips, deterministic, and loadable from the
// GGUF that write_synthetic_vocab produces; copy_vocab copies every tokenizer.* key.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "loader/error.h"
#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/synth_vocab.h"
#include "loader/tokenizer.h"

namespace pacer::loader {
namespace {

const std::string kEnglish =
    "The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of "
    "times, it was the age of wisdom, it was the age of foolishness. People often think that "
    "water and light are the most important things for a plant to grow, and they are right.";

const std::string kMixed =
    "Mixed: \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 caf\xC3\xA9 \t tab\r\nnew line \x01\x7F "
    "    indent 12345 'quoted' \"double\" <|im_end|> <s> \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D";

struct Case {
  VocabKind kind;
  int64_t n_vocab;
};

class SyntheticVocab : public ::testing::TestWithParam<Case> {};

Tokenizer load_through_gguf(VocabKind kind, int64_t n, uint64_t seed,
                            std::vector<std::byte>& storage) {
  GgufWriter w;
  w.set_string("general.architecture", kind == VocabKind::SentencePiece ? "llama" : "qwen2");
  write_synthetic_vocab(w, kind, n, seed);
  storage = w.to_bytes();
  const GgufFile f = GgufFile::parse(storage, "synthetic.gguf");
  return Tokenizer::from_gguf(f);
}

TEST_P(SyntheticVocab, HasExactSizeAndIsUsable) {
  const auto [kind, n] = GetParam();
  std::vector<std::byte> storage;
  const Tokenizer tok = load_through_gguf(kind, n, 42, storage);
  EXPECT_EQ(tok.n_vocab(), n);

  // Round trips: English, and arbitrary UTF-8 with control bytes (byte fallback / byte-level).
  for (const std::string& s : {kEnglish, kMixed}) {
    EXPECT_EQ(tok.decode(tok.encode(s, true)), s);
  }
  // English compresses: fewer tokens than half the bytes, and common words are one token.
  const std::vector<int32_t> ids = tok.encode(kEnglish, false);
  EXPECT_LT(ids.size() * 2, kEnglish.size()) << ids.size() << " tokens";
  size_t multi_char = 0;
  for (int32_t id : ids) multi_char += tok.piece(id).size() > 1;
  EXPECT_GT(multi_char * 2, ids.size());
  for (const char* word : {" the", " of", " and", " was"}) {
    const std::vector<int32_t> w = tok.encode(std::string("x") + word, false);
    EXPECT_EQ(tok.piece(w.back()), word) << word;
  }

  if (kind == VocabKind::SentencePiece) {
    EXPECT_EQ(tok.model(), "llama");
    EXPECT_EQ(tok.bos(), 1);
    EXPECT_EQ(tok.eos(), 2);
    EXPECT_EQ(tok.encode("hi", true).front(), 1);
    EXPECT_EQ(tok.token_type(3 + 0x41), TokenType::Byte);
    EXPECT_EQ(tok.piece(3 + 0x41), "A");
  } else {
    EXPECT_EQ(tok.model(), "gpt2");
    EXPECT_EQ(tok.pre(), "qwen2");
    EXPECT_EQ(tok.token_text(n - 3), "<|endoftext|>");
    EXPECT_EQ(tok.token_text(n - 1), "<|im_end|>");
    EXPECT_EQ(tok.eos(), n - 1);
    EXPECT_TRUE(tok.is_eog(static_cast<int32_t>(n - 3)));
    EXPECT_TRUE(tok.is_eog(static_cast<int32_t>(n - 1)));
    EXPECT_FALSE(tok.add_bos());
    EXPECT_EQ(tok.encode("<|im_start|>hi<|im_end|>", false, true).front(), n - 2);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SyntheticVocab,
    ::testing::Values(Case{VocabKind::SentencePiece, 512}, Case{VocabKind::SentencePiece, 32000},
                      Case{VocabKind::Gpt2Qwen2, 640}, Case{VocabKind::Gpt2Qwen2, 151936}),
    [](const auto& info) {
      return std::string(info.param.kind == VocabKind::SentencePiece ? "spm_" : "qwen2_") +
             std::to_string(info.param.n_vocab);
    });

TEST(SyntheticVocabBpe, EveryMergeJoinsTwoEarlierTokens) {
  const Vocab v = make_synthetic_vocab(VocabKind::Gpt2Qwen2, 4096, 1);
  std::unordered_set<std::string> tokens(v.tokens.begin(), v.tokens.end());
  ASSERT_EQ(tokens.size(), v.tokens.size()) << "duplicate token texts";
  // Position of each token: the parts of merge k must exist before its result does.
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < v.tokens.size(); ++i) index.emplace(v.tokens[i], i);
  std::set<std::pair<std::string, std::string>> seen;
  for (const std::string& m : v.merges) {
    const size_t sep = m.find(' ');
    ASSERT_NE(sep, std::string::npos) << m;
    const std::string l = m.substr(0, sep), r = m.substr(sep + 1);
    ASSERT_TRUE(index.count(l) && index.count(r) && index.count(l + r)) << m;
    EXPECT_LT(index[l], index[l + r]) << m;
    EXPECT_LT(index[r], index[l + r]) << m;
    EXPECT_TRUE(seen.insert({l, r}).second) << "repeated merge " << m;
  }
  EXPECT_EQ(v.tokens.size(), 4096u);
}

TEST(SyntheticVocabBpe, LargeVocabulariesFillWithPseudoWordsAndStayReachable) {
  // Beyond what training on the word list gives: filler pieces. Each piece joins two tokens
  // and, encoded on its own, comes back as a handful of tokens at most.
  const Vocab v = make_synthetic_vocab(VocabKind::Gpt2Qwen2, 20000, 9);
  const Tokenizer tok = Tokenizer::from_vocab(v);
  size_t single = 0, checked = 0;
  for (size_t i = 256; i < v.tokens.size() - 3; i += 97) {
    const std::string piece = tok.piece(static_cast<int32_t>(i));
    const std::vector<int32_t> ids = tok.encode(piece, false);
    EXPECT_EQ(tok.decode(ids), piece);
    single += ids.size() == 1;
    ++checked;
  }
  EXPECT_GT(single * 2, checked) << single << " of " << checked << " pieces are one token";
}

TEST(SyntheticVocab, IsDeterministicPerSeed) {
  const Vocab a = make_synthetic_vocab(VocabKind::SentencePiece, 20000, 5);
  const Vocab b = make_synthetic_vocab(VocabKind::SentencePiece, 20000, 5);
  const Vocab c = make_synthetic_vocab(VocabKind::SentencePiece, 20000, 6);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_NE(a.tokens, c.tokens);  // the filler depends on the seed
  EXPECT_THROW(make_synthetic_vocab(VocabKind::SentencePiece, 100, 0), std::invalid_argument);
}

TEST(SyntheticVocab, SmallestSizeWorksForBothKinds) {
  for (VocabKind kind : {VocabKind::SentencePiece, VocabKind::Gpt2Qwen2}) {
    for (int64_t n = kMinSyntheticVocab; n < kMinSyntheticVocab + 70; n += 7) {
      const Vocab v = make_synthetic_vocab(kind, n, 2);
      ASSERT_EQ(v.tokens.size(), static_cast<size_t>(n));
      const Tokenizer tok = Tokenizer::from_vocab(v);
      EXPECT_EQ(tok.decode(tok.encode(kMixed, true)), kMixed) << n;
      EXPECT_LT(tok.encode(kEnglish, false).size(), kEnglish.size()) << n;
    }
  }
}

TEST(SyntheticVocab, RealShapesHaveExactSizes) {
  // The 262144-token Gemma 3 shape (SPM) in memory; the others are loaded in SyntheticVocab.
  const Vocab v = make_synthetic_vocab(VocabKind::SentencePiece, 262144, 3);
  EXPECT_EQ(v.tokens.size(), 262144u);
  EXPECT_EQ(v.scores.size(), 262144u);
  EXPECT_EQ(v.token_types.size(), 262144u);
  std::unordered_set<std::string> unique(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(unique.size(), v.tokens.size());
}

TEST(CopyVocab, CopiesEveryTokenizerKey) {
  GgufWriter src;
  src.set_string("general.architecture", "qwen2");
  src.set_u32("qwen2.block_count", 2);
  write_synthetic_vocab(src, VocabKind::Gpt2Qwen2, 700, 4);
  src.set_string("tokenizer.chat_template", "{{ messages }}");
  const std::vector<std::byte> src_bytes = src.to_bytes();
  const GgufFile from = GgufFile::parse(src_bytes, "src.gguf");

  GgufWriter dst;
  dst.set_string("general.architecture", "qwen2");
  copy_vocab(dst, from);
  const std::vector<std::byte> dst_bytes = dst.to_bytes();
  const GgufFile to = GgufFile::parse(dst_bytes, "dst.gguf");

  size_t n_copied = 0;
  for (const GgufKv& kv : from.metadata()) {
    const GgufValue* got = to.find(kv.key);
    if (kv.key.rfind("tokenizer.", 0) != 0) {
      if (kv.key != "general.architecture") {
        EXPECT_EQ(got, nullptr) << kv.key;
      }
      continue;
    }
    ASSERT_NE(got, nullptr) << kv.key;
    EXPECT_EQ(got->type, kv.value.type) << kv.key;
    EXPECT_EQ(got->count, kv.value.count) << kv.key;
    EXPECT_EQ(got->str, kv.value.str) << kv.key;
    ++n_copied;
  }
  EXPECT_GE(n_copied, 9u);
  const Tokenizer a = Tokenizer::from_gguf(from), b = Tokenizer::from_gguf(to);
  EXPECT_EQ(a.encode(kEnglish, true), b.encode(kEnglish, true));

  GgufWriter no_vocab;
  no_vocab.set_string("general.architecture", "llama");
  const std::vector<std::byte> nv = no_vocab.to_bytes();
  EXPECT_THROW(copy_vocab(dst, GgufFile::parse(nv, "nv.gguf")), LoadError);
}

}  // namespace
}  // namespace pacer::loader
