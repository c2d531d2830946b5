// Window scores computed from what the cache holds, without a forward pass: the key-norm and
// expected-attention score sources of the first routing step (KvConfig::score_source;
// docs/kv-cache.md, "Score sources"). Inputs are dense, as TieredCache::DenseLayer gives them:
// keys after RoPE and values, [tokens][n_kv_heads][head_dim] fp32. Outputs are indexed by
// window index (windows not listed get 0) and shared by the layer's KV heads (max over heads:
// a window one head needs is kept, as the SnapKV ranking here does).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/rope.h"

namespace qevict {

// A resident window in the dense layout: its window index, first dense row and token count.
struct DenseWindow {
  int64_t index = 0;
  int64_t first = 0;
  int tokens = 0;
};

// Inverse of Rope::Apply for one head vector of rot_dims (the rest untouched).
void UnRotate(const Rope& rope, float* x, int32_t pos);

// Key norm (Devoto et al. 2024, "A simple and effective L2 norm-based strategy for KV cache
// compression": keys with a low L2 norm draw attention). Per KV head, a window's mean key norm
// n; its score is min over windows of n divided by n (1 for the lowest norm, in (0, 1]), max
// over heads.
void KeyNormWindowScores(std::span<const float> keys, int n_kv, int head_dim,
                         std::span<const DenseWindow> windows, std::vector<float>* scores);

// Expected attention (Devoto et al. 2025): the queries of the last prompt tokens (after RoPE,
// at `query_pos`; [m][n_heads][head_dim]) are un-rotated; per query head their mean and
// per-channel variance (a diagonal covariance) describe a future query, whose rotation is
// averaged over positions from_pos .. from_pos + future - 1 (clipped to the rope's table).
// A key's expected exponent is mu'k / sqrt(d) + k' S k / (2d) with mu and S projected by the
// averaged rotation; a softmax over every key of the layer (sinks included) gives the expected
// attention, averaged over the query heads of a KV head and multiplied by the value's L2 norm
// (the expected contribution to the output); a window's score is the sum over its tokens, max
// over KV heads.
void ExpectedAttentionWindowScores(std::span<const float> keys, std::span<const float> values,
                                   std::span<const float> queries,
                                   std::span<const int32_t> query_pos, int n_heads, int n_kv,
                                   int head_dim, const Rope& rope, int64_t from_pos, int future,
                                   std::span<const DenseWindow> windows,
                                   std::vector<float>* scores);

}  // namespace qevict
