// Hyperparameters of a decoder-only transformer read from GGUF metadata, validated before
// anything is allocated from them. One struct covers the families the engine runs (the GGUF
// `general.architecture` values llama.cpp uses): llama (and Mistral files, which are llama),
// qwen2, qwen3, gemma3 and phi3. What differs between them is data here, not code paths chosen
// by name in the forward pass (model/transformer_model.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/rope.h"

namespace qevict {

enum class FfnActivation {
  kSilu,      // SwiGLU: silu(gate) * up (llama, qwen, phi3)
  kGeluTanh,  // GeGLU with the tanh approximation of GELU (gemma3)
};

struct ModelConfig {
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
  RopeConfig rope;        // global (full-attention) layers
  RopeConfig rope_local;  // sliding-window layers (gemma3: its own base); == rope otherwise
  bool tied_output = false;  // output projection shares token_embd

  // Family options.
  FfnActivation activation = FfnActivation::kSilu;
  float embedding_scale = 1.0f;    // token embeddings are multiplied by it (gemma3: sqrt(n_embd))
  // Multiplies queries after RoPE, so that attention's own 1/sqrt(head_dim) yields the family's
  // scaling: 1 for every family but gemma3 with an attention.scale key (query_pre_attn_scalar).
  float query_prescale = 1.0f;
  float final_logit_softcap = 0.0f;  // logits = c * tanh(logits / c) when > 0 (gemma)

  // Sliding-window attention: window in tokens (a query at p sees keys at p - window + 1 .. p),
  // and which layers use it. Empty `sliding` or window 0: every layer is global.
  int sliding_window = 0;
  std::vector<bool> sliding;  // [n_layers] true for a sliding-window layer

  bool is_sliding(int layer) const { return sliding_window > 0 && sliding[layer]; }
  int n_sliding_layers() const;
  const RopeConfig& rope_for(int layer) const { return is_sliding(layer) ? rope_local : rope; }

  // Reads and validates; throws qevict::Error naming the offending key and value.
  static ModelConfig FromGguf(const gguf::File& file);
};

// The architectures FromGguf accepts, for messages ("llama, qwen2, ...").
const char* SupportedArchitectures();
// Ends the error of a GGUF file that is not a model qevict can run: what to do about it.
std::string UnreadableModelFix();

}  // namespace qevict
