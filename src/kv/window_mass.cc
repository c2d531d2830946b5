#include "kv/window_mass.h"

#include <algorithm>

#include "kv/grouped_attention.h"
#include "util/error.h"

namespace qevict {

void WindowMassObserver::Configure(int n_heads, int n_kv_heads, int window, int64_t max_slots) {
  n_heads_ = n_heads;
  n_kv_heads_ = n_kv_heads;
  group_ = n_heads / n_kv_heads;
  window_ = window;
  max_slots_ = max_slots;
  mass_.assign(max_slots, 0.0f);
  last_.assign(max_slots, 0.0f);
  last_rows_.assign(static_cast<size_t>(n_kv_heads) * max_slots, 0.0f);
  rows_.clear();
  row_used_.clear();
}

int64_t WindowMassObserver::RowOf(int i, int h) const {
  // One row per kQueryBlock queries of one KV head: GroupedAttentionBlocked hands one or two
  // such blocks (QueryBlockTokens) to one item, which then owns their rows alone.
  const int64_t block = QueryItemRow(n_, i);
  return block * n_kv_heads_ + h;
}

void WindowMassObserver::Begin(int sink_tokens, int64_t n_slots) {
  QEVICT_CHECK(n_slots <= max_slots_);
  sink_tokens_ = sink_tokens;
  n_slots_ = n_slots;
  std::fill(mass_.begin(), mass_.begin() + n_slots, 0.0f);
  std::fill(last_.begin(), last_.begin() + n_slots, 0.0f);
}

void WindowMassObserver::Prepare(int n, int64_t splits, const int64_t* visible) {
  n_ = n;
  splits_ = splits;
  visible_ = visible;
  if (splits == 1) {
    const int64_t n_rows = RowOf(n - 1, n_kv_heads_ - 1) + 1;
    if (static_cast<int64_t>(row_used_.size()) < n_rows) {
      row_used_.resize(n_rows, 0);
      rows_.resize(static_cast<size_t>(n_rows) * max_slots_, 0.0f);
    }
  }
  if (splits > 1) {
    int64_t max_visible = 0;
    for (int i = 0; i < n; ++i) max_visible = std::max(max_visible, visible[i]);
    item_stride_ = (max_visible + splits - 1) / splits / window_ + 3;
    const size_t need = static_cast<size_t>(n) * n_kv_heads_ * splits * group_ * item_stride_;
    if (item_sums_.size() < need) item_sums_.resize(need);
  }
}

void WindowMassObserver::AddSlotSums(int64_t begin, int64_t end, const float* probs, float scale,
                                     float* dst) const {
  int64_t r = begin;
  while (r < end) {
    const int64_t slot = SlotOf(r);
    const int64_t slot_end = slot == 0 ? sink_tokens_ : sink_tokens_ + slot * window_;
    const int64_t e = std::min(end, slot_end);
    float sum = 0.0f;
    for (int64_t j = r; j < e; ++j) sum += probs[j - begin];
    dst[slot] += sum * scale;
    r = e;
  }
}

void WindowMassObserver::OnItem(int64_t item, int i, int h, int64_t begin, int64_t end,
                                const float* probs, int64_t ld, const float* sums) {
  if (splits_ == 1) {
    const int64_t r = RowOf(i, h);
    row_used_[r] = 1;  // rows are distinct per parallel item: no two threads share a byte
    float* row = rows_.data() + r * max_slots_;
    for (int g = 0; g < group_; ++g) {
      AddSlotSums(begin, end, probs + g * ld, 1.0f / sums[g], row);
    }
    if (i == n_ - 1) {  // only this item writes head h's row of the last query
      float* last_row = last_rows_.data() + static_cast<int64_t>(h) * max_slots_;
      for (int g = 0; g < group_; ++g) {
        AddSlotSums(begin, end, probs + g * ld, 1.0f / sums[g], last_row);
      }
    }
    return;
  }
  // Own slice: slots [first, last] of this item, per query head of the group.
  const int64_t first = SlotOf(begin);
  const int64_t span = SlotOf(end - 1) - first + 1;
  QEVICT_CHECK(span <= item_stride_);
  float* slice = item_sums_.data() + item * group_ * item_stride_;
  for (int g = 0; g < group_; ++g) {
    float* dst = slice + g * item_stride_;
    std::fill(dst, dst + span, 0.0f);
    // AddSlotSums indexes by absolute slot; shift the base so slot `first` lands on dst[0].
    int64_t r = begin;
    while (r < end) {
      const int64_t slot = SlotOf(r);
      const int64_t slot_end = slot == 0 ? sink_tokens_ : sink_tokens_ + slot * window_;
      const int64_t e = std::min(end, slot_end);
      float sum = 0.0f;
      for (int64_t j = r; j < e; ++j) sum += probs[g * ld + (j - begin)];
      dst[slot - first] += sum / sums[g];
      r = e;
    }
  }
}

void WindowMassObserver::OnShare(int i, int h, int64_t split, int g, float share) {
  const int64_t item = (static_cast<int64_t>(i) * n_kv_heads_ + h) * splits_ + split;
  const int64_t begin = visible_[i] * split / splits_;
  const int64_t end = visible_[i] * (split + 1) / splits_;
  if (end <= begin) return;
  const int64_t first = SlotOf(begin);
  const int64_t span = SlotOf(end - 1) - first + 1;
  const float* src = item_sums_.data() + (item * group_ + g) * item_stride_;
  for (int64_t k = 0; k < span; ++k) mass_[first + k] += share * src[k];
  if (i == n_ - 1) {
    for (int64_t k = 0; k < span; ++k) last_[first + k] += share * src[k];
  }
}

void WindowMassObserver::Finish() {
  if (splits_ == 1) {
    for (size_t r = 0; r < row_used_.size(); ++r) {
      if (!row_used_[r]) continue;
      float* row = rows_.data() + r * max_slots_;
      for (int64_t s = 0; s < n_slots_; ++s) {
        mass_[s] += row[s];
        row[s] = 0.0f;
      }
      row_used_[r] = 0;
    }
    for (int h = 0; h < n_kv_heads_; ++h) {
      float* row = last_rows_.data() + static_cast<int64_t>(h) * max_slots_;
      for (int64_t s = 0; s < n_slots_; ++s) {
        last_[s] += row[s];
        row[s] = 0.0f;
      }
    }
  }
  const float inv = 1.0f / static_cast<float>(n_heads_);
  for (int64_t s = 0; s < n_slots_; ++s) {
    mass_[s] *= inv;
    last_[s] *= inv;
  }
}

}  // namespace qevict
