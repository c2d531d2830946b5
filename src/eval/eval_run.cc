#include "eval/eval_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include "eval/answer_match.h"
#include "eval/eval_report.h"
#include "eval/eval_resume.h"
#include "eval/turn_scores.h"
#include "eval/eval_rows.h"
#include "eval/policy_variant.h"
#include "eval/progress_bar.h"
#include "eval/task_file.h"
#include "util/error.h"

namespace qevict {
namespace {

using nlohmann::json;

bool IsQuestionTask(const std::string& name) { return name != "longgen" && name != "ppl"; }

// Generated tasks: question tasks get length - reserve tokens of context, so that a --lengths
// value is the whole prompt; their target_tokens still names the requested length.
std::vector<EvalTask> Generate(const EvalOptions& o, const LoadedModel& model) {
  const TokenCounter count = [&](std::string_view text) {
    return static_cast<int64_t>(model.tokenizer->Encode(text, false, false).size());
  };
  std::vector<EvalTask> tasks;
  for (const std::string& name : o.grid.tasks) {
    TaskGrid grid = o.grid;
    grid.tasks = {name};
    // Room for every question an instance asks in its session.
    const int64_t turns = GeneratedTaskTurns(name);
    const int64_t reserve = IsQuestionTask(name) ? o.question_reserve * turns : 0;
    // Generated contexts land within 5% of their target: at the model's context limit keep
    // that much free too, so that an instance of the longest length still fits.
    const int64_t limit = static_cast<int64_t>(
        static_cast<double>(model.model->config().context_length - reserve) / 1.05);
    std::map<int64_t, int64_t> requested;  // generated length -> the --lengths value
    for (int64_t& length : grid.lengths) {
      const int64_t generated = std::min(length - reserve, limit);
      requested[generated] = length;
      length = generated;
    }
    for (EvalTask& t : GenerateTasks(grid, count)) {
      const auto it = requested.find(t.target_tokens);
      if (t.target_tokens > 0 && it != requested.end() && it->second != t.target_tokens) {
        const std::string from = "-L" + std::to_string(t.target_tokens) + "-";
        t.target_tokens = it->second;
        const size_t at = t.id.find(from);
        if (at != std::string::npos) {
          t.id.replace(at, from.size(), "-L" + std::to_string(t.target_tokens) + "-");
        }
      }
      tasks.push_back(std::move(t));
    }
  }
  return tasks;
}

// The lines above the tables: how the questions were put to the model and scored.
std::string PromptStyleLine(const EvalSettings& settings) {
  std::string text = settings.prompt_style == PromptStyle::kChat
                         ? "Prompt style: chat (the model's chat template).\n\n"
                         : "Prompt style: completion (raw text, \"Question: ...\\nAnswer:\" and "
                           "the answer prefix).\n\n";
  text += settings.protocol == EvalProtocol::kContextOnly
              ? "Protocol: context-only (the cache is compressed after the context; every "
                "question comes as a later turn).\n\n"
              : "Protocol: question-in-prompt (the first question is part of the prompt the "
                "cache is compressed after).\n\n";
  if (settings.scorer != AnswerScorer::kSubstring) {
    text += "Scorer: " + std::string(AnswerScorerName(settings.scorer)) +
            " (on the output's first line, SQuAD-normalized) where a task names none.\n\n";
  }
  return text;
}

std::string IsoNow() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

// --export-tasks: the generated instances as a task file, every line or none (a task the
// format cannot hold stops the export before the file is written).
int ExportTasks(const EvalOptions& o) {
  if (!o.tasks_file.empty()) {
    throw Error("--export-tasks writes generated tasks; --tasks names a task file already");
  }
  LoadedModel model = LoadedModel::Load(o.model_path);
  const std::vector<EvalTask> tasks = Generate(o, model);
  std::string text;
  for (const EvalTask& t : tasks) text += TaskFileLine(t) + "\n";
  std::ofstream out(o.export_tasks, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw Error("cannot write " + o.export_tasks);
  std::fprintf(stderr, "qevict eval: %zu generated tasks written to %s (seed %llu)\n",
               tasks.size(), o.export_tasks.c_str(),
               static_cast<unsigned long long>(o.grid.seed));
  return 0;
}

// --rescore: the rows in out_dir scored again against `tasks`, the summary and table with them.
int RescoreRun(const EvalOptions& o, const EvalSettings& settings,
               const std::vector<EvalTask>& tasks) {
  const std::string rows_path = o.out_dir + "/rows.jsonl";
  EarlierRows earlier = ReadEarlierRows(rows_path);
  if (earlier.rows.empty()) throw Error("--rescore: no rows in '" + rows_path + "'");
  if (earlier.torn_tail) {
    throw Error("--rescore: the last line of '" + rows_path +
                "' is cut short (a run stopped while writing it): finish the run with --resume "
                "first");
  }
  const RescoreCount count = RescoreRows(earlier.rows, tasks);
  std::vector<std::string> lines;
  lines.reserve(earlier.rows.size());
  for (const json& row : earlier.rows) lines.push_back(row.dump());
  RewriteRows(rows_path, lines);
  const json rescored = {{"command", o.command_line},
                         {"build", o.build},
                         {"at", IsoNow()},
                         {"rows", count.rows},
                         {"changed_rows", count.changed_rows},
                         {"changed_turns", count.changed_turns}};
  const std::string summary_path = o.out_dir + "/summary.json";
  if (std::filesystem::exists(summary_path)) {
    json summary;
    try {
      summary = json::parse(std::ifstream(summary_path));
    } catch (const json::exception& e) {
      throw Error("--rescore: cannot read '" + summary_path + "': " + e.what());
    }
    const json stats = SummarizeRows(earlier.rows);
    summary["format"] = stats["format"];
    summary["rows"] = earlier.rows.size();
    summary["cells"] = stats["cells"];
    summary["comparisons"] = stats["comparisons"];
    summary["rescored"] = rescored;
    std::ofstream(summary_path, std::ios::trunc) << summary.dump(1) << '\n';
    const std::string header = PromptStyleLine(settings);
    std::ofstream(o.out_dir + "/table.md", std::ios::trunc)
        << "<!-- " << summary.value("command", o.command_line) << " -->\n\n"
        << header << MarkdownTable(summary);
  }
  std::fprintf(stderr,
               "qevict eval: --rescore: %lld question rows (%lld turns) scored again in %s: "
               "%lld turns and %lld rows changed\n",
               static_cast<long long>(count.rows), static_cast<long long>(count.turns),
               rows_path.c_str(), static_cast<long long>(count.changed_turns),
               static_cast<long long>(count.changed_rows));
  return 0;
}

}  // namespace

int RunEval(const EvalOptions& o) {
  if (o.rescore && (o.overwrite || o.resume || !o.export_tasks.empty())) {
    throw Error("--rescore scores the rows already in --out again: it takes neither "
                "--overwrite, --resume nor --export-tasks");
  }
  if (!o.export_tasks.empty()) return ExportTasks(o);
  if (o.settings.budgets.empty()) {
    throw Error("--budgets: give at least one budget, e.g. --budgets 0.1,0.3");
  }
  for (double b : o.settings.budgets) {
    if (!(b > 0.0 && b <= 1.0)) {
      throw Error("--budgets: " + std::to_string(b) +
                  " is outside (0, 1]: give fractions of the fp16 cache, e.g. 0.1,0.3");
    }
  }
  for (const std::string& p : o.settings.policies) {
    ApplyPolicyVariant(o.settings.kv, p);  // names an unknown policy or option
  }
  const std::string rows_path = o.out_dir + "/rows.jsonl";
  if (!o.rescore) CheckEarlierRows(rows_path, o.overwrite, o.resume);
  const EarlierRows earlier = o.resume ? ReadEarlierRows(rows_path) : EarlierRows{};
  const auto start = std::chrono::steady_clock::now();
  const std::string started = IsoNow();
  LoadedModel model = LoadedModel::Load(o.model_path);
  EvalSettings settings = o.settings;
  settings.prompt_style = ResolvePromptStyle(model, o.settings.prompt_style);

  std::vector<EvalTask> tasks;
  int file_errors = 0;
  if (!o.tasks_file.empty()) {
    TaskFileResult parsed = ReadTaskFile(o.tasks_file);
    for (const TaskFileError& e : parsed.errors) {
      std::fprintf(stderr, "qevict: %s:%lld: %s (line skipped)\n", o.tasks_file.c_str(),
                   static_cast<long long>(e.line), e.message.c_str());
    }
    file_errors = static_cast<int>(parsed.errors.size());
    tasks = std::move(parsed.tasks);
    if (tasks.empty()) {
      throw Error("no valid task in '" + o.tasks_file +
                  "': every line was skipped (reasons above); fix them as docs/evaluation.md "
                  "(\"Task files\") describes");
    }
  } else {
    tasks = Generate(o, model);
  }

  // Instances that cannot fit the model's context are reported and skipped.
  const int64_t context = model.model->config().context_length;
  std::vector<EvalTask> runnable;
  std::vector<int64_t> sizes;
  json skipped = json::array();
  for (EvalTask& t : tasks) {
    std::string why;
    int64_t need = 0;
    try {
      need = InstanceTokens(model, t, settings.prompt_style, settings.protocol);
    } catch (const Error& e) {  // e.g. a task without a context under context-only
      why = e.what();
    }
    if (why.empty() && need > context) {
      why = "needs " + std::to_string(need) + " tokens, more than the context of " +
            std::to_string(context);
    }
    if (!why.empty()) {
      std::fprintf(stderr, "qevict: skipping task %s: %s\n", t.id.c_str(), why.c_str());
      skipped.push_back({{"id", t.id}, {"reason", why}});
      continue;
    }
    sizes.push_back(need);
    runnable.push_back(std::move(t));
  }
  if (o.rescore) return RescoreRun(o, settings, runnable);

  if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards) {
    throw Error("--shard " + std::to_string(o.shard) + "/" + std::to_string(o.shards) +
                ": need 0 <= K < N, e.g. --shard 0/2 and --shard 1/2");
  }
  if (o.shards > 1) {  // the block [K*n/N, (K+1)*n/N)
    const size_t n = runnable.size();
    const size_t first = n * o.shard / o.shards, last = n * (o.shard + 1) / o.shards;
    runnable = std::vector<EvalTask>(std::make_move_iterator(runnable.begin() + first),
                                     std::make_move_iterator(runnable.begin() + last));
    sizes = std::vector<int64_t>(sizes.begin() + first, sizes.begin() + last);
    std::fprintf(stderr, "qevict eval: shard %d/%d: instances %zu to %zu of %zu\n", o.shard,
                 o.shards, first, last, n);
  }

  // Every row of rows.jsonl, for the summary: the earlier ones kept (--resume), then this run's.
  std::vector<json> rows;
  const std::string model_name = ModelName(o.model_path);
  int64_t resumed = 0;
  std::filesystem::create_directories(o.out_dir);
  if (o.resume) {
    ResumePlan plan = PlanResume(earlier, runnable, settings, model_name, o.grid.seed);
    RewriteRows(rows_path, plan.kept_lines);
    std::vector<EvalTask> to_run;
    std::vector<int64_t> to_run_sizes;
    for (const size_t i : plan.to_run) {
      to_run.push_back(std::move(runnable[i]));
      to_run_sizes.push_back(sizes[i]);
    }
    runnable = std::move(to_run);
    sizes = std::move(to_run_sizes);
    rows = std::move(plan.kept_rows);
    resumed = plan.done;
    std::fprintf(stderr,
                 "qevict eval: --resume: %lld instances already have every row (%zu rows kept "
                 "in %s); %zu to run",
                 static_cast<long long>(plan.done), rows.size(), rows_path.c_str(),
                 runnable.size());
    if (plan.dropped > 0) {
      std::fprintf(stderr, "; %lld rows of unfinished instances dropped, they run again",
                   static_cast<long long>(plan.dropped));
    }
    if (earlier.torn_tail) std::fprintf(stderr, "; a torn last line dropped");
    std::fprintf(stderr, "\n");
    // Nothing left to run: the summary of the run that wrote the rows (its wall time, its
    // command) stays as it was.
    if (runnable.empty() && plan.dropped == 0 && !earlier.torn_tail &&
        std::filesystem::exists(o.out_dir + "/summary.json")) {
      std::fprintf(stderr, "qevict eval: --resume: nothing to run; %s/summary.json kept\n",
                   o.out_dir.c_str());
      return 0;
    }
  }

  int64_t compressed_rows = 0;  // per prefill mode
  for (const std::string& p : settings.policies) {
    if (p != "full") compressed_rows += static_cast<int64_t>(settings.budgets.size());
  }
  const auto rows_per_instance = static_cast<int64_t>(PlannedRows(settings).size());
  // Work estimate for the ETA: a prompt token costs about 1, a decoded token 6 (12 with a shadow).
  const double decode_weight = settings.shadow ? 12.0 : 6.0;
  double total_work = 0.0;
  std::vector<double> prefill_work, row_work, bounded_prefill_work;
  for (size_t i = 0; i < runnable.size(); ++i) {
    const double n = static_cast<double>(sizes[i]);
    const double prefill = n * (1.0 + n / 4096.0);  // attention grows with the prompt
    const double decode = runnable[i].kind == TaskKind::kPerplexity
                              ? static_cast<double>(runnable[i].scored_text.size()) / 4.0
                              : static_cast<double>(runnable[i].max_new_tokens) *
                                    std::max<size_t>(1, runnable[i].turns.size());
    prefill_work.push_back(prefill);
    // A bounded row reads the prompt itself, attending to a budget-sized cache.
    bounded_prefill_work.push_back(n * (1.0 + settings.kv.prefill_chunk / 4096.0));
    row_work.push_back(decode * decode_weight * (1.0 + n / 8192.0));
    total_work += prefill + row_work.back() * static_cast<double>(rows_per_instance) +
                  (settings.bounded ? bounded_prefill_work.back() * compressed_rows : 0.0);
  }

  std::ofstream rows_out(rows_path, o.resume ? std::ios::app : std::ios::trunc);
  if (!rows_out) throw Error("cannot write '" + rows_path + "'");
  const char* style = PromptStyleName(settings.prompt_style);
  std::fprintf(stderr, "qevict eval: %zu task instances x %lld rows each, %s prompts, %s -> %s\n",
               runnable.size(), static_cast<long long>(rows_per_instance), style,
               EvalProtocolName(settings.protocol), o.out_dir.c_str());

  ThreadPool pool(o.threads > 0 ? o.threads : ThreadPool::HardwareThreads());
  ProgressBar progress(total_work, o.progress);
  json failed = json::array();
  for (size_t i = 0; i < runnable.size(); ++i) {
    const EvalTask& task = runnable[i];
    progress.Advance(0.0, task.id + " (prefill)");
    bool first_row = true;
    try {
      RunInstance(model, pool, settings, task, [&](json row) {
        row["model"] = model_name;
        row["seed"] = o.grid.seed;  // also for task files: the run's --seed
        if (!o.build.empty()) row["build"] = o.build;
        rows_out << row.dump() << '\n';
        rows_out.flush();
        const bool bounded = row.value("prefill_mode", "") == "bounded";
        progress.Advance(row_work[i] + (first_row ? prefill_work[i] : 0.0) +
                             (bounded ? bounded_prefill_work[i] : 0.0),
                         task.id + " " + row["policy"].get<std::string>());
        first_row = false;
        rows.push_back(std::move(row));
      });
    } catch (const Error& e) {
      std::fprintf(stderr, "\nqevict: task %s failed: %s\n", task.id.c_str(), e.what());
      failed.push_back({{"id", task.id}, {"error", e.what()}});
    }
  }
  progress.Finish();
  if (!rows_out) throw Error("writing '" + rows_path + "' failed");

  const json stats = SummarizeRows(rows);
  json summary = {{"format", stats["format"]},
                  {"command", o.command_line},
                  {"build", o.build},
                  {"model", o.model_path},
                  {"started", started},
                  {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
                  {"threads", pool.size()},
                  {"seed", o.grid.seed},
                  {"tasks_file", o.tasks_file},
                  {"tasks", o.tasks_file.empty() ? json(o.grid.tasks) : json::array({"file"})},
                  {"lengths", o.grid.lengths},
                  {"depths", o.grid.depths},
                  {"samples", o.grid.samples},
                  {"policies", settings.policies},
                  {"budgets", settings.budgets},
                  {"shadow", settings.shadow},
                  {"prompt_style", style},
                  {"protocol", EvalProtocolName(settings.protocol)},
                  {"scorer", AnswerScorerName(settings.scorer)},
                  {"prefill_modes", settings.bounded && settings.prompt_end
                                        ? json::array({"bounded", "prompt-end"})
                                    : settings.bounded ? json::array({"bounded"})
                                                       : json::array({"prompt-end"})},
                  {"prefill_chunk", settings.bounded ? settings.kv.prefill_chunk : 0},
                  {"tag", settings.tag},
                  {"instances", runnable.size()},
                  {"resumed_instances", resumed},
                  {"shard", std::to_string(o.shard) + "/" + std::to_string(o.shards)},
                  {"rows", rows.size()},
                  {"task_file_errors", file_errors},
                  {"skipped", skipped},
                  {"failed", failed},
                  {"cells", stats["cells"]},
                  {"comparisons", stats["comparisons"]}};
  std::ofstream(o.out_dir + "/summary.json", std::ios::trunc) << summary.dump(1) << '\n';
  const std::string table = MarkdownTable(summary);
  const std::string header = PromptStyleLine(settings);
  std::ofstream(o.out_dir + "/table.md", std::ios::trunc)
      << "<!-- " << o.command_line << " -->\n\n" << header << table;
  std::printf("%s%s", header.c_str(), table.c_str());
  std::printf("rows: %s  summary: %s/summary.json  table: %s/table.md\n"
              "pictures: .venv/bin/python scripts/plot_eval.py %s\n",
              rows_path.c_str(), o.out_dir.c_str(), o.out_dir.c_str(), o.out_dir.c_str());
  return failed.empty() ? 0 : 1;
}

}  // namespace qevict
