// The decoder-only transformer forward pass of every supported family (model/model_config.h):
// embeddings (scaled for gemma), n_layers of (RMSNorm, Q/K/V projections with optional biases
// and per-head Q/K RMSNorm, RoPE, attention with GQA through a KvCache, optional post-norm,
// residual, RMSNorm, SwiGLU or GeGLU, optional post-norm, residual), final norm, output
// projection and optional logit soft-capping. The model owns no per-sequence state: the cache
// and the scratch buffers are passed in, so one loaded model serves many sessions.
#pragma once

#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/thread_pool.h"

namespace qevict {

// Activations for up to max_batch tokens at once; one per session.
// RoPE tables of one session: the global layers' and, when sliding-window layers rotate with a
// base of their own (gemma3), theirs.
// Shared, read-only: every session of a model uses the same tables (kv caches keep references
// to them, sessions keep them alive).
struct RopeTables {
  std::shared_ptr<const Rope> global;
  std::shared_ptr<const Rope> local;  // nullptr: sliding layers use `global`
  const Rope& sliding() const { return local ? *local : *global; }
};

struct ForwardScratch {
  explicit ForwardScratch(const ModelConfig& c, int max_batch);
  // Frees every buffer (a kept conversation between turns); Allocate makes them again.
  void Release();
  void Allocate(const ModelConfig& c);
  bool allocated() const { return !x.empty(); }
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

class TransformerModel {
 public:
  // Opens, maps and validates the file; throws qevict::Error on anything unusable.
  static std::unique_ptr<TransformerModel> Load(const std::string& path);

  const ModelConfig& config() const { return config_; }
  // Exact products (fp32 activations, fp64 accumulation; see kernels/matmul_exact.h) instead of
  // the quantized fast kernels: for reference checks, not for speed.
  void set_exact_matmul(bool exact) { exact_matmul_ = exact; }
  const gguf::File& file() const { return *file_; }
  // The geometry of the cache a session of max_tokens needs. With sliding-window layers, this is
  // the geometry of the global layers (where the policy applies); the sliding layers' ring
  // (kv/interleaved_cache.h) is described by its ring_* fields.
  KvGeometry kv_geometry(int64_t max_tokens) const;
  // RoPE tables for positions [0, max_positions) at least: the largest tables made so far are
  // kept and shared by every later session that fits them. Thread-safe.
  RopeTables MakeRopes(int64_t max_positions) const;

  // Runs n tokens at positions pos through the model, storing their keys/values in `cache`.
  // Logits are computed for the last `n_logits` tokens of the batch (0..n) into scratch.logits,
  // row r holding token n - n_logits + r.
  void Forward(const int32_t* tokens, const int32_t* pos, int n, int n_logits,
               const RopeTables& ropes, KvCache& cache, ForwardScratch& scratch,
               ThreadPool& pool) const;

 private:
  void Mul(const WeightView& w, const float* x, int n, float* y, ThreadPool& pool) const;
  // Products of the same rows x (MatMulGroup: one parallel region for the group).
  void MulGroup(std::initializer_list<MatMulProduct> products, const float* x, int n,
                ThreadPool& pool) const;
  // Q, K and V of n normalized rows (biases, Q/K norms, RoPE and query scaling applied to Q).
  void ProjectQkv(const LayerWeights& L, int layer, const int32_t* pos, int n,
                  const RopeTables& ropes, ForwardScratch& s, ThreadPool& pool) const;
  void FeedForward(const LayerWeights& L, int n, ForwardScratch& s, ThreadPool& pool) const;

  std::unique_ptr<gguf::File> file_;
  bool exact_matmul_ = false;
  ModelConfig config_;
  ModelWeights weights_;
  mutable std::mutex ropes_mutex_;
  mutable RopeTables ropes_;  // the largest tables made so far
};

}  // namespace qevict
