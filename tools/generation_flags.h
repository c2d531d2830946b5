// Flags shared by the commands that generate text (run, chat): sampling, and reading a text
// file named on the command line.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "kv/kv_cache.h"

namespace qevict::cli {

// llama.cpp's defaults (llama-cli and llama-server alike): temperature 0.8, top-k 40, top-p
// 0.95, min-p 0.05, no repeat penalty. `qevict serve` uses the same for fields a request leaves
// out (docs/server.md). The seed is fixed here (42: a command line run twice gives the same
// text); the server draws one per request, as the OpenAI API does.
struct SamplingFlags {
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 42;
  std::vector<std::string> stop;

  SamplerOptions Options(uint64_t seed_offset = 0) const;
};

void AddSamplingFlags(CLI::App& cmd, SamplingFlags& flags, const std::string& seed_help);

// On a terminal (stderr is a TTY), a progress line while a prompt of more than 512 tokens is
// prefilled: tokens done, tokens/s, ETA, KV bytes held so far; erased when the prompt is read.
// Nothing otherwise (an empty function). For SessionOptions::on_prefill_chunk.
std::function<void(int64_t, int64_t, const KvCache&)> PrefillProgressLine();

// --chat-template, -t/--threads and -b/--batch(-size), as `run` and `chat` take them.
void AddEngineFlags(CLI::App& cmd, std::string& chat_template, int& threads, int& batch);

// --json's help where it implies --kv-stats (run, chat).
inline constexpr const char* kStatsJsonHelp =
    "after the --kv-stats summary, the raw statistics as one JSON line (implies --kv-stats)";

// The whole file; throws qevict::Error naming `what` ("prompt file", "document") when it cannot
// be read.
std::string ReadTextFile(const std::string& path, const std::string& what);

}  // namespace qevict::cli
