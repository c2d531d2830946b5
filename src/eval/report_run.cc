#include "eval/report_run.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "eval/eval_report.h"
#include "eval/eval_rows.h"
#include "util/error.h"

namespace qevict {

using nlohmann::json;

Report BuildReport(const ReportOptions& o) {
  if (o.inputs.empty()) throw Error("report: give at least one rows.jsonl, rows.jsonl.gz or directory");
  MergedRows merged;
  for (const std::string& input : o.inputs) merged.Add(ReadRowsInput(input));
  const json stats = SummarizeRows(merged);
  Report report;
  report.summary = {{"format", stats["format"]},
                    {"command", o.command_line},
                    {"sources", o.inputs},
                    {"rows", merged.rows.size()},
                    {"replaced", merged.replaced},
                    {"cells", stats["cells"]},
                    {"comparisons", stats["comparisons"]}};
  report.table = MarkdownTable(report.summary);
  return report;
}

int RunReport(const ReportOptions& o) {
  const Report report = BuildReport(o);
  const int64_t rows = report.summary["rows"], replaced = report.summary["replaced"];
  std::fprintf(stderr, "qevict report: %lld row%s from %zu input%s", static_cast<long long>(rows),
               rows == 1 ? "" : "s", o.inputs.size(), o.inputs.size() == 1 ? "" : "s");
  if (replaced > 0) {
    std::fprintf(stderr, "; %lld replaced by later rows of the same model, seed, id, policy, "
                 "budget, prefill mode, prompt style, protocol and scorer", static_cast<long long>(replaced));
  }
  std::fprintf(stderr, "\n");
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    const std::string summary_path = o.out_dir + "/summary.json";
    const std::string table_path = o.out_dir + "/table.md";
    std::ofstream summary(summary_path, std::ios::trunc);
    summary << report.summary.dump(1) << '\n';
    std::ofstream table(table_path, std::ios::trunc);
    table << "<!-- " << o.command_line << " -->\n\n" << report.table;
    if (!summary || !table) {
      throw Error("cannot write '" + o.out_dir + "': give -o a directory you can write to");
    }
  }
  std::printf("%s", report.table.c_str());
  if (!o.out_dir.empty()) {
    std::printf("summary: %s/summary.json  table: %s/table.md\n", o.out_dir.c_str(),
                o.out_dir.c_str());
  }
  return 0;
}

}  // namespace qevict
