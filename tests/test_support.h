// Shared helpers of the model-level tests.
#pragma once

#include "source_dir.h"
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/generate.h"
#include "engine/loaded_model.h"
#include "engine/session.h"
#include "kv/full_cache.h"
#include "policy/registry.h"

namespace qevict::testing {

inline std::string SourcePath(const std::string& rel) {
  return std::string(QEVICT_SOURCE_DIR) + "/" + rel;
}

inline std::string ReferenceModelPath() {
  if (const char* env = std::getenv("QEVICT_MODEL")) return env;
  return SourcePath("models/SmolLM2-135M-Instruct.Q4_1.gguf");
}

// The reference model, loaded once per test binary; nullptr when the file is absent.
inline const LoadedModel* ReferenceModel() {
  static const LoadedModel* model = [] () -> const LoadedModel* {
    if (!std::filesystem::exists(ReferenceModelPath())) return nullptr;
    return new LoadedModel(LoadedModel::Load(ReferenceModelPath()));
  }();
  return model;
}

// The second reference model, Gemma 3 270M base (scripts/fetch_model.sh gemma3).
inline std::string GemmaModelPath() {
  if (const char* env = std::getenv("QEVICT_GEMMA_MODEL")) return env;
  return SourcePath("models/gemma-3-270m-q4_k_m.gguf");
}

inline const LoadedModel* GemmaModel() {
  static const LoadedModel* model = [] () -> const LoadedModel* {
    if (!std::filesystem::exists(GemmaModelPath())) return nullptr;
    return new LoadedModel(LoadedModel::Load(GemmaModelPath()));
  }();
  return model;
}

inline nlohmann::json ReadJson(const std::string& rel) {
  std::ifstream in(SourcePath(rel));
  EXPECT_TRUE(in.good()) << rel;
  return nlohmann::json::parse(in);
}

inline KvCacheFactory FullCacheFactory() {
  return [](const KvGeometry& g, const Rope& r) -> std::unique_ptr<KvCache> {
    return std::make_unique<FullCache>(g, r);
  };
}

// The cache a policy's options make (policy/registry.h).
inline KvCacheFactory PolicyCacheFactory(const KvConfig& config) {
  return [config](const KvGeometry& g, const Rope& r) { return CreateKvCache(config, g, r); };
}

// Greedy decoding of up to n tokens.
inline GenerateOptions Greedy(int n) {
  GenerateOptions o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0.0f;
  return o;
}

}  // namespace qevict::testing

#define QEVICT_REQUIRE_MODEL(var)                                              \
  const ::qevict::LoadedModel* var = ::qevict::testing::ReferenceModel();      \
  if (var == nullptr) GTEST_SKIP() << "reference model not found (make setup)"

#define QEVICT_REQUIRE_GEMMA(var)                                              \
  const ::qevict::LoadedModel* var = ::qevict::testing::GemmaModel();          \
  if (var == nullptr) GTEST_SKIP() << "Gemma 3 270M not found (make setup)"
