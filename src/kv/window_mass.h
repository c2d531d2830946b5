// Attention mass per window, accumulated in fp32 inside the attention pass (an observer of
// GroupedAttentionOverPrefix, kv/grouped_attention.h). Keys are addressed by their resident
// index: the sink tokens first (slot 0), then W tokens per resident window (slot 1 + k).
// After Finish(): mass()[slot] = sum over the batch's queries of the softmax probability on the
// slot's keys, averaged over query heads; last_mass() the same for the batch's last query only.
//
// Two ways to combine partial softmaxes without races or atomics:
//   splits == 1 (prefill, many items): each item normalizes by its own sum (which is the total)
//     and adds into the row of its (query block, KV head) — items sharing a row run one after
//     another in the same parallel item — and Finish() adds the rows in row order, so the sums
//     do not depend on how threads were scheduled (runs and forked caches reproduce exactly);
//   splits > 1 (decoding): each item stores its per-slot sums, normalized by its own sum, in its
//     own slice; OnShare (serial) scales them by the split's share of the total.
#pragma once

#include <cstdint>
#include <vector>

namespace qevict {

class WindowMassObserver {
 public:
  static constexpr bool kEnabled = true;

  // max_slots bounds n_slots for the run (1 + windows); buffers are sized once here.
  void Configure(int n_heads, int n_kv_heads, int window, int64_t max_slots);

  // Before each attention call: the layer's resident layout.
  void Begin(int sink_tokens, int64_t n_slots);
  void Prepare(int n, int64_t splits, const int64_t* visible);
  void OnItem(int64_t item, int i, int h, int64_t begin, int64_t end, const float* probs,
              int64_t ld, const float* sums);
  void OnShare(int i, int h, int64_t split, int g, float share);
  void Finish();

  const float* mass() const { return mass_.data(); }
  const float* last_mass() const { return last_.data(); }

 private:
  int64_t SlotOf(int64_t r) const { return r < sink_tokens_ ? 0 : 1 + (r - sink_tokens_) / window_; }
  // Adds scale * (sum of probs per slot) for keys [begin, end) into dst[slot].
  void AddSlotSums(int64_t begin, int64_t end, const float* probs, float scale, float* dst) const;
  // Row of query i, KV head h (splits == 1): one per parallel item of the attention pass.
  int64_t RowOf(int i, int h) const;

  int n_heads_ = 0, n_kv_heads_ = 0, group_ = 0, window_ = 1;
  int64_t max_slots_ = 0;
  int sink_tokens_ = 0;
  int64_t n_slots_ = 0;
  int n_ = 0;
  int64_t splits_ = 1;
  const int64_t* visible_ = nullptr;

  std::vector<float> mass_;       // [max_slots]
  std::vector<float> last_;       // [max_slots]
  std::vector<float> last_rows_;  // [n_kv_heads][max_slots]: last query, splits == 1
  std::vector<float> item_sums_;  // [items][group][item_stride_], splits > 1
  int64_t item_stride_ = 0;

  std::vector<float> rows_;       // [n_rows][max_slots], splits == 1; zero between calls
  std::vector<uint8_t> row_used_;  // [n_rows]
};

}  // namespace qevict
