#include "model/llama_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "util/error.h"

namespace qevict {
namespace {

// Reads an integer hyperparameter and checks it lies in [lo, hi].
int64_t ReadBounded(const gguf::File& f, const std::string& key, int64_t lo, int64_t hi,
                    std::optional<int64_t> fallback = std::nullopt) {
  std::optional<int64_t> v = f.FindInt(key);
  if (!v) {
    if (fallback) return *fallback;
    throw Error("model metadata lacks required key '" + key + "'");
  }
  if (*v < lo || *v > hi) {
    throw Error("model metadata '" + key + "' = " + std::to_string(*v) + " is outside [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return *v;
}

}  // namespace

LlamaConfig LlamaConfig::FromGguf(const gguf::File& f) {
  LlamaConfig c;
  c.arch = std::string(f.GetString("general.architecture"));
  if (c.arch != "llama") {
    throw Error("unsupported architecture '" + c.arch + "' (supported: llama)");
  }
  c.name = std::string(f.FindString("general.name").value_or(""));
  const std::string p = c.arch + ".";
  c.n_layers = static_cast<int>(ReadBounded(f, p + "block_count", 1, 512));
  c.n_embd = static_cast<int>(ReadBounded(f, p + "embedding_length", 1, 65536));
  c.n_ff = static_cast<int>(ReadBounded(f, p + "feed_forward_length", 1, 1 << 20));
  c.n_heads = static_cast<int>(ReadBounded(f, p + "attention.head_count", 1, 1024));
  c.n_kv_heads =
      static_cast<int>(ReadBounded(f, p + "attention.head_count_kv", 1, 1024, c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0) {
    throw Error("attention.head_count (" + std::to_string(c.n_heads) +
                ") is not a multiple of attention.head_count_kv (" +
                std::to_string(c.n_kv_heads) + ")");
  }
  if (c.n_embd % c.n_heads != 0 && !f.Has(p + "attention.key_length")) {
    throw Error("embedding_length (" + std::to_string(c.n_embd) +
                ") is not a multiple of attention.head_count (" + std::to_string(c.n_heads) + ")");
  }
  c.head_dim = static_cast<int>(
      ReadBounded(f, p + "attention.key_length", 2, 1024, c.n_embd / c.n_heads));
  const int64_t value_length = ReadBounded(f, p + "attention.value_length", 2, 1024, c.head_dim);
  if (value_length != c.head_dim || c.head_dim % 2 != 0) {
    throw Error("head dimension " + std::to_string(c.head_dim) + " / value length " +
                std::to_string(value_length) + " not supported (must be equal and even)");
  }
  c.context_length = ReadBounded(f, p + "context_length", 1, int64_t{1} << 24);
  c.rms_eps = static_cast<float>(f.FindFloat(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f)) {
    throw Error("attention.layer_norm_rms_epsilon must be in (0, 1)");
  }

  c.rope.rot_dims = static_cast<int>(
      ReadBounded(f, p + "rope.dimension_count", 2, c.head_dim, c.head_dim));
  if (c.rope.rot_dims % 2 != 0) throw Error("rope.dimension_count must be even");
  c.rope.freq_base = static_cast<float>(f.FindFloat(p + "rope.freq_base").value_or(10000.0));
  if (!(c.rope.freq_base > 1.0f)) throw Error("rope.freq_base must be > 1");
  const std::string scaling =
      std::string(f.FindString(p + "rope.scaling.type").value_or("none"));
  if (scaling == "linear") {
    const double factor = f.FindFloat(p + "rope.scaling.factor").value_or(1.0);
    if (!(factor >= 1.0 && factor <= 1024.0)) throw Error("rope.scaling.factor out of range");
    c.rope.freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling == "llama3") {
    c.rope.llama3_factor = static_cast<float>(f.GetFloat(p + "rope.scaling.factor"));
    c.rope.llama3_low_freq_factor =
        static_cast<float>(f.FindFloat(p + "rope.scaling.low_freq_factor").value_or(1.0));
    c.rope.llama3_high_freq_factor =
        static_cast<float>(f.FindFloat(p + "rope.scaling.high_freq_factor").value_or(4.0));
    c.rope.llama3_original_context = static_cast<int>(std::clamp<int64_t>(
        f.FindInt(p + "rope.scaling.original_context_length").value_or(8192), 0, 1 << 30));
    // The interpolation divides by the factor and by high - low: refuse what would make it
    // infinite, negative or NaN.
    const auto finite_in = [](double v, double lo, double hi) {
      return std::isfinite(v) && v >= lo && v <= hi;
    };
    if (!finite_in(c.rope.llama3_factor, 1.0, 1024.0)) {
      throw Error("rope.scaling.factor " + std::to_string(c.rope.llama3_factor) +
                  " is outside [1, 1024]");
    }
    if (!finite_in(c.rope.llama3_low_freq_factor, 1e-3, 1024.0) ||
        !finite_in(c.rope.llama3_high_freq_factor, 1e-3, 1024.0) ||
        !(c.rope.llama3_high_freq_factor > c.rope.llama3_low_freq_factor)) {
      throw Error("rope.scaling.high_freq_factor " +
                  std::to_string(c.rope.llama3_high_freq_factor) + " and low_freq_factor " +
                  std::to_string(c.rope.llama3_low_freq_factor) +
                  " must be in (0, 1024] with high > low");
    }
    if (c.rope.llama3_original_context < 1) {
      throw Error("rope.scaling.original_context_length must be positive");
    }
  } else if (scaling != "none") {
    throw Error("unsupported rope.scaling.type '" + scaling + "'");
  }
  if (const gguf::TensorInfo* freqs = f.FindTensor("rope_freqs.weight")) {
    if (freqs->type != GgmlType::kF32 || freqs->n_elements() != c.rope.rot_dims / 2) {
      throw Error("rope_freqs.weight must be F32 with rope.dimension_count/2 elements");
    }
    c.rope.freq_factors.resize(c.rope.rot_dims / 2);
    std::memcpy(c.rope.freq_factors.data(), freqs->data, freqs->n_bytes);
    for (float v : c.rope.freq_factors) {
      if (!(v > 0.0f)) throw Error("rope_freqs.weight holds a non-positive factor");
    }
  }

  const gguf::TensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) throw Error("model lacks tensor 'token_embd.weight'");
  if (embd->n_dims != 2 || embd->ne[0] != c.n_embd) {
    throw Error("token_embd.weight has shape [" + std::to_string(embd->ne[0]) + ", " +
                std::to_string(embd->ne[1]) + "], expected [" + std::to_string(c.n_embd) +
                ", n_vocab]");
  }
  if (embd->ne[1] < 1 || embd->ne[1] > (int64_t{1} << 22)) {
    throw Error("vocabulary size " + std::to_string(embd->ne[1]) + " is out of range");
  }
  c.n_vocab = static_cast<int>(embd->ne[1]);
  c.tied_output = f.FindTensor("output.weight") == nullptr;
  return c;
}

}  // namespace qevict
