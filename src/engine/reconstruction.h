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

#include "engine/score_hooks.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace qevict {

using ReconstructionCost = ExternalScoreCost;  // engine/score_hooks.h

// The repeat prompt as raw text tokens (no special tokens): "\n\nRepeat the previous context:\n"
// (KVzip's instruction; the paper puts it in the chat template's user turn and the repetition in
// the assistant's, here it follows the context as plain text in every prompt style).
std::vector<int32_t> RepeatPromptTokens(const Tokenizer& tokenizer);

// Window scores of the session's policy cache (through KvCache::external_score_layout; a cache
// without windows throws) from repeating `context` after `repeat_prompt`: [policy layer][window
// index] (0 for windows not resident).
std::vector<std::vector<float>> ReconstructionScores(const Session& session,
                                                     std::span<const int32_t> repeat_prompt,
                                                     std::span<const int32_t> context, int chunk,
                                                     ThreadPool& pool, ReconstructionCost* cost);

// ReconstructionScores handed to the policy cache (KvCache::SetExternalScores), where the next
// prompt-end routing step consumes them. The cache is otherwise untouched. Entry points do not
// call this: the session's score hook does when the cache asks (engine/score_hooks.h).
ReconstructionCost ScoreByReconstruction(Session& session, std::span<const int32_t> repeat_prompt,
                                         std::span<const int32_t> context, int chunk,
                                         ThreadPool& pool);

}  // namespace qevict
