#include "server/session_cache.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "kv/quest_cache.h"
#include "policy/registry.h"
#include "server/request.h"

namespace qevict::server {
namespace {

using nlohmann::json;

json BytesOrNull(int64_t bytes) { return bytes < 0 ? json(nullptr) : json(bytes); }

}  // namespace

json TierMapJson(std::span<const WindowView> layers) {
  size_t n_windows = 0;
  for (const WindowView& v : layers) n_windows = std::max(n_windows, v.windows.size());
  struct Sum {
    int64_t first_token = 0;
    int n_tokens = 0;
    int64_t counts[4] = {0, 0, 0, 0};  // by Tier
    double score = 0.0;
    int resident_layers = 0;
  };
  std::vector<Sum> sums(n_windows);
  json by_layer = json::array();
  for (const WindowView& v : layers) {
    std::string tiers;
    tiers.reserve(v.windows.size());
    for (const WindowInfo& w : v.windows) {
      const int tier = static_cast<int>(w.tier);
      tiers += static_cast<char>('0' + tier);
      if (w.index < 0 || static_cast<size_t>(w.index) >= n_windows) continue;
      Sum& s = sums[static_cast<size_t>(w.index)];
      s.first_token = w.first_token;
      s.n_tokens = std::max(s.n_tokens, w.n_tokens);
      ++s.counts[tier];
      if (w.tier == Tier::kFp16 || w.tier == Tier::kQuant) {
        s.score += w.score;
        ++s.resident_layers;
      }
    }
    by_layer.push_back(std::move(tiers));
  }
  json windows = json::array();
  for (const Sum& s : sums) {
    windows.push_back({{"first_token", s.first_token},
                       {"n_tokens", s.n_tokens},
                       {"fp16", s.counts[0]},
                       {"quant", s.counts[1]},
                       {"evicted", s.counts[2]},
                       {"cold", s.counts[3]},
                       {"mean_score", s.resident_layers > 0 ? s.score / s.resident_layers : 0.0}});
  }
  return {{"layers", layers.size()},
          {"sink_tokens", layers.empty() ? 0 : layers.front().sink_tokens},
          {"window", layers.empty() ? 0 : layers.front().window},
          {"windows", std::move(windows)},
          {"by_layer", std::move(by_layer)}};
}

json CacheBytesJson(const KvStats& stats, const MemoryStats& memory) {
  return {{"resident", stats.resident_bytes()},
          {"fp16", stats.fp16_bytes},
          {"quant", stats.quant_bytes},
          {"meta", stats.meta_bytes},
          {"peak", stats.peak_bytes},
          {"reserved", stats.reserved_bytes},
          {"pool_reserved", stats.pool_reserved_bytes},
          {"cold", stats.cold_bytes},
          {"budget", BytesOrNull(stats.budget_bytes)},
          {"floor", BytesOrNull(stats.floor_bytes)},
          {"full_fp16", stats.full_fp16_bytes},
          {"process_rss", memory.rss_bytes},
          {"process_rss_anon", memory.rss_anon_bytes}};
}

std::variant<json, ApiError> SessionCacheReport(const ServerContext& ctx, const std::string& id) {
  if (!ValidSessionId(id)) {
    return InvalidRequest("a session id is 1-128 characters of letters, digits and . _ : -",
                          "session_id", "invalid_value");
  }
  std::optional<json> report;
  const bool found =
      ctx.sessions != nullptr &&
      ctx.sessions->Inspect(id, [&](const Conversation& conversation, int64_t kept_bytes) {
        const Session& session = conversation.session();
        const KvStats stats = session.cache().Stats();
        const auto* tiered = dynamic_cast<const TieredCache*>(session.policy_cache());
        const auto* quest = dynamic_cast<const QuestCache*>(session.policy_cache());
        const std::string whole = quest ? std::string(quest->policy_name()) : "full";
        std::vector<WindowView> views;
        if (tiered != nullptr) {
          for (int layer = 0; layer < tiered->geometry().n_layers; ++layer) {
            views.push_back(tiered->View(layer));
          }
        }
        json tiers = TierMapJson(views);
        tiers["tiered"] = tiered != nullptr;  // false: the full fp16 cache, no windows
        tiers["bits"] = tiered != nullptr ? tiered->config().bits : 16;  // the quantized tier
        // Quantized windows keep their fp16 original on disk (promoted exactly) under exact
        // recovery and with a cold tier; evicted ones are dropped (a cold tier's are `cold`).
        tiers["quant_exact_on_disk"] =
            tiered != nullptr && (tiered->config().recovery == RecoveryFidelity::kExact ||
                                  tiered->cold_tier());
        report = json{{"object", "session.cache"},
                      {"id", id},
                      {"policy", tiered != nullptr ? tiered->config().policy : whole},
                      {"tokens", conversation.tokens().size()},
                      {"kept_bytes", kept_bytes},
                      {"bytes", CacheBytesJson(stats, ReadMemoryStats())},
                      {"moves",
                       {{"promotions", stats.promotions},
                        {"demotions", stats.demotions},
                        {"evictions", stats.evictions}}},
                      {"tiers", std::move(tiers)}};
      });
  if (!found) {
    ApiError error = NotFound("no kept session '" + id +
                              "': it was never kept (requests name it with session_id), was "
                              "dropped, or a running request is using it");
    error.code = "session_not_found";
    return error;
  }
  return *report;
}

json PropsJson(const ServerContext& ctx) {
  json policies = json::array();
  for (const PolicyInfo& info : PolicyInfos()) {
    policies.push_back({{"name", info.name},
                        {"description", info.description},
                        {"diagnostic", info.diagnostic}});  // recall-oracle: not for use
  }
  const KvConfig& kv = ctx.defaults.kv;
  const SchedulerSnapshot slots = ctx.scheduler->Snapshot();
  return {{"model", ctx.model_id},
          {"build_info", ctx.build_info},  // llama.cpp's field: the build that answers
          {"n_ctx", ctx.defaults.context_tokens},
          {"total_slots", slots.slots},
          {"sessions", ctx.sessions != nullptr && ctx.sessions->enabled()},
          {"kv",
           {{"default_policy", kv.policy},
            {"default_budget", kv.budget},
            {"default_budget_bytes", BytesOrNull(kv.budget_bytes)},
            {"default_budget_scope", BudgetScopeName(kv.budget_scope)},
            {"budget_range", {0.0, 1.0}},  // (0, 1]: a fraction of prompt + max_tokens in fp16
            {"policies", std::move(policies)}}}};
}

}  // namespace qevict::server
