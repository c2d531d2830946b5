// qevict-recall: QEvict with a cold tier and recall (issue 38; docs/kv-cache.md, "Cold tier and
// recall"), our named setting -- not the paper's method, which drops what it evicts.
//
// Windows leave RAM for a cold tier on disk instead of being dropped (kept bit-exact, with a
// small digest in RAM). At the end of every prompt (each user turn; each prompt chunk under
// bounded prefill) the latest prompt queries rank every window of a layer (kv/recall_source.h):
// resident windows and the best cold ones (shortlisted by their digests, read back) by the
// attention they would receive with the shortlisted ones resident. That score becomes each
// window's snapshot, and between prompts a window's key is
//     snapshot (at the last prompt end) + attention mass received since
// (as qevict-qa). The tiers are then filled as qevict fills them, on one axis: fp16 from the
// top until its share (1 - q_share) of the band budget is used -- a cold candidate that ranks
// there is recalled into fp16 from disk -- then the quantized tier with what is left (resident
// windows only: a cold window comes back only exact), the rest to the cold tier. Bytes the
// quantized tier leaves idle go back to fp16: the best quantized windows, then the next cold
// candidates. The fp16 share is, by default (recall_split_error = 0.3), a count of windows per
// layer chosen at each prompt end to lose the least of the ranked attention
// (LeastLossFp16Windows) and kept, with the saved state, until the next one; with
// recall_split_error = 0 it is the fixed share 1 - q_share.
// At every decoding step (route_every tokens) the last generated token's queries
// rank the resident windows and a digest shortlist of the cold ones, and the `recall_focus`
// windows it attends most go first into fp16 (recalled from disk where cold).
#include <algorithm>
#include <limits>
#include <vector>

#include "kv/kv_config.h"
#include "kv/kv_options.h"
#include "policy/registry.h"
#include "policy/snapshot_keys.h"

namespace qevict {
namespace {

const KvPolicyOption kRecallFocus({
    .key = "recall_focus",
    .type = KvOptionType::kInt,
    .help = "qevict-recall: windows per layer the last generated token attends most, kept in "
            "fp16 (recalled from the cold tier) at each decoding step",
    .policies = "qevict-recall",
    .origin = "*choice* (ours; Quest selects pages per query)",
    .our_choice = true,
    .min = 0,
    .request_max = 4096,
    .eval_variant = true,
    .default_number = 4,
});

const KvPolicyOption kRecallSplitError({
    .key = "recall_split_error",
    .type = KvOptionType::kNumber,
    .help = "qevict-recall: above 0, each layer's fp16 / 2-bit split is chosen at every prompt "
            "end to lose the least of the attention its windows are ranked by, a 2-bit window "
            "losing this share of its own (0: the fixed --kv-q-share)",
    .policies = "qevict-recall",
    .origin = "*choice* (ours; 0.3 fixed on the development seeds, docs/kv-cache.md)",
    .our_choice = true,
    .min = 0,
    .max = 1,
    .eval_variant = true,
    .default_number = 0.3,
});

class QevictRecallPolicy : public Policy {
 public:
  explicit QevictRecallPolicy(const KvConfig& config)
      : focus_(kRecallFocus.GetInt(config)),
        q_share_(config.q_share),
        prefill_q_share_(config.prefill_q_share),
        hysteresis_(static_cast<float>(config.hysteresis)),
        split_error_(static_cast<float>(kRecallSplitError.Get(config))) {}

  bool keeps_cold() const override { return true; }
  bool wants_observation() const override { return true; }
  bool quantizes() const override { return true; }
  void BeginRun() override {
    keys_.Clear();
    fp_windows_.clear();
  }
  void SaveState(ByteWriter& out) const override {
    keys_.Save(out);
    out.Array<int64_t>(fp_windows_);
  }
  void LoadState(ByteReader& in, int n_layers) override {
    keys_.Load(in, n_layers, "qevict-recall snapshot", "qevict-recall scores");
    fp_windows_ = in.Array<int64_t>("qevict-recall fp16 split", static_cast<size_t>(n_layers));
    for (const int64_t n : fp_windows_) {
      if (n < -1 || n > kMaxSplitWindows) in.Fail("qevict-recall fp16 split out of range");
    }
  }

  void Route(const RoutingContext& context, Plan* plan) override {
    const size_t n_layers = context.layers.size();
    keys_.Reserve(n_layers);
    for (size_t l = 0; l < n_layers; ++l) {
      const LayerBand& band = context.layers[l];
      // A prompt's recall scores become the snapshot; a decoding step's (the last token's
      // attention) only say which windows it reads next (focus, FillLayer).
      const bool decoding = context.trigger == BatchKind::kGenerated;
      if (!band.recall.empty() && !decoding) {
        keys_.Take(band, l, band.recall.data(), static_cast<int64_t>(band.recall.size()));
      }
      keys_.Grow(band, l);
      FillLayer(context, l, plan);
    }
  }

 private:
  // One ranked unit: a band window (band >= 0) or a cold candidate (cold >= 0).
  struct Unit {
    float key;
    int band;
    int cold;
  };

  void FillLayer(const RoutingContext& context, size_t l, Plan* plan) {
    const LayerBand& band = context.layers[l];
    std::vector<Tier>& targets = plan->targets[l];
    std::vector<int>& recall = plan->recall[l];
    const float bonus = 1.0f + hysteresis_;
    units_.clear();
    for (size_t j = 0; j < band.windows.size(); ++j) {
      const BandWindow& w = band.windows[j];
      const float k = keys_.Key(l, w);
      units_.push_back({w.tier == Tier::kFp16 ? k * bonus : k, static_cast<int>(j), -1});
    }
    for (size_t c = 0; c < band.cold.size(); ++c) {
      if (band.cold[c].candidate) units_.push_back({band.cold[c].score, -1, static_cast<int>(c)});
    }
    // Best first; ties favour the newer window.
    std::stable_sort(units_.begin(), units_.end(), [&](const Unit& a, const Unit& b) {
      if (a.key != b.key) return a.key > b.key;
      return IndexOf(band, a) > IndexOf(band, b);
    });
    const int64_t budget = band.budget_bytes;
    const int64_t fp = context.fp_window_bytes, q = context.q_window_bytes;
    const double share = context.trigger == BatchKind::kPromptChunk ? prefill_q_share_ : q_share_;
    int64_t fp_budget =
        budget == RoutingContext::kUnlimited
            ? budget
            : static_cast<int64_t>((1.0 - share) * static_cast<double>(budget));
    int64_t used = 0;
    // At a decoding step, the `focus_` windows the last token attends most (band or recall
    // candidates, by band.recall) go first: what the next tokens read, as Quest selects pages
    // for each query, here from the cold tier too.
    if (context.trigger == BatchKind::kGenerated && !band.recall.empty() && focus_ > 0) {
      std::stable_sort(units_.begin(), units_.end(), [&](const Unit& a, const Unit& b) {
        return RecallOf(band, a) > RecallOf(band, b);
      });
      std::stable_sort(units_.begin() + std::min<size_t>(focus_, units_.size()), units_.end(),
                       [&](const Unit& a, const Unit& b) {
                         if (a.key != b.key) return a.key > b.key;
                         return IndexOf(band, a) > IndexOf(band, b);
                       });
    }
    // The windows the layers share (band.shared) go first, wherever they are.
    // (In reverse: each goes to the front, so the best ends first.)
    for (auto it = band.shared.rbegin(); it != band.shared.rend(); ++it) {
      const int64_t index = *it;
      const auto unit = std::find_if(units_.begin(), units_.end(),
                                     [&](const Unit& u) { return IndexOf(band, u) == index; });
      if (unit != units_.end()) {
        std::rotate(units_.begin(), unit, unit + 1);  // to the front, the rest in order
        continue;
      }
      const auto cold = std::lower_bound(
          band.cold.begin(), band.cold.end(), index,
          [](const ColdWindow& c, int64_t i) { return c.index < i; });
      if (cold != band.cold.end() && cold->index == index) {
        units_.insert(units_.begin(), Unit{0.0f, -1, static_cast<int>(cold - band.cold.begin())});
      }
    }
    // The least-loss split is chosen at a prompt end (the question's queries rank the windows)
    // and kept by the decoding steps after it (and in the saved state), until the next prompt
    // end. A layer whose split is 0 fp16 windows gives the focus windows (above) none: they go
    // 2 bits first where resident, and a cold one waits for idle bytes.
    if (split_error_ > 0.0f && budget != RoutingContext::kUnlimited) {
      if (fp_windows_.size() <= l) fp_windows_.resize(l + 1, -1);
      if (context.trigger == BatchKind::kPromptEnd) {
        fp_windows_[l] = LeastLossFp16Windows(budget, fp, q);
      }
      if (context.trigger != BatchKind::kPromptChunk && fp_windows_[l] >= 0) {
        fp_budget = std::min(budget, fp_windows_[l] * fp);  // the band may have shrunk since
      }
    }
    placed_.assign(units_.size(), 0);
    // The fp16 tier from the top, within its share.
    for (size_t u = 0; u < units_.size(); ++u) {
      if (used + fp > fp_budget) break;
      Place(units_[u], Tier::kFp16, targets, recall);
      placed_[u] = 1;
      used += fp;
    }
    // The quantized tier: resident windows only, in rank order, with the rest of the budget.
    for (size_t u = 0; u < units_.size(); ++u) {
      if (placed_[u] || units_[u].band < 0) continue;
      if (used + q <= budget) {
        Place(units_[u], Tier::kQuant, targets, recall);
        placed_[u] = 2;
        used += q;
      } else {
        targets[units_[u].band] = Tier::kEvicted;  // to the cold tier
        placed_[u] = 3;
      }
    }
    // Idle bytes back to fp16, best first: quantized windows, then cold candidates.
    for (size_t u = 0; u < units_.size(); ++u) {
      const int64_t extra = placed_[u] == 2 ? fp - q : placed_[u] == 0 ? fp : -1;
      if (extra < 0 || used + extra > budget) continue;
      Place(units_[u], Tier::kFp16, targets, recall);
      placed_[u] = 1;
      used += extra;
    }
  }

  // How many of the top units (in units_ order) go to fp16 so that the attention lost is least:
  // the first n in fp16 lose nothing, then the resident windows after them in rank order fill
  // the rest of the budget in 2 bits, each losing split_error_ of its key, and every other unit
  // (cold, or past the budget) loses its key. Keys stand for the attention a window gets.
  int64_t LeastLossFp16Windows(int64_t budget, int64_t fp, int64_t q) {
    const size_t n = units_.size();
    all_sum_.assign(n + 1, 0.0);
    resident_.clear();
    resident_sum_.assign(1, 0.0);
    for (size_t u = 0; u < n; ++u) {
      const double key = std::max(0.0f, units_[u].key);
      all_sum_[u + 1] = all_sum_[u] + key;
      if (units_[u].band >= 0) {
        resident_.push_back(u);
        resident_sum_.push_back(resident_sum_.back() + key);
      }
    }
    int64_t best = 0;
    double best_loss = std::numeric_limits<double>::infinity();
    for (int64_t k = 0; k <= static_cast<int64_t>(n) && k * fp <= budget; ++k) {
      const int64_t q_count = (budget - k * fp) / q;
      const size_t first = static_cast<size_t>(
          std::lower_bound(resident_.begin(), resident_.end(), static_cast<size_t>(k)) -
          resident_.begin());
      const size_t last = std::min(resident_.size(), first + static_cast<size_t>(q_count));
      const double quantized = resident_sum_[last] - resident_sum_[first];
      const double loss = (all_sum_[n] - all_sum_[k]) - (1.0 - split_error_) * quantized;
      if (loss < best_loss) {
        best_loss = loss;
        best = k;
      }
    }
    return best;
  }

  static float RecallOf(const LayerBand& band, const Unit& u) {
    const int64_t i = IndexOf(band, u);
    return i < static_cast<int64_t>(band.recall.size()) ? band.recall[i] : 0.0f;
  }

  static int64_t IndexOf(const LayerBand& band, const Unit& u) {
    return u.band >= 0 ? band.windows[u.band].index : band.cold[u.cold].index;
  }

  static void Place(const Unit& u, Tier tier, std::vector<Tier>& targets,
                    std::vector<int>& recall) {
    if (u.band >= 0) {
      targets[u.band] = tier;
    } else {
      recall.push_back(u.cold);
    }
  }

  static constexpr int64_t kMaxSplitWindows = int64_t{1} << 32;  // a saved split's bound

  int focus_;
  double q_share_, prefill_q_share_;
  float hysteresis_;
  float split_error_;
  SnapshotKeys keys_;
  std::vector<double> all_sum_, resident_sum_;  // LeastLossFp16Windows' prefix sums
  std::vector<size_t> resident_;
  std::vector<int64_t> fp_windows_;  // per layer: the split of the last prompt end (-1: none)
  std::vector<Unit> units_;
  std::vector<uint8_t> placed_;  // 0 not placed, 1 fp16, 2 quantized, 3 cold
};

const PolicyRegistration kQevictRecallRegistration({
    .name = "qevict-recall",
    .description = "QEvict with a cold tier on disk and recall at every prompt: windows are "
                   "kept exactly on disk, the question brings back what it needs (ours)",
    .order = 130,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<QevictRecallPolicy>(c);
    },
});

}  // namespace

}  // namespace qevict
