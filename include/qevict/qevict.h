// qevict public C++ API: load a GGUF model, open sessions with any KV-cache policy and budget,
// generate, and read per-tier cache statistics.
//
//   #include <qevict/qevict.h>
//
//   qevict::LoadedModel m = qevict::LoadedModel::Load("SmolLM2-135M-Instruct.Q4_1.gguf");
//   qevict::KvConfig kv;                 // docs/kv-cache.md lists every field and default
//   kv.policy = "qevict";
//   kv.budget = 0.1;                     // 10% of an fp16 cache of prompt + new tokens
//   qevict::ThreadPool pool(2);
//   std::vector<int32_t> prompt = m.EncodeChat({{"user", "..."}}, /*add_generation_prompt=*/true);
//   qevict::SessionOptions so;
//   so.n_ctx = prompt.size() + 128;
//   qevict::Session session(*m.model, pool, so, qevict::KvCacheFactoryFor(kv));
//   // qevict-zip / kvzip reconstruct the prompt's text before its end is routed: give it (else
//   // Prefill throws qevict::Error; engine/score_hooks.h).
//   session.set_score_context(qevict::MakeScoreContext(*m.tokenizer, kv, "..."));
//   session.BeginRun(prompt.size(), 128);
//   qevict::GenerateOptions go;          // sampling, stop strings, streaming callback
//   go.max_new_tokens = 128;
//   qevict::GenerateResult r = qevict::Generate(session, *m.tokenizer, session.Prefill(prompt), go);
//   qevict::KvStats stats = session.kv_stats();  // resident bytes per tier, promotions, ...
//
// Errors in inputs (bad files, bad options) are thrown as qevict::Error.
#pragma once

#include "engine/generate.h"
#include "engine/kv_stats_json.h"
#include "engine/loaded_model.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "kv/kv_cache.h"
#include "kv/kv_config.h"
#include "policy/registry.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace qevict {

// A session's cache factory for a configuration (validated now; throws qevict::Error).
inline KvCacheFactory KvCacheFactoryFor(const KvConfig& config) {
  config.Validate();
  return [config](const KvGeometry& geometry, const Rope& rope) {
    return CreateKvCache(config, geometry, rope);
  };
}

}  // namespace qevict
