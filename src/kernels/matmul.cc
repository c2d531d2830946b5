// MatMul: activations quantized once per call into the weight type's partner format, then
// tiles of (weight rows x up to kMaxTileTokens tokens) spread over the thread pool.
//
// Decode (one token) is bound by reading the weights, so rows are simply split among threads.
// Prefill walks each thread's rows in blocks small enough to stay in L1 and, for every block,
// sweeps the tokens kMaxTileTokens at a time: a weight block is fetched from memory once and
// decoded once per kMaxTileTokens tokens, and the activation rows stay in L2.
#include "kernels/matmul.h"

#include <algorithm>
#include <functional>
#include <new>
#include <vector>

#include "quant/activations.h"
#include "quant/vec_dot.h"
#include "util/error.h"

namespace qevict {
namespace {

// Bytes of weights per row block in prefill: a fraction of L1 so the block stays resident
// while the token tiles sweep over it.
constexpr size_t kRowBlockBytes = 16 * 1024;
// Tokens at or above which activation quantization is spread over the pool.
constexpr int64_t kParallelQuantizeTokens = 8;

// Grow-only, 64-byte aligned scratch owned by the calling thread (the workers only read it).
// The lambdas below are handed to ParallelFor through std::ref so that building its
// std::function argument does not allocate either.
class Scratch {
 public:
  ~Scratch() { Release(); }
  uint8_t* Get(size_t bytes) {
    if (bytes > capacity_) {
      const size_t capacity = std::max(bytes, capacity_ * 2);
      auto* data = static_cast<uint8_t*>(::operator new(capacity, std::align_val_t{64}));
      Release();
      data_ = data;
      capacity_ = capacity;
    }
    return data_;
  }

 private:
  void Release() {
    if (data_ != nullptr) ::operator delete(data_, std::align_val_t{64});
    data_ = nullptr;
    capacity_ = 0;
  }
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

uint8_t* ActivationScratch(size_t bytes) {
  thread_local Scratch scratch;
  return scratch.Get(bytes);
}

void CheckShapes(const WeightView& w, const float* x, int64_t n_tokens, const float* y) {
  QEVICT_CHECK(w.data != nullptr && x != nullptr && y != nullptr);
  QEVICT_CHECK(w.rows >= 0 && w.cols > 0 && n_tokens >= 0);
  QEVICT_CHECK(w.row_bytes >= RowBytes(w.type, w.cols));
}

// One product of a group, with its kernel and where its activations and rows sit.
struct GroupMember {
  const WeightView* w = nullptr;
  float* y = nullptr;
  DotKernel kernel;
  const uint8_t* act = nullptr;
  size_t act_stride = 0;
  int64_t first_row = 0;  // in the group's concatenated rows
  int64_t row_block = 1;  // prefill: rows per L1-sized block
};

constexpr int kMaxGroup = 4;

}  // namespace

void MatMul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const MatMulProduct product{&w, y};
  MatMulGroup(std::span<const MatMulProduct>(&product, 1), x, n_tokens, pool);
}

void MatMulGroup(std::span<const MatMulProduct> products, const float* x, int64_t n_tokens,
                 ThreadPool& pool) {
  QEVICT_CHECK(!products.empty() && products.size() <= kMaxGroup);
  const int64_t cols = products[0].w->cols;
  GroupMember members[kMaxGroup];
  ActivationLayout layouts[kMaxGroup];  // one per distinct partner format
  int n_layouts = 0;
  int layout_of[kMaxGroup];
  int64_t total_rows = 0;
  for (size_t i = 0; i < products.size(); ++i) {
    const WeightView& w = *products[i].w;
    CheckShapes(w, x, n_tokens, products[i].y);
    QEVICT_CHECK(w.cols == cols);
    GroupMember& m = members[i];
    m.w = &w;
    m.y = products[i].y;
    m.kernel = SelectDotKernel(w.type, n_tokens == 1 ? DotShape::kSingleRow : DotShape::kTiles);
    m.first_row = total_rows;
    m.row_block = std::max<int64_t>(1, static_cast<int64_t>(kRowBlockBytes / w.row_bytes));
    total_rows += w.rows;
    int j = 0;
    while (j < n_layouts && layouts[j].format != m.kernel.activation) ++j;
    if (j == n_layouts) layouts[n_layouts++] = MakeActivationLayout(m.kernel.activation, cols);
    layout_of[i] = j;
  }
  if (n_tokens == 0 || total_rows == 0) return;

  // Activation rows in each partner format (fp32 weights read x directly).
  size_t buffer_bytes = 0;
  size_t offsets[kMaxGroup];
  for (int j = 0; j < n_layouts; ++j) {
    offsets[j] = buffer_bytes;
    if (layouts[j].format != ActivationFormat::kF32) {
      buffer_bytes += layouts[j].row_bytes * static_cast<size_t>(n_tokens);
    }
  }
  uint8_t* buffer = buffer_bytes > 0 ? ActivationScratch(buffer_bytes) : nullptr;
  auto quantize = [&](int64_t begin, int64_t end) {
    for (int j = 0; j < n_layouts; ++j) {
      if (layouts[j].format == ActivationFormat::kF32) continue;
      for (int64_t t = begin; t < end; ++t) {
        QuantizeActivationRow(layouts[j], x + t * cols,
                              buffer + offsets[j] + t * layouts[j].row_bytes);
      }
    }
  };
  if (buffer_bytes > 0) {
    if (n_tokens >= kParallelQuantizeTokens) {
      pool.ParallelFor(n_tokens, 1, std::ref(quantize));
    } else {
      quantize(0, n_tokens);
    }
  }
  for (size_t i = 0; i < products.size(); ++i) {
    const ActivationLayout& layout = layouts[layout_of[i]];
    if (layout.format == ActivationFormat::kF32) {
      members[i].act = reinterpret_cast<const uint8_t*>(x);
      members[i].act_stride = static_cast<size_t>(cols) * sizeof(float);
    } else {
      members[i].act = buffer + offsets[layout_of[i]];
      members[i].act_stride = layout.row_bytes;
    }
  }

  // Rows [begin, end) of member m (its own row numbers).
  auto rows_of = [&](const GroupMember& m, int64_t begin, int64_t end) {
    const WeightView& w = *m.w;
    if (n_tokens == 1) {  // decode: one kernel call per chunk of rows
      m.kernel.tile(cols, w.data + begin * w.row_bytes, w.row_bytes, static_cast<int>(end - begin),
                    m.act, m.act_stride, 1, m.y + begin, w.rows);
      return;
    }
    for (int64_t r0 = begin; r0 < end; r0 += m.row_block) {
      const int n_rows = static_cast<int>(std::min(m.row_block, end - r0));
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTileTokens) {
        const int n_tok = static_cast<int>(std::min<int64_t>(kMaxTileTokens, n_tokens - t0));
        m.kernel.tile(cols, w.data + r0 * w.row_bytes, w.row_bytes, n_rows,
                      m.act + t0 * m.act_stride, m.act_stride, n_tok, m.y + t0 * w.rows + r0,
                      w.rows);
      }
    }
  };
  // A chunk of the concatenated rows may span members: each gets its own part.
  auto chunk = [&](int64_t begin, int64_t end) {
    for (size_t i = 0; i < products.size(); ++i) {
      const GroupMember& m = members[i];
      const int64_t lo = std::max(begin, m.first_row);
      const int64_t hi = std::min(end, m.first_row + m.w->rows);
      if (lo < hi) rows_of(m, lo - m.first_row, hi - m.first_row);
    }
  };
  int64_t grain = 16;
  if (n_tokens > 1) {
    for (size_t i = 0; i < products.size(); ++i) grain = std::min(grain, members[i].row_block);
  }
  pool.ParallelFor(total_rows, grain, std::ref(chunk));
}

void MatMulReference(const WeightView& w, const float* x, int64_t n_tokens, float* y) {
  CheckShapes(w, x, n_tokens, y);
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeRow(w.type, w.data + r * w.row_bytes, row.data(), w.cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * w.cols;
      double acc = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(row[c]) * xt[c];
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace qevict
