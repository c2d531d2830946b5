// Earlier rows in an output directory (eval_resume.h).
#include "eval/eval_resume.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "eval/answer_match.h"
#include "eval/eval_rows.h"
#include "util/error.h"

namespace qevict {

using nlohmann::json;

void CheckEarlierRows(const std::string& rows_path, bool overwrite, bool resume) {
  if (overwrite && resume) {
    throw Error("--overwrite and --resume exclude each other: start over or keep the rows");
  }
  std::error_code ec;
  const bool has_rows = std::filesystem::is_regular_file(rows_path, ec) &&
                        std::filesystem::file_size(rows_path, ec) > 0 && !ec;
  if (has_rows && !overwrite && !resume) {
    throw Error("'" + rows_path + "' already holds rows of an earlier run: pass --overwrite to " +
                "start over (they are lost) or --resume to keep them and run only the " +
                "instances whose rows are missing");
  }
}

EarlierRows ReadEarlierRows(const std::string& rows_path) {
  EarlierRows out;
  std::error_code ec;
  if (!std::filesystem::exists(rows_path, ec)) return out;
  std::ifstream in(rows_path, std::ios::binary);
  if (!in) throw Error("cannot read '" + rows_path + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  size_t start = 0;
  for (int64_t number = 1; start < text.size(); ++number) {
    size_t end = text.find('\n', start);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string why;
    json row = ParseRowLine(line, why);
    if (row.is_null()) {
      if (!complete) {  // the run that wrote it stopped in the middle of this line
        out.torn_tail = true;
        break;
      }
      throw Error(rows_path + ":" + std::to_string(number) + ": " + why +
                  " (--resume keeps only whole rows; --overwrite starts over)");
    }
    out.keys.insert(RowKey(ReadRowFields(row)));
    out.lines.push_back(std::move(line));
    out.rows.push_back(std::move(row));
  }
  return out;
}

std::vector<std::string> InstanceRowKeys(const EvalSettings& settings, const EvalTask& task,
                                         const std::string& model_name, uint64_t seed) {
  RowFields f;
  f.model = model_name;
  f.seed = seed;
  f.id = task.id;
  f.prompt_style = PromptStyleName(settings.prompt_style);
  f.protocol = EvalProtocolName(settings.protocol);
  f.scorer = AnswerScorerName(task.scorer.value_or(settings.scorer));
  std::vector<std::string> keys;
  for (const PlannedRow& planned : PlannedRows(settings)) {
    f.policy = planned.name;
    f.budget = planned.budget;
    f.prefill_mode = planned.prefill_mode;
    f.budget_scope = planned.budget_scope;
    keys.push_back(RowKey(f));
  }
  return keys;
}

ResumePlan PlanResume(const EarlierRows& earlier, const std::vector<EvalTask>& tasks,
                      const EvalSettings& settings, const std::string& model_name,
                      uint64_t seed) {
  ResumePlan plan;
  std::unordered_set<std::string> rerun;  // the row keys of the instances to run
  for (size_t i = 0; i < tasks.size(); ++i) {
    const std::vector<std::string> keys = InstanceRowKeys(settings, tasks[i], model_name, seed);
    const bool complete = std::all_of(keys.begin(), keys.end(), [&](const std::string& key) {
      return earlier.keys.count(key) > 0;
    });
    if (complete) {
      ++plan.done;
      continue;
    }
    plan.to_run.push_back(i);
    rerun.insert(keys.begin(), keys.end());
  }
  for (size_t j = 0; j < earlier.rows.size(); ++j) {
    if (rerun.count(RowKey(ReadRowFields(earlier.rows[j])))) {
      ++plan.dropped;
      continue;
    }
    plan.kept_lines.push_back(earlier.lines[j]);
    plan.kept_rows.push_back(earlier.rows[j]);
  }
  return plan;
}

void RewriteRows(const std::string& rows_path, const std::vector<std::string>& lines) {
  const std::string temporary = rows_path + ".resume";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    for (const std::string& line : lines) out << line << '\n';
    out.flush();
    if (!out) throw Error("cannot write '" + temporary + "'");
  }
  std::error_code ec;
  std::filesystem::rename(temporary, rows_path, ec);
  if (ec) throw Error("cannot replace '" + rows_path + "': " + ec.message());
}

}  // namespace qevict
