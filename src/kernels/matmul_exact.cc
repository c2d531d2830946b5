#include "kernels/matmul_exact.h"

#include <vector>

namespace qevict {

void MatMulExact(const WeightView& w, const float* x, int64_t n_tokens, float* y,
                 ThreadPool& pool) {
  pool.ParallelFor(w.rows, 8, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = begin; r < end; ++r) {
      DequantizeRow(w.type, w.data + static_cast<size_t>(r) * w.row_bytes, row.data(), w.cols);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * w.cols;
        double acc = 0.0;
        for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(row[c]) * xt[c];
        y[t * w.rows + r] = static_cast<float>(acc);
      }
    }
  });
}

}  // namespace qevict
