#include "engine/prompt_cache.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/byte_stream.h"
#include "util/error.h"

namespace qevict {
namespace {

constexpr char kMagic[8] = {'Q', 'E', 'V', 'P', 'C', 'A', 'C', 'H'};
constexpr uint32_t kVersion = 2;  // 2: qevict-recall saves its fp16 / 2-bit split

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Errors about a file's contents end by saying what to do about it.
[[noreturn]] void FailWithAdvice(const Error& e) {
  const std::string message = e.what();
  if (message.find("delete") != std::string::npos) throw e;
  throw Error(message + "; delete the file (or give another --prompt-cache) to start a new cache");
}

std::string DescribeKv(const KvConfig& kv) {
  std::ostringstream d;
  d << "--kv-policy " << kv.policy;
  if (kv.budget_bytes > 0) {
    d << " --kv-budget-bytes " << kv.budget_bytes;
  } else if (kv.budget < 1.0) {
    d << " --kv-budget " << kv.budget;
  }
  if (kv.budget_scope == BudgetScope::kGlobal) d << " --kv-budget-scope global";
  return d.str();
}

}  // namespace

uint64_t PromptCacheChecksum(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

PromptCacheKey MakePromptCacheKey(const std::string& model_path, const KvConfig& kv) {
  const MappedFile model(model_path);
  const std::span<const uint8_t> bytes = model.bytes();
  const size_t mib = size_t{1} << 20;
  const size_t head = std::min(bytes.size(), mib);
  const size_t tail = std::min(bytes.size(), mib);
  PromptCacheKey key;
  key.model = std::to_string(bytes.size()) + ":" + Hex(PromptCacheChecksum(bytes.first(head))) +
              ":" + Hex(PromptCacheChecksum(bytes.last(tail)));
  key.kv = KvConfigKey(kv);
  key.kv_description = DescribeKv(kv);
  return key;
}

PromptCacheFile::PromptCacheFile(const std::string& path, std::unique_ptr<MappedFile> file,
                                 std::span<const uint8_t> payload)
    : path_(path), file_(std::move(file)), payload_(payload) {
  tokens_ = Conversation::SavedTokens(ByteReader(payload_, "prompt cache '" + path_ + "'"));
}

std::optional<PromptCacheFile> PromptCacheFile::Open(const std::string& path,
                                                     const PromptCacheKey& key) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    return OpenExisting(path, key);
  } catch (const Error& e) {
    FailWithAdvice(e);
  }
}

PromptCacheFile PromptCacheFile::OpenExisting(const std::string& path, const PromptCacheKey& key) {
  auto file = std::make_unique<MappedFile>(path);
  const std::string what = "prompt cache '" + path + "'";
  ByteReader in(file->bytes(), what);
  char magic[sizeof(kMagic)];
  in.Raw(magic, sizeof(magic), "its header");
  if (!std::equal(magic, magic + sizeof(magic), kMagic)) {
    in.Fail(
        "not a qevict prompt cache; give another --prompt-cache file, or delete this one if "
        "it may be replaced");
  }
  const uint32_t version = in.Pod<uint32_t>("its version");
  if (version != kVersion) {
    in.Fail("written by another qevict version (format " + std::to_string(version) +
            ", this one "
            "reads " +
            std::to_string(kVersion) + ")");
  }
  const std::string model = in.String("the model's fingerprint", 256);
  const std::string kv = in.String("the KV options", 4096);
  const std::string kv_description = in.String("the KV options", 4096);
  if (model != key.model) in.Fail("saved with another model file; run with that model");
  if (kv != key.kv) {
    in.Fail("saved with other KV options (" +
            (kv_description != key.kv_description ? kv_description
                                                  : std::string("other --kv-* options")) +
            ", this run has " + key.kv_description + "); run with the same options");
  }
  const uint64_t size = in.Pod<uint64_t>("the payload size");
  if (size > in.remaining() || in.remaining() - size != sizeof(uint64_t)) {
    in.Fail("truncated or extended after it was written (its sizes disagree)");
  }
  const std::span<const uint8_t> payload = file->bytes().subspan(in.offset(), size);
  ByteReader tail(file->bytes().subspan(in.offset() + size), what);
  if (tail.Pod<uint64_t>("its checksum") != PromptCacheChecksum(payload)) {
    in.Fail("its checksum does not match (the file is corrupt)");
  }
  return PromptCacheFile(path, std::move(file), payload);
}

void PromptCacheFile::RestoreInto(Conversation& conversation) const {
  ByteReader in(payload_, "prompt cache '" + path_ + "'");
  try {
    conversation.LoadState(in);
    if (in.remaining() != 0) {
      conversation.Forget();
      in.Fail(std::to_string(in.remaining()) + " bytes follow the saved state");
    }
  } catch (const Error& e) {
    FailWithAdvice(e);
  }
}

int64_t SavePromptCache(const std::string& path, const PromptCacheKey& key,
                        const Conversation& conversation) {
  ByteWriter payload;
  conversation.SaveState(payload);
  ByteWriter file;
  file.Raw(kMagic, sizeof(kMagic));
  file.Pod<uint32_t>(kVersion);
  file.String(key.model);
  file.String(key.kv);
  file.String(key.kv_description);
  file.Pod<uint64_t>(payload.bytes().size());
  file.Raw(payload.bytes().data(), payload.bytes().size());
  file.Pod<uint64_t>(PromptCacheChecksum(payload.bytes()));

  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(file.bytes().data()),
              static_cast<std::streamsize>(file.bytes().size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw Error("cannot write the prompt cache '" + temporary +
                  "' (is its directory writable "
                  "and the disk not full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) throw Error("cannot replace the prompt cache '" + path + "': " + ec.message());
  return static_cast<int64_t>(file.bytes().size());
}

}  // namespace qevict
