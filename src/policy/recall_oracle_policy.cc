// recall-oracle: a diagnostic, not a policy to use (docs/kv-cache.md, "Recall oracle"). Every
// token stays fp16 in RAM (kv/quest_cache.h with PageRanking::kExactMass); after the run's first
// prompt, each later prompt token and each generated token attends, per KV head, the sinks, the
// recent windows and the windows of largest exact attention mass, as many as the budget's fp16
// tokens allow. Nothing is charged for knowing that mass, so a row of it shows how far a
// policy's recall (qevict-recall) is from what recall at that budget could reach.
#include "kv/kv_options.h"
#include "kv/quest_cache.h"
#include "policy/registry.h"

namespace qevict {
namespace {

const KvPolicyOption kOracleDecodeOnly({
    .key = "oracle_decode_only",
    .type = KvOptionType::kInt,
    .help = "recall-oracle (diagnostic): 0: later prompts (a question after the context) select "
            "windows too; 1: only generated tokens do",
    .policies = "recall-oracle",
    .doc = "`recall-oracle` (a diagnostic): 0, the queries of every prompt after the run's first "
           "(the question of `--protocol context-only`, a later chat turn) attend only their top "
           "windows as generated tokens do; 1, those prompts attend every token and only "
           "generated tokens select",
    .origin = "*choice* (ours: the measurement of issue 38 selects for the question too)",
    .our_choice = true,
    .min = 0,
    .max = 1,
    .eval_variant = true,
    .default_number = 0,
});

QuestSettings OracleSettingsOf(const KvConfig& config) {
  return RecallOracleSettings(config, /*later_prompts=*/kOracleDecodeOnly.GetInt(config) == 0);
}

const PolicyRegistration kRecallOracleRegistration({
    .name = "recall-oracle",
    .description = "DIAGNOSTIC, not for use: every token in fp16; later prompts and decode "
                   "attend the windows of largest exact attention mass (recall's upper bound)",
    .order = 140,
    .create = [](const KvConfig& config, const KvGeometry& geometry,
                 const Rope& rope) -> std::unique_ptr<KvCache> {
      return std::make_unique<QuestCache>(OracleSettingsOf(config), geometry, rope);
    },
    .fork = [](const TieredCache& prefix, const KvConfig& config,
               const Rope& rope) -> std::unique_ptr<KvCache> {
      return std::make_unique<QuestCache>(OracleSettingsOf(config), prefix.geometry(), rope,
                                          prefix.ForkFull(rope));
    },
    .diagnostic = true,
});

}  // namespace
}  // namespace qevict
