// Views of a model's tensors inside the mapped GGUF file, with every shape and type checked
// against the hyperparameters. Nothing is copied: fused tensors (phi3's attn_qkv and gate-up
// ffn_up) are split into row ranges of the same mapping. Optional tensors are nullptr when the
// family has none.
#pragma once

#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/model_config.h"

namespace qevict {

struct LayerWeights {
  const float* attn_norm;  // [n_embd]
  WeightView wq;           // [n_heads*head_dim rows][n_embd cols]
  WeightView wk;           // [n_kv_heads*head_dim][n_embd]
  WeightView wv;           // [n_kv_heads*head_dim][n_embd]
  const float* bq = nullptr;  // [n_heads*head_dim] (qwen2)
  const float* bk = nullptr;  // [n_kv_heads*head_dim]
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // [head_dim] RMSNorm of each query head (qwen3, gemma3)
  const float* k_norm = nullptr;  // [head_dim] RMSNorm of each key head
  WeightView wo;           // [n_embd][n_heads*head_dim]
  const float* attn_post_norm = nullptr;  // [n_embd] norm of attention's output (gemma3)
  const float* ffn_norm;   // [n_embd]
  WeightView w_gate;       // [n_ff][n_embd]
  WeightView w_up;         // [n_ff][n_embd]
  WeightView w_down;       // [n_embd][n_ff]
  const float* ffn_post_norm = nullptr;   // [n_embd] norm of the MLP's output (gemma3)
};

struct ModelWeights {
  WeightView token_embd;  // [n_vocab][n_embd]
  const float* output_norm;
  WeightView output;  // [n_vocab][n_embd]; token_embd when tied
  std::vector<LayerWeights> layers;

  // Throws qevict::Error naming the tensor when one is missing or has the wrong shape or type.
  static ModelWeights FromGguf(const gguf::File& file, const ModelConfig& config);
};

}  // namespace qevict
