#include "policy/policy_state.h"

#include <algorithm>
#include <cmath>

namespace qevict {

void SaveLayerTables(const std::vector<std::vector<float>>& tables, ByteWriter& out) {
  out.Pod<uint64_t>(tables.size());
  for (const std::vector<float>& t : tables) out.Array<float>(t);
}

std::vector<std::vector<float>> LoadLayerTables(ByteReader& in, int n_layers, const char* what) {
  const uint64_t n = in.Pod<uint64_t>(what);
  if (n != 0 && n != static_cast<uint64_t>(n_layers)) {
    in.Fail(std::string(what) + " for " + std::to_string(n) + " layers, the cache has " +
            std::to_string(n_layers));
  }
  std::vector<std::vector<float>> tables(n);
  for (std::vector<float>& t : tables) {
    t = in.Array<float>(what, size_t{1} << 26);
    if (!std::all_of(t.begin(), t.end(), [](float x) { return std::isfinite(x); })) {
      in.Fail(std::string(what) + " holds a value that is not finite");
    }
  }
  return tables;
}

}  // namespace qevict
