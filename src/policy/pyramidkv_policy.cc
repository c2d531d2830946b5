// PyramidKV: SnapKV's selection with per-layer budgets that decrease linearly with depth
// (attention funnels from broad to focused). As in the PyramidKV paper, the last layer gets
// mean/beta of the band budget and the first 2*mean - mean/beta, linear in between.
#include "policy/policies.h"
#include "policy/snapkv_policy.h"

namespace qevict {
namespace {

const KvPolicyOption kPyramidBeta({
    .key = "pyramid_beta",
    .help = "pyramidkv: last layer's band budget is mean/beta, linear in depth",
    .policies = "pyramidkv",
    .origin = "PyramidKV",
    .min = 1,
    .request_max = 1e6,
    .eval_variant = true,
    .default_number = 20,
});

class PyramidKvPolicy : public SnapKvPolicy {
 public:
  explicit PyramidKvPolicy(const KvConfig& config)
      : SnapKvPolicy(config), beta_(kPyramidBeta.Get(config)) {}

  void LayerBudgetWeights(int n_layers, std::vector<double>* weights) const override {
    weights->assign(n_layers, 1.0);
    if (n_layers < 2) return;
    const double last = 1.0 / beta_;
    const double first = 2.0 - last;
    for (int l = 0; l < n_layers; ++l) {
      (*weights)[l] = first + (last - first) * l / (n_layers - 1);
    }
  }

 private:
  double beta_;
};

const PolicyRegistration kPyramidKvRegistration({
    .name = "pyramidkv",
    .description = "PyramidKV: SnapKV selection with budgets decreasing linearly with depth",
    .order = 50,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<PyramidKvPolicy>(c);
    },
});

}  // namespace

}  // namespace qevict
