#include "model/llama_weights.h"

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

}  // namespace

LlamaWeights LlamaWeights::FromGguf(const gguf::File& f, const LlamaConfig& c) {
  LlamaWeights w;
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  w.token_embd = Matrix(f, "token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = Vector(f, "output_norm.weight", c.n_embd);
  w.output = c.tied_output ? w.token_embd : Matrix(f, "output.weight", c.n_embd, c.n_vocab);
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LlamaLayerWeights& L = w.layers[l];
    L.attn_norm = Vector(f, p + "attn_norm.weight", c.n_embd);
    L.wq = Matrix(f, p + "attn_q.weight", c.n_embd, q_dim);
    L.wk = Matrix(f, p + "attn_k.weight", c.n_embd, kv_dim);
    L.wv = Matrix(f, p + "attn_v.weight", c.n_embd, kv_dim);
    L.wo = Matrix(f, p + "attn_output.weight", q_dim, c.n_embd);
    L.ffn_norm = Vector(f, p + "ffn_norm.weight", c.n_embd);
    L.w_gate = Matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff);
    L.w_up = Matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff);
    L.w_down = Matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd);
  }
  return w;
}

}  // namespace qevict
