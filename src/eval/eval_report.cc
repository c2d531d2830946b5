#include "eval/eval_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace qevict {
namespace {

using nlohmann::json;

constexpr const char* kMeans[] = {"accuracy", "agreement", "edit_similarity", "kl", "delta_ppl",
                                  "top1_agreement", "missed_mass", "fmm"};
constexpr const char* kKvMeans[][2] = {{"peak_bytes", "peak_bytes"},
                                       {"mean_bytes", "mean_resident_bytes"},
                                       {"prefill_peak_bytes", "prefill_peak_bytes"},
                                       {"peak_reserved_bytes", "peak_reserved_bytes"},
                                       {"reserved_bytes", "reserved_bytes"},
                                       {"rss_bytes", "rss_bytes"},
                                       {"peak_rss_bytes", "peak_rss_bytes"},
                                       {"promotions", "promotions"},
                                       {"demotions", "demotions"},
                                       {"evictions", "evictions"}};

struct Mean {
  double sum = 0.0;
  int n = 0;
  void Add(const json& v) {
    if (v.is_number()) {
      sum += v.get<double>();
      ++n;
    }
  }
  json Get() const { return n > 0 ? json(sum / n) : json(nullptr); }
};

std::string Format(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

// Rows of the two prefill modes are separate groups: prompt-end rows (docs/evaluation.md,
// "Prefill modes") carry the mode in their label, bounded rows (the default) and full do not.
std::string PolicyLabel(const json& row) {
  const std::string policy = row.value("policy", "");
  return row.value("prefill_mode", "") == "prompt-end" ? policy + " (prompt-end)" : policy;
}

// A row's prompt style ("chat" for rows written before styles existed).
std::string PromptStyleOf(const json& row) {
  const std::string style = row.value("prompt_style", "");
  return style.empty() ? "chat" : style;
}

// Rows of different prompt styles are separate groups. One run has one style, said above its
// tables; only when the rows mix styles do the completion ones carry it in their task's label,
// "niah (completion)", so that each style's rows are compared with its own full cache.
std::string TaskLabel(const json& group, bool mixed_styles) {
  const std::string task = group.value("task", "");
  const std::string style = group.value("prompt_style", "chat");
  return mixed_styles && style != "chat" ? task + " (" + style + ")" : task;
}

bool MixedStyles(const json& groups) {
  std::set<std::string> styles;
  for (const json& g : groups) styles.insert(g.value("prompt_style", "chat"));
  return styles.size() > 1;
}

json SummaryGroups(const std::vector<json>& rows) {
  struct Group {
    json key;
    std::map<std::string, Mean> means;
    int n = 0, infeasible = 0;
  };
  std::vector<Group> groups;
  std::map<std::string, size_t> index;
  for (const json& row : rows) {
    const std::string label = PolicyLabel(row);
    const std::string style = PromptStyleOf(row);
    const std::string key = row.value("task", "") + "\x1f" + style + "\x1f" + label + "\x1f" +
                            Format(row.value("budget", 0.0), 4);
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) {
      Group g;
      g.key = {{"task", row["task"]}, {"policy", label}, {"budget", row["budget"]},
               {"prefill_mode", row.value("prefill_mode", "")}, {"prompt_style", style}};
      groups.push_back(std::move(g));
    }
    Group& g = groups[it->second];
    ++g.n;
    g.infeasible += row.value("infeasible", false) ? 1 : 0;
    for (const char* m : kMeans) g.means[m].Add(row.contains(m) ? row[m] : json());
    for (const auto& [name, field] : kKvMeans) {
      g.means[name].Add(row.contains("kv") ? row["kv"].value(field, json()) : json());
    }
  }
  json out = json::array();
  for (const Group& g : groups) {
    json j = g.key;
    j["n"] = g.n;
    j["infeasible_n"] = g.infeasible;
    for (const auto& [name, mean] : g.means) j[name] = mean.Get();
    out.push_back(std::move(j));
  }
  return out;
}

namespace {
bool IsFull(const std::string& policy) {
  return policy == "full" || policy.rfind("full[", 0) == 0;  // "full[tag]" of a tagged run
}
}  // namespace

std::string MarkdownTable(const json& groups) {
  std::vector<std::string> tasks, policies;
  std::set<double> budget_set;
  std::map<std::string, const json*> cell;  // task|policy|budget
  auto key = [](const std::string& t, const std::string& p, double b) {
    return t + "|" + p + "|" + Format(b, 4);
  };
  const bool mixed = MixedStyles(groups);
  for (const json& g : groups) {
    const std::string task = TaskLabel(g, mixed), policy = g["policy"];
    if (std::find(tasks.begin(), tasks.end(), task) == tasks.end()) tasks.push_back(task);
    if (std::find(policies.begin(), policies.end(), policy) == policies.end()) {
      policies.push_back(policy);
    }
    if (!IsFull(policy)) budget_set.insert(g["budget"].get<double>());
    cell[key(task, IsFull(policy) ? "full" : policy, g["budget"].get<double>())] = &g;
  }
  const std::vector<double> budgets(budget_set.begin(), budget_set.end());
  std::string md;
  for (const std::string& task : tasks) {
    const json* full = cell.count(key(task, "full", 1.0)) ? cell[key(task, "full", 1.0)] : nullptr;
    const bool ppl = full != nullptr && (*full)["kl"].is_number();
    const bool longgen = task == "longgen" || task.starts_with("longgen (");
    const char* metric = ppl ? "kl" : longgen ? "edit_similarity" : "accuracy";
    md += "### " + task + " — " +
          (ppl ? std::string("mean KL to the full cache (lower is better)")
               : longgen ? std::string("edit similarity to the full cache's generation")
                         : std::string("accuracy")) +
          "\n\n| policy |";
    for (double b : budgets) md += " " + Format(b, 2) + " |";
    md += "\n|---|";
    for (size_t i = 0; i < budgets.size(); ++i) md += "---:|";
    md += "\n";
    if (full != nullptr) {
      md += "| full (n=" + std::to_string((*full)["n"].get<int>()) + ") |";
      const json& v = (*full)[ppl ? "accuracy" : metric];
      const std::string text = v.is_number() ? Format(v.get<double>(), ppl ? 3 : 2) : "—";
      for (size_t i = 0; i < budgets.size(); ++i) md += " " + (ppl ? "top-1 " + text : text) + " |";
      md += "\n";
    }
    for (const std::string& policy : policies) {
      if (IsFull(policy)) continue;
      md += "| " + policy + " |";
      for (double b : budgets) {
        const auto it = cell.find(key(task, policy, b));
        if (it == cell.end() || !(*it->second)[metric].is_number()) {
          md += " — |";
          continue;
        }
        const json& g = *it->second;
        md += " " + Format(g[metric].get<double>(), ppl ? 4 : 2);
        if (g["infeasible_n"].get<int>() > 0) md += " (inf.)";
        md += " |";
      }
      md += "\n";
    }
    md += "\n";
  }
  return md;
}

}  // namespace qevict
