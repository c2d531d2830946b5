#include "engine/reconstruction.h"

#include <algorithm>
#include <chrono>

#include "engine/reconstruction_cache.h"
#include "kv/grouped_attention.h"
#include "util/error.h"

namespace qevict {
namespace {

// Per-head token maxima (attention order of the layer's resident tokens) -> window scores by
// index. Per KV head a window's score is the max over its tokens (KVzip's pair score); the heads
// share the window's tier, so each head ranks the windows by it and a window's score is its best
// rank over the heads, as a fraction: 1 for a window some head ranks first, 1 - k/n for one whose
// best rank is k of n. Keeping the top of this order keeps, for every head, the windows that
// head ranks highest, as KVzip's per-head top-k selection with uniform head budgets would.
std::vector<float> WindowScores(const KvCache& cache, int layer,
                                const std::vector<float>& token_max) {
  const ExternalScoreLayout layout = cache.external_score_layout(layer);
  const int n_kv = cache.geometry().n_kv_heads;
  const int64_t T = static_cast<int64_t>(token_max.size()) / n_kv;
  const std::vector<int64_t>& resident = layout.resident_index;  // attention order
  std::vector<std::vector<float>> per_head(n_kv);
  int64_t at = layout.sink_tokens;
  for (const int n_tokens : layout.resident_tokens) {
    QEVICT_CHECK(at + n_tokens <= T);
    for (int h = 0; h < n_kv; ++h) {
      const float* row = token_max.data() + h * T + at;
      per_head[h].push_back(*std::max_element(row, row + n_tokens));
    }
    at += n_tokens;
  }
  QEVICT_CHECK(at == T || token_max.empty());
  std::vector<float> scores(layout.n_windows, 0.0f);
  const size_t n = resident.size();
  std::vector<size_t> order(n);
  for (int h = 0; h < n_kv; ++h) {
    for (size_t i = 0; i < n; ++i) order[i] = i;
    const std::vector<float>& s = per_head[h];
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] > s[b]; });
    for (size_t rank = 0; rank < n; ++rank) {
      const float fraction = 1.0f - static_cast<float>(rank) / static_cast<float>(n);
      float& dst = scores[resident[order[rank]]];
      dst = std::max(dst, fraction);
    }
  }
  return scores;
}

}  // namespace

std::vector<int32_t> RepeatPromptTokens(const Tokenizer& tokenizer) {
  return tokenizer.Encode("\n\nRepeat the previous context:\n", /*add_bos=*/false,
                          /*parse_special=*/false);
}

std::vector<std::vector<float>> ReconstructionScores(const Session& session,
                                                     std::span<const int32_t> repeat_prompt,
                                                     std::span<const int32_t> context, int chunk,
                                                     ThreadPool& pool, ReconstructionCost* cost) {
  const auto t0 = std::chrono::steady_clock::now();
  // The policy's layers through the cache's interface (an interleaved cache forwards them to
  // its global layers' cache, geometry().n_layers counts those); a cache without windows to
  // score throws.
  const KvCache& cache = session.cache();
  if (cache.geometry().n_layers == 0) {
    throw Error("reconstruction scoring needs a compressing KV cache over global layers");
  }
  const TransformerModel& model = session.model();
  const ModelConfig& config = model.config();
  QEVICT_CHECK(chunk >= 1 && !context.empty());

  // Chunks of nearly equal size, none above `chunk`.
  const int64_t n_ctx = static_cast<int64_t>(context.size());
  const int64_t n_chunks = (n_ctx + chunk - 1) / chunk;
  const int64_t per_chunk = (n_ctx + n_chunks - 1) / n_chunks;
  const int64_t prompt = static_cast<int64_t>(repeat_prompt.size());
  const int max_batch = static_cast<int>(prompt + per_chunk);
  const int64_t first_pos = session.position();
  const RopeTables ropes = model.MakeRopes(first_pos + max_batch);

  std::vector<int> policy_layer(config.n_layers, -1);
  for (int l = 0, g = 0; l < config.n_layers; ++l) {
    if (!config.is_sliding(l)) policy_layer[l] = g++;
  }
  ReconstructionCache view(session.cache(), config, session.cache().geometry(), ropes,
                           policy_layer);
  ForwardScratch scratch(config, max_batch);
  std::vector<int32_t> tokens, positions;
  // Each pass must take the attention's blocked path (one key split per query, which the
  // observer needs): a chunk shorter than that starts earlier, overlapping the previous one.
  const int64_t least = std::max<int64_t>(1, 2 * kQueryBlock - prompt);
  if (n_ctx < least) {  // too short to score: every window 0
    std::vector<std::vector<float>> zeros;
    for (int l = 0; l < cache.geometry().n_layers; ++l) {
      zeros.emplace_back(cache.external_score_layout(l).n_windows, 0.0f);
    }
    return zeros;
  }
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t end = std::min(n_ctx, (c + 1) * per_chunk);
    const int64_t begin = std::min(c * per_chunk, std::max<int64_t>(0, end - least));
    tokens.assign(repeat_prompt.begin(), repeat_prompt.end());
    tokens.insert(tokens.end(), context.begin() + begin, context.begin() + end);
    positions.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) positions[i] = static_cast<int32_t>(first_pos + i);
    model.Forward(tokens.data(), positions.data(), static_cast<int>(tokens.size()), 0, ropes,
                  view, scratch, pool);
    if (cost != nullptr) cost->tokens += static_cast<int64_t>(tokens.size());
  }

  std::vector<std::vector<float>> scores(view.token_max().size());
  for (size_t l = 0; l < scores.size(); ++l) {
    scores[l] = WindowScores(cache, static_cast<int>(l), view.token_max()[l]);
  }
  if (cost != nullptr) {
    cost->chunks += n_chunks;
    int64_t forward_bytes = 0;
    for (const std::vector<float>* b : {&scratch.x, &scratch.xn, &scratch.q, &scratch.k,
                                        &scratch.v, &scratch.attn, &scratch.proj, &scratch.gate,
                                        &scratch.up, &scratch.logits}) {
      forward_bytes += static_cast<int64_t>(b->capacity() * sizeof(float));
    }
    cost->scratch_bytes = std::max(cost->scratch_bytes, forward_bytes + view.peak_scratch_bytes());
    cost->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return scores;
}

ReconstructionCost ScoreByReconstruction(Session& session, std::span<const int32_t> repeat_prompt,
                                         std::span<const int32_t> context, int chunk,
                                         ThreadPool& pool) {
  ReconstructionCost cost;
  std::vector<std::vector<float>> scores =
      ReconstructionScores(session, repeat_prompt, context, chunk, pool, &cost);
  for (size_t l = 0; l < scores.size(); ++l) {
    session.cache().SetExternalScores(static_cast<int>(l), std::move(scores[l]));
  }
  return cost;
}

}  // namespace qevict
