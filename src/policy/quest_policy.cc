// Quest (Tang et al., ICML 2024): query-aware page selection at decode time over a cache that
// keeps every token in fp16 (kv/quest_cache.h). Not a tiered-cache policy: it registers its own
// cache, built empty or from a prefix's tokens (TieredCache::ForkFull).
#include "kv/kv_options.h"
#include "kv/quest_cache.h"
#include "policy/registry.h"

namespace qevict {
namespace {

const KvPolicyOption kQuestPage({
    .key = "quest_page",
    .type = KvOptionType::kInt,
    .help = "quest: tokens per page, the unit of selection (per-channel key min/max per page)",
    .policies = "quest",
    .origin = "Quest",
    .min = 1,
    .max = 1024,
    .eval_variant = true,
    .default_number = 16,
});

const KvPolicyOption kQuestDenseLayers({
    .key = "quest_dense_layers",
    .type = KvOptionType::kInt,
    .help = "quest: first layers (of the policy's cache) that attend every token",
    .policies = "quest",
    .doc = "`quest`: the first layers of the policy's cache (the global layers on sliding-window "
           "models) that attend every token, as Quest leaves its first two layers dense",
    .origin = "Quest",
    .min = 0,
    .max = 1024,
    .eval_variant = true,
    .default_number = 2,
});

QuestSettings SettingsOf(const KvConfig& config) {
  QuestSettings s;
  s.budget = config;
  s.page = kQuestPage.GetInt(config);
  s.dense_layers = kQuestDenseLayers.GetInt(config);
  return s;
}

const PolicyRegistration kQuestRegistration({
    .name = "quest",
    .description = "Quest: every token in fp16, decode attends the top pages by a key-bound "
                   "estimate (attention anchor)",
    .order = 120,
    .create = [](const KvConfig& config, const KvGeometry& geometry,
                 const Rope& rope) -> std::unique_ptr<KvCache> {
      return std::make_unique<QuestCache>(SettingsOf(config), geometry, rope);
    },
    .fork = [](const TieredCache& prefix, const KvConfig& config,
               const Rope& rope) -> std::unique_ptr<KvCache> {
      return std::make_unique<QuestCache>(SettingsOf(config), prefix.geometry(), rope,
                                          prefix.ForkFull(rope));
    },
});

}  // namespace
}  // namespace qevict
