// ppl: teacher-forced prose. The context is about L - 256 tokens of the haystack and scored_text
// the ~256 tokens that follow it (L/2 each below L = 512); the runner scores next-token NLL and
// KL to the full cache over scored_text with compression active.
#include <algorithm>
#include <cstdlib>

#include "eval/task_util.h"

namespace qevict::eval_internal {

EvalTask GeneratePpl(const TaskInstance& instance, TaskResources& resources) {
  const Haystack& prose = resources.prose();
  const int64_t scored_tokens = std::min<int64_t>(256, instance.length / 2);
  // Fill by the cached sentence counts, then correct for what the joined text really counts.
  int64_t fill_target = instance.length, actual = 0;
  std::vector<TextPiece> pieces;
  for (int attempt = 0; attempt < 3; ++attempt) {
    pieces = prose.Fill(fill_target, Mix64(instance.seed));
    actual = std::max<int64_t>(1, resources.count_tokens()(JoinPieces(pieces)));
    const int64_t error = instance.length - actual;
    if (std::llabs(error) * 50 <= instance.length) break;  // within 2%
    fill_target += error;
  }
  // Split at the sentence boundary that leaves closest to scored_tokens after it (in cached
  // units, scaled to what the joined text counts).
  const int64_t cached = PieceTokens(pieces, prose.paragraph_break_tokens());
  const int64_t target = cached - scored_tokens * cached / actual;
  size_t split = 1;
  int64_t before = 0, best = -1;
  for (size_t k = 1; k < pieces.size(); ++k) {
    const TextPiece& p = pieces[k - 1];
    before += p.tokens + (p.paragraph_end ? prose.paragraph_break_tokens() : 0);
    if (best < 0 || std::llabs(before - target) < best) {
      best = std::llabs(before - target);
      split = k;
    }
  }
  EvalTask task;
  task.task = instance.task;
  task.id = instance.id;
  task.kind = TaskKind::kPerplexity;
  task.context = JoinPieces(pieces, 0, split);
  if (split < pieces.size()) {
    // The separator goes with the continuation, so that it tokenizes as it would in place.
    task.scored_text =
        (pieces[split - 1].paragraph_end ? "\n\n" : " ") + JoinPieces(pieces, split, pieces.size());
  }
  task.max_new_tokens = 0;
  task.target_tokens = instance.length;
  task.depth = -1.0;
  return task;
}

}  // namespace qevict::eval_internal
