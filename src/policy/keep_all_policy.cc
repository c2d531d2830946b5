// The policy of prefix and shadow caches (registry.h, CreatePrefixCache): it wants every
// statistic and never moves a window. Not a user-visible policy.
#include "policy/policies.h"

namespace qevict {
namespace {

class KeepAllPolicy : public Policy {
 public:
  bool wants_scores() const override { return true; }
  bool wants_observation() const override { return true; }
  void Route(const RoutingContext&, Plan*) override {}
};

}  // namespace

std::unique_ptr<Policy> MakeKeepAllPolicy() { return std::make_unique<KeepAllPolicy>(); }

}  // namespace qevict
