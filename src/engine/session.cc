#include "engine/session.h"

#include <algorithm>
#include <numeric>

#include "kv/interleaved_cache.h"
#include "util/error.h"

namespace qevict {
namespace {
double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// The session's cache: the factory's for every layer, or, with sliding-window layers, rings for
// those beside the factory's cache for the global layers.
std::unique_ptr<KvCache> MakeSessionCache(const TransformerModel& model, int64_t n_ctx,
                                          const RopeTables& ropes,
                                          const KvCacheFactory& make_cache) {
  const KvGeometry geometry = model.kv_geometry(n_ctx);
  std::unique_ptr<KvCache> global;
  if (geometry.n_layers > 0) global = make_cache(geometry, *ropes.global);
  if (geometry.ring_layers == 0) return global;
  KvGeometry ring_geometry = geometry;
  ring_geometry.n_layers = geometry.ring_layers;
  ring_geometry.ring_layers = 0;
  ring_geometry.ring_window = 0;
  auto rings = std::make_unique<SlidingWindowCache>(
      ring_geometry, static_cast<int>(geometry.ring_window), ropes.sliding());
  return std::make_unique<InterleavedCache>(model.config().sliding, std::move(global),
                                            std::move(rings), geometry);
}

Session::Session(const TransformerModel& model, ThreadPool& pool, const SessionOptions& options,
                 const KvCacheFactory& make_cache)
    : model_(model),
      pool_(&pool),
      options_(options),
      scratch_(model.config(), std::max(1, options.prefill_chunk)) {
  if (options_.n_ctx <= 0 || options_.n_ctx > model.config().context_length) {
    throw Error("context of " + std::to_string(options_.n_ctx) +
                " tokens is outside the model's window of " +
                std::to_string(model.config().context_length));
  }
  ropes_ = model.MakeRopes(options_.n_ctx);
  cache_ = MakeSessionCache(model, options_.n_ctx, ropes_, make_cache);
  positions_.resize(std::max(1, options_.prefill_chunk));
}

Session::Session(const Session& prefix, const CacheFork& fork)
    : model_(prefix.model_),
      pool_(prefix.pool_),
      options_(prefix.options_),
      scratch_(prefix.model_.config(), std::max(1, prefix.options_.prefill_chunk)),
      position_(prefix.position_),
      timings_(prefix.timings_),
      score_context_(prefix.score_context_),
      external_score_cost_(prefix.external_score_cost_) {
  ropes_ = model_.MakeRopes(options_.n_ctx);
  const KvCache* prefix_policy = prefix.policy_cache();
  std::unique_ptr<KvCache> global =
      prefix_policy != nullptr ? fork(*prefix_policy, *ropes_.global) : nullptr;
  if (const auto* interleaved = dynamic_cast<const InterleavedCache*>(prefix.cache_.get())) {
    cache_ = interleaved->WithGlobal(std::move(global), ropes_.sliding());
  } else {
    cache_ = std::move(global);
  }
  QEVICT_CHECK(cache_ != nullptr && cache_->n_tokens() == prefix.cache_->n_tokens());
  positions_.resize(std::max(1, options_.prefill_chunk));
}

const KvCache* Session::policy_cache() const { return PolicyCacheOf(*cache_); }

KvStats Session::kv_stats() const {
  KvStats s = cache_->Stats();
  if (external_score_cost_) {
    s.external_score_seconds = external_score_cost_->seconds;
    s.external_score_tokens = external_score_cost_->tokens;
  }
  return s;
}

void Session::BeginRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  position_ = 0;  // a new run starts from an empty cache
  has_logits_ = false;
  CheckRoom(prompt_tokens + max_new_tokens);
  timings_ = {};
  external_score_cost_.reset();
  cache_->BeginRun(prompt_tokens, max_new_tokens);
}

void Session::ContinueRun(int64_t prompt_tokens, int64_t max_new_tokens) {
  CheckRoom(prompt_tokens + max_new_tokens);
  cache_->ContinueRun(prompt_tokens, max_new_tokens);
}

std::span<const float> Session::logits() const {
  if (!has_logits_ || !scratch_.allocated()) return {};
  return {scratch_.logits.data(), static_cast<size_t>(model_.config().n_vocab)};
}

void Session::LoadState(ByteReader& in) {
  position_ = 0;
  has_logits_ = false;
  timings_ = {};
  external_score_cost_.reset();  // a restored run's first prompt end is behind it
  try {
    cache_->LoadState(in);
  } catch (...) {
    cache_->BeginRun(0, 0);  // nothing half-restored stays behind
    throw;
  }
  position_ = cache_->n_tokens();
}

void Session::CheckRoom(int64_t n) const {
  if (position_ + n > options_.n_ctx) {
    throw Error(std::to_string(position_ + n) + " tokens do not fit the context of " +
                std::to_string(options_.n_ctx) + " tokens");
  }
}

std::span<const float> Session::Prefill(std::span<const int32_t> tokens) {
  has_logits_ = false;
  QEVICT_CHECK(!tokens.empty());
  CheckRoom(static_cast<int64_t>(tokens.size()));
  if (!scratch_.allocated()) scratch_.Allocate(model_.config());
  const auto t0 = std::chrono::steady_clock::now();
  const int n_vocab = model_.config().n_vocab;
  size_t done = 0;
  while (done < tokens.size()) {
    const int n = static_cast<int>(std::min<size_t>(options_.prefill_chunk, tokens.size() - done));
    const bool last = done + n == tokens.size();
    std::iota(positions_.begin(), positions_.begin() + n, static_cast<int32_t>(position_));
    cache_->BeginBatch(last ? BatchKind::kPromptEnd : BatchKind::kPromptChunk);
    model_.Forward(tokens.data() + done, positions_.data(), n, last ? 1 : 0, ropes_, *cache_,
                   scratch_, *pool_);
    position_ += n;
    done += n;
    if (last && options_.before_prompt_end) options_.before_prompt_end(*this);
    if (last) {
      // The run's first prompt end: what the cache asks for before it is routed.
      if (auto cost = ScoreWhatTheCacheWants(*this, score_context_.get(), *pool_)) {
        external_score_cost_ = cost;
      }
    }
    cache_->EndBatch(last ? BatchKind::kPromptEnd : BatchKind::kPromptChunk, *pool_);
    if (options_.on_prefill_chunk) {
      options_.on_prefill_chunk(static_cast<int64_t>(done), static_cast<int64_t>(tokens.size()),
                                *cache_);
    }
  }
  timings_.prompt_tokens += static_cast<int64_t>(tokens.size());
  timings_.prompt_seconds += SecondsSince(t0);
  has_logits_ = true;
  return {scratch_.logits.data(), static_cast<size_t>(n_vocab)};
}

std::vector<float> Session::PrefillAllLogits(std::span<const int32_t> tokens) {
  has_logits_ = false;
  CheckRoom(static_cast<int64_t>(tokens.size()));
  if (!scratch_.allocated()) scratch_.Allocate(model_.config());
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  std::vector<float> all(tokens.size() * n_vocab);
  size_t done = 0;
  while (done < tokens.size()) {
    const int n = static_cast<int>(std::min<size_t>(options_.prefill_chunk, tokens.size() - done));
    const bool last = done + n == tokens.size();
    std::iota(positions_.begin(), positions_.begin() + n, static_cast<int32_t>(position_));
    cache_->BeginBatch(last ? BatchKind::kPromptEnd : BatchKind::kPromptChunk);
    model_.Forward(tokens.data() + done, positions_.data(), n, n, ropes_, *cache_, scratch_,
                   *pool_);
    std::copy(scratch_.logits.begin(), scratch_.logits.begin() + n * n_vocab,
              all.begin() + done * n_vocab);
    position_ += n;
    done += n;
    if (last) {
      if (auto cost = ScoreWhatTheCacheWants(*this, score_context_.get(), *pool_)) {
        external_score_cost_ = cost;
      }
    }
    cache_->EndBatch(last ? BatchKind::kPromptEnd : BatchKind::kPromptChunk, *pool_);
  }
  timings_.prompt_tokens += static_cast<int64_t>(tokens.size());
  timings_.prompt_seconds += SecondsSince(t0);
  has_logits_ = false;
  return all;
}

std::span<const float> Session::Decode(int32_t token) {
  has_logits_ = false;
  CheckRoom(1);
  if (!scratch_.allocated()) scratch_.Allocate(model_.config());
  const auto t0 = std::chrono::steady_clock::now();
  const int32_t pos = static_cast<int32_t>(position_);
  cache_->BeginBatch(BatchKind::kGenerated);
  model_.Forward(&token, &pos, 1, 1, ropes_, *cache_, scratch_, *pool_);
  position_ += 1;
  cache_->EndBatch(BatchKind::kGenerated, *pool_);
  timings_.generated_tokens += 1;
  timings_.generate_seconds += SecondsSince(t0);
  has_logits_ = true;
  return {scratch_.logits.data(), static_cast<size_t>(model_.config().n_vocab)};
}

}  // namespace qevict
