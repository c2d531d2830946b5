#include "kv/observation_buffer.h"

#include <algorithm>

namespace qevict {

ObservationBuffer::ObservationBuffer(int n_layers, int capacity, int n_heads, int head_dim)
    : capacity_(capacity), n_heads_(n_heads), head_dim_(head_dim), layers_(n_layers) {}

int64_t ObservationBuffer::BytesFor(int n_layers, int capacity, int n_heads, int head_dim) {
  const int64_t per_query = int64_t{n_heads} * head_dim * 4 + 4;
  return int64_t{n_layers} * capacity * per_query;
}

void ObservationBuffer::Hold() {
  for (Ring& r : layers_) {
    r.queries.resize(static_cast<size_t>(capacity_) * n_heads_ * head_dim_);
    r.pos.resize(capacity_);
    r.filled = r.next = 0;
  }
  held_ = true;
}

void ObservationBuffer::Release() {
  for (Ring& r : layers_) {
    r.queries = {};
    r.pos = {};
    r.filled = r.next = 0;
  }
  held_ = false;
  remembering_ = false;
}

void ObservationBuffer::Remember(int layer, int n, const int32_t* pos, const float* q) {
  Ring& r = layers_[layer];
  const int64_t q_floats = static_cast<int64_t>(n_heads_) * head_dim_;
  const int keep = std::min(n, capacity_);
  for (int i = n - keep; i < n; ++i) {
    std::copy(q + i * q_floats, q + (i + 1) * q_floats, r.queries.begin() + r.next * q_floats);
    r.pos[r.next] = pos[i];
    r.next = (r.next + 1) % capacity_;
    r.filled = std::min(r.filled + 1, capacity_);
  }
}

std::span<const float> ObservationBuffer::queries(int layer) const {
  const Ring& r = layers_[layer];
  return {r.queries.data(), static_cast<size_t>(r.filled) * n_heads_ * head_dim_};
}

std::span<const int32_t> ObservationBuffer::positions(int layer) const {
  const Ring& r = layers_[layer];
  return {r.pos.data(), static_cast<size_t>(r.filled)};
}

void ObservationBuffer::CopyFrom(const ObservationBuffer& other) {
  layers_ = other.layers_;
  held_ = other.held_;
  remembering_ = other.remembering_;
}

void ObservationBuffer::SaveLayer(int layer, ByteWriter& out) const {
  const Ring& r = layers_[layer];
  out.Pod<int32_t>(r.filled);
  out.Pod<int32_t>(r.next);
  out.Array<float>(r.queries);
  out.Array<int32_t>(r.pos);
}

void ObservationBuffer::LoadLayer(int layer, ByteReader& in) {
  Ring& r = layers_[layer];
  const size_t n_queries = static_cast<size_t>(capacity_) * n_heads_ * head_dim_;
  r.filled = in.Pod<int32_t>("observation");
  r.next = in.Pod<int32_t>("observation");
  r.queries = in.Array<float>("observation queries", n_queries);
  r.pos = in.Array<int32_t>("observation positions", capacity_);
  const bool held = LayerHeld(layer);
  if ((held && (r.queries.size() != n_queries || r.pos.size() != static_cast<size_t>(capacity_))) ||
      r.filled < 0 || r.filled > (held ? capacity_ : 0) || r.next < 0 ||
      r.next >= std::max(1, held ? capacity_ : 0)) {
    in.Fail("malformed observation buffer");
  }
}

bool ObservationBuffer::LayerHeld(int layer) const {
  return !layers_[layer].pos.empty() || !layers_[layer].queries.empty();
}

}  // namespace qevict
