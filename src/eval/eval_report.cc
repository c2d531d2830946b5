#include "eval/eval_report.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "eval/eval_rows.h"
#include "eval/eval_stats.h"

namespace qevict {
namespace {

using nlohmann::json;

// The metrics of a cell. Proportions get a Wilson interval when every value is 0 or 1; the
// others (unbounded: KL, ΔPPL) always a bootstrap one.
struct MetricSpec {
  const char* name;
  bool proportion;
};
constexpr MetricSpec kMetrics[] = {{"accuracy", true},    {"edit_similarity", true},
                                   {"agreement", true},   {"top1_agreement", true},
                                   {"kl", false},         {"delta_ppl", false},
                                   {"missed_mass", true}, {"quantized_mass", true},
                                   {"fmm", true},         {"fmm_cumulative", true}};
// The cold tier's (cold_bytes, recalls) and the ledger's resident and pool-reserved bytes at the
// row's end are what `make demo` prints beside the RSS.
constexpr const char* kKvMeans[] = {"peak_bytes",          "mean_resident_bytes",
                                    "prefill_peak_bytes",  "peak_reserved_bytes",
                                    "reserved_bytes",      "rss_bytes",
                                    "peak_rss_bytes",      "promotions",
                                    "demotions",           "evictions",
                                    "resident_bytes",      "pool_reserved_bytes",
                                    "cold_bytes",          "cold_peak_bytes",
                                    "recalls"};

struct Row {
  RowFields f;
  const json* j;
  std::string instance;  // (seed, id): what pairs two policies' rows
  int source = 0;        // the input (run) it came from
  bool earlier = false;  // a full-cache row a later run replaced: for pairing only
};

using Rows = std::vector<const Row*>;

std::optional<double> Number(const json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

bool Binary(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return v == 0.0 || v == 1.0; });
}

double Mean(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

json OrNull(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
json OrNull(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json MetricStats(const std::vector<double>& values, bool proportion, uint64_t seed) {
  const bool wilson = proportion && Binary(values);
  const auto n = static_cast<int64_t>(values.size());
  const Interval ci =
      wilson ? WilsonInterval(std::count(values.begin(), values.end(), 1.0), n)
             : BootstrapMeanInterval(values, seed);
  return {{"mean", Mean(values)}, {"lo", ci.lo}, {"hi", ci.hi}, {"n", n},
          {"interval", wilson ? "wilson" : "bootstrap"}};
}

// The bootstrap seed's key of a cell or comparison: its identifying fields, and the protocol
// and scorer only where they are not the defaults, so that the intervals of rows written before
// protocols and scorers existed (the published ones) stay what they were.
std::string SeedKey(const json& fields, const RowFields& f) {
  std::string key = fields.dump();
  if (f.protocol != "question-in-prompt") key += "\x1fprotocol=" + f.protocol;
  if (f.scorer != "substring") key += "\x1fscorer=" + f.scorer;
  return key;
}

void AddProtocolAndScorer(const RowFields& f, json& out) {
  out["protocol"] = f.protocol;
  out["scorer"] = f.scorer;
}

// One cell: rows of one (model, task, style, protocol, scorer, mode, policy, budget, budget
// scope) at one level.
json Cell(Rows rows, const std::optional<int64_t>& length, const std::optional<double>& depth) {
  // Instance order, so that the bootstrap does not depend on the order rows were read in.
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row* a, const Row* b) { return a->instance < b->instance; });
  const RowFields& f = rows.front()->f;
  json cell = {{"model", f.model},   {"task", f.task},
               {"prompt_style", f.prompt_style},
               {"prefill_mode", f.prefill_mode},
               {"policy", f.policy}, {"family", PolicyFamily(f.policy)},
               {"budget", f.budget}, {"length", OrNull(length)},
               {"depth", OrNull(depth)}};
  // The global scope seeds its own bootstrap; cells of the default scope keep their seeds.
  if (f.budget_scope != "all") cell["budget_scope"] = f.budget_scope;
  const std::string key = SeedKey(cell, f);
  cell["budget_scope"] = f.budget_scope;
  AddProtocolAndScorer(f, cell);
  cell["n"] = rows.size();
  cell["infeasible_n"] =
      std::count_if(rows.begin(), rows.end(), [](const Row* r) { return r->f.infeasible; });
  json metrics = json::object();
  for (const MetricSpec& m : kMetrics) {
    std::vector<double> values;
    for (const Row* r : rows) {
      if (const auto v = Number(*r->j, m.name)) values.push_back(*v);
    }
    if (!values.empty()) {
      metrics[m.name] = MetricStats(values, m.proportion, SeedFromKey(key + '\x1f' + m.name));
    }
  }
  cell["metrics"] = std::move(metrics);
  json kv = json::object();
  for (const char* name : kKvMeans) {
    std::vector<double> values;
    for (const Row* r : rows) {
      const auto it = r->j->find("kv");
      if (it == r->j->end() || !it->is_object()) continue;
      if (const auto v = Number(*it, name)) values.push_back(*v);
    }
    kv[name] = values.empty() ? json(nullptr) : json(Mean(values));
  }
  cell["kv"] = std::move(kv);
  return cell;
}

// Groups in first-appearance order of their key.
template <typename KeyFn>
std::vector<Rows> GroupBy(const Rows& rows, KeyFn key) {
  std::vector<Rows> groups;
  std::unordered_map<std::string, size_t> index;
  for (const Row* r : rows) {
    const auto [it, fresh] = index.emplace(key(*r), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(r);
  }
  return groups;
}

std::string Budget(double b) { return json(b).dump(); }

json Cells(const Rows& rows) {
  json cells = json::array();
  const auto groups = GroupBy(rows, [](const Row& r) {
    const RowFields& f = r.f;
    return f.model + '\x1f' + f.task + '\x1f' + RowConditions(f) + '\x1f' + f.prefill_mode +
           '\x1f' + f.policy + '\x1f' + Budget(f.budget) + '\x1f' + f.budget_scope;
  });
  for (const Rows& group : groups) {
    cells.push_back(Cell(group, std::nullopt, std::nullopt));
    std::map<int64_t, Rows> by_length;
    std::map<std::pair<int64_t, double>, Rows> by_depth;
    for (const Row* r : group) {
      if (!r->f.length) continue;
      by_length[*r->f.length].push_back(r);
      if (r->f.depth) by_depth[{*r->f.length, *r->f.depth}].push_back(r);
    }
    for (const auto& [length, level] : by_length) cells.push_back(Cell(level, length, std::nullopt));
    for (const auto& [at, level] : by_depth) cells.push_back(Cell(level, at.first, at.second));
  }
  return cells;
}

// The comparison of policies a and b on the instances both have.
struct PairSpec {
  json key;  // model, task, prompt_style, prefill_mode, budget, length
  std::string budget_scope;  // "all" or "global"
  std::string metric;
  bool higher_is_better;
  const RowFields& conditions;  // a row of the group: its protocol and scorer
};

std::optional<json> Compare(const PairSpec& spec, const std::string& a, const std::string& b,
                            const std::map<std::string, double>& values_a,
                            const std::map<std::string, double>& values_b) {
  std::vector<double> va, vb;
  for (const auto& [instance, v] : values_a) {
    const auto it = values_b.find(instance);
    if (it == values_b.end()) continue;
    va.push_back(v);
    vb.push_back(it->second);
  }
  if (va.empty()) return std::nullopt;
  json c = spec.key;
  c["metric"] = spec.metric;
  c["higher_is_better"] = spec.higher_is_better;
  c["a"] = a;
  c["b"] = b;
  if (spec.budget_scope != "all") c["budget_scope"] = spec.budget_scope;  // as in Cell()
  const Interval ci = PairedBootstrapInterval(va, vb, SeedFromKey(SeedKey(c, spec.conditions)));
  c["budget_scope"] = spec.budget_scope;
  AddProtocolAndScorer(spec.conditions, c);
  const double mean_a = Mean(va), mean_b = Mean(vb), diff = mean_a - mean_b;
  c["same_family"] = PolicyFamily(a) == PolicyFamily(b);
  c["n"] = va.size();
  c["mean_a"] = mean_a;
  c["mean_b"] = mean_b;
  c["diff"] = diff;
  c["lo"] = ci.lo;
  c["hi"] = ci.hi;
  const bool binary = Binary(va) && Binary(vb);
  double p = 0.0;
  if (binary) {
    int64_t a_only = 0, b_only = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      a_only += va[i] > vb[i];
      b_only += vb[i] > va[i];
    }
    p = McNemarExactP(a_only, b_only);
    c["a_only"] = a_only;
    c["b_only"] = b_only;
    c["p"] = p;
  } else {
    c["a_only"] = c["b_only"] = c["p"] = nullptr;
  }
  // Better: the interval excludes zero on that side (and, binary, McNemar agrees).
  const double sign = spec.higher_is_better ? 1.0 : -1.0;
  const bool significant = !binary || p < 0.05;
  const bool a_better = sign * diff > 0 && (spec.higher_is_better ? ci.lo > 0 : ci.hi < 0);
  const bool b_better = sign * diff < 0 && (spec.higher_is_better ? ci.hi < 0 : ci.lo > 0);
  c["verdict"] = significant && a_better ? "a" : significant && b_better ? "b" : "none";
  return c;
}

// Every pair of policies among the rows of one comparison group, in first-appearance order.
// A policy is paired with the full cache on the full-cache rows of its own rows' runs (the same
// process and build made both), where those runs have them, and on the latest full-cache rows
// otherwise; "full_from_own_run" counts the pairs of the first kind.
void ComparePolicies(const PairSpec& spec, const Rows& rows, json& out) {
  using Values = std::map<std::string, double>;  // instance -> value
  std::vector<std::string> policies;
  std::map<std::string, Values> values;                      // the rows that count
  std::map<std::string, std::map<std::string, int>> source;  // policy -> instance -> input
  std::map<std::string, std::map<std::pair<int, std::string>, double>> full_by_run;
  for (const Row* r : rows) {
    const auto v = Number(*r->j, spec.metric.c_str());
    if (r->f.prefill_mode == "full" && v) full_by_run[r->f.policy][{r->source, r->instance}] = *v;
    if (r->earlier) continue;
    if (!values.count(r->f.policy)) policies.push_back(r->f.policy);
    auto& of = values[r->f.policy];
    if (v) {
      of[r->instance] = *v;
      source[r->f.policy][r->instance] = r->source;
    }
  }
  // The full cache's values as paired with `policy`'s rows, and how many came from their runs.
  auto full_for = [&](const std::string& full, const std::string& policy, int64_t& own) {
    Values paired = values[full];
    own = 0;
    for (const auto& [instance, at] : source[policy]) {
      const auto it = full_by_run[full].find({at, instance});
      if (it == full_by_run[full].end()) continue;
      paired[instance] = it->second;
      ++own;
    }
    return paired;
  };
  for (size_t i = 0; i < policies.size(); ++i) {
    for (size_t k = i + 1; k < policies.size(); ++k) {
      const std::string& a = policies[i];
      const std::string& b = policies[k];
      const bool a_full = full_by_run.count(a) > 0, b_full = full_by_run.count(b) > 0;
      int64_t own = 0;
      std::optional<json> c;
      if (a_full != b_full) {
        c = a_full ? Compare(spec, a, b, full_for(a, b, own), values[b])
                   : Compare(spec, a, b, values[a], full_for(b, a, own));
        if (c) (*c)["full_from_own_run"] = own;
      } else {
        c = Compare(spec, a, b, values[a], values[b]);
      }
      if (c) out.push_back(std::move(*c));
    }
  }
}

json Comparisons(const Rows& rows) {
  json out = json::array();
  const auto groups = GroupBy(rows, [](const Row& r) {
    return r.f.model + '\x1f' + r.f.task + '\x1f' + RowConditions(r.f);
  });
  for (const Rows& group : groups) {
    const RowFields& first = group.front()->f;
    const bool has_kl = std::any_of(group.begin(), group.end(),
                                    [](const Row* r) { return Number(*r->j, "kl").has_value(); });
    const std::string metric = PrimaryMetric(first.task, has_kl);
    Rows full;
    std::vector<std::string> modes;
    std::map<std::string, std::set<std::pair<std::string, double>>> budgets;  // (scope, budget)
    for (const Row* r : group) {
      if (r->f.prefill_mode == "full") {
        full.push_back(r);
        continue;
      }
      if (!budgets.count(r->f.prefill_mode)) modes.push_back(r->f.prefill_mode);
      budgets[r->f.prefill_mode].insert({r->f.budget_scope, r->f.budget});
    }
    for (const std::string& mode : modes) {
      for (const auto& [scope, budget] : budgets[mode]) {
        // The full cache's rows join every mode's comparisons, at every budget.
        Rows members;
        std::set<int64_t> lengths;
        for (const Row* r : group) {
          if (r->f.prefill_mode == "full" ||
              (r->f.prefill_mode == mode && r->f.budget == budget && r->f.budget_scope == scope)) {
            members.push_back(r);
            if (r->f.length) lengths.insert(*r->f.length);
          }
        }
        std::vector<std::optional<int64_t>> levels = {std::nullopt};
        levels.insert(levels.end(), lengths.begin(), lengths.end());
        for (const auto& level : levels) {
          Rows at;
          for (const Row* r : members) {
            if (!level || r->f.length == level) at.push_back(r);
          }
          const PairSpec spec{{{"model", first.model},
                               {"task", first.task},
                               {"prompt_style", first.prompt_style},
                               {"prefill_mode", mode},
                               {"budget", budget},
                               {"length", OrNull(level)}},
                              scope,
                              metric,
                              metric != "kl",
                              first};
          ComparePolicies(spec, at, out);
        }
      }
    }
  }
  return out;
}

}  // namespace

std::string PrimaryMetric(const std::string& task, bool has_kl) {
  return has_kl ? "kl" : task == "longgen" ? "edit_similarity" : "accuracy";
}

json SummarizeRows(const std::vector<json>& rows) {
  MergedRows one;
  one.rows = rows;
  one.sources.assign(rows.size(), 0);
  return SummarizeRows(one);
}

json SummarizeRows(const MergedRows& merged) {
  std::vector<Row> parsed;
  parsed.reserve(merged.rows.size() + merged.earlier_full.size());
  auto add = [&](const json& j, int source, bool earlier) {
    RowFields f = ReadRowFields(j);
    std::string instance = f.seed.dump() + '\x1f' + f.id;
    parsed.push_back({std::move(f), &j, std::move(instance), source, earlier});
  };
  for (size_t i = 0; i < merged.rows.size(); ++i) {
    add(merged.rows[i], i < merged.sources.size() ? merged.sources[i] : 0, false);
  }
  for (const MergedRows::Kept& kept : merged.earlier_full) add(kept.row, kept.source, true);
  Rows current, all;
  for (const Row& r : parsed) {
    all.push_back(&r);
    if (!r.earlier) current.push_back(&r);
  }
  return {{"format", kSummaryFormat}, {"cells", Cells(current)}, {"comparisons", Comparisons(all)}};
}

}  // namespace qevict
