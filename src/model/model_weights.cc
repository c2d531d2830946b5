#include "model/model_weights.h"

#include <string>

#include "util/error.h"

namespace qevict {
namespace {

std::string Shape(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

const gguf::TensorInfo& Require(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.FindTensor(name);
  if (t == nullptr) throw Error("model lacks required tensor '" + name + "'");
  return *t;
}

WeightView Matrix(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows) {
  const gguf::TensorInfo& t = Require(f, name);
  if (t.n_dims != 2 || t.ne[0] != cols || t.ne[1] != rows) {
    throw Error("tensor '" + name + "' has shape " + Shape(t) + ", expected [" +
                std::to_string(cols) + ", " + std::to_string(rows) + "]");
  }
  const TypeTraits& traits = GetTypeTraits(t.type);
  if (!traits.weight_supported) {
    throw Error("tensor '" + name + "' has type " + traits.name +
                ", which this build cannot compute with");
  }
  WeightView w;
  w.type = t.type;
  w.rows = rows;
  w.cols = cols;
  w.data = t.data;
  w.row_bytes = RowBytes(t.type, cols);
  return w;
}

const float* Vector(const gguf::File& f, const std::string& name, int64_t n) {
  const gguf::TensorInfo& t = Require(f, name);
  if (t.n_elements() != n || t.ne[0] != n) {
    throw Error("tensor '" + name + "' has shape " + Shape(t) + ", expected [" +
                std::to_string(n) + "]");
  }
  if (t.type != GgmlType::kF32) {
    throw Error("tensor '" + name + "' must be F32, found " + GetTypeTraits(t.type).name);
  }
  if (reinterpret_cast<uintptr_t>(t.data) % alignof(float) != 0) {
    throw Error("tensor '" + name + "' data is not 4-byte aligned");
  }
  return reinterpret_cast<const float*>(t.data);
}

const float* OptionalVector(const gguf::File& f, const std::string& name, int64_t n) {
  return f.FindTensor(name) != nullptr ? Vector(f, name, n) : nullptr;
}

// Rows [first, first + count) of a matrix view.
WeightView Rows(const WeightView& w, int64_t first, int64_t count) {
  WeightView r = w;
  r.data = w.data + static_cast<size_t>(first) * w.row_bytes;
  r.rows = count;
  return r;
}

}  // namespace

ModelWeights ModelWeights::FromGguf(const gguf::File& f, const ModelConfig& c) {
  ModelWeights w;
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  w.token_embd = Matrix(f, "token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = Vector(f, "output_norm.weight", c.n_embd);
  w.output = c.tied_output ? w.token_embd : Matrix(f, "output.weight", c.n_embd, c.n_vocab);
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    L.attn_norm = Vector(f, p + "attn_norm.weight", c.n_embd);
    if (f.FindTensor(p + "attn_qkv.weight") != nullptr) {  // phi3: Q, K and V rows in one
      const WeightView qkv = Matrix(f, p + "attn_qkv.weight", c.n_embd, q_dim + 2 * kv_dim);
      L.wq = Rows(qkv, 0, q_dim);
      L.wk = Rows(qkv, q_dim, kv_dim);
      L.wv = Rows(qkv, q_dim + kv_dim, kv_dim);
    } else {
      L.wq = Matrix(f, p + "attn_q.weight", c.n_embd, q_dim);
      L.wk = Matrix(f, p + "attn_k.weight", c.n_embd, kv_dim);
      L.wv = Matrix(f, p + "attn_v.weight", c.n_embd, kv_dim);
    }
    L.bq = OptionalVector(f, p + "attn_q.bias", q_dim);
    L.bk = OptionalVector(f, p + "attn_k.bias", kv_dim);
    L.bv = OptionalVector(f, p + "attn_v.bias", kv_dim);
    L.q_norm = OptionalVector(f, p + "attn_q_norm.weight", c.head_dim);
    L.k_norm = OptionalVector(f, p + "attn_k_norm.weight", c.head_dim);
    if ((L.q_norm == nullptr) != (L.k_norm == nullptr)) {
      throw Error("layer " + std::to_string(l) + " has one of attn_q_norm/attn_k_norm only");
    }
    L.wo = Matrix(f, p + "attn_output.weight", q_dim, c.n_embd);
    L.attn_post_norm = OptionalVector(f, p + "post_attention_norm.weight", c.n_embd);
    L.ffn_norm = Vector(f, p + "ffn_norm.weight", c.n_embd);
    if (f.FindTensor(p + "ffn_gate.weight") == nullptr) {  // phi3: gate rows, then up rows
      const WeightView gate_up = Matrix(f, p + "ffn_up.weight", c.n_embd, 2 * int64_t{c.n_ff});
      L.w_gate = Rows(gate_up, 0, c.n_ff);
      L.w_up = Rows(gate_up, c.n_ff, c.n_ff);
    } else {
      L.w_gate = Matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff);
      L.w_up = Matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff);
    }
    L.w_down = Matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd);
    L.ffn_post_norm = OptionalVector(f, p + "post_ffw_norm.weight", c.n_embd);
    if (c.arch == "gemma3" && (L.attn_post_norm == nullptr || L.ffn_post_norm == nullptr ||
                               L.q_norm == nullptr)) {
      throw Error("gemma3 layer " + std::to_string(l) +
                  " lacks post_attention_norm, post_ffw_norm or attn_q_norm/attn_k_norm");
    }
  }
  return w;
}

}  // namespace qevict
