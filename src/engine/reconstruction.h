// KVzip's reconstruction scoring (Kim et al. 2025, arXiv 2505.23416), a query-agnostic source
// of window scores for the tiered cache (docs/kv-cache.md, "Score sources"). After the context
// has been prefilled, the model is run on a reconstruction prompt -- the repeat prompt
// ("Repeat the previous context:") followed by the context's tokens again -- attending over the
// cached context; a resident token's score is the largest attention probability any
// reconstruction query of any query head gives it, and a window's score is the largest over its
// tokens (max over the layer's KV heads, since tier decisions are shared by the heads). The
// context is repeated in chunks of `chunk` tokens: each chunk's input is the repeat prompt and
// that chunk's tokens, at the positions right after the cached ones, attending the whole cache
// plus its own input, so the attention scratch stays one chunk's. The pass never writes the
// session's cache (engine/reconstruction_cache.h): its keys and values live in scratch and the
// conversation continues right after the context, at the same positions as without it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace qevict {

struct ReconstructionCost {
  double seconds = 0.0;      // wall time of the whole pass
  int64_t tokens = 0;        // tokens forwarded (repeat prompts + repeated context)
  int64_t chunks = 0;
  int64_t scratch_bytes = 0;  // peak scratch: forward buffers + attention copies + maxima
};

// The repeat prompt as raw text tokens (no special tokens): "\n\nRepeat the previous context:\n"
// (KVzip's instruction; the paper puts it in the chat template's user turn and the repetition in
// the assistant's, here it follows the context as plain text in every prompt style).
std::vector<int32_t> RepeatPromptTokens(const Tokenizer& tokenizer);

// Window scores of the session's policy cache (a TieredCache; throws otherwise) from repeating
// `context` after `repeat_prompt`: [policy layer][window index] (0 for windows not resident).
std::vector<std::vector<float>> ReconstructionScores(const Session& session,
                                                     std::span<const int32_t> repeat_prompt,
                                                     std::span<const int32_t> context, int chunk,
                                                     ThreadPool& pool, ReconstructionCost* cost);

// ReconstructionScores handed to the policy cache (TieredCache::SetExternalScores), where the
// next prompt-end routing step consumes them. The cache is otherwise untouched.
ReconstructionCost ScoreByReconstruction(Session& session, std::span<const int32_t> repeat_prompt,
                                         std::span<const int32_t> context, int chunk,
                                         ThreadPool& pool);

}  // namespace qevict
