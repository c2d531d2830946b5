// Aggregates of an evaluation, with their statistics (docs/evaluation.md, "Summary"): the
// cells (means of every metric with a 95% interval, per model, task, prompt style, protocol,
// scorer, prefill mode, policy and budget, pooled and per length and depth), the paired comparisons of the policies,
// and the Markdown tables of policies x budgets. `qevict eval` and `qevict report` both write
// them through these functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_rows.h"

namespace qevict {

// Version of the summary's shape: "format" in summary.json.
inline constexpr int kSummaryFormat = 2;

// {"format": 2, "cells": [...], "comparisons": [...]} of the rows (each instance once per
// policy, budget and prefill mode; `qevict report` merges repeated rows first). The shape is
// documented in docs/evaluation.md.
nlohmann::json SummarizeRows(const std::vector<nlohmann::json>& rows);

// The same for rows of several runs (`qevict report`): the cells of merged.rows, and comparisons
// in which each policy's rows are paired with the full-cache rows of their own runs (those that
// later runs replaced included: merged.earlier_full), so that both sides of a pair come from one
// process and one build; where a run has no full-cache row of an instance, the latest one.
nlohmann::json SummarizeRows(const MergedRows& merged);

// The task's primary metric: "kl" for ppl rows, "edit_similarity" for longgen, else "accuracy".
std::string PrimaryMetric(const std::string& task, bool has_kl);

// Per (model, task, prompt style, protocol, scorer, prefill mode): a table of the primary metric with its
// interval, policies as rows and budgets as columns, the full cache's value in every column and
// "(inf.)" where the mean includes rows that could not meet the budget; pooled over lengths,
// then one table per length when there are several. Labels name the prompt style, protocol,
// scorer or model only when the cells mix them.
std::string MarkdownTable(const nlohmann::json& summary);

}  // namespace qevict
