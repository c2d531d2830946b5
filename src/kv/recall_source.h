// The recall score source of the cold tier (docs/kv-cache.md, "Cold tier and recall"): after a
// prompt batch (the end of each user turn above all), the latest prompt queries (the
// observation buffer) rank every window of a layer -- resident ones exactly, cold ones first by
// their digests and then, for the best of them, exactly.
//
// At a decoding step the last generated token's queries rank instead (a query per layer, kept
// while decoding; the next tokens read what it reads), with a quarter of the candidates.
// Per layer, for every observed query s and query head h:
//   1. the exact logits of the resident keys the query sees (ScoreRange: fp16 and quantized),
//      their max m[s][h];
//   2. the candidates: at a prompt with `scan` (KvConfig::recall_scan, the default), every cold
//      window the queries see; otherwise (and at every decoding step) the cold windows whose
//      digest estimate e of their largest logit (kv/window_digest.h) stands highest by max over
//      s, h of e - m[s][h] (how far above what the query already attends it may stand), the
//      top `candidates` (a quarter at a decoding step) with their cold neighbours;
//   3. the candidates are read back from the disk store kChunk windows at a time (one batched
//      read each) and their exact logits reduced per window and chunk, so scratch stays small;
//   4. one softmax over the resident keys and the candidates' keys, as if the candidates were
//      resident: a window's recall score is the attention it receives, summed over the observed
//      queries, averaged over the query heads of a KV head, and the largest over KV heads (a
//      window is one unit for all heads of a layer).
// A later prompt's end reuses the scores its ScoreBatch (before the batch attended) computed when
// they were for the same queries (ReuseBatchScores): the cold file is read once per question.
// Then, across layers: each layer's scores are divided by its largest band or cold score, and
// of the windows that were recall candidates somewhere, the `shared` with the largest such share
// in any layer are offered to every layer (a fact a
// few layers' heads find is recalled in all of them, as OmniKV and GemFilter select tokens once
// for the layers after a filter layer; here every layer votes).
// The two-stage ranking is ours: Quest and ArkVale select by the bound (or estimate) alone; here
// the digest only shortlists, so that what is recalled is ranked by its true attention against
// what is already resident (docs/kv-cache.md says what it costs in bytes read).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/routing.h"
#include "kv/score_sources.h"
#include "kv/window_digest.h"

namespace qevict {

class DiskColdStore;

class RecallSource final : public BandScoreSource {
 public:
  // wanted: the policy keeps a cold tier. candidates: cold windows per layer read back and
  // scored exactly at each prompt batch.
  // scan: at a prompt, every cold window is read back and ranked exactly (the digests shortlist
  // only for decoding steps).
  RecallSource(bool wanted, DigestKind kind, bool scan, int candidates, int shared)
      : wanted_(wanted), kind_(kind), scan_(scan), candidates_(candidates), shared_count_(shared) {}
  const char* name() const override { return "recall"; }
  // `disk`: the cache's cold store (reads only), nullptr without a cold tier.
  void set_disk(const DiskColdStore* disk) { disk_ = disk; }
  double Prepare(const ScoreStep& step, const ResidentReader& cache, ThreadPool& pool) override;
  void Describe(int layer, const ResidentReader& cache, std::span<BandWindow> windows,
                LayerBand& band) const override;
  void Consumed(const ScoreStep& step) override;

  // Sizes the last-query buffer (one query row per layer, charged with the cold tier's RAM).
  void Configure(int n_layers, int n_heads, int head_dim);
  // The last generated token's queries of a layer ([n][n_heads][head_dim], the last row kept),
  // which rank the windows at the next decoding step; Forget() at a run's start.
  void RememberQuery(int layer, int n, const int32_t* pos, const float* q);
  void Forget();
  // Scores one layer's windows against the last rows of a prompt batch's queries ([n][n_heads]
  // [head_dim] at positions pos) before the batch attends (KvConfig::recall_prompt): cold(layer)
  // then lists the layer's cold windows with the candidates scored.
  void ScoreBatch(int layer, const ResidentReader& cache, int n, const int32_t* pos,
                  const float* q, ThreadPool& pool);
  const std::vector<ColdWindow>& cold(int layer) const { return cold_[layer]; }
  int64_t read_bytes(int layer) const { return read_bytes_[layer]; }
  // RAM the last-query buffer holds (a query row and its position per layer).
  int64_t query_bytes() const {
    return last_q_.empty() ? 0
                           : static_cast<int64_t>(last_q_.size()) *
                                 (static_cast<int64_t>(last_q_[0].size()) * 4 + 4);
  }
  static int64_t QueryBytesFor(int n_heads, int head_dim) { return int64_t{n_heads} * head_dim * 4 + 4; }

  // Bytes the step read back from the disk store to score candidates (KvStats).
  int64_t last_read_bytes() const { return last_read_bytes_; }

 private:
  void ComputeLayer(int layer, const ResidentReader& cache);
  void ComputeShared(const ResidentReader& cache);
  void DescribeCold(const WindowTable& table, int layer);  // cold_[layer], none scored yet
  // At a prompt's end with `scan_`: when this layer's ScoreBatch (before the batch attended)
  // ranked exactly the queries the observation now holds, its scores stand -- the same queries
  // against the same windows, only some moved from cold to resident since -- so the cold file is
  // not read a second time. True when it reused them.
  bool ReuseBatchScores(int layer, const ObservationBuffer& obs);
  void ShortlistByDigest(const WindowTable& table, const LayerWindows& l,
                         std::span<const float* const> queries, std::span<const int32_t> positions,
                         std::span<const float> row_max, int n_heads, int n_kv, int hd, float scale,
                         int candidates,
                         std::vector<std::pair<float, int64_t>>& ranked) const;

  bool wanted_;
  DigestKind kind_;
  bool scan_;
  int candidates_;
  int shared_count_;
  std::vector<int64_t> shared_;                 // window indices, best first
  const DiskColdStore* disk_ = nullptr;
  bool active_ = false;
  bool decode_step_ = false;
  const float* batch_q_ = nullptr;  // ScoreBatch's queries while it runs
  ThreadPool* batch_pool_ = nullptr;  // ScoreBatch's pool while it runs (its chunks in parallel)
  const int32_t* batch_pos_ = nullptr;
  int batch_n_ = 0;
  std::vector<std::vector<float>> last_q_;  // [layer][n_heads * head_dim]
  std::vector<int32_t> last_pos_;
  std::vector<uint8_t> has_last_;
  int64_t last_read_bytes_ = 0;
  std::vector<std::vector<float>> scores_;      // [layer][window index]
  std::vector<std::vector<ColdWindow>> cold_;   // [layer][cold window]
  std::vector<int64_t> read_bytes_;             // [layer] this step
  struct BatchRows {  // the query rows a layer's last ScoreBatch ranked (n 0: none since)
    int n = 0;
    int32_t first = 0, last = 0;
  };
  std::vector<BatchRows> batch_rows_;  // [layer]
};

}  // namespace qevict
