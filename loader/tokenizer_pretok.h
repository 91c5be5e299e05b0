#pragma once
// Pre-tokenizers of byte-level BPE vocabularies: the regular expressions of Hugging Face
// `tokenizer.json` files (named by GGUF `tokenizer.ggml.pre`), implemented by hand over Unicode
// categories because std::regex has no \p{L}. Each pre-tokenizer is a sequence of patterns;
// like llama.cpp's unicode_regex_split, every pattern splits each piece left by the previous
// one into its matches AND the unmatched text between them (HF's "Isolated" split), so the
// pieces always cover the whole input.
//
// Patterns (leftmost-first alternation, greedy quantifiers, as in the original regexes):
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//           | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2:  as llama3 with \p{N} (one digit per piece)
#include <optional>
#include <string_view>
#include <vector>

namespace pacer::loader {

enum class PreTokenizer {
  Gpt2,       // gpt-2, mpt, olmo, phi-2, roberta-bpe, jina-*
  Llama3,     // llama3, llama-v3, llama-bpe, falcon3, dbrx, smaug-bpe (also skips merges when a
              // whole piece is a token)
  Qwen2,      // qwen2, deepseek-r1-qwen, stablelm2, megrez
  Starcoder,  // starcoder, refact, smollm, codeshell, command-r: \p{N} then gpt2
  Falcon,     // falcon: [\p{P}\$\+<=>\^~\|`]+ then gpt2 then [0-9][0-9][0-9]
  Default,    // "default" (llama.cpp's fallback): [\p{P}\$\+<=>\^~\|]+, gpt2, \p{N}+, [0-9]{3}
};

// The pre-tokenizer a GGUF `tokenizer.ggml.pre` value names; nullopt when unsupported.
std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name) noexcept;
// Comma-separated list of the accepted names (for error messages).
std::string_view supported_pre_tokenizer_names() noexcept;

// Splits `text` into consecutive, non-empty pieces that concatenate back to `text` exactly
// (invalid UTF-8 bytes are kept, classified like a symbol).
std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace pacer::loader
