// Shared by the tokenizer tests: golden files and the SmolLM2 model (when present).
#pragma once

#include "source_dir.h"
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace qevict::testing {

inline std::string GoldenPath(const std::string& name) {
  return std::string(QEVICT_SOURCE_DIR) + "/tests/golden/" + name;
}

// Parsed golden JSON; a missing file is a test failure (regenerate with
// scripts/gen_tokenizer_golden.py), reported as an empty object.
inline nlohmann::json LoadGolden(const std::string& name) {
  std::ifstream in(GoldenPath(name));
  if (!in) {
    ADD_FAILURE() << "missing golden file " << GoldenPath(name)
                  << " (python3 scripts/gen_tokenizer_golden.py)";
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(in);
}

inline std::string SmolLm2Path() {
  return std::string(QEVICT_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// The SmolLM2 tokenizer, loaded once; nullptr when the model file is absent.
inline const Tokenizer* SmolLm2Tokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer = []() -> std::unique_ptr<Tokenizer> {
    if (!std::filesystem::exists(SmolLm2Path())) return nullptr;
    return Tokenizer::FromGguf(*gguf::File::Open(SmolLm2Path()));
  }();
  return tokenizer.get();
}

#define QEVICT_REQUIRE_SMOLLM2(var)                                                      \
  const ::qevict::Tokenizer* var = ::qevict::testing::SmolLm2Tokenizer();                \
  if (var == nullptr) GTEST_SKIP() << "model not present: " << ::qevict::testing::SmolLm2Path()

}  // namespace qevict::testing
