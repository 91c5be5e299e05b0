// Pre-tokenizer splits, derived by hand from the regular expressions in tokenizer_pretok.h, and
// the Unicode facts they rest on.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "loader/tokenizer_pretok.h"
#include "loader/tokenizer_unicode.h"

namespace pacer::loader {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(PreTokenizer k, std::string_view s) {
  Pieces out;
  for (std::string_view p : pre_tokenize(k, s)) out.emplace_back(p);
  return out;
}

TEST(PreTokenizer, Qwen2) {
  const auto k = PreTokenizer::Qwen2;
  EXPECT_EQ(split(k, "Hello, world!"), (Pieces{"Hello", ",", " world", "!"}));
  // A lone space before a digit is its own piece (\s+), digits one by one (\p{N}).
  EXPECT_EQ(split(k, "I'm 123 ok"), (Pieces{"I", "'m", " ", "1", "2", "3", " ok"}));
  // Contractions are case-insensitive.
  EXPECT_EQ(split(k, "DON'T"), (Pieces{"DON", "'T"}));
  // \s*[\r\n]+ takes whitespace up to the last newline; \s+(?!\S) leaves one space for " b".
  EXPECT_EQ(split(k, "a  \n  b"), (Pieces{"a", "  \n", " ", " b"}));
  EXPECT_EQ(split(k, "a\n\nb"), (Pieces{"a", "\n\n", "b"}));
  // Punctuation takes the newlines after it.
  EXPECT_EQ(split(k, "x.\n\ny"), (Pieces{"x", ".\n\n", "y"}));
  // [^\r\n\p{L}\p{N}]?\p{L}+: one non-letter (tab, quote, bracket) leads a word.
  EXPECT_EQ(split(k, "\thello (world"), (Pieces{"\thello", " (", "world"}));
  // Letters of any script; emoji are "other".
  EXPECT_EQ(split(k, "Привет мир 你好世界"), (Pieces{"Привет", " мир", " 你好世界"}));
  EXPECT_EQ(split(k, "\xF0\x9F\x91\x8B hi"), (Pieces{"\xF0\x9F\x91\x8B", " hi"}));
  // Trailing whitespace at the end of the text is one piece.
  EXPECT_EQ(split(k, "end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(split(k, ""), Pieces{});
}

TEST(PreTokenizer, Llama3GroupsUpToThreeDigits) {
  EXPECT_EQ(split(PreTokenizer::Llama3, "12345 x"), (Pieces{"123", "45", " x"}));
  EXPECT_EQ(split(PreTokenizer::Qwen2, "12345"), (Pieces{"1", "2", "3", "4", "5"}));
}

TEST(PreTokenizer, Gpt2) {
  const auto k = PreTokenizer::Gpt2;
  EXPECT_EQ(split(k, "I'm 123 ok"), (Pieces{"I", "'m", " 123", " ok"}));
  // Case-sensitive contractions: "'T" is punctuation then a letter.
  EXPECT_EQ(split(k, "DON'T"), (Pieces{"DON", "'", "T"}));
  // \s+(?!\S) keeps the last space for the next word; the tab-led word is not joined.
  EXPECT_EQ(split(k, "a  \n  b"), (Pieces{"a", "  \n ", " b"}));
  EXPECT_EQ(split(k, "\thello"), (Pieces{"\t", "hello"}));
  EXPECT_EQ(split(k, "Hello, world!"), (Pieces{"Hello", ",", " world", "!"}));
}

TEST(PreTokenizer, MultiPatternSequences) {
  // starcoder: every digit is split off first, then gpt2 inside each piece.
  EXPECT_EQ(split(PreTokenizer::Starcoder, "ab12 cd"), (Pieces{"ab", "1", "2", " cd"}));
  // falcon: punctuation runs first; three ASCII digits last.
  EXPECT_EQ(split(PreTokenizer::Falcon, "x=1234;"), (Pieces{"x", "=", "123", "4", ";"}));
}

TEST(PreTokenizer, PiecesAlwaysCoverTheInput) {
  std::mt19937 rng(3);
  for (PreTokenizer k : {PreTokenizer::Gpt2, PreTokenizer::Llama3, PreTokenizer::Qwen2,
                         PreTokenizer::Starcoder, PreTokenizer::Falcon, PreTokenizer::Default}) {
    for (int i = 0; i < 200; ++i) {
      std::string s;
      const size_t n = rng() % 40;
      for (size_t j = 0; j < n; ++j) {
        static const char* kParts[] = {"a",
                                       "Z",
                                       " ",
                                       "\n",
                                       "\r",
                                       "\t",
                                       "7",
                                       "'",
                                       "'s",
                                       ".",
                                       "é",
                                       "中",
                                       "\xF0\x9F\x98\x80",
                                       "\xFF",
                                       "\xC3",
                                       "$"};
        s += kParts[rng() % std::size(kParts)];
      }
      std::string joined;
      for (std::string_view p : pre_tokenize(k, s)) {
        ASSERT_FALSE(p.empty());
        joined += p;
      }
      ASSERT_EQ(joined, s);
    }
  }
}

TEST(PreTokenizer, Names) {
  EXPECT_EQ(pre_tokenizer_from_name("qwen2"), PreTokenizer::Qwen2);
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizer::Llama3);
  EXPECT_EQ(pre_tokenizer_from_name("gpt-2"), PreTokenizer::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("refact"), PreTokenizer::Starcoder);
  EXPECT_FALSE(pre_tokenizer_from_name("tekken").has_value());
}

TEST(Unicode, CategoriesAndWhitespace) {
  using unicode::Category;
  EXPECT_EQ(unicode::category('a'), Category::L);
  EXPECT_EQ(unicode::category('7'), Category::N);
  EXPECT_EQ(unicode::category('!'), Category::P);
  EXPECT_EQ(unicode::category('$'), Category::S);
  EXPECT_EQ(unicode::category(0x4E2D), Category::L);   // 中
  EXPECT_EQ(unicode::category(0x0416), Category::L);   // Ж
  EXPECT_EQ(unicode::category(0x00B2), Category::N);   // ²
  EXPECT_EQ(unicode::category(0x0663), Category::N);   // Arabic-Indic three
  EXPECT_EQ(unicode::category(0x0301), Category::M);   // combining acute
  EXPECT_EQ(unicode::category(0x1F600), Category::S);  // 😀
  EXPECT_EQ(unicode::category(0x10FFFF), Category::C);
  EXPECT_EQ(unicode::category(unicode::kInvalid), Category::C);
  for (uint32_t c : {0x09u, 0x0Au, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x2003u, 0x3000u}) {
    EXPECT_TRUE(unicode::is_whitespace(c)) << c;
  }
  for (uint32_t c : {0x41u, 0x200Bu, 0x1Cu}) EXPECT_FALSE(unicode::is_whitespace(c)) << c;
}

TEST(Unicode, DecodeRejectsMalformedSequences) {
  auto dec = [](std::string_view s) { return unicode::decode_utf8(s, 0); };
  EXPECT_EQ(dec("\xE2\x82\xAC").cpt, 0x20ACu);
  EXPECT_EQ(dec("\xE2\x82\xAC").len, 3u);
  EXPECT_EQ(dec("\xF0\x9F\x98\x80").cpt, 0x1F600u);
  for (std::string_view bad :
       {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82", "\x80", "\xFF"}) {
    EXPECT_EQ(dec(bad).cpt, unicode::kInvalid);
    EXPECT_EQ(dec(bad).len, 1u);
  }
  std::string s;
  for (uint32_t c : {0x41u, 0xE9u, 0x20ACu, 0x1F600u}) unicode::append_utf8(s, c);
  EXPECT_EQ(s, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace pacer::loader
