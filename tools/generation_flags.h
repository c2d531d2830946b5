// Flags shared by the commands that generate text (run, chat): sampling, and reading a text
// file named on the command line.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "engine/sampler.h"

namespace qevict::cli {

// llama.cpp's llama-cli defaults: temperature 0.8, top-k 40, top-p 0.95; seed 42.
struct SamplingFlags {
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 42;

  SamplerOptions Options(uint64_t seed_offset = 0) const {
    return {temperature, top_k, top_p, seed + seed_offset};
  }
};

void AddSamplingFlags(CLI::App& cmd, SamplingFlags& flags, const std::string& seed_help);

// The whole file; throws qevict::Error naming `what` ("prompt file", "document") when it cannot
// be read.
std::string ReadTextFile(const std::string& path, const std::string& what);

}  // namespace qevict::cli
