// Per-layer score tables policies keep between routing steps ([layer][window index]), saved with
// the cache (Policy::SaveState). Loading checks the layer count and that every value is finite,
// so a malformed prompt cache cannot reach the rankings.
#pragma once

#include <vector>

#include "util/byte_stream.h"

namespace qevict {

void SaveLayerTables(const std::vector<std::vector<float>>& tables, ByteWriter& out);
// Empty, or exactly n_layers tables of at most max_windows finite values each.
std::vector<std::vector<float>> LoadLayerTables(ByteReader& in, int n_layers, const char* what);

}  // namespace qevict
