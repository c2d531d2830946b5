// Task-file parser (task_file.h). Lines are split by hand; each line goes through nlohmann's SAX
// parser with a handler that fills the EvalTask as the events come and checks the schema on the
// way, so no JSON document is built: memory stays proportional to the strings kept, and nesting
// depth costs the parser one bit per level (100,000 '[' are a plain syntax error, no recursion).
// JSON syntax errors (invalid UTF-8 included: nlohmann's lexer rejects it) take precedence over
// schema errors; after the first schema error the handler only lets the parser finish checking
// the syntax. Messages never quote more than a short, escaped excerpt of the input.
#include "eval/task_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/answer_match.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace qevict {
namespace {

using json = nlohmann::json;

constexpr int kDefaultMaxNewTokens = 32;

bool IsInvalid(const unicode::DecodedChar& c) { return c.cp == 0xFFFD && c.length == 1; }

bool IsValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(s, pos);
    if (IsInvalid(c)) return false;
    pos += c.length;
  }
  return true;
}

// `s` for a message: valid UTF-8 whatever the input (invalid bytes and controls as \xNN; with
// `quoted`, quotes and backslashes escaped too), at most about max_bytes of it, "..." where cut.
std::string Escape(std::string_view s, size_t max_bytes, bool quoted = false) {
  std::string out;
  out.reserve(std::min(s.size(), max_bytes) + 8);
  for (size_t pos = 0; pos < s.size();) {
    if (pos >= max_bytes) {
      out += "...";
      break;
    }
    const auto byte = static_cast<unsigned char>(s[pos]);
    if (byte >= 0x20 && byte < 0x7F) {  // printable ASCII, the common case
      if (quoted && (byte == '"' || byte == '\\')) out += '\\';
      out += static_cast<char>(byte);
      ++pos;
      continue;
    }
    const unicode::DecodedChar c = unicode::DecodeUtf8(s, pos);
    if (IsInvalid(c) || c.cp < 0x20 || c.cp == 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(s[pos]));
      out += hex;
    } else {
      out.append(s.substr(pos, c.length));
    }
    pos += c.length;
  }
  return out;
}

std::string Quote(std::string_view s, size_t max_bytes = 60) {
  return '"' + Escape(s, max_bytes, /*quoted=*/true) + '"';
}

// Quote of the last max_bytes of s (where a lexer error is).
std::string QuoteTail(std::string_view s, size_t max_bytes = 40) {
  if (s.size() <= max_bytes) return Quote(s, max_bytes);
  return "..." + Quote(s.substr(s.size() - max_bytes), max_bytes);
}

// Only the whitespace NormalizeForMatch removes (answer_match.h), or nothing.
bool IsBlank(std::string_view text) {
  for (const char c : text) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') return false;
  }
  return true;
}

bool HasControl(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return true;
  }
  return false;
}

// What a line must hold, said after a missing or empty key.
constexpr const char* kTaskShape =
    " (a task is {\"id\": ..., \"context\": ..., \"turns\": [...]}; docs/evaluation.md, "
    "\"Task files\")";
constexpr const char* kTurnShape =
    " (a turn is {\"question\": ..., \"answers\": [...]}; docs/evaluation.md, \"Task files\")";

// nlohmann's parse error without its "[json.exception...] parse error at line 1, column N: "
// prefix, with the token it quotes ("last read") shortened and escaped.
std::string JsonErrorMessage(size_t position, const std::string& last_token, const char* what) {
  std::string_view text = what;
  if (text.find("ill-formed UTF-8") != std::string_view::npos) {
    return "invalid UTF-8 at byte " + std::to_string(position) + " (JSON strings must be UTF-8)";
  }
  if (const size_t syntax = text.find("syntax error"); syntax != std::string_view::npos) {
    text.remove_prefix(syntax);
  } else if (text.starts_with("[json.exception.")) {
    if (const size_t close = text.find("] "); close != std::string_view::npos) {
      text.remove_prefix(close + 2);
    }
  }
  std::string reason;
  static constexpr std::string_view kLastRead = "; last read: '";
  const size_t last_read = text.find(kLastRead);
  if (last_read == std::string_view::npos) {
    reason = Escape(text, 200);
  } else {
    // What follows the quoted token (e.g. "; expected string literal") is nlohmann's own text.
    const size_t after = last_read + kLastRead.size() + last_token.size() + 1;
    reason = Escape(text.substr(0, last_read), 200) + "; last read: " + QuoteTail(last_token);
    if (after < text.size()) reason += Escape(text.substr(after), 80);
  }
  return "invalid JSON at byte " + std::to_string(position) + ": " + reason;
}

enum class Field {
  kNone, kId, kContext, kTurns, kMaxNewTokens, kScorer, kQuestion, kAnswers, kAnswerPrefix,
  kScoring
};
enum class Scope { kTask, kTurns, kTurn, kAnswers };
enum class Kind { kString, kInteger, kObject, kArray, kNumber, kBool, kNull, kBinary };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kString: return "a string";
    case Kind::kInteger: return "an integer";
    case Kind::kObject: return "an object";
    case Kind::kArray: return "an array";
    case Kind::kNumber: return "a number with a fraction or exponent";
    case Kind::kBool: return "a boolean";
    case Kind::kNull: return "null";
    case Kind::kBinary: return "binary data";
  }
  return "?";
}

// Builds one task from the SAX events of one line.
class TaskLineHandler final : public json::json_sax_t {
 public:
  explicit TaskLineHandler(const TaskFileLimits& limits) : limits_(limits) {
    task_.task = "file";
    task_.kind = TaskKind::kQuestions;
    task_.max_new_tokens = kDefaultMaxNewTokens;
  }

  // After sax_parse: the error for the line, empty when the task is good.
  std::string Error() const { return !json_error_.empty() ? json_error_ : schema_error_; }
  EvalTask& task() { return task_; }

  bool null() override { return Scalar(Kind::kNull); }
  bool boolean(bool) override { return Scalar(Kind::kBool); }
  bool number_integer(number_integer_t v) override { return Integer(v, std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    return Integer(static_cast<int64_t>(v > kMax ? kMax : v), std::to_string(v));
  }
  bool number_float(number_float_t, const string_t&) override { return Scalar(Kind::kNumber); }
  bool binary(binary_t&) override { return Scalar(Kind::kBinary); }

  bool string(string_t& value) override {
    if (!Expect(Kind::kString)) return true;
    if (!IsValidUtf8(value)) return Fail(Path() + ": invalid UTF-8");
    if (scope_.back() == Scope::kAnswers) {
      EvalTurn& turn = task_.turns.back();
      if (value.empty()) return Fail(Path() + ": must not be empty");
      if (IsBlank(value)) return Fail(Path() + ": only whitespace (it could never match)");
      if (static_cast<int64_t>(turn.answers.size()) >= limits_.max_answers) {
        return Fail(TurnPath() + ".answers: more than " + std::to_string(limits_.max_answers) +
                    " answers");
      }
      turn.answers.push_back(std::move(value));
      return true;
    }
    switch (field_) {
      case Field::kId:
        if (value.empty()) return Fail("id: must not be empty");
        if (HasControl(value)) return Fail("id: must not contain control characters");
        if (value.size() > kTaskIdMaxBytes) {
          return Fail("id: " + std::to_string(value.size()) + " bytes, over the limit of " +
                      std::to_string(kTaskIdMaxBytes));
        }
        task_.id = std::move(value);
        return true;
      case Field::kContext:
        task_.context = std::move(value);
        return true;
      case Field::kQuestion:
        if (value.empty()) return Fail(Path() + ": must not be empty");
        task_.turns.back().question = std::move(value);
        return true;
      case Field::kAnswerPrefix:
        if (static_cast<int64_t>(value.size()) > limits_.max_answer_prefix_bytes) {
          return Fail(Path() + ": " + std::to_string(value.size()) +
                      " bytes, over the limit of " +
                      std::to_string(limits_.max_answer_prefix_bytes));
        }
        task_.turns.back().answer_prefix = std::move(value);
        return true;
      case Field::kScoring:
        if (const std::optional<TurnScoring> scoring = ParseTurnScoring(value)) {
          task_.turns.back().scoring = *scoring;
          return true;
        }
        return Fail(Path() + ": " + Quote(value) + " is not one of \"any\", \"all\", \"share\"");
      case Field::kScorer:
        if (const std::optional<AnswerScorer> scorer = ParseAnswerScorer(value)) {
          task_.scorer = *scorer;
          return true;
        }
        return Fail("scorer: " + Quote(value) + " is not one of \"substring\", \"exact\", \"f1\"");
      default:
        return Fail(Path() + ": unexpected string");  // unreachable: Expect checked the place
    }
  }

  bool start_object(std::size_t) override {
    if (failed()) return true;
    if (scope_.empty()) {
      scope_.push_back(Scope::kTask);
      field_ = Field::kNone;
      seen_ = 0;
      return true;
    }
    if (!Expect(Kind::kObject)) return true;
    // Only a turn is an object below the top (Expect checked we are in "turns").
    if (static_cast<int64_t>(task_.turns.size()) >= limits_.max_turns) {
      return Fail("turns: more than " + std::to_string(limits_.max_turns) + " turns");
    }
    task_.turns.emplace_back();
    scope_.push_back(Scope::kTurn);
    field_ = Field::kNone;
    turn_seen_ = 0;
    return true;
  }

  bool key(string_t& name) override {
    if (failed()) return true;
    const bool in_task = scope_.back() == Scope::kTask;
    using KeyField = std::pair<std::string_view, Field>;
    static constexpr KeyField kTaskKeys[] = {
        {"id", Field::kId},
        {"context", Field::kContext},
        {"turns", Field::kTurns},
        {"max_new_tokens", Field::kMaxNewTokens},
        {"scorer", Field::kScorer}};
    static constexpr KeyField kTurnKeys[] = {{"question", Field::kQuestion},
                                             {"answers", Field::kAnswers},
                                             {"answer_prefix", Field::kAnswerPrefix},
                                             {"scoring", Field::kScoring}};
    const std::string where = in_task ? "" : TurnPath() + ": ";
    unsigned& seen = in_task ? seen_ : turn_seen_;
    unsigned bit = 1;
    const std::span<const KeyField> keys = in_task ? std::span<const KeyField>(kTaskKeys)
                                                   : std::span<const KeyField>(kTurnKeys);
    for (const auto& [known, field] : keys) {
      if (name == known) {
        if (seen & bit) return Fail(where + "duplicate key " + Quote(name));
        seen |= bit;
        field_ = field;
        return true;
      }
      bit <<= 1;
    }
    return Fail(where + "unknown key " + Quote(name) +
                (in_task ? " (expected id, context, turns, max_new_tokens, scorer)"
                         : " (expected question, answers, answer_prefix, scoring)"));
  }

  bool end_object() override {
    if (failed()) return true;
    if (scope_.back() == Scope::kTurn) {
      if (!(turn_seen_ & 1)) return Fail(TurnPath() + ": missing key \"question\"" + kTurnShape);
      if (!(turn_seen_ & 2)) return Fail(TurnPath() + ": missing key \"answers\"" + kTurnShape);
    } else {
      if (!(seen_ & 1)) return Fail("missing key \"id\"" + std::string(kTaskShape));
      if (!(seen_ & 2)) return Fail("missing key \"context\"" + std::string(kTaskShape));
      if (!(seen_ & 4)) return Fail("missing key \"turns\"" + std::string(kTaskShape));
    }
    scope_.pop_back();
    return true;
  }

  bool start_array(std::size_t) override {
    if (!Expect(Kind::kArray)) return true;
    scope_.push_back(scope_.back() == Scope::kTask ? Scope::kTurns : Scope::kAnswers);
    return true;
  }

  bool end_array() override {
    if (failed()) return true;
    if (scope_.back() == Scope::kTurns && task_.turns.empty()) {
      return Fail(std::string("turns: must not be empty") + kTurnShape);
    }
    if (scope_.back() == Scope::kAnswers && task_.turns.back().answers.empty()) {
      return Fail(TurnPath() + ".answers: must not be empty");
    }
    scope_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string& last_token,
                   const json::exception& ex) override {
    json_error_ = JsonErrorMessage(position, last_token, ex.what());
    return false;
  }

 private:
  bool failed() const { return !schema_error_.empty(); }

  // Records the first schema error; parsing goes on to check the syntax only.
  bool Fail(std::string message) {
    if (schema_error_.empty()) schema_error_ = std::move(message);
    return true;
  }

  std::string TurnPath() const { return "turns[" + std::to_string(task_.turns.size() - 1) + "]"; }

  // The place the next value goes, for messages.
  std::string Path() const {
    switch (scope_.back()) {
      case Scope::kTurns: return "turns[" + std::to_string(task_.turns.size()) + "]";
      case Scope::kAnswers:
        return TurnPath() + ".answers[" + std::to_string(task_.turns.back().answers.size()) + "]";
      case Scope::kTurn:
        switch (field_) {
          case Field::kQuestion: return TurnPath() + ".question";
          case Field::kAnswerPrefix: return TurnPath() + ".answer_prefix";
          case Field::kScoring: return TurnPath() + ".scoring";
          default: return TurnPath() + ".answers";
        }
      case Scope::kTask: break;
    }
    switch (field_) {
      case Field::kId: return "id";
      case Field::kContext: return "context";
      case Field::kTurns: return "turns";
      case Field::kMaxNewTokens: return "max_new_tokens";
      case Field::kScorer: return "scorer";
      default: return "?";
    }
  }

  Kind Expected() const {
    switch (scope_.back()) {
      case Scope::kTurns: return Kind::kObject;
      case Scope::kAnswers: return Kind::kString;
      case Scope::kTurn: return field_ == Field::kAnswers ? Kind::kArray : Kind::kString;
      case Scope::kTask: break;
    }
    switch (field_) {
      case Field::kTurns: return Kind::kArray;
      case Field::kMaxNewTokens: return Kind::kInteger;
      default: return Kind::kString;
    }
  }

  // Whether a value of kind `got` may come here (false after an error, or records one).
  bool Expect(Kind got) {
    if (failed()) return false;
    if (scope_.empty()) {
      Fail(std::string("the line is not a JSON object (it is ") + KindName(got) + ")");
      return false;
    }
    const Kind want = Expected();
    if (got != want) {
      Fail(Path() + ": expected " + KindName(want) + ", got " + KindName(got));
      return false;
    }
    return true;
  }

  bool Scalar(Kind got) {
    Expect(got);  // no scalar is ever expected except strings and integers, handled elsewhere
    return true;
  }

  // `value` is clamped to int64_t; `text` is the number as written.
  bool Integer(int64_t value, const std::string& text) {
    if (!Expect(Kind::kInteger)) return true;
    if (value < 1 || value > limits_.max_new_tokens) {
      return Fail("max_new_tokens: " + text + " is outside [1, " +
                  std::to_string(limits_.max_new_tokens) + "]");
    }
    task_.max_new_tokens = static_cast<int>(value);
    return true;
  }

  const TaskFileLimits& limits_;
  EvalTask task_;
  std::vector<Scope> scope_;  // at most 4 deep: task, turns, turn, answers
  Field field_ = Field::kNone;
  unsigned seen_ = 0;       // bits: id, context, turns, max_new_tokens, scorer
  unsigned turn_seen_ = 0;  // bits: question, answers, answer_prefix, scoring
  std::string schema_error_;
  std::string json_error_;
};

// Collects errors up to limits.max_errors; the rest are counted in one last error.
class ErrorList {
 public:
  ErrorList(std::vector<TaskFileError>* errors, int64_t max_errors)
      : errors_(errors), max_(max_errors < 0 ? 0 : max_errors) {}

  void Add(int64_t line, std::string message) {
    if (static_cast<int64_t>(errors_->size()) < max_) {
      errors_->push_back({line, std::move(message)});
      return;
    }
    if (suppressed_++ == 0) first_suppressed_line_ = line;
  }

  void Finish() {
    if (suppressed_ == 0) return;
    errors_->push_back({first_suppressed_line_, std::to_string(suppressed_) +
                                                    " more errors, from this line on, not listed"});
  }

 private:
  std::vector<TaskFileError>* errors_;
  int64_t max_;
  int64_t suppressed_ = 0;
  int64_t first_suppressed_line_ = 0;
};

}  // namespace

TaskFileResult ParseTaskFile(std::string_view bytes, const TaskFileLimits& limits) {
  TaskFileResult result;
  ErrorList errors(&result.errors, limits.max_errors);
  if (static_cast<int64_t>(bytes.size()) > limits.max_file_bytes) {
    errors.Add(0, "the file is " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                      std::to_string(limits.max_file_bytes));
    errors.Finish();
    return result;
  }
  if (bytes.starts_with("\xEF\xBB\xBF")) bytes.remove_prefix(3);

  std::unordered_map<std::string, int64_t> id_lines;  // accepted id -> its line
  int64_t line_number = 0;
  for (size_t pos = 0; pos < bytes.size();) {
    ++line_number;
    const size_t end = bytes.find('\n', pos);
    std::string_view line = bytes.substr(pos, end == std::string_view::npos ? end : end - pos);
    pos = end == std::string_view::npos ? bytes.size() : end + 1;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (IsBlank(line)) continue;

    if (static_cast<int64_t>(result.tasks.size()) >= limits.max_tasks) {
      errors.Add(line_number, "over the limit of " + std::to_string(limits.max_tasks) +
                                  " tasks: this line and the rest of the file are ignored");
      break;
    }
    if (static_cast<int64_t>(line.size()) > limits.max_line_bytes) {
      errors.Add(line_number, "the line is " + std::to_string(line.size()) +
                                  " bytes, over the limit of " +
                                  std::to_string(limits.max_line_bytes));
      continue;
    }
    try {
      TaskLineHandler handler(limits);
      json::sax_parse(line.begin(), line.end(), &handler);
      std::string error = handler.Error();
      if (!error.empty()) {
        errors.Add(line_number, std::move(error));
        continue;
      }
      EvalTask& task = handler.task();
      const auto [it, inserted] = id_lines.emplace(task.id, line_number);
      if (!inserted) {
        errors.Add(line_number, "duplicate id " + Quote(task.id) + " (first used on line " +
                                    std::to_string(it->second) + ")");
        continue;
      }
      result.tasks.push_back(std::move(task));
    } catch (const std::exception& e) {
      // Not expected from any content (the handler and the SAX parser report through
      // parse_error); kept so that nothing escapes, std::bad_alloc included.
      errors.Add(line_number, "cannot parse the line: " + Quote(e.what(), 200));
    }
  }
  errors.Finish();
  return result;
}

TaskFileResult ReadTaskFile(const std::string& path, const TaskFileLimits& limits) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    throw Error("task file " + path + " does not exist: check the path given to --tasks");
  }
  if (ec) throw Error("cannot read task file " + path + ": " + ec.message());
  if (fs::is_directory(status)) {
    throw Error("task file " + path + " is a directory: give --tasks one .jsonl file in it");
  }
  const auto too_large = [&](uintmax_t size) {
    return Error("task file " + path + " is " + std::to_string(size) +
                 " bytes, over the limit of " + std::to_string(limits.max_file_bytes) +
                 ": split it into smaller files and run each");
  };
  const uintmax_t limit = limits.max_file_bytes < 0 ? 0 : limits.max_file_bytes;
  std::string bytes;
  if (fs::is_regular_file(status)) {
    const uintmax_t size = fs::file_size(path, ec);
    if (ec) throw Error("cannot read task file " + path + ": " + ec.message());
    if (size > limit) throw too_large(size);
    bytes.reserve(size);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot open task file " + path + ": " + std::strerror(errno) +
                "; check its permissions");
  }
  // Read in chunks and stop past the limit: a pipe or a file that grew has no size to check first.
  std::vector<char> chunk(1 << 20);
  for (;;) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(in.gcount());
    bytes.append(chunk.data(), got);
    if (bytes.size() > limit) throw too_large(bytes.size());
    if (got < chunk.size()) break;
  }
  if (in.bad()) throw Error("error reading task file " + path);
  return ParseTaskFile(bytes, limits);
}

std::string TaskFileLine(const EvalTask& task) {
  const TaskFileLimits limits;
  const auto refusal = [&](const std::string& why) {
    return Error("task " + Quote(task.id) + " cannot be written as a task-file line: " + why);
  };
  if (task.kind != TaskKind::kQuestions) {
    throw refusal("only question tasks (a context and its turns) have a task-file form");
  }
  if (task.id.empty() || task.id.size() > kTaskIdMaxBytes || HasControl(task.id)) {
    throw refusal("its id must be 1 to " + std::to_string(kTaskIdMaxBytes) +
                  " bytes without control characters");
  }
  if (task.turns.empty() || task.turns.size() > static_cast<size_t>(limits.max_turns)) {
    throw refusal("it needs 1 to " + std::to_string(limits.max_turns) + " turns");
  }
  if (task.max_new_tokens < 1 || task.max_new_tokens > limits.max_new_tokens) {
    throw refusal("max_new_tokens must be in [1, " + std::to_string(limits.max_new_tokens) + "]");
  }
  json turns = json::array();
  for (const EvalTurn& turn : task.turns) {
    if (turn.question.empty()) throw refusal("a turn has an empty question");
    if (turn.answers.empty() || turn.answers.size() > static_cast<size_t>(limits.max_answers)) {
      throw refusal("a turn needs 1 to " + std::to_string(limits.max_answers) + " answers");
    }
    if (std::any_of(turn.answers.begin(), turn.answers.end(), IsBlank)) {
      throw refusal("a turn has a blank answer");
    }
    if (turn.answer_prefix.size() > static_cast<size_t>(limits.max_answer_prefix_bytes)) {
      throw refusal("an answer prefix is over " + std::to_string(limits.max_answer_prefix_bytes) +
                    " bytes");
    }
    json t = {{"question", turn.question}, {"answers", turn.answers}};
    if (!turn.answer_prefix.empty()) t["answer_prefix"] = turn.answer_prefix;
    if (turn.scoring != TurnScoring::kAny) t["scoring"] = TurnScoringName(turn.scoring);
    turns.push_back(std::move(t));
  }
  json line = {{"id", task.id}, {"context", task.context}, {"turns", std::move(turns)}};
  if (task.max_new_tokens != kDefaultMaxNewTokens) line["max_new_tokens"] = task.max_new_tokens;
  if (task.scorer) line["scorer"] = AnswerScorerName(*task.scorer);
  // Invalid UTF-8 cannot be written as JSON text (the parser rejects it anyway).
  try {
    return line.dump();
  } catch (const json::exception&) {
    throw refusal("it holds text that is not valid UTF-8");
  }
}

}  // namespace qevict
