#include "eval/eval_rows.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "util/error.h"

namespace qevict {
namespace {

using nlohmann::json;

std::string Str(const json& row, const char* key) {
  const auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A directory stands for the rows file it holds.
std::string RowsPath(const std::string& input) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(input, ec)) {
    throw Error("cannot open '" + input +
                "': no such file or directory; give the --out directory of an eval run or its "
                "rows.jsonl");
  }
  if (!fs::is_directory(input, ec)) return input;
  const std::string plain = (fs::path(input) / "rows.jsonl").string();
  const std::string gz = plain + ".gz";
  const bool has_plain = fs::exists(plain, ec), has_gz = fs::exists(gz, ec);
  if (has_plain && has_gz) {
    throw Error("'" + input + "' holds both rows.jsonl and rows.jsonl.gz: name the one to read");
  }
  if (!has_plain && !has_gz) {
    throw Error("'" + input +
                "' holds no rows.jsonl or rows.jsonl.gz: give the --out directory of an eval run");
  }
  return has_plain ? plain : gz;
}

// "[json.exception.parse_error.101] parse error at ..." -> "parse error at ...".
std::string JsonMessage(const std::exception& e) {
  const std::string what = e.what();
  const size_t at = what.find("] ");
  return at == std::string::npos ? what : what.substr(at + 2);
}

}  // namespace

json ParseRowLine(const std::string& line, std::string& why) {
  json row;
  try {
    row = json::parse(line);
  } catch (const json::exception& e) {
    why = "not JSON: " + JsonMessage(e);
    return nullptr;
  }
  if (!row.is_object()) {
    why = "not a row: a JSON object per line expected";
    return nullptr;
  }
  for (const char* key : {"task", "id", "policy"}) {
    if (!row.contains(key) || !row[key].is_string()) {
      why = std::string("not a row: no string \"") + key + "\"";
      return nullptr;
    }
  }
  if (!row.contains("budget") || !row["budget"].is_number()) {
    why = "not a row: no number \"budget\"";
    return nullptr;
  }
  return row;
}

RowFields ReadRowFields(const json& row) {
  RowFields f;
  f.model = Str(row, "model");
  if (row.contains("seed") && row["seed"].is_number()) f.seed = row["seed"];
  f.task = Str(row, "task");
  f.id = Str(row, "id");
  f.kind = Str(row, "kind");
  f.policy = Str(row, "policy");
  f.prefill_mode = Str(row, "prefill_mode");
  if (f.prefill_mode.empty()) f.prefill_mode = IsFullPolicy(f.policy) ? "full" : "prompt-end";
  f.prompt_style = Str(row, "prompt_style");
  if (f.prompt_style.empty()) f.prompt_style = "chat";
  f.protocol = Str(row, "protocol");
  if (f.protocol.empty()) f.protocol = "question-in-prompt";
  f.scorer = Str(row, "scorer");
  if (f.scorer.empty()) f.scorer = "substring";
  if (row.contains("budget") && row["budget"].is_number()) f.budget = row["budget"].get<double>();
  f.budget_scope = Str(row, "budget_scope");
  if (f.budget_scope.empty()) f.budget_scope = "all";
  if (row.contains("target_tokens") && row["target_tokens"].is_number()) {
    const auto tokens = static_cast<int64_t>(row["target_tokens"].get<double>());
    if (tokens > 0) f.length = tokens;
  }
  if (row.contains("depth") && row["depth"].is_number()) f.depth = row["depth"].get<double>();
  f.infeasible = row.contains("infeasible") && row["infeasible"].is_boolean() &&
                 row["infeasible"].get<bool>();
  return f;
}

std::string RowConditions(const RowFields& f) {
  return f.prompt_style + '\x1f' + f.protocol + '\x1f' + f.scorer;
}

std::string RowKey(const RowFields& f) {
  return f.model + '\x1f' + f.seed.dump() + '\x1f' + f.id + '\x1f' + f.policy + '\x1f' +
         json(f.budget).dump() + (f.budget_scope == "global" ? " global" : "") + '\x1f' +
         f.prefill_mode + '\x1f' + RowConditions(f);
}

bool IsFullPolicy(const std::string& policy) {
  return policy == "full" || policy.starts_with("full[");
}

std::string PolicyFamily(const std::string& policy) {
  std::string family = policy.substr(0, policy.find_first_of(":["));
  if (family.starts_with("qevict-")) family = "qevict";
  return family;
}

std::string ModelName(const std::string& model_path) {
  std::string name = std::filesystem::path(model_path).filename().string();
  if (name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

std::vector<json> ReadRowsInput(const std::string& input) {
  const std::string path = RowsPath(input);
  errno = 0;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) {
    throw Error("cannot open '" + path + "': " + (errno != 0 ? std::strerror(errno) : "gzopen failed"));
  }
  // gzread reads gzip streams and plain files alike.
  std::vector<json> rows;
  std::string pending;
  int64_t line_number = 0;
  auto take_line = [&](std::string line) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    std::string why;
    json row = ParseRowLine(line, why);
    if (row.is_null()) throw Error(path + ":" + std::to_string(line_number) + ": " + why);
    rows.push_back(std::move(row));
  };
  char buffer[1 << 16];
  for (;;) {
    const int got = gzread(file.get(), buffer, sizeof buffer);
    if (got < 0) {
      int code = 0;
      throw Error("cannot read '" + path + "': " + gzerror(file.get(), &code));
    }
    if (got == 0) break;
    pending.append(buffer, static_cast<size_t>(got));
    size_t start = 0;
    for (size_t end; (end = pending.find('\n', start)) != std::string::npos; start = end + 1) {
      take_line(pending.substr(start, end - start));
    }
    pending.erase(0, start);
  }
  int code = 0;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK) throw Error("cannot read '" + path + "': " + message);
  if (!pending.empty()) take_line(pending);
  if (rows.empty()) {
    throw Error("'" + path + "' holds no row: give the rows.jsonl that `qevict eval` wrote");
  }
  return rows;
}

void MergedRows::Add(std::vector<json> more) {
  const int source = inputs_++;
  for (json& row : more) {
    const RowFields f = ReadRowFields(row);
    const auto [it, fresh] = index_.emplace(RowKey(f), rows.size());
    if (fresh) {
      rows.push_back(std::move(row));
      sources.push_back(source);
      continue;
    }
    if (f.prefill_mode == "full" && sources[it->second] != source) {
      earlier_full.push_back({std::move(rows[it->second]), sources[it->second]});
    }
    rows[it->second] = std::move(row);
    sources[it->second] = source;
    ++replaced;
  }
}

}  // namespace qevict
