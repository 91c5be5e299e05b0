#pragma once
// The tables behind a Tokenizer (internal to the loader): built once from a Vocab by
// build_tokenizer_tables(), read-only afterwards. The two algorithms live in
// tokenizer_spm.cpp and tokenizer_bpe.cpp.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loader/tokenizer.h"
#include "loader/tokenizer_pretok.h"

namespace pacer::loader {

// Byte offset of a GGUF key for error messages (-1 when unknown, e.g. in-memory vocabularies).
using KeyOffset = std::function<int64_t(std::string_view key)>;

// GGUF keys, named once.
namespace tokenizer_keys {
inline constexpr std::string_view kModel = "tokenizer.ggml.model";
inline constexpr std::string_view kPre = "tokenizer.ggml.pre";
inline constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
inline constexpr std::string_view kScores = "tokenizer.ggml.scores";
inline constexpr std::string_view kTokenType = "tokenizer.ggml.token_type";
inline constexpr std::string_view kMerges = "tokenizer.ggml.merges";
inline constexpr std::string_view kBos = "tokenizer.ggml.bos_token_id";
inline constexpr std::string_view kEos = "tokenizer.ggml.eos_token_id";
inline constexpr std::string_view kUnk = "tokenizer.ggml.unknown_token_id";
inline constexpr std::string_view kPad = "tokenizer.ggml.padding_token_id";
inline constexpr std::string_view kEot = "tokenizer.ggml.eot_token_id";
inline constexpr std::string_view kEom = "tokenizer.ggml.eom_token_id";
inline constexpr std::string_view kAddBos = "tokenizer.ggml.add_bos_token";
inline constexpr std::string_view kAddEos = "tokenizer.ggml.add_eos_token";
inline constexpr std::string_view kAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
}  // namespace tokenizer_keys

// GPT-2's reversible byte <-> code point alphabet: printable Latin-1 bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves, the other 68 bytes for U+0100.. in byte order, so that every
// byte string is a printable string without spaces.
uint32_t gpt2_byte_to_cpt(uint8_t byte) noexcept;
// Inverse mapping: the byte a code point stands for, or -1 when it is not in the alphabet.
int gpt2_cpt_to_byte(uint32_t cpt) noexcept;
// Bytes of a string written in that alphabet; nullopt when a character is outside it.
std::optional<std::string> gpt2_unmap(std::string_view mapped);
// The alphabet form of raw bytes (what GGUF stores for byte-level BPE tokens and merges).
std::string gpt2_map(std::string_view bytes);

struct Tokenizer::Impl {
  enum class Kind { Spm, Bpe };
  Kind kind = Kind::Spm;
  std::string source;  // file name or "<vocab>", for messages
  std::string model;   // "llama" | "gpt2"
  std::string pre_name;
  PreTokenizer pre = PreTokenizer::Default;
  bool ignore_merges = false;  // llama3: a piece that is a whole token skips merging

  std::vector<std::string> text;   // stored text
  std::vector<std::string> piece;  // rendered bytes (see Tokenizer::piece)
  std::vector<float> score;
  std::vector<TokenType> type;
  std::vector<uint8_t> strip;  // kLstrip | kRstrip: eat whitespace beside a special token
  static constexpr uint8_t kLstrip = 1, kRstrip = 2;

  // SPM: stored text -> id. BPE: the byte string a token stands for -> id. Later ids win on
  // duplicates (as llama.cpp's token_to_id). Keys view `text` / `bpe_bytes`.
  std::unordered_map<std::string_view, int32_t> by_text;
  std::vector<std::string> bpe_bytes;     // BPE: unmapped token text ("" when not in the alphabet)
  std::array<int32_t, 256> byte_token{};  // byte-fallback / single-byte token, -1 if none

  // BPE merges over "symbols": ids < n_vocab are tokens, larger ids are byte strings that some
  // merge produces or consumes without being a token themselves.
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, Merge> merges;  // (left << 32 | right) -> merge
  std::array<int32_t, 256> byte_symbol{};      // symbol of each single byte
  int64_t n_merges = 0;

  // Tokens that split the text before tokenizing (control, user-defined, unknown), longest
  // text first.
  std::vector<int32_t> special_tokens;

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  std::vector<int32_t> eog;  // sorted

  int32_t lookup(std::string_view s) const {
    auto it = by_text.find(s);
    return it == by_text.end() ? -1 : it->second;
  }
  int64_t n_vocab() const { return static_cast<int64_t>(text.size()); }
};

// Validates `v` and builds the tables. Errors: LoadError(source, key, key_offset(key), ...).
std::shared_ptr<const Tokenizer::Impl> build_tokenizer_tables(const Vocab& v, std::string source,
                                                              const KeyOffset& key_offset);

// Appends the ids of one text fragment (no special tokens inside). SPM: `escaped` already has
// its spaces replaced by U+2581 and the prefix added.
void spm_encode_fragment(const Tokenizer::Impl& t, std::string_view escaped,
                         std::vector<int32_t>& out);
void bpe_encode_fragment(const Tokenizer::Impl& t, std::string_view text,
                         std::vector<int32_t>& out);
// BPE part of building: interns symbols and fills `merges` (throws LoadError on a malformed
// merge string).
void build_bpe_merges(Tokenizer::Impl& t, const std::vector<std::string>& merges,
                      const KeyOffset& key_offset);

}  // namespace pacer::loader
