// The llama-family forward pass: embeddings, n_layers of (RMSNorm, attention with RoPE and GQA
// through a KvCache, residual, RMSNorm, SwiGLU, residual), final norm and output projection.
// The model owns no per-sequence state: the cache and the scratch buffers are passed in, so one
// loaded model serves many sessions.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "model/llama_config.h"
#include "model/llama_weights.h"
#include "util/thread_pool.h"

namespace qevict {

// Activations for up to max_batch tokens at once; one per session.
struct ForwardScratch {
  explicit ForwardScratch(const LlamaConfig& c, int max_batch);
  int max_batch;
  std::vector<float> x;       // [max_batch][n_embd] residual stream
  std::vector<float> xn;      // [max_batch][n_embd] normalized
  std::vector<float> q;       // [max_batch][n_heads*head_dim]
  std::vector<float> k;       // [max_batch][n_kv_heads*head_dim]
  std::vector<float> v;       // [max_batch][n_kv_heads*head_dim]
  std::vector<float> attn;    // [max_batch][n_heads*head_dim]
  std::vector<float> proj;    // [max_batch][n_embd]
  std::vector<float> gate;    // [max_batch][n_ff]
  std::vector<float> up;      // [max_batch][n_ff]
  std::vector<float> logits;  // [max_batch][n_vocab] (rows requested only)
};

class LlamaModel {
 public:
  // Opens, maps and validates the file; throws qevict::Error on anything unusable.
  static std::unique_ptr<LlamaModel> Load(const std::string& path);

  const LlamaConfig& config() const { return config_; }
  // Exact products (fp32 activations, fp64 accumulation; see kernels/matmul_exact.h) instead of
  // the quantized fast kernels: for reference checks, not for speed.
  void set_exact_matmul(bool exact) { exact_matmul_ = exact; }
  const gguf::File& file() const { return *file_; }
  KvGeometry kv_geometry(int64_t max_tokens) const;
  // RoPE tables for positions [0, max_positions).
  std::unique_ptr<Rope> MakeRope(int64_t max_positions) const;

  // Runs n tokens at positions pos through the model, storing their keys/values in `cache`.
  // Logits are computed for the last `n_logits` tokens of the batch (0..n) into scratch.logits,
  // row r holding token n - n_logits + r.
  void Forward(const int32_t* tokens, const int32_t* pos, int n, int n_logits,
               const Rope& rope, KvCache& cache, ForwardScratch& scratch, ThreadPool& pool) const;

 private:
  void Mul(const WeightView& w, const float* x, int n, float* y, ThreadPool& pool) const;

  std::unique_ptr<gguf::File> file_;
  bool exact_matmul_ = false;
  LlamaConfig config_;
  LlamaWeights weights_;
};

}  // namespace qevict
