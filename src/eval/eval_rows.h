// Rows of an evaluation (rows.jsonl, docs/evaluation.md): the fields the summary reads, with the
// defaults of rows written by older versions, and reading and merging saved rows for
// `qevict report`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace qevict {

// What the summary reads from a row.
struct RowFields {
  std::string model;         // the GGUF file's basename without ".gguf"; "" in older rows
  nlohmann::json seed;       // the run's --seed; null in older rows
  std::string task, id, kind, policy;
  std::string prefill_mode;  // older rows: "full" for the full cache, else "prompt-end"
  std::string prompt_style;  // older rows: "chat"
  std::string protocol;      // older rows: "question-in-prompt"
  std::string scorer;        // older rows: "substring"
  double budget = 0.0;
  std::string budget_scope;       // what the budget is of: "all" or "global"; older rows: "all"
  std::optional<int64_t> length;  // target_tokens when > 0
  std::optional<double> depth;
  bool infeasible = false;
};
RowFields ReadRowFields(const nlohmann::json& row);

// What a row's questions were asked and scored under: prompt style, protocol and scorer,
// joined. Rows that differ in it never share a cell, a comparison or a table.
std::string RowConditions(const RowFields& f);

// What identifies a row among the rows of runs: (model, seed, id, policy, budget, budget scope,
// prefill mode) and RowConditions (the scope only when "global", so that older keys stay). `qevict
// report` keeps the last row of each key; `qevict eval --resume` skips an instance whose every row
// key is present.
std::string RowKey(const RowFields& f);

// "full", or "full[TAG]" of a tagged run.
bool IsFullPolicy(const std::string& policy);

// The policy a name is a variant of: without "[tag]" and ":options", and qevict-* (qevict-qa)
// counted as qevict's own.
std::string PolicyFamily(const std::string& policy);

// "models/SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct.Q4_1".
std::string ModelName(const std::string& model_path);

// The row of one line of a rows file, or null with `why` saying why the line is not one (not
// JSON, not an object, no string "task", "id", "policy" or no number "budget").
nlohmann::json ParseRowLine(const std::string& line, std::string& why);

// The rows of a rows.jsonl, a gzip-compressed rows.jsonl.gz, or a directory holding one of them.
// Throws qevict::Error for a missing or unreadable input, a line that is not a row
// ("FILE:LINE: message") and an input without any row. Blank lines are skipped.
std::vector<nlohmann::json> ReadRowsInput(const std::string& input);

// Rows of several inputs, merged: a later row with the same RowKey replaces the earlier one in
// its place.
// Each row remembers the input it came from (`sources[i]` of `rows[i]`: 0, 1, ... in the order
// of Add), and the full-cache rows a later input replaced are kept apart (`earlier_full`, with
// their inputs): not counted in any cell, they pair each policy's row with the full-cache row
// that its own run made (eval_report.h).
struct MergedRows {
  struct Kept {
    nlohmann::json row;
    int source = 0;
  };
  std::vector<nlohmann::json> rows;
  std::vector<int> sources;
  std::vector<Kept> earlier_full;
  int64_t replaced = 0;
  void Add(std::vector<nlohmann::json> more);

 private:
  std::unordered_map<std::string, size_t> index_;  // key -> position in rows
  int inputs_ = 0;
};

}  // namespace qevict
