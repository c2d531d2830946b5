// Aggregates of an evaluation: the summary groups (means per task × policy × budget over the
// instances) and the Markdown table of policies × budgets per task.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qevict {

// One group per (task, policy, budget) in first-seen order, with means of accuracy, agreement,
// edit_similarity, kl, delta_ppl, top1_agreement, peak_bytes, mean_bytes, promotions,
// demotions, evictions, missed_mass, fmm (null where no row has the metric), n and infeasible_n.
nlohmann::json SummaryGroups(const std::vector<nlohmann::json>& rows);

// Per task: a table of mean accuracy (ppl: KL to the full cache; longgen: edit similarity),
// policies as rows and budgets as columns, the full cache on its own row; "(inf.)" marks means
// that include rows where the policy could not meet the budget.
std::string MarkdownTable(const nlohmann::json& groups);

}  // namespace qevict
