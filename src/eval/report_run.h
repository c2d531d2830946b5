// `qevict report`: the summary and tables of `qevict eval` (eval/eval_report.h), recomputed from
// saved rows of one or more runs (rows.jsonl, rows.jsonl.gz or their directories), merged
// (eval/eval_rows.h, MergedRows).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qevict {

struct ReportOptions {
  std::vector<std::string> inputs;
  std::string out_dir;       // "" : write nothing, only print the table
  std::string command_line;  // recorded in summary.json
};

struct Report {
  nlohmann::json summary;  // "format", "command", "sources", "rows", "replaced", cells, comparisons
  std::string table;       // Markdown
};

// Reads and merges the inputs and summarizes them. Throws qevict::Error for bad input.
Report BuildReport(const ReportOptions& options);

// BuildReport, then writes OUT/summary.json and OUT/table.md and prints the table; returns the
// exit code.
int RunReport(const ReportOptions& options);

}  // namespace qevict
