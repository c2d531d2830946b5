// Reads the tokenizer.ggml.* metadata of a GGUF file into a Vocab (no validation beyond types;
// Tokenizer::FromVocab validates).
#pragma once

#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace qevict {

Vocab VocabFromGguf(const gguf::File& file);

}  // namespace qevict
