// The token sequences one task instance feeds a session: the first prompt (context and first
// question, or the whole prompt / prefix) and, for every later turn, the tokens that close the
// previous answer and ask the next question. With a chat template the turns are rendered by it
// (the delta after the previous assistant message, which does not depend on what the model
// answered); without one, "Question: ... Answer:" lines are used.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/loaded_model.h"
#include "eval/task.h"

namespace qevict {

struct TurnTokens {
  std::vector<int32_t> first;               // prompt of the first turn (BOS included if any)
  std::vector<std::vector<int32_t>> later;  // one per turn after the first
  std::vector<int32_t> scored;              // kPerplexity: the teacher-forced tokens
  bool chat = false;                        // rendered with the model's chat template
};

TurnTokens BuildTurnTokens(const LoadedModel& model, const EvalTask& task);

}  // namespace qevict
