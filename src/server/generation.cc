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
                             ServerMetrics& metrics)
    : model_(model), lease_(std::move(lease)), job_(std::move(job)), metrics_(metrics) {
  QEVICT_CHECK(lease_.valid());
  metrics_.SlotStarted(lease_.slot(), static_cast<int64_t>(job_.prompt.size()));
  try {
    lease_.Run([this] {
      SessionOptions options;
      options.n_ctx = static_cast<int64_t>(job_.prompt.size()) + job_.max_tokens;
      options.prefill_chunk = job_.kv.ForwardBatch(job_.batch);
      const KvConfig config = job_.kv;
      session_ = std::make_unique<Session>(*model_.model, lease_.pool(), options,
                                           [&config](const KvGeometry& g, const Rope& rope) {
                                             return CreateKvCache(config, g, rope);
                                           });
      session_->BeginRun(static_cast<int64_t>(job_.prompt.size()), job_.max_tokens);
      logits_ = session_->Prefill(job_.prompt);
      final_stats_ = session_->cache().Stats();
    });
    metrics_.SlotProgress(lease_.slot(), 0, final_stats_);
  } catch (...) {
    Finish();
    throw;
  }
}

GenerationRun::~GenerationRun() { Finish(); }

GenerationOutcome GenerationRun::Generate(const std::function<bool(std::string_view)>& on_text) {
  QEVICT_CHECK(!finished_ && session_ != nullptr);
  GenerateOptions go;
  go.max_new_tokens = static_cast<int>(job_.max_tokens);
  go.sampling = job_.sampling;
  go.stop = job_.stop;
  auto last_publish = std::chrono::steady_clock::now();
  go.on_text = [&](std::string_view text) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_publish >= kProgressInterval) {
      last_publish = now;
      // The first sampled token needs no decode step; every later one took one.
      metrics_.SlotProgress(lease_.slot(), session_->timings().generated_tokens + 1,
                            session_->cache().Stats());
    }
    if (lease_.cancelled()) return false;
    return on_text ? on_text(text) : true;
  };
  GenerationOutcome out;
  lease_.Run([&] {
    out.result = qevict::Generate(*session_, *model_.tokenizer, logits_, go);
    out.kv = session_->cache().Stats();
    out.timings = session_->timings();
  });
  generated_ = static_cast<int64_t>(out.result.tokens.size());
  decode_seconds_ = out.timings.generate_seconds;
  final_stats_ = out.kv;
  Finish();
  return out;
}

void GenerationRun::Finish() {
  if (finished_) return;
  finished_ = true;
  // The cache's memory goes before its reservation does, freed on the thread that allocated it.
  if (session_ != nullptr) lease_.Run([this] { session_.reset(); });
  metrics_.SlotFinished(lease_.slot(), generated_, decode_seconds_, final_stats_);
  lease_ = SlotLease();
}

}  // namespace qevict::server
