#include "model/model_config.h"

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

bool IsSupported(const std::string& arch) {
  return arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "gemma3" ||
         arch == "phi3";
}

// Which layers use the sliding window. gemma3: `attention.sliding_window_pattern` is either an
// array of bools (one per layer) or a period n (layer l slides unless l % n == n - 1); absent,
// llama.cpp's default period of 6 applies. Other families: every layer slides (Mistral).
std::vector<bool> SlidingLayers(const gguf::File& f, const std::string& p, int n_layers,
                                int default_period) {
  std::vector<bool> sliding(n_layers, true);
  const std::string key = p + "attention.sliding_window_pattern";
  const gguf::Value* v = f.Find(key);
  if (v != nullptr && v->type == gguf::ValueType::kArray) {
    if (v->array_type != gguf::ValueType::kBool || v->array_size != static_cast<uint64_t>(n_layers)) {
      throw Error("'" + key + "' must be an array of " + std::to_string(n_layers) + " bools");
    }
    for (int l = 0; l < n_layers; ++l) sliding[l] = v->array_data[l] != 0;
    return sliding;
  }
  const int64_t period = default_period == 0
                             ? 0
                             : ReadBounded(f, key, 0, 1 << 16, int64_t{default_period});
  for (int l = 0; l < n_layers; ++l) sliding[l] = period == 0 || l % period < period - 1;
  return sliding;
}

float ReadPositiveFloat(const gguf::File& f, const std::string& key, double fallback) {
  const double v = f.FindFloat(key).value_or(fallback);
  if (!(std::isfinite(v) && v > 0.0 && v < 1e9)) {
    throw Error("model metadata '" + key + "' = " + std::to_string(v) + " must be positive");
  }
  return static_cast<float>(v);
}

// What distinguishes the families beyond the shared keys, as llama.cpp reads the same GGUF keys.
void ReadFamilyOptions(const gguf::File& f, const std::string& p, ModelConfig& c) {
  c.rope_local = c.rope;
  if (f.FindTensor("rope_factors_long.weight") != nullptr ||
      f.FindString(p + "rope.scaling.type").value_or("") == "longrope") {
    throw Error(
        "LongRoPE models (rope_factors_long/short, e.g. Phi-3 128k) are not supported: "
        "use the 4k variant (Phi-3 mini/medium 4k)");
  }
  int default_period = 0;  // every layer slides when a window is set
  if (c.arch == "gemma3") {
    c.activation = FfnActivation::kGeluTanh;
    c.embedding_scale = std::sqrt(static_cast<float>(c.n_embd));
    // 0 or absent: no soft-capping (llama.cpp tests the value for zero).
    const double softcap = f.FindFloat(p + "final_logit_softcapping").value_or(0.0);
    c.final_logit_softcap =
        softcap == 0.0 ? 0.0f : ReadPositiveFloat(f, p + "final_logit_softcapping", 1.0);
    // Queries are scaled by attention.scale when the file has it; otherwise as llama.cpp does:
    // 1/sqrt(head_dim), except Gemma 3 27B (62 layers), 1/sqrt(n_embd / n_heads).
    float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    if (f.Has(p + "attention.scale")) {
      scale = ReadPositiveFloat(f, p + "attention.scale", 1.0);
    } else if (c.n_layers == 62) {
      scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_heads));
    }
    c.query_prescale = scale * std::sqrt(static_cast<float>(c.head_dim));
    // Sliding layers rotate with their own base and without the global layers' scaling.
    c.rope_local.freq_base = ReadPositiveFloat(f, p + "rope.freq_base_swa", 10000.0);
    c.rope_local.freq_scale = 1.0f;
    c.rope_local.llama3_factor = 0.0f;
    c.rope_local.freq_factors.clear();
    default_period = 6;
  }
  // phi3 files carry a sliding window that llama.cpp ignores ("Phi SWA is currently disabled");
  // so do we, to compute what llama.cpp computes. qwen2/qwen3 set none.
  if (c.arch == "gemma3" || c.arch == "llama") {
    c.sliding_window = static_cast<int>(
        ReadBounded(f, p + "attention.sliding_window", 0, int64_t{1} << 24, int64_t{0}));
  }
  if (c.sliding_window > 0 && c.sliding_window < c.context_length) {
    c.sliding = SlidingLayers(f, p, c.n_layers, default_period);
  } else {
    c.sliding_window = 0;  // a window as long as the context is no window
    c.sliding.assign(c.n_layers, false);
  }
}

}  // namespace

const char* SupportedArchitectures() { return "llama, qwen2, qwen3, gemma3, phi3"; }

std::string UnreadableModelFix() {
  return std::string("; qevict runs GGUF files of ") + SupportedArchitectures() +
         " as llama.cpp's converter writes them: use one (re-download or re-convert a damaged "
         "file)";
}

int ModelConfig::n_sliding_layers() const {
  if (sliding_window <= 0) return 0;
  return static_cast<int>(std::count(sliding.begin(), sliding.end(), true));
}

ModelConfig ModelConfig::FromGguf(const gguf::File& f) {
  ModelConfig c;
  c.arch = std::string(f.GetString("general.architecture"));
  if (!IsSupported(c.arch)) {
    throw Error("unsupported architecture '" + c.arch + "' (general.architecture)");
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
  // llama rotates adjacent pairs; the other families rotate the two halves (llama.cpp's NEOX).
  c.rope.neox = c.arch != "llama";
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
  ReadFamilyOptions(f, p, c);
  return c;
}

}  // namespace qevict
