// Aggregates of an evaluation: the summary groups (means per task × policy × budget over the
// instances) and the Markdown table of policies × budgets per task.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qevict {

// One group per (task, prompt style, policy, budget) in first-seen order, keyed by task, policy
// (prompt-end rows labelled "policy (prompt-end)"), budget, prefill_mode and prompt_style, with
// means of accuracy, agreement, edit_similarity, kl, delta_ppl, top1_agreement, peak_bytes,
// mean_bytes, promotions, demotions, evictions, missed_mass, fmm (null where no row has the
// metric), n and infeasible_n.
nlohmann::json SummaryGroups(const std::vector<nlohmann::json>& rows);

// Per task: a table of mean accuracy (ppl: KL to the full cache; longgen: edit similarity),
// policies as rows and budgets as columns, the full cache on its own row; "(inf.)" marks means
// that include rows where the policy could not meet the budget. When the groups mix prompt
// styles, the completion-style tables are their own, headed "task (completion)".
std::string MarkdownTable(const nlohmann::json& groups);

}  // namespace qevict
