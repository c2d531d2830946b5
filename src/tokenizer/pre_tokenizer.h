// Pre-tokenizers of byte-level BPE models: split text into the words BPE runs on, as the
// model's Hugging Face pre-tokenizer regex would. Each is implemented as a hand-written matcher
// over Unicode character classes (no regex engine):
//   kGpt2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kLlama3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2  as kLlama3 with \p{N} (one digit per word) instead of \p{N}{1,3}
//   kSmolLm every \p{N} character is a word of its own (HF Digits(individual_digits)), and the
//           text between them is split with kGpt2 (HF ByteLevel(use_regex)).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace qevict {

enum class PreTokenizer { kGpt2, kLlama3, kQwen2, kSmolLm };

// The pre-tokenizer for a tokenizer.ggml.pre value ("default", "gpt2", "llama-bpe", "llama3",
// "qwen2", "smollm"), or nullopt for names we do not implement.
std::optional<PreTokenizer> PreTokenizerFromName(std::string_view name);
const char* PreTokenizerName(PreTokenizer pre);

// Appends the words of `text` to `words`; concatenated, they are exactly `text`. Invalid UTF-8
// bytes are words' characters like any other (class "other").
void SplitWords(PreTokenizer pre, std::string_view text, std::vector<std::string_view>* words);

}  // namespace qevict
