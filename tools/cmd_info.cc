// `qevict info`: what a GGUF model is, as the engine sees it.
#include <algorithm>
#include <cstdio>
#include <map>

#include "engine/loaded_model.h"
#include "tools/commands.h"

namespace qevict::cli {
namespace {

int Info(const std::string& path) {
  LoadedModel m = LoadedModel::Load(path);
  const gguf::File& f = m.model->file();
  const ModelConfig& c = m.model->config();
  std::printf("file:            %s (GGUF v%u, %zu bytes, alignment %llu)\n", path.c_str(),
              f.version(), f.file_size(), static_cast<unsigned long long>(f.alignment()));
  std::printf("name:            %s\n", c.name.c_str());
  std::printf("architecture:    %s\n", c.arch.c_str());
  std::printf("layers:          %d\n", c.n_layers);
  std::printf("embedding:       %d\n", c.n_embd);
  std::printf("feed-forward:    %d\n", c.n_ff);
  std::printf("heads:           %d query, %d key/value (head_dim %d)\n", c.n_heads, c.n_kv_heads,
              c.head_dim);
  std::printf("context length:  %lld\n", static_cast<long long>(c.context_length));
  std::printf("rope:            base %g, %d dims, %s%s%s\n", c.rope.freq_base, c.rope.rot_dims,
              c.rope.neox ? "neox" : "normal", c.rope.llama3_factor > 0 ? ", llama3 scaling" : "",
              c.rope.freq_factors.empty() ? "" : ", rope_freqs");
  const int sliding = c.n_sliding_layers();
  if (sliding > 0) {
    std::printf("sliding window:  %d tokens in %d of %d layers (rope base %g there)\n",
                c.sliding_window, sliding, c.n_layers, c.rope_local.freq_base);
  }
  std::printf("rms epsilon:     %g\n", c.rms_eps);
  std::printf("vocabulary:      %d (%s output embedding)\n", c.n_vocab,
              c.tied_output ? "tied" : "separate");
  const KvGeometry geo = m.model->kv_geometry(c.context_length);
  if (sliding > 0) {
    // Global layers grow with the context; each sliding layer holds a ring of its window.
    std::printf("kv fp16 bytes:   %lld per token in the %d global layers + %.1f MiB of rings "
                "(a dense cache: %lld per token; at %lld tokens %.1f MiB instead of %.1f MiB)\n",
                static_cast<long long>(geo.fp16_bytes_per_token()), c.n_layers - sliding,
                geo.ring_bytes(c.context_length) / 1048576.0,
                static_cast<long long>(2LL * c.n_layers * c.n_kv_heads * c.head_dim * 2),
                static_cast<long long>(c.context_length),
                geo.full_bytes(c.context_length) / 1048576.0,
                2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 2 * c.context_length / 1048576.0);
  } else {
    std::printf("kv fp16 bytes:   %lld per token\n",
                static_cast<long long>(geo.fp16_bytes_per_token()));
  }
  std::map<std::string, std::pair<int, size_t>> types;
  size_t total = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    auto& e = types[GetTypeTraits(t.type).name];
    e.first += 1;
    e.second += t.n_bytes;
    total += t.n_bytes;
  }
  std::printf("tensors:         %zu (%.1f MiB)\n", f.tensors().size(), total / 1048576.0);
  for (const auto& [name, e] : types) {
    std::printf("  %-6s %4d tensors %9.1f MiB\n", name.c_str(), e.first, e.second / 1048576.0);
  }
  const Tokenizer& tok = *m.tokenizer;
  std::printf("tokenizer:       %s (pre-tokenizer %s), bos %d, eos %d, add_bos %s\n",
              std::string(tok.model_name()).c_str(), std::string(tok.pre_name()).c_str(),
              tok.bos(), tok.eos(), tok.add_bos() ? "yes" : "no");
  if (m.chat) {
    std::printf("chat template:   %s\n", ChatStyleName(m.chat->style));
  } else {
    std::printf("chat template:   %s\n",
                m.chat_template_source.empty() ? "none" : "unknown (raw prompts only)");
  }
  return 0;
}

}  // namespace

std::function<int()> RegisterInfo(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "print a model's architecture, tensors and tokenizer");
  cmd->add_option("-m,--model", *path, "GGUF model file")->required();
  return [path] { return Info(*path); };
}

}  // namespace qevict::cli
