// longgen: a short prompt ("Continue the following text:" and a passage of about 200 tokens of
// the prose) and a long generation, during which the cache fills; scored against the full
// cache's output. Context lengths and depths do not apply: one instance per sample.
#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GenerateLongGen(const TaskInstance& instance, TaskResources& resources) {
  constexpr int64_t kPassageTokens = 200;
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kLongGen;
  task.context = "Continue the following text:\n\n" +
                 JoinPieces(resources.prose().Fill(kPassageTokens, Mix64(instance.seed)));
  task.max_new_tokens = 384;
  task.target_tokens = 0;
  task.depth = -1.0;
  return task;
}

}  // namespace qevict::eval_internal
