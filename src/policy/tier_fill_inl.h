// Template part of tier_fill.h.
#pragma once

#include <algorithm>
#include <numeric>

namespace qevict {

template <class KeyFn>
void RankBand(std::span<const BandWindow> band, KeyFn&& key, std::vector<int>* order,
              std::vector<float>* keys) {
  keys->resize(band.size());
  order->resize(band.size());
  for (size_t j = 0; j < band.size(); ++j) (*keys)[j] = key(band[j]);
  std::iota(order->begin(), order->end(), 0);
  const std::vector<float>& k = *keys;
  std::sort(order->begin(), order->end(), [&](int a, int b) {
    if (k[a] != k[b]) return k[a] > k[b];
    return a > b;  // newer first
  });
}

}  // namespace qevict
