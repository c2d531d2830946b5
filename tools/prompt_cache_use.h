// --prompt-cache as `run` and `chat` use it: restore a saved conversation when the prompt starts
// with its tokens, save the conversation after the part a later prompt will start with, and say
// on stderr what was done (engine/prompt_cache.h holds the file format and its checks).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/conversation.h"
#include "engine/prompt_cache.h"
#include "kv/kv_config.h"

namespace qevict::cli {

struct PromptCacheUse {
  std::string path;
  bool read_only = false;
  PromptCacheKey key;
  int64_t restored = 0;  // tokens read from the file (0: nothing restored)
};

// Opens `path` and restores it into `conversation` when `prompt` starts with its tokens (a file
// that does not exist or holds other tokens is said and left; one saved with another model or
// other KV options is an error).
PromptCacheUse RestorePromptCache(const std::string& path, bool read_only,
                                  const std::string& model_path, const KvConfig& kv,
                                  std::span<const int32_t> prompt, Conversation& conversation);
// Saves the conversation (unless read-only) and says so.
void SavePromptCacheFile(const PromptCacheUse& use, const Conversation& conversation);

}  // namespace qevict::cli
