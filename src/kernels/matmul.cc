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

}  // namespace

void MatMul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  CheckShapes(w, x, n_tokens, y);
  if (n_tokens == 0 || w.rows == 0) return;
  const DotKernel kernel = SelectDotKernel(w.type);
  const ActivationLayout layout = MakeActivationLayout(kernel.activation, w.cols);

  // Activation rows in the partner format (fp32 weights read x directly).
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  size_t act_stride = static_cast<size_t>(w.cols) * sizeof(float);
  if (layout.format != ActivationFormat::kF32) {
    uint8_t* buffer = ActivationScratch(layout.row_bytes * static_cast<size_t>(n_tokens));
    auto quantize = [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        QuantizeActivationRow(layout, x + t * w.cols, buffer + t * layout.row_bytes);
      }
    };
    if (n_tokens >= kParallelQuantizeTokens) {
      pool.ParallelFor(n_tokens, 1, std::ref(quantize));
    } else {
      quantize(0, n_tokens);
    }
    act = buffer;
    act_stride = layout.row_bytes;
  }

  const int64_t rows = w.rows;
  const int64_t cols = w.cols;
  if (n_tokens == 1) {
    // Decode: each chunk of rows is one kernel call.
    auto rows_chunk = [&](int64_t begin, int64_t end) {
      kernel.tile(cols, w.data + begin * w.row_bytes, w.row_bytes, static_cast<int>(end - begin), act,
                  act_stride, 1, y + begin, rows);
    };
    pool.ParallelFor(rows, 16, std::ref(rows_chunk));
    return;
  }
  const int64_t row_block = std::max<int64_t>(1, static_cast<int64_t>(kRowBlockBytes / w.row_bytes));
  auto tiles = [&](int64_t begin, int64_t end) {
    for (int64_t r0 = begin; r0 < end; r0 += row_block) {
      const int n_rows = static_cast<int>(std::min(row_block, end - r0));
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTileTokens) {
        const int n_tok = static_cast<int>(std::min<int64_t>(kMaxTileTokens, n_tokens - t0));
        kernel.tile(cols, w.data + r0 * w.row_bytes, w.row_bytes, n_rows, act + t0 * act_stride,
                    act_stride, n_tok, y + t0 * rows + r0, rows);
      }
    }
  };
  pool.ParallelFor(rows, std::min<int64_t>(row_block, 16), std::ref(tiles));
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
