#include "model/transformer_model.h"

#include <algorithm>

#include "kernels/elementwise.h"
#include "kernels/matmul_exact.h"
#include "util/error.h"

namespace qevict {

ForwardScratch::ForwardScratch(const ModelConfig& c, int max_batch_tokens)
    : max_batch(max_batch_tokens) {
  Allocate(c);
}

void ForwardScratch::Release() {
  for (std::vector<float>* buffer : {&x, &xn, &q, &k, &v, &attn, &proj, &gate, &up, &logits}) {
    std::vector<float>().swap(*buffer);
  }
}

void ForwardScratch::Allocate(const ModelConfig& c) {
  const size_t b = static_cast<size_t>(max_batch);
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

std::unique_ptr<TransformerModel> TransformerModel::Load(const std::string& path) {
  auto model = std::unique_ptr<TransformerModel>(new TransformerModel());
  model->file_ = gguf::File::Open(path);  // its errors name the file
  try {
    model->config_ = ModelConfig::FromGguf(*model->file_);
    model->weights_ = ModelWeights::FromGguf(*model->file_, model->config_);
  } catch (const Error& e) {
    throw Error("model '" + path + "': " + e.what() + UnreadableModelFix());
  }
  return model;
}

KvGeometry TransformerModel::kv_geometry(int64_t max_tokens) const {
  KvGeometry g;
  g.n_layers = config_.n_layers - config_.n_sliding_layers();
  g.n_heads = config_.n_heads;
  g.n_kv_heads = config_.n_kv_heads;
  g.head_dim = config_.head_dim;
  g.max_tokens = max_tokens;
  g.ring_layers = config_.n_sliding_layers();
  g.ring_window = g.ring_layers > 0 ? config_.sliding_window : 0;
  return g;
}

RopeTables TransformerModel::MakeRopes(int64_t max_positions) const {
  std::lock_guard<std::mutex> lock(ropes_mutex_);
  if (ropes_.global != nullptr && ropes_.global->max_positions() >= max_positions) return ropes_;
  RopeTables r;
  r.global = std::make_shared<const Rope>(config_.rope, max_positions);
  const RopeConfig& a = config_.rope;
  const RopeConfig& b = config_.rope_local;
  const bool same = a.freq_base == b.freq_base && a.freq_scale == b.freq_scale &&
                    a.llama3_factor == b.llama3_factor && a.freq_factors == b.freq_factors;
  if (config_.n_sliding_layers() > 0 && !same) {
    r.local = std::make_shared<const Rope>(config_.rope_local, max_positions);
  }
  ropes_ = r;
  return r;
}

void TransformerModel::Mul(const WeightView& w, const float* x, int n, float* y,
                           ThreadPool& pool) const {
  if (exact_matmul_) {
    MatMulExact(w, x, n, y, pool);
  } else {
    MatMul(w, x, n, y, pool);
  }
}

void TransformerModel::MulGroup(std::initializer_list<MatMulProduct> products, const float* x,
                                int n, ThreadPool& pool) const {
  if (exact_matmul_) {
    for (const MatMulProduct& p : products) MatMulExact(*p.w, x, n, p.y, pool);
  } else {
    MatMulGroup(std::span<const MatMulProduct>(products.begin(), products.size()), x, n, pool);
  }
}

namespace {

// The per-token work between the matrix products (norms, biases, RoPE, the FFN's activation,
// residual sums) runs on the pool too when a batch holds a prompt's tokens: on 2 threads it
// would otherwise leave one core idle for a tenth of a prompt's time. A decode step's single
// row stays on the calling thread (its few hundred parallel regions would cost more than it).
constexpr int kParallelRows = 8;     // rows in a batch from which rows are spread
constexpr int64_t kRowGrain = 4;     // rows a chunk at least
// Element-wise passes are cut into spans of a multiple of every SIMD width, so each element
// takes the same path (vector body or scalar tail) as in one pass over the whole array.
constexpr int64_t kSpan = 4096;

// fn(i) for every row i in [0, n).
template <class Fn>
void ForEachRow(ThreadPool& pool, int n, const Fn& fn) {
  if (n < kParallelRows) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  pool.ParallelFor(n, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(static_cast<int>(i));
  });
}

// fn(begin, count) over [0, total) in spans of kSpan elements (one call when total is small).
template <class Fn>
void ForEachSpan(ThreadPool& pool, int64_t total, const Fn& fn) {
  if (total <= kSpan * kParallelRows) {
    fn(int64_t{0}, total);
    return;
  }
  pool.ParallelFor((total + kSpan - 1) / kSpan, 1, [&](int64_t first, int64_t last) {
    const int64_t begin = first * kSpan;
    fn(begin, std::min(total, last * kSpan) - begin);
  });
}

void AddBias(float* row, const float* bias, int64_t dim) {
  if (bias != nullptr) AddInPlace(row, bias, dim);
}

// RMSNorm of every head_dim-long head of one row, in place.
void NormHeads(float* row, const float* weight, int heads, int head_dim, float eps) {
  if (weight == nullptr) return;
  for (int64_t h = 0; h < heads; ++h) {
    RmsNorm(row + h * head_dim, weight, head_dim, eps, row + h * head_dim);
  }
}

// out[i] = RMSNorm(in[i]) for the n rows of d values (in place when out == in).
void NormRows(ThreadPool& pool, const float* in, const float* weight, int n, int64_t d,
              float eps, float* out) {
  ForEachRow(pool, n, [&](int i) { RmsNorm(in + i * d, weight, d, eps, out + i * d); });
}

void AddRows(ThreadPool& pool, float* x, const float* y, int64_t total) {
  ForEachSpan(pool, total, [&](int64_t begin, int64_t count) {
    AddInPlace(x + begin, y + begin, count);
  });
}

}  // namespace

void TransformerModel::ProjectQkv(const LayerWeights& L, int layer, const int32_t* pos, int n,
                                  const RopeTables& ropes, ForwardScratch& s,
                                  ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  MulGroup({{&L.wq, s.q.data()}, {&L.wk, s.k.data()}, {&L.wv, s.v.data()}}, s.xn.data(), n, pool);
  const Rope& rope = c.is_sliding(layer) ? ropes.sliding() : *ropes.global;
  ForEachRow(pool, n, [&](int i) {
    float* q = &s.q[i * q_dim];
    float* k = &s.k[i * kv_dim];
    AddBias(q, L.bq, q_dim);
    AddBias(k, L.bk, kv_dim);
    AddBias(&s.v[i * kv_dim], L.bv, kv_dim);
    NormHeads(q, L.q_norm, c.n_heads, c.head_dim, c.rms_eps);
    NormHeads(k, L.k_norm, c.n_kv_heads, c.head_dim, c.rms_eps);
    rope.Apply(q, c.n_heads, c.head_dim, pos[i]);
    if (c.query_prescale != 1.0f) Scale(q, q_dim, c.query_prescale);
  });
}

void TransformerModel::FeedForward(const LayerWeights& L, int n, ForwardScratch& s,
                                   ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t d = c.n_embd;
  NormRows(pool, s.x.data(), L.ffn_norm, n, d, c.rms_eps, s.xn.data());
  MulGroup({{&L.w_gate, s.gate.data()}, {&L.w_up, s.up.data()}}, s.xn.data(), n, pool);
  const bool gelu = c.activation == FfnActivation::kGeluTanh;
  ForEachSpan(pool, static_cast<int64_t>(n) * c.n_ff, [&](int64_t begin, int64_t count) {
    if (gelu) {
      GeluTanhMul(s.gate.data() + begin, s.up.data() + begin, count);
    } else {
      SiluMul(s.gate.data() + begin, s.up.data() + begin, count);
    }
  });
  Mul(L.w_down, s.gate.data(), n, s.proj.data(), pool);
  if (L.ffn_post_norm != nullptr) {
    NormRows(pool, s.proj.data(), L.ffn_post_norm, n, d, c.rms_eps, s.proj.data());
  }
  AddRows(pool, s.x.data(), s.proj.data(), n * d);
}

void TransformerModel::Forward(const int32_t* tokens, const int32_t* pos, int n, int n_logits,
                               const RopeTables& ropes, KvCache& cache, ForwardScratch& s,
                               ThreadPool& pool) const {
  const ModelConfig& c = config_;
  QEVICT_CHECK(n > 0 && n <= s.max_batch && n_logits >= 0 && n_logits <= n);
  const int64_t d = c.n_embd;

  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab) {
      throw Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary");
    }
  }
  ForEachRow(pool, n, [&](int i) {
    const WeightView& e = weights_.token_embd;
    DequantizeRow(e.type, e.data + static_cast<size_t>(tokens[i]) * e.row_bytes, &s.x[i * d], d);
    if (c.embedding_scale != 1.0f) Scale(&s.x[i * d], d, c.embedding_scale);
  });

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = weights_.layers[l];
    NormRows(pool, s.x.data(), L.attn_norm, n, d, c.rms_eps, s.xn.data());
    ProjectQkv(L, l, pos, n, ropes, s, pool);
    cache.Store(l, n, pos, s.k.data(), s.v.data());
    cache.Attend(l, n, pos, s.q.data(), s.attn.data(), pool);
    Mul(L.wo, s.attn.data(), n, s.proj.data(), pool);
    if (L.attn_post_norm != nullptr) {
      NormRows(pool, s.proj.data(), L.attn_post_norm, n, d, c.rms_eps, s.proj.data());
    }
    AddRows(pool, s.x.data(), s.proj.data(), n * d);
    FeedForward(L, n, s, pool);
  }

  if (n_logits == 0) return;
  const int first = n - n_logits;
  for (int i = first; i < n; ++i) {
    RmsNorm(&s.x[i * d], weights_.output_norm, d, c.rms_eps, &s.xn[(i - first) * d]);
  }
  s.logits.resize(static_cast<size_t>(n_logits) * c.n_vocab);
  Mul(weights_.output, s.xn.data(), n_logits, s.logits.data(), pool);
  if (c.final_logit_softcap > 0.0f) {
    SoftCap(s.logits.data(), static_cast<int64_t>(n_logits) * c.n_vocab, c.final_logit_softcap);
  }
}

}  // namespace qevict
