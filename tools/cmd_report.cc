// `qevict report`: the summary and tables of saved evaluation rows (src/eval/report_run.h).
#include "eval/report_run.h"
#include "tools/commands.h"

namespace qevict::cli {

std::function<int()> RegisterReport(CLI::App& app) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report", "summary (means, 95% intervals, paired comparisons) and tables of saved eval "
                "rows; rows of several runs are merged (docs/evaluation.md)");
  cmd->add_option("inputs", options->inputs,
                  "rows.jsonl, rows.jsonl.gz, or a directory holding one of them")
      ->required();
  cmd->add_option("-o,--out", options->out_dir,
                  "write DIR/summary.json and DIR/table.md (default: only print the table)");
  return [options] {
    options->command_line = CommandLine();
    return RunReport(*options);
  };
}

}  // namespace qevict::cli
