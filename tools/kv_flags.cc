#include "tools/kv_flags.h"

#include <cstdio>
#include <memory>
#include <sstream>

#include "engine/reconstruction.h"
#include "policy/registry.h"
#include "util/error.h"

namespace qevict::cli {

KvConfig KvFlags::Resolve() const {
  KvConfig c = config;
  c.policy = policy;
  if (ratio >= 0.0) {
    if (!(ratio < 1.0)) {
      std::ostringstream value;
      value << ratio;
      throw Error("--kv-ratio " + value.str() +
                  ": must be in [0, 1), the share of the cache removed (--kv-ratio 0.9 is "
                  "--kv-budget 0.1)");
    }
    c.budget = 1.0 - ratio;
  }
  c.recovery = ParseRecoveryFidelity(recovery);
  c.score = ParseScoreMode(score);
  c.score_source = ParseScoreSource(score_source);
  c.print_stats = stats;
  c.Validate();
  return c;
}

void AddKvFlags(CLI::App& cmd, KvFlags& f, const KvFlagSet& set) {
  std::string names;
  for (const std::string& n : PolicyNames()) names += (names.empty() ? "" : ", ") + n;
  KvConfig& c = f.config;
  const std::string group = "KV cache";
  if (set.policy) {
    cmd.add_option("--kv-policy", f.policy, "cache policy: " + names)
        ->capture_default_str()
        ->group(group);
    CLI::Option* budget =
        cmd.add_option("--kv-budget", c.budget,
                       "KV bytes kept, as a fraction of an fp16 cache of every token the run can "
                       "hold (prompt + new tokens), (0, 1]; 1: no limit")
            ->capture_default_str()
            ->group(group);
    cmd.add_option("--kv-ratio", f.ratio,
                   "share of that cache removed, kvpress's compression ratio: --kv-ratio R is "
                   "--kv-budget 1-R")
        ->excludes(budget)
        ->group(group);
    cmd.add_option("--kv-budget-bytes", c.budget_bytes,
                   "absolute cap on KV bytes (e.g. 512k, 64m), instead of a fraction")
        ->transform(CLI::AsSizeValue(false))
        ->group(group);
  }
  cmd.add_option("--kv-bits", c.bits, "bits of the quantized tier: 2, 4 or 8")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-window", c.window, "tokens per window")->capture_default_str()->group(group);
  cmd.add_option("--kv-sinks", c.sinks, "first tokens kept in fp16")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-recent", c.recent, "last tokens kept in fp16")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-route-every", c.route_every, "generated tokens between routing steps")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-q-share", c.q_share, "share of the band's bytes for the quantized tier")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-prefill-q-share", c.prefill_q_share,
                 "qevict/qevict-qa between prompt chunks: the quantized tier's share of the band "
                 "(1: archive rather than evict until the prompt's end ranks the windows)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-hysteresis", c.hysteresis,
                 "margin a quantized window's score must exceed an fp16 window's by to swap")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-score", f.score, "importance: cumulative, decay or normalized")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-score-source", f.score_source,
                 "qevict-zip/kvzip: scores of the first routing step: reconstruction (KVzip), "
                 "expected-attention or key-norm")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-score-decay", c.score_decay, "decay per query for --kv-score decay")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-recovery", f.recovery,
                 "what promotion restores: paper (dequantized codes) or exact (cold store)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-cold-dir", c.cold_store_dir, "directory of the exact-recovery cold store")
      ->group(group);
  cmd.add_option("--kv-prefill-chunk", c.prefill_chunk,
                 "with a budget, route after every prompt chunk of this many tokens: the cache peaks "
                 "at budget + one chunk (0: route once, after the whole prompt, as the paper)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-query-kernel", c.query_kernel,
                 "qevict-qa: max-pool kernel over the question's token attention (odd)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-snapkv-window", c.snapkv_window, "snapkv/pyramidkv observation window")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-snapkv-kernel", c.snapkv_kernel, "snapkv/pyramidkv max-pool kernel")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--kv-pyramid-beta", c.pyramid_beta, "pyramidkv: the last layer gets the mean band budget / beta")
      ->capture_default_str()
      ->group(group);
  if (set.stats) {
    cmd.add_flag("--kv-stats", f.stats,
                 "print a KV cache summary on stderr at the end (bytes kept, saved, tiers)")
        ->group(group);
  }
  if (!set.json_help.empty()) cmd.add_flag("--json", f.json, set.json_help)->group(group);
}

void ApplyPrefillChunk(const KvFlags& flags, SessionOptions& options) {
  options.prefill_chunk = flags.config.ForwardBatch(options.prefill_chunk);
}

KvCacheFactory MakeKvCacheFactory(const KvFlags& flags) {
  const KvConfig config = flags.Resolve();
  return [config](const KvGeometry& g, const Rope& rope) {
    return CreateKvCache(config, g, rope);
  };
}

void ApplyReconstruction(const KvFlags& flags, const Tokenizer& tokenizer,
                         const std::string& context, ThreadPool& pool, SessionOptions& options) {
  const KvConfig config = flags.Resolve();
  if (config.policy == "full" || config.score_source != ScoreSource::kReconstruction ||
      !MakePolicy(config)->wants_external_scores()) {
    return;
  }
  std::vector<int32_t> tokens = tokenizer.Encode(context, /*add_bos=*/false, /*parse_special=*/false);
  if (tokens.empty()) {
    std::fprintf(stderr, "warning: --kv-policy %s has no context to reconstruct (give -f): its "
                         "first routing step has no reconstruction scores\n", config.policy.c_str());
    return;
  }
  auto done = std::make_shared<bool>(false);
  options.before_prompt_end = [tokens = std::move(tokens), repeat = RepeatPromptTokens(tokenizer),
                               chunk = config.reconstruction_chunk, done, &pool](Session& s) {
    if (*done || s.policy_cache() == nullptr) return;  // the first prompt only
    *done = true;
    const ReconstructionCost cost = ScoreByReconstruction(s, repeat, tokens, chunk, pool);
    std::fprintf(stderr, "reconstruction scoring: %lld tokens in %lld chunks, %.2f s, %.1f MiB scratch\n",
                 static_cast<long long>(cost.tokens), static_cast<long long>(cost.chunks),
                 cost.seconds, static_cast<double>(cost.scratch_bytes) / (1 << 20));
  };
}

}  // namespace qevict::cli
