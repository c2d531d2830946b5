#include "tools/prompt_cache_use.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace qevict::cli {

PromptCacheUse RestorePromptCache(const std::string& path, bool read_only,
                                  const std::string& model_path, const KvConfig& kv,
                                  std::span<const int32_t> prompt, Conversation& conversation) {
  PromptCacheUse use{path, read_only, MakePromptCacheKey(model_path, kv), 0};
  std::optional<PromptCacheFile> file = PromptCacheFile::Open(path, use.key);
  if (!file) {
    std::fprintf(stderr, "prompt cache: '%s' does not exist yet%s\n", path.c_str(),
                 read_only ? " (read-only: nothing will be saved)" : "; it will be created");
    return use;
  }
  const std::vector<int32_t>& saved = file->tokens();
  const bool prefix =
      saved.size() <= prompt.size() && std::equal(saved.begin(), saved.end(), prompt.begin());
  if (!prefix) {
    const size_t common =
        std::mismatch(saved.begin(), saved.end(), prompt.begin(), prompt.end()).first -
        saved.begin();
    std::fprintf(stderr,
                 "prompt cache: '%s' holds %zu tokens that this prompt does not start with (%zu "
                 "in common; a compressed cache cannot be cut back); reading the prompt from the "
                 "start%s\n",
                 path.c_str(), saved.size(), common,
                 read_only ? "" : " and saving it over the file");
    return use;
  }
  file->RestoreInto(conversation);
  use.restored = static_cast<int64_t>(saved.size());
  std::fprintf(stderr, "prompt cache: %zu of the prompt's %zu tokens read from '%s'\n",
               saved.size(), prompt.size(), path.c_str());
  return use;
}

void SavePromptCacheFile(const PromptCacheUse& use, const Conversation& conversation) {
  if (use.read_only) return;
  const int64_t bytes = SavePromptCache(use.path, use.key, conversation);
  std::fprintf(stderr, "prompt cache: %zu tokens saved to '%s' (%.2f MiB)\n",
               conversation.tokens().size(), use.path.c_str(),
               static_cast<double>(bytes) / (1 << 20));
}

}  // namespace qevict::cli
