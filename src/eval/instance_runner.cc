#include "eval/instance_runner.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <map>
#include <optional>

#include "engine/kv_stats_json.h"
#include "engine/reconstruction.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "eval/answer_match.h"
#include "eval/attention_miss.h"
#include "eval/chat_turns.h"
#include "eval/policy_variant.h"
#include "eval/seq_metrics.h"
#include "eval/turn_scores.h"
#include "policy/registry.h"
#include "util/error.h"
#include "util/memory_stats.h"

namespace qevict {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const char* KindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kQuestions: return "questions";
    case TaskKind::kLongGen: return "longgen";
    default: return "ppl";
  }
}

// Tokens after the first prompt: later turns' prompts and every generated / scored token.
int64_t ExtraTokens(const EvalTask& task, const TurnTokens& turns) {
  if (task.kind == TaskKind::kPerplexity) return static_cast<int64_t>(turns.scored.size());
  if (task.kind == TaskKind::kLongGen) return task.max_new_tokens;
  int64_t extra = static_cast<int64_t>(task.turns.size()) * task.max_new_tokens;
  for (const auto& later : turns.later) extra += static_cast<int64_t>(later.size());
  return extra;
}

// What one run produced: per-turn tokens, or per-position log-probabilities.
struct RunOutput {
  std::vector<std::vector<int32_t>> turn_tokens;  // questions / longgen (one "turn")
  std::vector<std::vector<float>> log_probs;      // ppl, kept for the full reference only
  double nll = 0.0, kl = 0.0, top1 = 0.0;         // ppl
  std::vector<int32_t> argmax;                    // ppl: the most likely token per position
  KvStats stats;
  SessionTimings timings;
  std::optional<AttentionMissTracker> miss;
};

// A policy's session and, with a shadow, the fp16 twin fed the same tokens.
class Runner {
 public:
  Runner(Session& session, Session* shadow, int horizon) : session_(session), shadow_(shadow) {
    if (shadow_ != nullptr && tiered() != nullptr) {
      miss_.emplace(horizon);
      miss_->AfterBatch(*tiered());  // the first routing step happened at the fork
    }
  }

  std::span<const float> Prompt(std::span<const int32_t> tokens) {
    std::span<const float> logits = session_.Prefill(tokens);
    if (shadow_ != nullptr) shadow_->Prefill(tokens);
    if (miss_) miss_->AfterBatch(*tiered());
    return logits;
  }

  std::span<const float> Step(int32_t token) {
    if (miss_) miss_->BeforeStep(*tiered());
    std::span<const float> logits = session_.Decode(token);
    if (shadow_ != nullptr) {
      shadow_->Decode(token);
      if (miss_) {
        miss_->AfterStep(dynamic_cast<const TieredCache&>(*shadow_->policy_cache()));
        miss_->AfterBatch(*tiered());
      }
    }
    return logits;
  }

  std::optional<AttentionMissTracker>& miss() { return miss_; }

 private:
  const TieredCache* tiered() const { return dynamic_cast<const TieredCache*>(session_.policy_cache()); }

  Session& session_;
  Session* shadow_;
  std::optional<AttentionMissTracker> miss_;
};

// Greedy generation until end of generation or max_new tokens; every kept token is decoded so
// the next turn follows it. In completion style (base models, which do not stop on their own) a
// line break after the first non-blank text also ends the answer, as the line that completes
// "Answer: <prefix>" is the answer; the break is kept. Returns the generated tokens.
std::vector<int32_t> Greedy(Runner& runner, const Tokenizer& tokenizer,
                            std::span<const float>& logits, int max_new, bool stop_at_line_end) {
  std::vector<int32_t> tokens;
  bool seen_text = false;
  for (int i = 0; i < max_new; ++i) {
    const int32_t token = Sampler::Argmax(logits);
    if (tokenizer.IsEndOfGeneration(token)) break;
    tokens.push_back(token);
    logits = runner.Step(token);
    if (!stop_at_line_end) continue;
    bool line_ended = false;
    for (const char ch : tokenizer.TokenToPiece(token)) {
      if (ch == '\n') {
        line_ended = seen_text;
        if (line_ended) break;
      } else if (ch != ' ' && ch != '\t' && ch != '\r') {
        seen_text = true;
      }
    }
    if (line_ended) break;
  }
  return tokens;
}

RunOutput RunOne(const LoadedModel& model, Session& session, Session* shadow,
                 const EvalSettings& settings, const EvalTask& task, const TurnTokens& turns,
                 std::span<const float> prefix_logits, const RunOutput* reference) {
  RunOutput out;
  Runner runner(session, shadow, settings.fmm_horizon);
  std::span<const float> logits = prefix_logits;
  const bool completion =
      turns.style == PromptStyle::kCompletion && task.kind == TaskKind::kQuestions;
  if (task.kind == TaskKind::kPerplexity) {
    const size_t n = turns.scored.size();
    int top1_same = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::vector<double> lp = LogSoftmax(logits);
      out.nll -= lp[turns.scored[i]];
      const int32_t best = Sampler::Argmax(logits);
      out.argmax.push_back(best);
      if (reference != nullptr) {
        const std::vector<float>& ref = reference->log_probs[i];
        std::vector<double> ref_lp(ref.begin(), ref.end());
        out.kl += KlDivergence(ref_lp, lp);
        top1_same += reference->argmax[i] == best;
      } else {
        out.log_probs.emplace_back(lp.begin(), lp.end());
        top1_same += 1;
      }
      if (i + 1 < n) logits = runner.Step(turns.scored[i]);
    }
    out.nll /= static_cast<double>(n);
    out.kl /= static_cast<double>(n);
    out.top1 = static_cast<double>(top1_same) / static_cast<double>(n);
  } else if (task.kind == TaskKind::kLongGen) {
    out.turn_tokens.push_back(Greedy(runner, *model.tokenizer, logits, task.max_new_tokens,
                                            completion));
  } else {
    for (size_t t = 0; t < task.turns.size(); ++t) {
      if (t >= turns.first_asks) logits = runner.Prompt(turns.later[t - turns.first_asks]);
      out.turn_tokens.push_back(Greedy(runner, *model.tokenizer, logits, task.max_new_tokens,
                                            completion));
    }
  }
  out.stats = session.cache().Stats();
  out.timings = session.timings();
  out.miss = std::move(runner.miss());
  return out;
}

json Row(const LoadedModel& model, const EvalTask& task, const TurnTokens& turns,
         AnswerScorer scorer, const std::string& policy, double budget, const RunOutput& run,
         const RunOutput* full, double prefill_seconds, double wall_seconds, bool shadow) {
  json row;
  row["task"] = task.task;
  row["id"] = task.id;
  row["kind"] = KindName(task.kind);
  row["policy"] = policy;
  row["budget"] = budget;
  row["target_tokens"] = task.target_tokens;
  row["depth"] = task.depth >= 0.0 ? json(task.depth) : json(nullptr);
  row["prompt_style"] = PromptStyleName(turns.style);
  row["scorer"] = AnswerScorerName(scorer);
  row["prompt_tokens"] = turns.first.size();
  row["total_tokens"] = run.stats.tokens_seen;
  const RunOutput& ref = full != nullptr ? *full : run;

  json turn_rows = json::array();
  double accuracy = 0.0;
  json agreement = nullptr, edit = nullptr;
  if (task.kind == TaskKind::kPerplexity) {
    accuracy = run.top1;
    const double ppl = std::exp(run.nll);
    row["nll"] = run.nll;
    row["ppl"] = ppl;
    row["delta_ppl"] = ppl - std::exp(ref.nll);
    row["kl"] = run.kl;
    row["top1_agreement"] = run.top1;
  } else {
    std::vector<int32_t> all, ref_all;
    for (const auto& t : run.turn_tokens) all.insert(all.end(), t.begin(), t.end());
    for (const auto& t : ref.turn_tokens) ref_all.insert(ref_all.end(), t.begin(), t.end());
    agreement = TokenAgreement(all, ref_all);
    edit = EditSimilarity(all, ref_all);
    if (task.kind == TaskKind::kLongGen) {
      accuracy = edit.get<double>();
    } else {
      // The row's accuracy is the mean of its turns' scores (each in [0, 1]: turn_scores.h).
      for (size_t t = 0; t < task.turns.size(); ++t) {
        turn_rows.push_back({{"question", task.turns[t].question},
                             {"prompt_tail", turns.tails[t]},
                             {"output", model.tokenizer->Decode(run.turn_tokens[t])}});
      }
      accuracy = ScoreTurns(turn_rows, task, scorer);
    }
    for (const char* key : {"nll", "ppl", "delta_ppl", "kl", "top1_agreement"}) row[key] = nullptr;
  }
  if (task.kind == TaskKind::kLongGen) {
    turn_rows.push_back({{"question", ""}, {"output", model.tokenizer->Decode(run.turn_tokens[0])},
                         {"score", nullptr}, {"correct", nullptr}});
  }
  row["accuracy"] = accuracy;
  row["turns"] = turn_rows;
  row["agreement"] = agreement;
  row["edit_similarity"] = edit;
  row["infeasible"] = run.stats.infeasible;
  row["note"] = run.stats.note;
  row["kv"] = KvStatsToJson(run.stats);
  if (shadow) {
    if (run.miss) {
      row["missed_mass"] = run.miss->mean_missed();
      row["quantized_mass"] = run.miss->mean_quantized();
      const double fmm = run.miss->mean_fmm(), cumulative = run.miss->mean_fmm_cumulative();
      row["fmm"] = fmm >= 0.0 ? json(fmm) : json(nullptr);
      row["fmm_cumulative"] = cumulative >= 0.0 ? json(cumulative) : json(nullptr);
      row["missed_mass_steps"] = run.miss->missed_per_step();
    } else {  // the full cache misses nothing
      row["missed_mass"] = 0.0;
      row["quantized_mass"] = 0.0;
      row["fmm"] = 0.0;
      row["fmm_cumulative"] = 0.0;
      row["missed_mass_steps"] = json::array();
    }
  } else {
    for (const char* key : {"missed_mass", "quantized_mass", "fmm", "fmm_cumulative"}) {
      row[key] = nullptr;
    }
  }
  row["prefill_tok_s"] = prefill_seconds > 0 ? turns.first.size() / prefill_seconds : 0.0;
  row["prefill_s"] = prefill_seconds;
  const SessionTimings& t = run.timings;
  row["generated_tokens"] = t.generated_tokens;
  row["decode_tok_s"] = t.generate_seconds > 0 ? t.generated_tokens / t.generate_seconds : 0.0;
  row["wall_s"] = wall_seconds;
  return row;
}

}  // namespace

std::vector<PlannedRow> PlannedRows(const EvalSettings& settings) {
  auto named = [&](const std::string& policy) {
    return settings.tag.empty() ? policy : policy + "[" + settings.tag + "]";
  };
  std::vector<PlannedRow> rows = {{"full", named("full"), 1.0, "full", "all"}};
  for (const bool bounded : {true, false}) {
    if (bounded ? !settings.bounded : !settings.prompt_end) continue;
    for (const std::string& policy : settings.policies) {
      if (policy == "full") continue;
      const std::string scope =
          BudgetScopeName(ApplyPolicyVariant(settings.kv, policy).budget_scope);
      for (const double budget : settings.budgets) {
        rows.push_back({policy, named(policy), budget, bounded ? "bounded" : "prompt-end", scope});
      }
    }
  }
  return rows;
}

int64_t InstanceTokens(const LoadedModel& model, const EvalTask& task, PromptStyle style,
                       EvalProtocol protocol) {
  const TurnTokens turns = BuildTurnTokens(model, task, style, protocol);
  return static_cast<int64_t>(turns.first.size()) + ExtraTokens(task, turns);
}

void RunInstance(const LoadedModel& model, ThreadPool& pool, const EvalSettings& settings,
                 const EvalTask& task, const std::function<void(json)>& on_row) {
  const TurnTokens turns =
      BuildTurnTokens(model, task, settings.prompt_style, settings.protocol);
  const int64_t extra = ExtraTokens(task, turns);
  const int64_t prompt = static_cast<int64_t>(turns.first.size());
  const int64_t context = model.model->config().context_length;
  if (prompt + extra > context) {
    throw Error("task " + task.id + " needs " + std::to_string(prompt + extra) +
                " tokens, more than the model's context of " + std::to_string(context));
  }
  SessionOptions options;
  options.n_ctx = prompt + extra;
  options.prefill_chunk = settings.prefill_chunk;

  // One fp16 prefill for the full row and every prompt-end row (and the shadows).
  const auto t0 = Clock::now();
  std::optional<Session> prefix_session;
  prefix_session.emplace(*model.model, pool, options, [&](const KvGeometry& g, const Rope& r) {
    return std::unique_ptr<KvCache>(CreatePrefixCache(settings.kv, g, r));
  });
  Session* prefix = &*prefix_session;
  if (prefix->policy_cache() == nullptr) {
    throw Error("every layer of this model is a sliding-window layer: its cache holds only the "
                "windows, and there is nothing for a policy to compress or evaluate");
  }
  prefix->BeginRun(prompt, extra);
  const std::span<const float> first = prefix->Prefill(turns.first);
  const std::vector<float> prefix_logits(first.begin(), first.end());
  const double prefill_seconds = Since(t0);
  const auto& prefix_cache = dynamic_cast<const TieredCache&>(*prefix->policy_cache());

  // Reconstruction scoring (qevict-zip, kvzip; engine/reconstruction.h): the task's context
  // repeated over the cache once its first prompt is stored. Prompt-end rows share one pass over
  // the prefix (its scores travel with every fork); bounded rows run their own before their
  // prompt's end is routed. Rows that use it report its cost.
  // The context is the task's (engine/score_hooks.h: the same plain-text encoding as every
  // entry point); each row reconstructs it in chunks of its own reconstruction_chunk.
  const std::shared_ptr<const ScoreContext> task_context =
      MakeScoreContext(*model.tokenizer, settings.kv, task.context);
  const std::vector<int32_t>& repeat_prompt = task_context->repeat_prompt;
  const std::vector<int32_t>& context_tokens = task_context->context;
  auto external = [&](const KvConfig& config) {
    return IsTieredPolicy(config.policy) && MakePolicy(config)->wants_external_scores();
  };
  auto reconstructs = [&](const KvConfig& config) {
    return external(config) && config.score_source == ScoreSource::kReconstruction;
  };
  std::optional<ReconstructionCost> prefix_reconstruction;
  auto reconstruct_prefix = [&](const KvConfig& config) {
    if (!prefix_reconstruction) {
      if (context_tokens.empty()) throw Error("task " + task.id + " has no context to reconstruct");
      prefix_reconstruction = ScoreByReconstruction(*prefix, repeat_prompt, context_tokens,
                                                    config.reconstruction_chunk, pool);
    }
    return *prefix_reconstruction;
  };

  // A policy whose cache has another window (kivi's 32-token key groups: PolicyLayout) forks
  // from the prefix re-windowed to that layout: its rows copied, the prompt not read again
  // (RelayoutPrefixCache; such policies do not route on window scores, which do not carry over).
  std::map<int, std::unique_ptr<Session>> other_prefixes;
  auto prefix_for = [&](const KvConfig& config) -> const Session& {
    const int window = PolicyLayout(config).window;
    if (config.policy == "full" || window == prefix_cache.config().window) return *prefix;
    std::unique_ptr<Session>& slot = other_prefixes[window];
    if (!slot) {
      slot = std::make_unique<Session>(*prefix, [&](const KvCache& p, const Rope& r) {
        return std::unique_ptr<KvCache>(
            RelayoutPrefixCache(dynamic_cast<const TieredCache&>(p), config,
                                options.prefill_chunk, r));
      });
    }
    return *slot;
  };

  auto run = [&](const PlannedRow& planned, const RunOutput* reference) {
    const std::string& policy = planned.policy;
    const bool bounded = planned.prefill_mode == "bounded";
    ResetPeakRss();  // each row's peak_rss_bytes is the peak of that row alone
    const auto start = Clock::now();
    KvConfig config = ApplyPolicyVariant(settings.kv, policy);
    config.budget = planned.budget;
    config.budget_bytes = -1;
    std::optional<Session> own;  // bounded: this row's own chunked prefill
    std::vector<float> own_logits;
    double own_prefill_seconds = 0.0;
    const bool reconstruction = reconstructs(config);
    std::optional<ReconstructionCost> reconstruction_cost;
    if (bounded) {
      SessionOptions chunked = options;
      chunked.prefill_chunk = config.ForwardBatch(options.prefill_chunk);
      if (reconstruction && context_tokens.empty()) {
        throw Error("task " + task.id + " has no context to reconstruct");
      }
      own.emplace(*model.model, pool, chunked, [&](const KvGeometry& g, const Rope& r) {
        return CreateKvCache(config, g, r);
      });
      // The session's score hook reconstructs the task's context before the first prompt end
      // is routed, when the cache asks (engine/score_hooks.h).
      auto row_context = std::make_shared<ScoreContext>(*task_context);
      row_context->reconstruction_chunk = config.reconstruction_chunk;
      own->set_score_context(std::move(row_context));
      own->BeginRun(prompt, extra);
      const std::span<const float> l = own->Prefill(turns.first);
      own_logits.assign(l.begin(), l.end());
      reconstruction_cost = own->external_score_cost();
      own_prefill_seconds = Since(start);
    }
    // Prompt-end rows fork a prefix of the policy's layout; so do shadows (their windows must be
    // the policy's to compare them). Bounded rows without shadows need no prefix at all.
    // Shadows compare a tiered cache's windows with the full cache's; quest has no windows (its
    // rows leave the missed-mass columns null rather than claim it misses nothing).
    const bool shadowed = settings.shadow && IsTieredPolicy(policy);
    const bool needs_base = !bounded || shadowed;
    const Session* base = needs_base ? &prefix_for(config) : nullptr;
    const TieredCache* base_cache =
        needs_base ? &dynamic_cast<const TieredCache&>(*base->policy_cache()) : nullptr;
    std::optional<Session> forked;
    if (!bounded && reconstruction) reconstruction_cost = reconstruct_prefix(config);
    if (!bounded) {
      forked.emplace(*base, [&](const KvCache&, const Rope& r) {
        return ForkKvCache(*base_cache, config, r, pool);
      });
    }
    Session& session = bounded ? *own : *forked;
    std::optional<Session> shadow;
    if (shadowed) {
      shadow.emplace(*base, [&](const KvCache&, const Rope& r) {
        return std::unique_ptr<KvCache>(ForkShadowCache(*base_cache, r, pool));
      });
    }
    RunOutput out = RunOne(model, session, shadow ? &*shadow : nullptr, settings, task, turns,
                           bounded ? std::span<const float>(own_logits) : prefix_logits,
                           reference);
    json row = Row(model, task, turns, task.scorer.value_or(settings.scorer), planned.name,
                   config.budget, out, reference,
                   bounded ? own_prefill_seconds : prefill_seconds, Since(start),
                   settings.shadow && (policy == "full" || shadowed));
    row["prefill_mode"] = planned.prefill_mode;
    if (planned.prefill_mode != "full") row["budget_scope"] = planned.budget_scope;
    row["protocol"] = EvalProtocolName(settings.protocol);
    row["prefill_chunk"] = bounded ? config.prefill_chunk : 0;
    row["score_source"] =
        external(config) ? json(ScoreSourceName(config.score_source)) : json(nullptr);
    row["reconstruction_s"] = reconstruction_cost ? json(reconstruction_cost->seconds) : json(nullptr);
    row["reconstruction_tokens"] =
        reconstruction_cost ? json(reconstruction_cost->tokens) : json(nullptr);
    row["reconstruction_scratch_bytes"] =
        reconstruction_cost ? json(reconstruction_cost->scratch_bytes) : json(nullptr);
    on_row(std::move(row));
    return out;
  };

  const std::vector<PlannedRow> planned = PlannedRows(settings);
  const RunOutput full = run(planned.front(), nullptr);
  // Bounded rows without shadows or prompt-end rows to come need no fp16 prefix: dropping it
  // first makes their RSS that of a process holding their own cache alone.
  if (settings.bounded && !settings.prompt_end && !settings.shadow) prefix_session.reset();
  for (size_t i = 1; i < planned.size(); ++i) run(planned[i], &full);
}

}  // namespace qevict
