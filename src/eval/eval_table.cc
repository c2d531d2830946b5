// MarkdownTable (eval/eval_report.h): the summary's cells as policies x budgets tables.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "eval/eval_report.h"

namespace qevict {
namespace {

using nlohmann::json;
using CellList = std::vector<const json*>;

std::string Format(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string MetricTitle(const std::string& metric) {
  if (metric == "kl") return "mean KL to the full cache (lower is better)";
  if (metric == "edit_similarity") return "edit similarity to the full cache's generation";
  return "accuracy";
}

// "0.83 [0.66, 0.93]", "(inf.)" when the mean includes infeasible rows.
std::string Value(const json& cell, const std::string& metric) {
  const json& metrics = cell["metrics"];
  if (!metrics.contains(metric)) return "—";
  const json& m = metrics[metric];
  const int digits = metric == "kl" ? 4 : 2;
  std::string text = Format(m["mean"].get<double>(), digits) + " [" +
                     Format(m["lo"].get<double>(), digits) + ", " +
                     Format(m["hi"].get<double>(), digits) + "]";
  if (cell["infeasible_n"].get<int64_t>() > 0) text += " (inf.)";
  return text;
}

// "policy (n=12)", or "(n=10–12)" when its cells differ.
std::string Label(const std::string& policy, const CellList& cells) {
  int64_t lo = INT64_MAX, hi = 0;
  for (const json* c : cells) {
    lo = std::min(lo, (*c)["n"].get<int64_t>());
    hi = std::max(hi, (*c)["n"].get<int64_t>());
  }
  return policy + " (n=" + std::to_string(lo) + (lo == hi ? "" : "–" + std::to_string(hi)) + ")";
}

struct TableSpec {
  std::string title;   // heading before " — metric"
  std::string metric;
  std::string mode;    // the compressed prefill mode, or "full" when there is none
  json length;         // null: pooled
};

constexpr const char* kDefaultProtocol = "question-in-prompt";
constexpr const char* kDefaultScorer = "substring";

// A cell's protocol and scorer (summaries written before they existed have the defaults).
std::string Protocol(const json& cell) { return cell.value("protocol", kDefaultProtocol); }
std::string Scorer(const json& cell) { return cell.value("scorer", kDefaultScorer); }

// What a cell's budget is of (summaries written before the scope existed: "all").
std::string CellBudgetScope(const json& cell) { return cell.value("budget_scope", "all"); }

// Policies as rows (the full cache first, its value in every column), budgets as columns: those
// of the global layers (--kv-budget-scope global) headed "0.05 global".
std::string Table(const TableSpec& spec, const CellList& group) {
  CellList at;
  std::set<std::pair<std::string, double>> budgets;  // (scope, budget)
  for (const json* c : group) {
    const std::string mode = (*c)["prefill_mode"];
    if ((*c)["length"] != spec.length || !(*c)["depth"].is_null()) continue;
    if (mode != spec.mode && mode != "full") continue;
    at.push_back(c);
    if (mode == spec.mode) budgets.insert({CellBudgetScope(*c), (*c)["budget"].get<double>()});
  }
  if (at.empty()) return "";
  std::vector<std::string> policies;
  for (const bool full : {true, false}) {
    for (const json* c : at) {
      const std::string policy = (*c)["policy"];
      if (((*c)["prefill_mode"] == "full") != full) continue;
      if (std::find(policies.begin(), policies.end(), policy) == policies.end()) {
        policies.push_back(policy);
      }
    }
  }
  std::string md = "### " + spec.title + " — " + MetricTitle(spec.metric) +
                   (spec.mode == "full" ? "" : ", " + spec.mode + " prefill") + "\n\n| policy |";
  for (const auto& [scope, b] : budgets) {
    md.append(" ").append(Format(b, 2)).append(scope == "all" ? "" : " " + scope).append(" |");
  }
  md += "\n|---|";
  for (size_t i = 0; i < budgets.size(); ++i) md += "---:|";
  md += "\n";
  for (const std::string& policy : policies) {
    CellList mine;
    for (const json* c : at) {
      if ((*c)["policy"] == policy) mine.push_back(c);
    }
    md += "| " + Label(policy, mine) + " |";
    for (const auto& [scope, b] : budgets) {
      const json* cell = nullptr;
      for (const json* c : mine) {
        if ((*c)["prefill_mode"] == "full" ||
            ((*c)["budget"].get<double>() == b && CellBudgetScope(*c) == scope)) {
          cell = c;
        }
      }
      md.append(" ").append(cell != nullptr ? Value(*cell, spec.metric) : "—").append(" |");
    }
    md += "\n";
  }
  return md + "\n";
}

}  // namespace

std::string MarkdownTable(const json& summary) {
  const json& cells = summary.at("cells");
  std::set<std::string> styles, protocols, scorers, models;
  std::vector<std::string> order;  // (model, task, style, protocol, scorer) as they first appear
  std::map<std::string, CellList> groups;
  for (const json& c : cells) {
    const std::string style = c["prompt_style"], protocol = Protocol(c), scorer = Scorer(c);
    styles.insert(style);
    protocols.insert(protocol);
    scorers.insert(scorer);
    models.insert(c["model"].get<std::string>());
    const std::string key = c["model"].get<std::string>() + '\x1f' + c["task"].get<std::string>() +
                            '\x1f' + style + '\x1f' + protocol + '\x1f' + scorer;
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&c);
  }
  std::string md;
  for (const std::string& key : order) {
    const CellList& group = groups[key];
    const json& first = *group.front();
    const std::string task = first["task"], style = first["prompt_style"], model = first["model"];
    const std::string protocol = Protocol(first), scorer = Scorer(first);
    // What sets the group apart, named only when the cells mix it and it is not the default.
    std::vector<std::string> labels;
    if (styles.size() > 1 && style != "chat") labels.push_back(style);
    if (protocols.size() > 1 && protocol != kDefaultProtocol) labels.push_back(protocol);
    if (scorers.size() > 1 && scorer != kDefaultScorer) labels.push_back(scorer + " scorer");
    bool has_kl = false;
    std::vector<std::string> modes;
    std::set<int64_t> lengths;
    for (const json* c : group) {
      has_kl = has_kl || (*c)["metrics"].contains("kl");
      const std::string mode = (*c)["prefill_mode"];
      if (mode != "full" && std::find(modes.begin(), modes.end(), mode) == modes.end()) {
        modes.push_back(mode);
      }
      if ((*c)["length"].is_number()) lengths.insert((*c)["length"].get<int64_t>());
    }
    if (modes.empty()) modes.push_back("full");  // only the full cache: one column
    std::string title = task;
    for (size_t i = 0; i < labels.size(); ++i) title += (i == 0 ? " (" : ", ") + labels[i];
    if (!labels.empty()) title += ")";
    if (models.size() > 1) title += ", " + (model.empty() ? std::string("unnamed model") : model);
    TableSpec spec{title, PrimaryMetric(task, has_kl), "", nullptr};
    for (const std::string& mode : modes) {
      spec.mode = mode;
      spec.title = title;
      spec.length = nullptr;
      md += Table(spec, group);
      if (lengths.size() < 2) continue;
      for (int64_t length : lengths) {
        spec.title = title + " at " + std::to_string(length) + " tokens";
        spec.length = length;
        md += Table(spec, group);
      }
    }
  }
  return md;
}

}  // namespace qevict
