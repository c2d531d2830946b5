// The task registry and the grid expansion with validation (see task_generators.h); the
// generators themselves live in task_<name>.cc.
#include "eval/task_generators.h"

#include <cmath>
#include <set>
#include <string_view>

#include "eval/task_util.h"
#include "util/error.h"

namespace qevict {
namespace {

using eval_internal::TaskGenerator;
using eval_internal::TaskInstance;

struct TaskInfo {
  std::string_view name;
  bool uses_lengths;
  bool uses_depths;
  TaskGenerator generate;
  int turns = 1;  // questions asked in one session (GeneratedTaskTurns)
};

constexpr TaskInfo kTasks[] = {
    {"passkey", true, true, eval_internal::GeneratePasskey},
    {"niah", true, true, eval_internal::GenerateNiah},
    {"multikey", true, true, eval_internal::GenerateMultikey},
    {"vt", true, false, eval_internal::GenerateVt},
    {"drift", true, false, eval_internal::GenerateDrift, 4},
    {"longgen", false, false, eval_internal::GenerateLongGen},
    {"ppl", true, false, eval_internal::GeneratePpl},
    {"multivalue", true, true, eval_internal::GenerateMultivalue},
    {"multiquery", true, true, eval_internal::GenerateMultiquery},
    {"cwe", true, false, eval_internal::GenerateCwe},
    {"fwe", true, false, eval_internal::GenerateFwe},
    {"scbench", true, false, eval_internal::GenerateScbench, 5},
    {"twofacts", true, false, eval_internal::GenerateTwoFacts, 2},
};

constexpr int64_t kMinLength = 256;
constexpr int64_t kMaxLength = 1000000;
constexpr int kMaxSamples = 1000;

std::string KnownTasks() {
  std::string s;
  for (const TaskInfo& t : kTasks) s += (s.empty() ? "" : " ") + std::string(t.name);
  return s;
}

const TaskInfo* FindTask(std::string_view name) {
  for (const TaskInfo& t : kTasks) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// "0.50", "0.125", ...: at least two decimals, more when needed (up to six).
std::string FormatDepth(double depth) {
  int decimals = 2;
  long long scale = 100;
  while (decimals < 6 && std::fabs(std::round(depth * scale) / scale - depth) > 1e-9) {
    ++decimals;
    scale *= 10;
  }
  const long long scaled = std::llround(depth * scale);
  std::string frac = std::to_string(scaled % scale);
  frac.insert(0, decimals - frac.size(), '0');
  return std::to_string(scaled / scale) + "." + frac;
}

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "nan";
  std::string s = std::to_string(v);  // fixed, six decimals
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

void Validate(const TaskGrid& grid, std::vector<const TaskInfo*>& infos) {
  if (grid.tasks.empty()) {
    throw Error("no evaluation tasks given: list some with --tasks (known: " + KnownTasks() + ")");
  }
  std::set<std::string> seen;
  bool need_lengths = false, need_depths = false;
  for (const std::string& name : grid.tasks) {
    const TaskInfo* info = FindTask(name);
    if (info == nullptr) {
      throw Error("unknown evaluation task '" + name + "' (known: " + KnownTasks() + ")");
    }
    if (!seen.insert(name).second) {
      throw Error("--tasks: evaluation task '" + name + "' listed twice; give each once");
    }
    need_lengths |= info->uses_lengths;
    need_depths |= info->uses_depths;
    infos.push_back(info);
  }
  std::set<int64_t> lengths;
  for (int64_t length : grid.lengths) {
    if (length < kMinLength || length > kMaxLength) {
      throw Error("--lengths: context length " + std::to_string(length) + " is out of range [" +
                  std::to_string(kMinLength) + ", " + std::to_string(kMaxLength) + "]");
    }
    if (!lengths.insert(length).second) {
      throw Error("--lengths: context length " + std::to_string(length) +
                  " listed twice; give each once");
    }
  }
  std::set<std::string> depths;
  for (double depth : grid.depths) {
    if (!(depth >= 0.0 && depth <= 1.0)) {
      throw Error("--depths: needle depth " + FormatNumber(depth) +
                  " is outside [0, 1] (0 the start of the context, 1 its end)");
    }
    if (!depths.insert(FormatDepth(depth)).second) {
      throw Error("--depths: needle depth " + FormatDepth(depth) + " listed twice; give each once");
    }
  }
  if (grid.samples < 1 || grid.samples > kMaxSamples) {
    throw Error("--samples must be in [1, " + std::to_string(kMaxSamples) + "], got " +
                std::to_string(grid.samples));
  }
  if (grid.first_sample < 0 || grid.first_sample > kMaxSamples - grid.samples) {
    throw Error("--first-sample must be in [0, " + std::to_string(kMaxSamples - grid.samples) +
                "] with --samples " + std::to_string(grid.samples) +
                " (sample indices stay below " + std::to_string(kMaxSamples) + "), got " +
                std::to_string(grid.first_sample));
  }
  if (need_lengths && grid.lengths.empty()) {
    throw Error(
        "no context lengths given (needed by the tasks listed): give --lengths, e.g. "
        "--lengths 2048,4096");
  }
  if (need_depths && grid.depths.empty()) {
    throw Error(
        "no needle depths given (needed by passkey, niah, multikey, multivalue and multiquery): "
        "give --depths, e.g. --depths 0.1,0.5,0.9");
  }
}

}  // namespace

const std::vector<std::string>& TaskNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const TaskInfo& t : kTasks) v.emplace_back(t.name);
    return v;
  }();
  return names;
}

int GeneratedTaskTurns(std::string_view name) {
  const TaskInfo* info = FindTask(name);
  return info == nullptr ? 0 : info->turns;
}

std::vector<EvalTask> GenerateTasks(const TaskGrid& grid, const TokenCounter& count_tokens) {
  std::vector<const TaskInfo*> infos;
  Validate(grid, infos);
  eval_internal::TaskResources resources(count_tokens);
  std::vector<EvalTask> out;
  std::set<std::string> ids;
  auto generate = [&](const TaskInfo& info, int64_t length, double depth, int sample) {
    TaskInstance instance;
    instance.task = std::string(info.name);
    instance.length = length;
    instance.depth = depth;
    instance.sample = sample;
    instance.seed = eval_internal::InstanceSeed(grid.seed, info.name, length, depth, sample);
    instance.id = instance.task;
    if (info.uses_lengths) instance.id += "-L" + std::to_string(length);
    if (info.uses_depths) instance.id += "-d" + FormatDepth(depth);
    instance.id += "-s" + std::to_string(sample);
    QEVICT_CHECK(ids.insert(instance.id).second);
    out.push_back(info.generate(instance, resources));
  };
  const int first = grid.first_sample, end = grid.first_sample + grid.samples;
  for (const TaskInfo* info : infos) {
    if (!info->uses_lengths) {
      for (int s = first; s < end; ++s) generate(*info, 0, -1.0, s);
      continue;
    }
    for (int64_t length : grid.lengths) {
      if (info->uses_depths) {
        for (double depth : grid.depths) {
          for (int s = first; s < end; ++s) generate(*info, length, depth, s);
        }
      } else {
        for (int s = first; s < end; ++s) generate(*info, length, -1.0, s);
      }
    }
  }
  return out;
}

}  // namespace qevict
