#include "server/kv_reservation.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kv/kv_quantizer.h"
#include "kv/tiered_cache.h"
#include "policy/registry.h"

namespace qevict::server {
namespace {

// Bookkeeping the tiered cache charges: one 28-byte record per resident window and layer, and
// the position of every stored token (src/kv/tiered_cache.h). Rounded up.
constexpr int64_t kWindowRecordBytes = 32;
constexpr int64_t kPositionBytes = 4;

class TieredSizes {
 public:
  TieredSizes(const KvConfig& c, const KvGeometry& g)
      : sinks_(c.sinks),
        window_(c.window),
        layers_(g.n_layers),
        per_token_(g.fp16_bytes_per_token()) {}

  int64_t Windows(int64_t tokens) const {
    const int64_t rest = std::max<int64_t>(0, tokens - sinks_);
    return (rest + window_ - 1) / window_;
  }
  // The first `tokens` tokens all in fp16: the sink block and whole windows, their records.
  int64_t Fp16Blocks(int64_t tokens) const {
    const int64_t sink_tokens = tokens > 0 ? sinks_ : 0;
    return (sink_tokens + Windows(tokens) * window_) * per_token_ +
           layers_ * Windows(tokens) * kWindowRecordBytes;
  }
  // Positions are kept for every token stored, resident or not.
  static int64_t Positions(int64_t tokens) { return (tokens + 1) * kPositionBytes; }

 private:
  int64_t sinks_, window_, layers_, per_token_;
};

}  // namespace

int64_t KvReservationBytes(const KvConfig& requested, const KvGeometry& geometry,
                           int64_t prompt_tokens, int64_t max_new_tokens,
                           int64_t budget_new_tokens) {
  const KvConfig config = PolicyLayout(requested);  // the window the cache will really have
  const int64_t per_token = geometry.fp16_bytes_per_token();
  const int64_t run = std::max<int64_t>(0, prompt_tokens) + std::max<int64_t>(0, max_new_tokens);
  const int64_t rings = geometry.ring_bytes(run);  // sliding layers: a ring of their window
  if (config.policy == "full") return run * per_token + rings;
  const TieredSizes sizes(config, geometry);
  const int64_t everything = sizes.Fp16Blocks(run) + TieredSizes::Positions(run);
  const int64_t budget_run =
      budget_new_tokens < 0 ? run
                            : std::max<int64_t>(0, prompt_tokens) +
                                  std::min(budget_new_tokens, std::max<int64_t>(0, max_new_tokens));
  const std::optional<int64_t> budget_or_none = config.GlobalBudgetBytes(budget_run, geometry);
  if (!budget_or_none) {
    return everything + rings +
           TieredCache::MappedSlackBytes(config, geometry, 0, MakePolicy(config)->quantizes());
  }

  // With a budget, resident bytes (metadata included) stay under it from the first routing step
  // on, unless it is below the floor the cache keeps whatever the budget: sinks, the recent
  // region, the window being filled and the one being closed.
  const int64_t budget = *budget_or_none;
  const int64_t recent_windows = (config.recent + config.window - 1) / config.window;
  const int64_t floor = sizes.Fp16Blocks(config.sinks + (recent_windows + 2) * config.window) +
                        TieredSizes::Positions(run);
  int64_t steady = std::max(budget, floor);
  if (config.policy == "kivi") {
    // kivi never evicts: past the floor, every window stays in the quantized tier whatever the
    // budget (the run is then reported infeasible).
    const QuantLayout q = QuantLayout::Make(geometry.n_kv_heads, config.window, geometry.head_dim,
                                            config.bits, config.value_group);
    steady = std::max(steady, floor + int64_t{geometry.n_layers} * sizes.Windows(run) *
                                          (q.bytes + kWindowRecordBytes));
  }
  // Before the first routing step the prompt sits in fp16: all of it, or one chunk on top of
  // what the previous chunks were routed down to.
  const int64_t prefill =
      config.prefill_chunk > 0
          ? steady + sizes.Fp16Blocks(std::min<int64_t>(config.prefill_chunk, prompt_tokens) +
                                      config.window)
          : sizes.Fp16Blocks(prompt_tokens) + TieredSizes::Positions(prompt_tokens);
  // What the pools map beyond the ledger (slabs, demotions in flight) and the observation
  // buffer of policies that keep one: admission accounts reserved bytes, not only resident.
  const std::unique_ptr<Policy> policy = MakePolicy(config);
  const int64_t mapped =
      TieredCache::MappedSlackBytes(config, geometry, budget, policy->quantizes()) +
      (policy->wants_observation() ? TieredCache::ObservationBytesFor(config, geometry) : 0);
  return std::min(everything, std::max(steady, prefill)) + mapped + rings;
}

std::string DescribeKvRequest(const KvConfig& config, const KvGeometry& geometry,
                              int64_t prompt_tokens, int64_t max_new_tokens) {
  std::ostringstream out;
  out << "policy " << config.policy;
  if (config.budget_bytes > 0) {
    out << ", budget_bytes " << config.budget_bytes;
  } else if (config.budget < 1.0) {
    out << ", budget " << config.budget;
  }
  out << ", " << prompt_tokens << " prompt + " << max_new_tokens << " new tokens at "
      << geometry.fp16_bytes_per_token() << " fp16 bytes/token";
  return out.str();
}

}  // namespace qevict::server
