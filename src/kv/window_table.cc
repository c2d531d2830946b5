#include "kv/window_table.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "util/error.h"

namespace qevict {

WindowTable::WindowTable(const KvConfig& config, int n_layers, int64_t max_tokens)
    : window_(config.window),
      sinks_(config.sinks),
      recent_(config.recent),
      score_(config.score),
      score_decay_(config.score_decay),
      max_windows_((max_tokens + config.window - 1) / config.window + 1),
      layers_(n_layers),
      pos_(max_tokens) {
  for (LayerWindows& l : layers_) l.windows.reserve(max_windows_);
}

void WindowTable::Reset() {
  for (LayerWindows& l : layers_) {
    l.count = 0;
    l.sink_block = BlockPool::kNoBlock;
    l.windows.clear();
    l.cold.clear();
    l.digests.clear();
    l.group_digests.clear();
    l.group_covered.clear();
    l.digest_context = DigestContext();
    l.has_digest_context = false;
    l.evicted = 0;
  }
}

void WindowTable::RecordPosition(int layer, int64_t token, int32_t pos) {
  if (layer == 0) {
    QEVICT_CHECK(token == 0 || pos > pos_[token - 1]);
    pos_[token] = pos;
  } else {
    QEVICT_CHECK(token < layers_.front().count && pos_[token] == pos);
  }
}

int WindowTable::SinkTokens(const LayerWindows& l) const {
  return static_cast<int>(std::min<int64_t>(l.count, sinks_));
}

int WindowTable::WindowTokens(const LayerWindows& l, const WindowRecord& w) const {
  return static_cast<int>(std::min<int64_t>(window_, l.count - FirstToken(w.index)));
}

int64_t WindowTable::ResidentTokens(const LayerWindows& l) const {
  int64_t n = SinkTokens(l);
  if (!l.windows.empty()) {
    n += static_cast<int64_t>(l.windows.size() - 1) * window_ + WindowTokens(l, l.windows.back());
  }
  return n;
}

int64_t WindowTable::ResidentPrefix(const LayerWindows& l, int64_t logical) const {
  if (logical <= sinks_) return std::min<int64_t>(logical, SinkTokens(l));
  // Windows that start before `logical`: index < ceil((logical - S) / W).
  const int64_t limit = (logical - sinks_ + window_ - 1) / window_;
  const auto end = std::lower_bound(
      l.windows.begin(), l.windows.end(), limit,
      [](const WindowRecord& w, int64_t index) { return w.index < index; });
  const int64_t k = end - l.windows.begin();
  if (k == 0) return sinks_;
  const int64_t first = FirstToken(l.windows[k - 1].index);
  return sinks_ + (k - 1) * window_ + std::min<int64_t>(window_, logical - first);
}

int64_t WindowTable::VisibleTo(const LayerWindows& l, int32_t pos) const {
  const int64_t logical = std::upper_bound(pos_.data(), pos_.data() + l.count, pos) - pos_.data();
  return ResidentPrefix(l, logical);
}

int64_t WindowTable::FirstRecentIndex(int64_t count) const {
  const int64_t old_tokens = count - recent_ - sinks_;
  return old_tokens > 0 ? old_tokens / window_ : 0;  // windows fully out of recent
}

size_t WindowTable::BandSize(const LayerWindows& l) const {
  const int64_t limit = FirstRecentIndex(l.count);
  return std::lower_bound(l.windows.begin(), l.windows.end(), limit,
                          [](const WindowRecord& w, int64_t index) { return w.index < index; }) -
         l.windows.begin();
}

int64_t WindowTable::CreatedWindows(const LayerWindows& l) const {
  return l.count > sinks_ ? (l.count - sinks_ + window_ - 1) / window_ : 0;
}

int64_t WindowTable::ResidentRecords() const {
  int64_t records = 0;
  for (const LayerWindows& l : layers_) records += static_cast<int64_t>(l.windows.size());
  return records;
}

float WindowTable::ScoreOf(const WindowRecord& w) const {
  if (score_ == ScoreMode::kNormalized) {
    return w.observers > 0.0f ? w.mass_sum / w.observers : 0.0f;
  }
  return w.mass_sum;
}

void WindowTable::AddMass(LayerWindows& l, const float* mass, const float* last, int n,
                          const int64_t* visible) {
  const bool decay = score_ == ScoreMode::kDecay;
  const bool normalized = score_ == ScoreMode::kNormalized;
  const float factor = decay ? static_cast<float>(std::pow(score_decay_, n)) : 1.0f;
  const int sink = SinkTokens(l);
  for (size_t k = 0; k < l.windows.size(); ++k) {
    WindowRecord& w = l.windows[k];
    w.mass_sum = decay ? w.mass_sum * factor + mass[1 + k] : w.mass_sum + mass[1 + k];
    w.last_mass = last[1 + k];
    if (normalized) {
      // Queries that saw at least the window's first key (visible is non-decreasing).
      const int64_t first = sink + static_cast<int64_t>(k) * window_;
      w.observers += static_cast<float>(visible + n - std::upper_bound(visible, visible + n, first));
    }
  }
}

void WindowTable::EraseEvicted() {
  for (LayerWindows& l : layers_) {
    std::erase_if(l.windows, [](const WindowRecord& w) { return w.tier == Tier::kEvicted; });
  }
}

void WindowTable::AddCold(LayerWindows& l, ColdRecord record, const uint8_t* digest) {
  const auto at = std::lower_bound(
      l.cold.begin(), l.cold.end(), record.index,
      [](const ColdRecord& c, int32_t index) { return c.index < index; });
  const int64_t k = at - l.cold.begin();
  l.cold.insert(at, record);
  if (digest_group_ > 1) {
    QEVICT_CHECK(digest == nullptr && GroupCovers(l, record.index));
    return;
  }
  l.digests.insert(l.digests.begin() + k * digest_bytes_, digest, digest + digest_bytes_);
}

uint8_t* WindowTable::GroupDigestForWrite(LayerWindows& l, int64_t group, uint64_t covered) {
  QEVICT_CHECK(digest_group_ > 1 && group >= 0);
  if (group >= static_cast<int64_t>(l.group_covered.size())) {
    l.group_covered.resize(static_cast<size_t>(group + 1), 0);
    l.group_digests.resize(static_cast<size_t>((group + 1) * digest_bytes_), 0);
  }
  l.group_covered[group] = covered;
  return l.group_digests.data() + group * digest_bytes_;
}

ColdRecord WindowTable::TakeCold(LayerWindows& l, size_t k) {
  const ColdRecord record = l.cold[k];
  l.cold.erase(l.cold.begin() + static_cast<int64_t>(k));
  if (digest_group_ > 1) return record;  // the group's digest stays (its other windows)
  const auto first = l.digests.begin() + static_cast<int64_t>(k) * digest_bytes_;
  l.digests.erase(first, first + digest_bytes_);
  return record;
}

void WindowTable::InsertResident(LayerWindows& l, const WindowRecord& record) {
  const auto at = std::lower_bound(
      l.windows.begin(), l.windows.end(), record.index,
      [](const WindowRecord& w, int32_t index) { return w.index < index; });
  l.windows.insert(at, record);
}

int64_t WindowTable::ColdRecords() const {
  int64_t records = 0;
  for (const LayerWindows& l : layers_) records += static_cast<int64_t>(l.cold.size());
  return records;
}

WindowView WindowTable::View(int layer) const {
  const LayerWindows& l = layers_[layer];
  WindowView view;
  view.layer = layer;
  view.sink_tokens = SinkTokens(l);
  view.window = window_;
  const int64_t total = CreatedWindows(l);
  const size_t band = BandSize(l);
  view.windows.resize(total);
  size_t next = 0, next_cold = 0;
  for (int64_t index = 0; index < total; ++index) {
    WindowInfo& info = view.windows[index];
    info.index = index;
    info.first_token = FirstToken(index);
    info.first_pos = pos_[info.first_token];
    info.n_tokens = static_cast<int>(std::min<int64_t>(window_, l.count - info.first_token));
    if (next < l.windows.size() && l.windows[next].index == index) {
      const WindowRecord& w = l.windows[next];
      info.tier = w.tier;
      info.in_band = next < band;
      info.score = ScoreOf(w);
      info.last_mass = w.last_mass;
      ++next;
    } else {
      const bool cold = next_cold < l.cold.size() && l.cold[next_cold].index == index;
      info.tier = cold ? Tier::kCold : Tier::kEvicted;
      info.in_band = true;
      if (cold) ++next_cold;
    }
  }
  return view;
}

void WindowTable::CheckInvariants() const {
  auto fail = [](int layer, const std::string& what) {
    throw std::logic_error("window table, layer " + std::to_string(layer) + ": " + what);
  };
  const int64_t count = layers_.front().count;
  for (int64_t t = 1; t < count; ++t) {
    if (pos_[t] <= pos_[t - 1]) fail(0, "positions not strictly increasing");
  }
  for (int li = 0; li < n_layers(); ++li) {
    const LayerWindows& l = layers_[li];
    // Within a batch layer 0 stores first, then layer 1, ...: between batches they are equal.
    if (li > 0 && l.count > layers_[li - 1].count) {
      fail(li, "stored more tokens than the layer before it");
    }
    if ((l.count > 0 && sinks_ > 0) != (l.sink_block != BlockPool::kNoBlock)) {
      fail(li, "sink block held without sinks, or sinks without a block");
    }
    const int64_t created = CreatedWindows(l);
    if (static_cast<int64_t>(l.windows.size() + l.cold.size()) + l.evicted != created) {
      fail(li, "resident + cold + evicted windows != windows created");
    }
    if (digest_group_ > 1) {
      if (!l.digests.empty()) fail(li, "per-window digests beside digest groups");
      for (const ColdRecord& c : l.cold) {
        if (!GroupCovers(l, c.index)) fail(li, "a cold window its group's digest does not cover");
      }
    } else if (static_cast<int64_t>(l.digests.size()) !=
               static_cast<int64_t>(l.cold.size()) * digest_bytes_) {
      fail(li, "a cold window without its digest");
    }
    {
      size_t r = 0;
      int64_t previous_cold = -1;
      for (const ColdRecord& c : l.cold) {
        if (c.index <= previous_cold || c.index >= FirstRecentIndex(l.count)) {
          fail(li, "cold windows out of order or in the recent region");
        }
        previous_cold = c.index;
        if (c.slot < 0) fail(li, "a cold window without a disk slot");
        while (r < l.windows.size() && l.windows[r].index < c.index) ++r;
        if (r < l.windows.size() && l.windows[r].index == c.index) {
          fail(li, "a window both resident and cold");
        }
      }
    }
    const int64_t first_recent = FirstRecentIndex(l.count);
    int64_t previous = -1;
    for (const WindowRecord& w : l.windows) {
      if (w.index <= previous || w.index >= created) fail(li, "window indices out of order");
      previous = w.index;
      if (w.tier == Tier::kEvicted) fail(li, "an evicted window still has a record");
      if (w.block == BlockPool::kNoBlock) fail(li, "a resident window has no block");
      if (w.index >= first_recent && w.tier != Tier::kFp16) fail(li, "a recent window is not fp16");
      if (!(w.mass_sum >= 0.0f) || !(w.observers >= 0.0f) || !(w.last_mass >= 0.0f)) {
        fail(li, "a window score is negative or not a number");
      }
    }
    const int64_t recent_held = std::count_if(
        l.windows.begin(), l.windows.end(),
        [&](const WindowRecord& w) { return w.index >= first_recent; });
    if (recent_held != std::max<int64_t>(0, created - first_recent)) {
      fail(li, "a recent window is missing");
    }
  }
}

}  // namespace qevict
