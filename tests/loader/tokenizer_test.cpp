// Tokenizer on hand-built vocabularies whose expected ids are derived by hand in the comments
// (SentencePiece: merges by score; byte-level BPE: merges by rank), special-token handling,
// lossless round trips, GGUF loading and its errors.
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "loader/error.h"
#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/tokenizer.h"

namespace pacer::loader {
namespace {

using Ids = std::vector<int32_t>;
const std::string kSp = "\xE2\x96\x81";  // "▁"

// ---- SentencePiece vocabulary -------------------------------------------------------------
// 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then pieces with the scores below.
constexpr int32_t kByte0 = 3;
int32_t byte_id(unsigned char b) {
  return kByte0 + b;
}

Vocab spm_vocab() {
  Vocab v;
  v.model = "llama";
  auto add = [&](std::string t, float s, TokenType ty) {
    v.tokens.push_back(std::move(t));
    v.scores.push_back(s);
    v.token_types.push_back(static_cast<int32_t>(ty));
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  const char* hex = "0123456789ABCDEF";
  for (unsigned b = 0; b < 256; ++b) {
    add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, TokenType::Byte);
  }
  const std::pair<std::string, float> pieces[] = {
      {kSp, -10},           // 259
      {"h", -10},           // 260
      {"e", -10},           // 261
      {"l", -10},           // 262
      {"o", -10},           // 263
      {"w", -10},           // 264
      {"r", -10},           // 265
      {"d", -10},           // 266
      {"ll", -1},           // 267
      {"he", -2},           // 268
      {kSp + "he", -3},     // 269
      {"llo", -4},          // 270
      {kSp + "hello", -5},  // 271
      {"or", -6},           // 272
      {kSp + "w", -7},      // 273
      {"ld", -8},           // 274
      {kSp + "wor", -9},    // 275
  };
  for (const auto& [t, s] : pieces) add(t, s, TokenType::Normal);
  add("<tool>", 0, TokenType::UserDefined);  // 276
  return v;
}

TEST(TokenizerSpm, MergesByHighestScore) {
  const Tokenizer tok = Tokenizer::from_vocab(spm_vocab());
  // "▁hello": ll(-1) > he(-2) -> [▁ he ll o]; ▁he(-3) > llo(-4) -> [▁he ll o]; llo -> [▁he llo];
  // ▁hello(-5) -> [▁hello].
  // "▁world": or(-6) > ▁w(-7) > ld(-8) > ▁wor(-9) -> [▁wor ld] ("▁world" is no token).
  EXPECT_EQ(tok.encode("hello world", false), (Ids{271, 275, 274}));
  EXPECT_EQ(tok.encode("hello world", true), (Ids{1, 271, 275, 274}));  // BOS by default
  // Equal scores: the leftmost pair first. "▁lll" -> [▁ ll l], and "▁ll"/"lll" are no tokens.
  EXPECT_EQ(tok.encode("lll", false), (Ids{259, 267, 262}));
  // A leading space is kept: "▁▁hello".
  EXPECT_EQ(tok.encode(" hello", false), (Ids{259, 271}));
}

TEST(TokenizerSpm, ByteFallbackForUnknownCharacters) {
  const Tokenizer tok = Tokenizer::from_vocab(spm_vocab());
  // 'i' is no piece: its byte token. The emoji U+1F600 is F0 9F 98 80.
  EXPECT_EQ(tok.encode("hi", false), (Ids{259, 260, byte_id('i')}));
  EXPECT_EQ(tok.encode("\xF0\x9F\x98\x80", false),
            (Ids{259, byte_id(0xF0), byte_id(0x9F), byte_id(0x98), byte_id(0x80)}));
  EXPECT_EQ(tok.encode("\n", false), (Ids{259, byte_id('\n')}));
  EXPECT_EQ(tok.piece(byte_id(0xF0)), "\xF0");
  EXPECT_EQ(tok.piece(271), " hello");  // "▁" -> ' '
  EXPECT_EQ(tok.piece(1), "<s>");
}

TEST(TokenizerSpm, DecodeRemovesThePrefixSpaceAndSkipsControlTokens) {
  const Tokenizer tok = Tokenizer::from_vocab(spm_vocab());
  EXPECT_EQ(tok.decode(Ids{1, 271, 275, 274}), "hello world");
  EXPECT_EQ(tok.decode(Ids{271, 275, 274, 2}), "hello world");
  EXPECT_EQ(tok.decode(Ids{1, 271, 2}, /*render_special=*/true), "<s> hello</s>");
  EXPECT_EQ(tok.decode(Ids{259, 271}), " hello");
  EXPECT_THROW(tok.decode(Ids{5000}), std::out_of_range);
  EXPECT_THROW(tok.piece(-1), std::out_of_range);
}

TEST(TokenizerSpm, SpecialTokens) {
  const Tokenizer tok = Tokenizer::from_vocab(spm_vocab());
  // Control text stays text unless parse_special: "▁<s>hello" -> ▁ < s > he llo.
  EXPECT_EQ(tok.encode("<s>hello", false),
            (Ids{259, byte_id('<'), byte_id('s'), byte_id('>'), 268, 270}));
  // parse_special: the control token, then "▁hello" (a space is prefixed after a special token).
  EXPECT_EQ(tok.encode("<s>hello", false, true), (Ids{1, 271}));
  // User-defined tokens split the text even without parse_special.
  EXPECT_EQ(tok.encode("hello<tool>hello", false), (Ids{271, 276, 271}));
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.unk(), 0);
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(1));
  EXPECT_EQ(tok.n_vocab(), 277);
  EXPECT_EQ(tok.model(), "llama");
}

TEST(TokenizerSpm, AddEosAndNoSpacePrefixFromMetadata) {
  Vocab v = spm_vocab();
  v.add_eos = true;
  v.add_bos = false;
  v.add_space_prefix = false;
  const Tokenizer tok = Tokenizer::from_vocab(v);
  // No "▁" prefix: "hello" -> h e l l o -> ll, he, llo -> [he llo] (no "hello" piece).
  EXPECT_EQ(tok.encode("hello", true), (Ids{268, 270, 2}));
  EXPECT_EQ(tok.decode(tok.encode(" hello", false)), " hello");
}

// ---- byte-level BPE vocabulary ------------------------------------------------------------
// Tokens 0..255: the byte b (in GPT-2's alphabet); then one token per merge, in rank order.
std::string mapped(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    unsigned cp = b;
    if (!printable) {
      unsigned n = 0;
      for (unsigned c = 0; c < b; ++c) {
        const bool pc = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
        n += !pc;
      }
      cp = 256 + n;
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

Vocab bpe_vocab() {
  Vocab v;
  v.model = "gpt2";
  v.pre = "qwen2";
  for (unsigned b = 0; b < 256; ++b) {
    v.tokens.push_back(mapped(std::string(1, static_cast<char>(b))));
    v.token_types.push_back(1);
  }
  const std::pair<std::string, std::string> merges[] = {
      {"h", "e"},      // rank 0 -> 256 "he"
      {"l", "l"},      // rank 1 -> 257 "ll"
      {"he", "ll"},    // rank 2 -> 258 "hell"
      {"hell", "o"},   // rank 3 -> 259 "hello"
      {" ", "w"},      // rank 4 -> 260 " w"
      {"o", "r"},      // rank 5 -> 261 "or"
      {" w", "or"},    // rank 6 -> 262 " wor"
      {"l", "d"},      // rank 7 -> 263 "ld"
      {" wor", "ld"},  // rank 8 -> 264 " world"
      {"e", "l"},      // rank 9 -> 265 "el"
  };
  for (const auto& [l, r] : merges) {
    v.merges.push_back(mapped(l) + " " + mapped(r));
    v.tokens.push_back(mapped(l + r));
    v.token_types.push_back(1);
  }
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {  // 266, 267, 268
    v.tokens.push_back(s);
    v.token_types.push_back(static_cast<int32_t>(TokenType::Control));
  }
  v.bos_id = 266;
  v.eos_id = 268;
  return v;
}

TEST(TokenizerBpe, MergesByLowestRank) {
  const Tokenizer tok = Tokenizer::from_vocab(bpe_vocab());
  // qwen2 split: "hello" | " world".
  // "hello": he(0) -> [he l l o]; ll(1) -> [he ll o]; (he,ll)=2 -> [hell o]; (hell,o)=3.
  // " world": " w"(4) -> or(5) -> " wor"(6) -> ld(7) -> " world"(8).
  EXPECT_EQ(tok.encode("hello world", false), (Ids{259, 264}));
  // "ell": (l,l) has rank 1 < rank 9 of (e,l), although (e,l) is further left: [e ll].
  EXPECT_EQ(tok.encode("ell", false), (Ids{'e', 257}));
  // Unmerged bytes are byte tokens: "wor" -> [w or]; digits are split one by one (qwen2).
  EXPECT_EQ(tok.encode("wor", false), (Ids{'w', 261}));
  EXPECT_EQ(tok.encode("12", false), (Ids{'1', '2'}));
  // qwen2 adds no BOS by default.
  EXPECT_EQ(tok.encode("hello", true), (Ids{259}));
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.piece(264), " world");
  EXPECT_EQ(tok.piece(' '), " ");
  EXPECT_EQ(tok.token_text(264), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(tok.n_merges(), 10);
  EXPECT_EQ(tok.pre(), "qwen2");
}

TEST(TokenizerBpe, SpecialTokensAndEndOfGeneration) {
  const Tokenizer tok = Tokenizer::from_vocab(bpe_vocab());
  EXPECT_EQ(tok.encode("<|im_start|>hello<|im_end|>", false, true), (Ids{267, 259, 268}));
  // Without parse_special the markers are plain text: '<', '|', "im", ... as bytes.
  const Ids plain = tok.encode("<|im_end|>", false, false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok.decode(plain), "<|im_end|>");
  // <|endoftext|> and <|im_end|> end generation by their text; <|im_start|> does not.
  EXPECT_TRUE(tok.is_eog(266));
  EXPECT_TRUE(tok.is_eog(268));
  EXPECT_FALSE(tok.is_eog(267));
  EXPECT_EQ(tok.decode(Ids{267, 259, 268}), "hello");
  EXPECT_EQ(tok.decode(Ids{267, 259, 268}, true), "<|im_start|>hello<|im_end|>");
}

TEST(TokenizerBpe, Llama3PreTokenizerAddsBosAndSkipsMergesForWholeTokens) {
  Vocab v = bpe_vocab();
  v.pre = "llama3";
  const Tokenizer tok = Tokenizer::from_vocab(v);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.encode("hello world", true), (Ids{266, 259, 264}));
  // llama3 keeps up to three digits together; "123" is no token: bytes.
  EXPECT_EQ(tok.encode("1234", false), (Ids{'1', '2', '3', '4'}));
}

// Random byte strings, valid UTF-8 (ASCII, CJK, emoji, controls) and random bytes.
std::string random_text(std::mt19937& rng, size_t n, bool valid_utf8) {
  static const char* kPieces[] = {
      "hello",        " world", "\n", "\t",  " ",  "  ",   "\r\n", "中文", "\xF0\x9F\x98\x80",
      "\xE2\x82\xAC", "é",      "'s", "123", "!?", "\x01", "\x7F", "Ä",    "ß",
      "\xD7\x90"};
  std::string s;
  while (s.size() < n) {
    if (valid_utf8 || rng() % 3) {
      s += kPieces[rng() % std::size(kPieces)];
    } else {
      s += static_cast<char>(rng() % 256);
    }
  }
  return s;
}

TEST(TokenizerBpe, RoundTripIsLosslessForAnyBytes) {
  const Tokenizer tok = Tokenizer::from_vocab(bpe_vocab());
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const std::string s = random_text(rng, 1 + rng() % 60, /*valid_utf8=*/false);
    ASSERT_EQ(tok.decode(tok.encode(s, true)), s) << "case " << i;
  }
}

TEST(TokenizerSpm, RoundTripIsLosslessForUtf8AndBytes) {
  const Tokenizer tok = Tokenizer::from_vocab(spm_vocab());
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) {
    const std::string s = random_text(rng, 1 + rng() % 60, /*valid_utf8=*/i % 2 == 0);
    ASSERT_EQ(tok.decode(tok.encode(s, true)), s) << "case " << i;
  }
}

// ---- validation ---------------------------------------------------------------------------
void expect_load_error(const Vocab& v, const std::string& field, const std::string& what) {
  try {
    (void)Tokenizer::from_vocab(v, "hand.gguf");
    ADD_FAILURE() << "no error for " << field;
  } catch (const LoadError& e) {
    EXPECT_EQ(e.file(), "hand.gguf");
    EXPECT_EQ(e.field(), field);
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, BadVocabulariesAreRejectedWithTheField) {
  Vocab v = spm_vocab();
  v.model = "t5";
  expect_load_error(v, "tokenizer.ggml.model", "unsupported tokenizer model 't5'");
  v = spm_vocab();
  v.scores.pop_back();
  expect_load_error(v, "tokenizer.ggml.scores", "scores for");
  v = spm_vocab();
  v.token_types.push_back(1);
  expect_load_error(v, "tokenizer.ggml.token_type", "token types for");
  v = spm_vocab();
  v.bos_id = 277;
  expect_load_error(v, "tokenizer.ggml.bos_token_id", "outside the vocabulary");
  v = spm_vocab();
  v.token_types[3] = static_cast<int32_t>(TokenType::Byte);
  v.tokens[3] = "<0xZZ>";
  expect_load_error(v, "tokenizer.ggml.tokens", "not of the form <0xXX>");
  v = spm_vocab();
  v.tokens.clear(), v.scores.clear(), v.token_types.clear();
  expect_load_error(v, "tokenizer.ggml.tokens", "empty");
  v = bpe_vocab();
  v.pre = "no-such-pre";
  expect_load_error(v, "tokenizer.ggml.pre", "unsupported pre-tokenizer 'no-such-pre'");
  v = bpe_vocab();
  v.merges.clear();
  expect_load_error(v, "tokenizer.ggml.merges", "needs merges");
  v = bpe_vocab();
  v.merges[3] = "nospace";
  expect_load_error(v, "tokenizer.ggml.merges[3]", "not two pieces");
  v = bpe_vocab();
  v.bos_id.reset();
  v.pre = "llama3";  // adds BOS, but there is none
  expect_load_error(v, "tokenizer.ggml.bos_token_id", "missing");
}

// ---- GGUF ---------------------------------------------------------------------------------
void write_vocab(GgufWriter& w, const Vocab& v) {
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", v.model);
  if (!v.pre.empty()) w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(v.tokens));
  if (!v.scores.empty()) w.set_array("tokenizer.ggml.scores", v.scores);
  w.set_array("tokenizer.ggml.token_type", v.token_types);
  if (!v.merges.empty()) {
    w.set_string_array("tokenizer.ggml.merges", std::span<const std::string>(v.merges));
  }
  if (v.bos_id) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*v.bos_id));
  if (v.eos_id) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*v.eos_id));
}

uint64_t key_offset(const GgufFile& f, std::string_view key) {
  for (const GgufKv& kv : f.metadata()) {
    if (kv.key == key) return kv.offset;
  }
  return 0;
}

TEST(TokenizerGguf, LoadsWhatTheWriterWrote) {
  for (const Vocab& v : {spm_vocab(), bpe_vocab()}) {
    GgufWriter w;
    write_vocab(w, v);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    const std::vector<std::byte> bytes = w.to_bytes();
    const GgufFile f = GgufFile::parse(bytes, "mem.gguf");
    const Tokenizer from_file = Tokenizer::from_gguf(f);
    const Tokenizer from_mem = Tokenizer::from_vocab(v);
    EXPECT_EQ(from_file.n_vocab(), from_mem.n_vocab());
    EXPECT_FALSE(from_file.add_bos());
    for (const char* s : {"hello world", "lll hello", "ell wor 12 \xF0\x9F\x98\x80"}) {
      EXPECT_EQ(from_file.encode(s, false), from_mem.encode(s, false)) << s;
    }
  }
}

TEST(TokenizerGguf, ErrorsNameTheKeyAndItsOffset) {
  {
    GgufWriter w;
    Vocab v = spm_vocab();
    v.model = "bogus";
    write_vocab(w, v);
    const std::vector<std::byte> bytes = w.to_bytes();
    const GgufFile f = GgufFile::parse(bytes, "bad_model.gguf");
    try {
      (void)Tokenizer::from_gguf(f);
      ADD_FAILURE() << "no error";
    } catch (const LoadError& e) {
      EXPECT_EQ(e.file(), "bad_model.gguf");
      EXPECT_EQ(e.field(), "tokenizer.ggml.model");
      EXPECT_EQ(e.offset(), static_cast<int64_t>(key_offset(f, "tokenizer.ggml.model")));
      EXPECT_GT(e.offset(), 0);
    }
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_array("tokenizer.ggml.tokens", std::vector<int32_t>{1, 2, 3});  // not strings
    const std::vector<std::byte> bytes = w.to_bytes();
    const GgufFile f = GgufFile::parse(bytes, "int_tokens.gguf");
    try {
      (void)Tokenizer::from_gguf(f);
      ADD_FAILURE() << "no error";
    } catch (const LoadError& e) {
      EXPECT_EQ(e.field(), "tokenizer.ggml.tokens");
      EXPECT_EQ(e.offset(), static_cast<int64_t>(key_offset(f, "tokenizer.ggml.tokens")));
      EXPECT_NE(std::string(e.what()).find("expected strings"), std::string::npos) << e.what();
    }
  }
  {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    const std::vector<std::byte> bytes = w.to_bytes();
    const GgufFile f = GgufFile::parse(bytes, "no_vocab.gguf");
    EXPECT_THROW((void)Tokenizer::from_gguf(f), LoadError);
  }
}

}  // namespace
}  // namespace pacer::loader
