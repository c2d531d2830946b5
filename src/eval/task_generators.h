// Deterministic, offline generators of the long-context evaluation tasks (docs: the "Tasks"
// table of docs/evaluation.md): passkey, niah, multikey, vt, drift, longgen, ppl, and the RULER /
// SCBench-style multivalue, multiquery, cwe, fwe, scbench, and twofacts (`make demo`). A grid of
// tasks × context lengths × needle depths × samples expands into EvalTask instances whose text
// depends only on the grid values and the seed (byte-identical on every machine); each instance
// has its own seed, so adding a length or depth leaves the other instances unchanged. Haystack
// prose ships in data/haystack/ (override: $QEVICT_HAYSTACK_DIR); nothing is downloaded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eval/task.h"

namespace qevict {

struct TaskGrid {
  std::vector<std::string> tasks;  // names from TaskNames()
  std::vector<int64_t> lengths;    // context lengths in tokens, e.g. {2048, 4096}
  std::vector<double> depths;      // needle depths in [0,1] (tasks with one needle)
  int samples = 1;                 // instances per (length, depth)
  // The first sample's index: samples first_sample .. first_sample + samples - 1, so a grid can
  // be given more instances (the ones before unchanged: each instance has its own seed).
  int first_sample = 0;
  uint64_t seed = 1;
};

// passkey niah multikey vt drift longgen ppl multivalue multiquery cwe fwe scbench twofacts
const std::vector<std::string>& TaskNames();

// Questions a generated task asks in one session (drift 4, scbench 5, twofacts 2, longgen and ppl 1
// as the other tasks, though they ask none); 0 for an unknown name. What room a --lengths value
// must leave for later turns.
int GeneratedTaskTurns(std::string_view name);

// Instances, task by task in grid order, then by length, depth and sample:
//  - passkey, niah, multikey, multivalue, multiquery: lengths × depths × samples;
//  - vt, drift, ppl, cwe, fwe, scbench, twofacts: lengths × samples (depth -1);
//  - longgen: samples (target_tokens 0, depth -1).
// ids read "<task>[-L<length>][-d<depth>]-s<sample>", e.g. "niah-L4096-d0.50-s0".
// Context token counts (by count_tokens) are within a few percent of the length; questions are
// extra. Throws qevict::Error for an unknown or repeated task, an empty task list, a length
// outside [256, 1000000], a depth outside [0, 1], samples outside [1, 1000] (first_sample +
// samples too), repeated lengths or
// depths, missing lengths/depths that a listed task needs, or unreadable haystack files.
std::vector<EvalTask> GenerateTasks(const TaskGrid& grid, const TokenCounter& count_tokens);

}  // namespace qevict
