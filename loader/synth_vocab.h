#pragma once
// Synthetic vocabularies for synthetic models: exactly n_vocab tokens that a Tokenizer loads and
// that encode ordinary English to multi-character tokens, so `pacer run` on a synthetic model
// tokenizes prompts and prints text like a real model would (only the weights are random).
//
//   SentencePiece (GGUF model "llama", llama/gemma shapes): <unk>=0 <s>=1 </s>=2, the 256 byte
//     tokens <0x00>..<0xFF> (ids 3..258), single characters, then merged pieces ("▁the",
//     "ing", ...) with decreasing scores.
//   Gpt2Qwen2 (model "gpt2", pre "qwen2", Qwen2 shapes): the 256 byte tokens of GPT-2's
//     byte alphabet (ids 0..255), merged pieces ("Ġthe", "ing", ...) each with its merge
//     "left right" in rank order, and <|endoftext|> <|im_start|> <|im_end|> as the last three ids
//     (control tokens; <|im_end|> is EOS).
// The merged pieces are learned by BPE from a built-in English word list (Zipf-weighted) and then
// extended, when n_vocab asks for more, with pseudo-words drawn from English syllables with
// `seed`; every piece is the concatenation of two earlier tokens, so all are reachable.
// The same (kind, n_vocab, seed) always gives the same vocabulary.
#include <cstdint>

namespace pacer::loader {

class GgufWriter;
class GgufFile;
struct Vocab;

// SentencePiecePhi3: SentencePiece plus Phi-3's <|endoftext|> and <|end|> control tokens at the
// end (llama.cpp's loader looks <|endoftext|> up by name in any model named phi-3).
enum class VocabKind { SentencePiece, Gpt2Qwen2, SentencePiecePhi3 };

// Smallest n_vocab a synthetic vocabulary can have (specials + 256 byte tokens + a few pieces).
inline constexpr int64_t kMinSyntheticVocab = 300;

// The vocabulary in memory (tests; write_synthetic_vocab writes exactly this). Throws
// std::invalid_argument when n_vocab < kMinSyntheticVocab or above 2^31 - 1.
Vocab make_synthetic_vocab(VocabKind kind, int64_t n_vocab, uint64_t seed);
// Sets the tokenizer.* keys of `w`.
void write_synthetic_vocab(GgufWriter& w, VocabKind kind, int64_t n_vocab, uint64_t seed);
// Copies every tokenizer.* key of `vocab_file` (e.g. one of llama.cpp's vocab-only GGUFs) to `w`.
// Throws LoadError naming the file when it has no tokenizer.ggml.tokens.
void copy_vocab(GgufWriter& w, const GgufFile& vocab_file);

}  // namespace pacer::loader
