// `--prompt-cache FILE` (llama.cpp's flag) for a compressed cache: a conversation's state --
// its tokens, the logits after the last one, and the KV cache exactly as the policy left it
// (tiers, 2-bit codes, scores, counters) -- saved to a file, so that a later run whose prompt
// starts with those tokens reads them back instead of prefilling them. The file holds what the
// cache held: at --kv-budget 0.1 about a tenth of a full cache's bytes.
//
// A file is only used with the model and the KV options it was saved with (both are recorded
// and checked; a mismatch is an error that says what differs). Its contents are checked before
// anything is restored: a checksum over the payload, then every count and index against the
// cache's layout (security.md's rule for files from disk).
//
// File layout (little-endian): "QEVPCACH", u32 version, the model's fingerprint and the KV
// options' key (strings), u64 payload size, the payload (Conversation::SaveState), u64 FNV-1a of
// the payload.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/conversation.h"
#include "kv/kv_config.h"
#include "util/mapped_file.h"

namespace qevict {

// What a prompt cache must have been saved with to be used.
struct PromptCacheKey {
  std::string model;           // the GGUF file's size and hashes of its first and last MiB
  std::string kv;              // KvConfigKey of the KV options
  std::string kv_description;  // the same for people: policy and budget
};
PromptCacheKey MakePromptCacheKey(const std::string& model_path, const KvConfig& kv);

class PromptCacheFile {
 public:
  // nullopt when `path` does not exist. Throws Error when it is not a prompt cache, is
  // truncated or corrupt, or was saved for another model or other KV options.
  static std::optional<PromptCacheFile> Open(const std::string& path, const PromptCacheKey& key);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Restores the saved conversation into `conversation` (built with the same model and KV
  // options, a context that holds tokens()).
  void RestoreInto(Conversation& conversation) const;

 private:
  PromptCacheFile(const std::string& path, std::unique_ptr<MappedFile> file,
                  std::span<const uint8_t> payload);
  static PromptCacheFile OpenExisting(const std::string& path, const PromptCacheKey& key);

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  std::span<const uint8_t> payload_;
  std::vector<int32_t> tokens_;
};

// The checksum a file carries of its payload (FNV-1a, 64 bits).
uint64_t PromptCacheChecksum(std::span<const uint8_t> payload);

// Writes the conversation's state to `path` (through a temporary file renamed over it, so an
// interrupted write never leaves a torn cache). Returns the bytes written.
int64_t SavePromptCache(const std::string& path, const PromptCacheKey& key,
                        const Conversation& conversation);

}  // namespace qevict
