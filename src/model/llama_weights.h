// Views of a llama model's tensors inside the mapped GGUF file, with every shape and type
// checked against the hyperparameters. Nothing is copied.
#pragma once

#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/llama_config.h"

namespace qevict {

struct LlamaLayerWeights {
  const float* attn_norm;  // [n_embd]
  WeightView wq;           // [n_heads*head_dim rows][n_embd cols]
  WeightView wk;           // [n_kv_heads*head_dim][n_embd]
  WeightView wv;           // [n_kv_heads*head_dim][n_embd]
  WeightView wo;           // [n_embd][n_heads*head_dim]
  const float* ffn_norm;   // [n_embd]
  WeightView w_gate;       // [n_ff][n_embd]
  WeightView w_up;         // [n_ff][n_embd]
  WeightView w_down;       // [n_embd][n_ff]
};

struct LlamaWeights {
  WeightView token_embd;  // [n_vocab][n_embd]
  const float* output_norm;
  WeightView output;  // [n_vocab][n_embd]; token_embd when tied
  std::vector<LlamaLayerWeights> layers;

  // Throws qevict::Error naming the tensor when one is missing or has the wrong shape or type.
  static LlamaWeights FromGguf(const gguf::File& file, const LlamaConfig& config);
};

}  // namespace qevict
