// Hyperparameters of a llama-family model read from GGUF metadata, validated before anything is
// allocated from them.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf.h"
#include "kernels/rope.h"

namespace qevict {

struct LlamaConfig {
  std::string arch;  // general.architecture
  std::string name;  // general.name, informational
  int n_layers = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int n_vocab = 0;
  int64_t context_length = 0;
  float rms_eps = 1e-5f;
  RopeConfig rope;
  bool tied_output = false;  // output projection shares token_embd

  // Reads and validates; throws qevict::Error naming the offending key and value.
  static LlamaConfig FromGguf(const gguf::File& file);
};

}  // namespace qevict
