#include "model/llama_model.h"

#include "kernels/elementwise.h"
#include "kernels/matmul_exact.h"
#include "util/error.h"

namespace qevict {

ForwardScratch::ForwardScratch(const LlamaConfig& c, int max_batch_tokens)
    : max_batch(max_batch_tokens) {
  const size_t b = static_cast<size_t>(max_batch_tokens);
  const size_t q_dim = static_cast<size_t>(c.n_heads) * c.head_dim;
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  x.resize(b * c.n_embd);
  xn.resize(b * c.n_embd);
  q.resize(b * q_dim);
  k.resize(b * kv_dim);
  v.resize(b * kv_dim);
  attn.resize(b * q_dim);
  proj.resize(b * c.n_embd);
  gate.resize(b * c.n_ff);
  up.resize(b * c.n_ff);
}

std::unique_ptr<LlamaModel> LlamaModel::Load(const std::string& path) {
  auto model = std::unique_ptr<LlamaModel>(new LlamaModel());
  model->file_ = gguf::File::Open(path);
  model->config_ = LlamaConfig::FromGguf(*model->file_);
  model->weights_ = LlamaWeights::FromGguf(*model->file_, model->config_);
  return model;
}

KvGeometry LlamaModel::kv_geometry(int64_t max_tokens) const {
  KvGeometry g;
  g.n_layers = config_.n_layers;
  g.n_heads = config_.n_heads;
  g.n_kv_heads = config_.n_kv_heads;
  g.head_dim = config_.head_dim;
  g.max_tokens = max_tokens;
  return g;
}

std::unique_ptr<Rope> LlamaModel::MakeRope(int64_t max_positions) const {
  return std::make_unique<Rope>(config_.rope, max_positions);
}

void LlamaModel::Mul(const WeightView& w, const float* x, int n, float* y,
                     ThreadPool& pool) const {
  if (exact_matmul_) {
    MatMulExact(w, x, n, y, pool);
  } else {
    MatMul(w, x, n, y, pool);
  }
}

void LlamaModel::Forward(const int32_t* tokens, const int32_t* pos, int n, int n_logits,
                         const Rope& rope, KvCache& cache, ForwardScratch& s,
                         ThreadPool& pool) const {
  const LlamaConfig& c = config_;
  QEVICT_CHECK(n > 0 && n <= s.max_batch && n_logits >= 0 && n_logits <= n);
  const int64_t d = c.n_embd;
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;

  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab) {
      throw Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary");
    }
    const WeightView& e = weights_.token_embd;
    DequantizeRow(e.type, e.data + static_cast<size_t>(tokens[i]) * e.row_bytes, &s.x[i * d], d);
  }

  for (int l = 0; l < c.n_layers; ++l) {
    const LlamaLayerWeights& L = weights_.layers[l];
    for (int i = 0; i < n; ++i) RmsNorm(&s.x[i * d], L.attn_norm, d, c.rms_eps, &s.xn[i * d]);
    Mul(L.wq, s.xn.data(), n, s.q.data(), pool);
    Mul(L.wk, s.xn.data(), n, s.k.data(), pool);
    Mul(L.wv, s.xn.data(), n, s.v.data(), pool);
    for (int i = 0; i < n; ++i) rope.Apply(&s.q[i * q_dim], c.n_heads, c.head_dim, pos[i]);
    cache.Store(l, n, pos, s.k.data(), s.v.data());
    cache.Attend(l, n, pos, s.q.data(), s.attn.data(), pool);
    Mul(L.wo, s.attn.data(), n, s.proj.data(), pool);
    AddInPlace(s.x.data(), s.proj.data(), n * d);

    for (int i = 0; i < n; ++i) RmsNorm(&s.x[i * d], L.ffn_norm, d, c.rms_eps, &s.xn[i * d]);
    Mul(L.w_gate, s.xn.data(), n, s.gate.data(), pool);
    Mul(L.w_up, s.xn.data(), n, s.up.data(), pool);
    SiluMul(s.gate.data(), s.up.data(), static_cast<int64_t>(n) * c.n_ff);
    Mul(L.w_down, s.gate.data(), n, s.proj.data(), pool);
    AddInPlace(s.x.data(), s.proj.data(), n * d);
  }

  if (n_logits == 0) return;
  const int first = n - n_logits;
  for (int i = first; i < n; ++i) {
    RmsNorm(&s.x[i * d], weights_.output_norm, d, c.rms_eps, &s.xn[(i - first) * d]);
  }
  s.logits.resize(static_cast<size_t>(n_logits) * c.n_vocab);
  Mul(weights_.output, s.xn.data(), n_logits, s.logits.data(), pool);
}

}  // namespace qevict
