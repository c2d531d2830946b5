#include "server/generation.h"

#include <chrono>
#include <utility>

#include "policy/registry.h"
#include "util/error.h"

namespace qevict::server {
namespace {

// A slot publishes its progress at most this often (a KvStats snapshot walks the window lists).
constexpr auto kProgressInterval = std::chrono::milliseconds(100);

}  // namespace

GenerationRun::GenerationRun(const LoadedModel& model, SlotLease lease, GenerationJob job,
                             ServerMetrics& metrics, SessionStore* store)
    : model_(model),
      lease_(std::move(lease)),
      job_(std::move(job)),
      metrics_(metrics),
      store_(store),
      conversation_(std::move(job_.conversation)) {
  QEVICT_CHECK(lease_.valid() && job_.n_ctx > 0);
  const int64_t reusable = conversation_ ? conversation_->ReusableTokens(job_.prompt) : 0;
  metrics_.SlotStarted(lease_.slot(), static_cast<int64_t>(job_.prompt.size()) - reusable);
  try {
    lease_.Run([this] {
      if (conversation_ != nullptr) {
        conversation_->session().set_pool(lease_.pool());
      } else {
        SessionOptions options;
        options.n_ctx = job_.n_ctx;
        options.prefill_chunk = job_.kv.ForwardBatch(job_.batch);
        const KvConfig config = job_.kv;
        conversation_ = std::make_unique<Conversation>(
            *model_.model, lease_.pool(), options,
            [&config](const KvGeometry& g, const Rope& rope) {
              return CreateKvCache(config, g, rope);
            });
      }
      // A kept conversation continues its run (its first prompt end, the only one that routes on
      // external scores, is behind it) unless the prompt does not extend it: then a new run
      // starts and takes this request's context.
      conversation_->session().set_score_context(job_.score_context);
      const TurnStart start = conversation_->Prefill(job_.prompt, job_.budget_new_tokens);
      logits_ = start.logits;
      reused_tokens_ = start.reused_tokens;
      final_stats_ = conversation_->session().kv_stats();
    });
    metrics_.SlotProgress(lease_.slot(), 0, final_stats_);
  } catch (...) {
    Finish();
    throw;
  }
}

GenerationRun::~GenerationRun() { Finish(); }

GenerationOutcome GenerationRun::Generate(const ChunkCallback& on_chunk) {
  QEVICT_CHECK(!finished_ && conversation_ != nullptr);
  Session& session = conversation_->session();
  GenerateOptions go;
  go.max_new_tokens = static_cast<int>(job_.max_tokens);
  go.sampling = job_.sampling;
  go.stop = job_.stop;
  go.top_logprobs = job_.top_logprobs;
  go.seen_tokens = job_.prompt;  // the whole conversation so far, kept part included
  auto last_publish = std::chrono::steady_clock::now();
  const int64_t generated_before = session.timings().generated_tokens;
  go.on_chunk = [&](std::string_view text, std::span<const TokenLogprob> logprobs) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_publish >= kProgressInterval) {
      last_publish = now;
      // The first sampled token needs no decode step; every later one took one.
      metrics_.SlotProgress(lease_.slot(),
                            session.timings().generated_tokens - generated_before + 1,
                            session.cache().Stats());
    }
    if (lease_.cancelled()) return false;
    return on_chunk ? on_chunk(text, logprobs) : true;
  };
  GenerationOutcome out;
  const double seconds_before = session.timings().generate_seconds;
  try {
    lease_.Run([&] {
      out.result = conversation_->Generate(*model_.tokenizer, logits_, go);
      out.kv = session.kv_stats();
      out.timings = session.timings();
    });
  } catch (...) {
    // A failed generation (a cold-store fault leaves the cache dead) is never kept: its cache,
    // cold file included, is freed now and the slot released.
    Finish();
    throw;
  }
  generated_ = static_cast<int64_t>(out.result.tokens.size());
  decode_seconds_ = out.timings.generate_seconds - seconds_before;
  final_stats_ = out.kv;
  keepable_ = out.result.finish_reason != "cancelled";
  Finish();
  return out;
}

void GenerationRun::Finish() {
  if (finished_) return;
  finished_ = true;
  const bool keep = conversation_ != nullptr && keepable_ && job_.keep && store_ != nullptr &&
                    store_->enabled();
  // The cache's memory goes (or only the scratch, for a kept conversation) on the thread that
  // allocated it, before the reservation does.
  int64_t kept_bytes = 0, kept_cold_bytes = 0;
  if (conversation_ != nullptr) {
    lease_.Run([&] {
      if (keep) {
        conversation_->session().Trim();
        const KvStats stats = conversation_->session().cache().Stats();
        kept_bytes = stats.reserved_bytes;
        kept_cold_bytes = stats.cold_bytes;
      } else {
        conversation_.reset();
      }
    });
  }
  metrics_.SlotFinished(lease_.slot(), generated_, decode_seconds_, final_stats_);
  if (keep) {
    lease_.ReleaseWith([&] {
      store_->Keep(job_.session_id, job_.kv_key, std::move(conversation_), kept_bytes,
                   kept_cold_bytes);
    });
  }
  lease_ = SlotLease();
}

}  // namespace qevict::server
