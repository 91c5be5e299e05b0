#pragma once
// Text <-> token ids for the vocabularies Llama-family GGUF files carry (`tokenizer.*` keys):
//   "llama": SentencePiece (SPM): spaces escaped to U+2581 "▁", a "▁" prefixed to the text,
//            adjacent pieces merged greedily by the score of the token they form, characters that
//            are no token fall back to <0xXX> byte tokens.
//   "gpt2":  byte-level BPE: the text is split by the pre-tokenizer pattern of
//            `tokenizer.ggml.pre` (qwen2, llama3, gpt-2, ...), each piece's bytes merged by the
//            rank of `tokenizer.ggml.merges`; tokens are stored in GPT-2's byte-to-unicode
//            alphabet ("Ġ" = space), so every byte string is encodable and decoding is lossless.
// The semantics follow llama.cpp's llama-vocab (Feb 2025), which is what GGUF files are made for:
// special tokens split the text before tokenizing (user-defined ones always, control ones only
// when parse_special), the BOS/EOS defaults per model, end-of-generation detection by id and by
// the well-known texts (<|im_end|>, <|eot_id|>, <end_of_turn>, ...).
//
// A Tokenizer is immutable after construction; copies share the tables and it is safe to use
// from several threads.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pacer::loader {

class GgufFile;

// GGUF `tokenizer.ggml.token_type` values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// The vocabulary as stored in GGUF, before interpretation. `from_gguf` fills one of these; tests
// and tools can build one by hand.
struct Vocab {
  std::string model;                 // tokenizer.ggml.model: "llama" | "gpt2"
  std::string pre;                   // tokenizer.ggml.pre (gpt2 only; "" = "default")
  std::string name;                  // general.name (a few models get per-token attributes)
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens, stored text
  std::vector<float> scores;         // tokenizer.ggml.scores (empty: all 0)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (empty: all Normal)
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right" (gpt2)
  // Special ids; nullopt = not in the file (the model's default applies).
  std::optional<int64_t> bos_id, eos_id, unk_id, pad_id, eot_id, eom_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

class Tokenizer {
 public:
  // Reads the tokenizer.* keys of a GGUF file (a model or a vocab-only file). Throws LoadError
  // naming the file, the key and the key's byte offset on missing or malformed metadata.
  static Tokenizer from_gguf(const GgufFile& file);
  // From in-memory data; `source` names it in error messages (LoadError, offset -1).
  static Tokenizer from_vocab(const Vocab& vocab, std::string source = "<vocab>");

  // Token ids of `text`. add_special: prepend BOS / append EOS where the vocabulary asks for it
  // (tokenizer.ggml.add_bos_token / add_eos_token, else the model's default: BOS for SPM, none
  // for qwen2). parse_special: text such as "<|im_start|>" becomes that control token instead of
  // being tokenized as characters.
  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special = false) const;
  // The text of a sequence: the concatenated pieces, control and unknown tokens rendered only
  // when render_special. For SPM the space the encoder prefixed is removed from the first
  // rendered piece (after a leading BOS). decode(encode(t)) == t for any bytes t, except where
  // t holds special-token text that splits it (user-defined tokens; control tokens with
  // parse_special) and, for SPM, where t holds U+2581 itself (it decodes as a space).
  // Throws std::out_of_range for an id outside [0, n_vocab).
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;
  // The raw bytes of one token: byte tokens give their byte, SPM "▁" becomes ' ', byte-level BPE
  // tokens are mapped back to bytes, control/user-defined tokens give their text; unused tokens
  // give "". Pieces may be partial UTF-8 sequences. Throws std::out_of_range.
  std::string piece(int32_t id) const;
  // The token's text as stored in the file (e.g. "▁Hello", "Ġworld", "<0x0A>").
  const std::string& token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;  // after llama.cpp's EOG overrides

  int32_t bos() const noexcept;  // -1 when the vocabulary has none
  int32_t eos() const noexcept;
  int32_t eot() const noexcept;
  int32_t unk() const noexcept;
  int32_t pad() const noexcept;
  bool add_bos() const noexcept;
  bool add_eos() const noexcept;
  bool add_space_prefix() const noexcept;
  // End of generation: EOS, EOT, EOM and tokens such as <|im_end|>, <|endoftext|>, <|eot_id|>.
  bool is_eog(int32_t id) const noexcept;
  const std::vector<int32_t>& eog_ids() const noexcept;  // sorted
  int64_t n_vocab() const noexcept;
  int64_t n_merges() const noexcept;
  std::string_view model() const noexcept;  // "llama" | "gpt2"
  std::string_view pre() const noexcept;    // pre-tokenizer name ("" for SPM)

  struct Impl;  // the tables (loader/tokenizer_internal.h)

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace pacer::loader
