// Every option surface is generated from the option descriptors (kv/kv_options.h): for every
// registered option -- the cache's, every policy's, and the one of a test-only policy registered
// below from this file alone -- the command line takes --kv-<option>, the server's kv object
// takes its key, an `eval --policies` variant takes it (or refuses it by name when it shapes the
// shared prefix), KvOptionDocs() and the docs table list it, and KvConfigKey() tells it apart.
// Its own executable, so that the test-only policy appears in no other test's PolicyNames().
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/policy_variant.h"
#include "kv/kv_options.h"
#include "kv/kv_test_util.h"
#include "policy/policies.h"
#include "policy/registry.h"
#include "policy/tier_fill.h"
#include "server/json_fields.h"
#include "server/kv_overrides.h"
#include "tools/kv_flags.h"
#include "util/error.h"

namespace qevict {
namespace {

// A policy with one option, as docs/kv-cache.md's "Adding a policy" writes one: the oldest
// `test_keep_oldest` band windows first, then the newest, in fp16 while they fit.
const KvPolicyOption kKeepOldest({
    .key = "test_keep_oldest",
    .type = KvOptionType::kInt,
    .help = "test-keep-oldest: band windows kept from the start before the newest ones",
    .policies = "test-keep-oldest",
    .origin = "ours (test)",
    .min = 0,
    .max = 64,
    .eval_variant = true,
    .default_number = 2,
});

class KeepOldestPolicy : public Policy {
 public:
  explicit KeepOldestPolicy(const KvConfig& config) : keep_(kKeepOldest.GetInt(config)) {}
  bool wants_scores() const override { return false; }

  void Route(const RoutingContext& context, Plan* plan) override {
    for (size_t l = 0; l < context.layers.size(); ++l) {
      const int n = static_cast<int>(context.layers[l].windows.size());
      const int oldest = std::min(keep_, n);
      order_.clear();
      for (int j = 0; j < oldest; ++j) order_.push_back(j);
      for (int j = n - 1; j >= oldest; --j) order_.push_back(j);
      FillLayer(context, static_cast<int>(l), order_, FillRule{}, plan);
    }
  }

  int keep() const { return keep_; }

 private:
  int keep_;
  std::vector<int> order_;
};

const PolicyRegistration kKeepOldestRegistration({
    .name = "test-keep-oldest",
    .description = "test only: the oldest band windows, then the newest",
    .order = 1000,
    .make = [](const KvConfig& c) -> std::unique_ptr<Policy> {
      return std::make_unique<KeepOldestPolicy>(c);
    },
});

// A valid value other than the default, so that a surface that ignored the option fails.
KvValue Sample(const KvOptionDef& def) {
  const KvValue fallback = KvOptionDefault(def);
  switch (def.type) {
    case KvOptionType::kChoice:
      return std::string(def.choices.back());
    case KvOptionType::kText:
      return std::string("/tmp/qevict-test-dir");
    case KvOptionType::kBytes:
      return 65536.0;
    default:
      break;
  }
  if (!def.one_of.empty()) return def.one_of.back();
  const double d = std::get<double>(fallback);
  const std::vector<double> candidates = {d + (def.odd ? 2 : 1), (def.min + def.max) / 2, def.max,
                                          def.min + (def.odd ? 0 : 1)};
  for (double c : candidates) {
    if (std::isfinite(c) && c != d && KvValueInRange(def, c)) return c;
  }
  ADD_FAILURE() << def.key << ": no sample value";
  return fallback;
}

nlohmann::json ToJson(const KvValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::get<std::string>(v);
}

TEST(KvOptionSurfaces, TheTestPolicyIsRegisteredLast) {
  const std::vector<std::string> names = PolicyNames();
  const std::vector<std::string> shipped = {
      "full", "streaming", "h2o",       "tova",       "snapkv", "pyramidkv",       "kivi",
      "mikv", "qevict",    "qevict-qa", "qevict-zip", "kvzip",  "quest", "qevict-recall",
      "recall-oracle", "test-keep-oldest"};
  EXPECT_EQ(names, shipped);
  EXPECT_EQ(KnownKvPolicyNames().back(), "test-keep-oldest");
  EXPECT_EQ(PolicyDescription("test-keep-oldest"),
            "test only: the oldest band windows, then the newest");
  const KvOptionDef* def = FindKvOption("test_keep_oldest");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(KvOptionFlag(*def), "--kv-test-keep-oldest");
}

TEST(KvOptionSurfaces, TheTestPolicyBuildsACacheWithItsOption) {
  KvConfig config;
  config.policy = "test-keep-oldest";
  config.budget = 0.5;
  config.set_option("test_keep_oldest", 5);
  auto policy = MakePolicy(config);
  auto* keep = dynamic_cast<KeepOldestPolicy*>(policy.get());
  ASSERT_NE(keep, nullptr);
  EXPECT_EQ(keep->keep(), 5);
  const KvGeometry geo = testing::SmallGeometry();
  const Rope rope(testing::TestRopeConfig(64), 4096);
  EXPECT_NE(CreateKvCache(config, geo, rope), nullptr);
}

TEST(KvOptionSurfaces, TheCommandLineTakesEveryOption) {
  for (const KvOptionDef* def : KvOptions()) {
    SCOPED_TRACE(std::string(def->key));
    CLI::App app;
    cli::KvFlags flags;
    cli::AddKvFlags(app, flags);
    const KvValue sample = Sample(*def);
    std::vector<std::string> args = {"--kv-policy", "qevict", KvOptionFlag(*def),
                                     KvValueText(*def, sample)};
    std::reverse(args.begin(), args.end());  // CLI11 takes them in reverse
    ASSERT_NO_THROW(app.parse(args));
    const KvConfig config = flags.Resolve();
    EXPECT_EQ(KvOptionValue(config, *def), sample);
  }
}

TEST(KvOptionSurfaces, TheCommandLineChecksTheTestOptionsRange) {
  CLI::App app;
  cli::KvFlags flags;
  cli::AddKvFlags(app, flags);
  app.parse(
      std::vector<std::string>{"65", "--kv-test-keep-oldest", "test-keep-oldest", "--kv-policy"});
  try {
    flags.Resolve();
    FAIL() << "65 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--kv-test-keep-oldest must be in [0, 64], got 65");
  }
}

TEST(KvOptionSurfaces, TheServersKvObjectTakesEveryRequestOption) {
  const KvConfig defaults;
  for (const KvOptionDef* def : KvOptions()) {
    SCOPED_TRACE(std::string(def->key));
    const KvValue sample = Sample(*def);
    const nlohmann::json kv = {{"policy", "qevict"}, {std::string(def->key), ToJson(sample)}};
    if (!def->request) {
      EXPECT_THROW(server::ApplyKvOverrides(kv, defaults), server::RequestRejected);
      continue;
    }
    const KvConfig config = server::ApplyKvOverrides(kv, defaults);
    EXPECT_EQ(KvOptionValue(config, *def), sample);
  }
  try {
    server::ApplyKvOverrides({{"policy", "test-keep-oldest"}, {"test_keep_oldest", 65}}, defaults);
    FAIL() << "65 accepted";
  } catch (const server::RequestRejected& e) {
    EXPECT_EQ(e.error.param, "kv.test_keep_oldest");
  }
}

TEST(KvOptionSurfaces, EvalVariantsTakeEveryVariantOption) {
  const KvConfig base;
  for (const KvOptionDef* def : KvOptions()) {
    SCOPED_TRACE(std::string(def->key));
    const KvValue sample = Sample(*def);
    const std::string spec = "qevict:" + std::string(def->key) + "=" + KvValueText(*def, sample);
    if (def->eval_variant) {
      EXPECT_EQ(KvOptionValue(ApplyPolicyVariant(base, spec), *def), sample);
      EXPECT_NE(PolicyVariantKeys().find(std::string(def->key)), std::string::npos);
    } else {
      try {
        ApplyPolicyVariant(base, spec);
        ADD_FAILURE() << spec << " accepted";
      } catch (const Error& e) {
        // The budget is the evaluation's own axis (--budgets); the others name their flag.
        const bool budget = def->key == "budget" || def->key == "budget_bytes";
        EXPECT_NE(std::string(e.what()).find(budget ? "--budgets" : KvOptionFlag(*def)),
                  std::string::npos)
            << e.what();
      }
    }
  }
  EXPECT_EQ(
      ApplyPolicyVariant(base, "test-keep-oldest:test_keep_oldest=7").option("test_keep_oldest"),
      7);
}

TEST(KvOptionSurfaces, DocsAndTheConfigKeyListEveryOption) {
  const std::string md = KvOptionsMarkdown();
  const KvConfig defaults;
  for (const KvOptionDef* def : KvOptions()) {
    SCOPED_TRACE(std::string(def->key));
    const std::string flag = KvOptionFlag(*def);
    EXPECT_TRUE(std::any_of(KvOptionDocs().begin(), KvOptionDocs().end(),
                            [&](const KvOptionDoc& d) { return d.flag == flag; }));
    EXPECT_NE(md.find("| `" + flag + "` |"), std::string::npos);
    KvConfig changed = defaults;
    SetKvOption(changed, *def, Sample(*def));
    EXPECT_NE(KvConfigKey(changed), KvConfigKey(defaults));
  }
  // An option left at its default and one set to it are the same cache.
  KvConfig explicit_default = defaults;
  explicit_default.set_option("test_keep_oldest", 2);
  EXPECT_EQ(KvConfigKey(explicit_default), KvConfigKey(defaults));
}

}  // namespace
}  // namespace qevict
