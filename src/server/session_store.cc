#include "server/session_store.h"

#include <algorithm>

namespace qevict::server {

SessionStore::SessionStore(const SessionStoreOptions& options) : options_(options) {}

SessionStore::~SessionStore() = default;

void SessionStore::DropLocked(List::iterator it, int64_t& counter) {
  bytes_ -= it->bytes;
  ++counter;
  entries_.erase(it);
}

void SessionStore::ExpireLocked(Clock::time_point now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (!it->pinned && now - it->last_used > options_.ttl) DropLocked(it, counters_.dropped_ttl);
    it = next;
  }
}

std::optional<SessionStore::Found> SessionStore::Find(const std::string& name,
                                                      const std::string& kv_key,
                                                      std::span<const int32_t> prompt) {
  std::lock_guard<std::mutex> lock(mutex_);
  ExpireLocked(Clock::now());
  auto best = entries_.end();
  int64_t best_tokens = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->pinned || it->name != name) continue;
    const int64_t n = it->kv_key == kv_key ? it->conversation->ReusableTokens(prompt) : 0;
    if (!name.empty()) {  // the named conversation: this one or none
      if (n == 0) DropLocked(it, counters_.dropped_diverged);
      best = n > 0 ? it : entries_.end();
      best_tokens = n;
      break;
    }
    if (n > best_tokens) {
      best = it;
      best_tokens = n;
    }
  }
  if (best == entries_.end()) {
    ++counters_.misses;
    return std::nullopt;
  }
  ++counters_.hits;
  best->pinned = true;
  return Found{best->id, best_tokens, best->bytes};
}

std::unique_ptr<Conversation> SessionStore::Take(uint64_t id, int64_t reused_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->id != id) continue;
    std::unique_ptr<Conversation> out = std::move(it->conversation);
    bytes_ -= it->bytes;
    entries_.erase(it);
    counters_.reused_tokens += reused_tokens;
    return out;
  }
  return nullptr;
}

void SessionStore::Unpin(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Entry& e : entries_) {
    if (e.id == id) e.pinned = false;
  }
}

void SessionStore::Keep(const std::string& name, const std::string& kv_key,
                        std::unique_ptr<Conversation> conversation, int64_t bytes,
                        int64_t cold_bytes) {
  if (!enabled() || conversation == nullptr || conversation->tokens().empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Clock::now();
  ExpireLocked(now);
  if (!name.empty()) {  // a newer state of the named conversation replaces the old one
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->name == name && !it->pinned) {
        DropLocked(it, counters_.dropped_diverged);
        break;
      }
    }
  }
  Entry e;
  e.id = next_id_++;
  e.name = name;
  e.kv_key = kv_key;
  e.conversation = std::move(conversation);
  e.bytes = bytes;
  e.cold_bytes = cold_bytes;
  e.last_used = now;
  bytes_ += bytes;
  entries_.push_back(std::move(e));
  // Beyond max_sessions: the least recently used idle ones go (pinned ones are waited for).
  int64_t idle_excess = static_cast<int64_t>(entries_.size()) - options_.max_sessions;
  for (auto it = entries_.begin(); it != entries_.end() && idle_excess > 0;) {
    auto next = std::next(it);
    if (!it->pinned) {
      DropLocked(it, counters_.dropped_lru);
      --idle_excess;
    }
    it = next;
  }
}

int64_t SessionStore::held_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

int64_t SessionStore::Release(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t freed = 0;
  for (auto it = entries_.begin(); it != entries_.end() && freed < bytes;) {
    auto next = std::next(it);
    if (!it->pinned) {
      freed += it->bytes;
      DropLocked(it, counters_.dropped_memory);
    }
    it = next;
  }
  return freed;
}

int64_t SessionStore::ReleaseColdBytes(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t freed = 0;
  for (auto it = entries_.begin(); it != entries_.end() && freed < bytes;) {
    auto next = std::next(it);
    if (!it->pinned && it->cold_bytes > 0) {
      freed += it->cold_bytes;
      DropLocked(it, counters_.dropped_cold_disk);
    }
    it = next;
  }
  return freed;
}

bool SessionStore::Inspect(
    const std::string& name,
    const std::function<void(const Conversation&, int64_t bytes)>& inspect) const {
  if (name.empty()) return false;  // unnamed conversations are not addressable
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& entry : entries_) {
    if (entry.name != name || entry.conversation == nullptr) continue;
    inspect(*entry.conversation, entry.bytes);
    return true;
  }
  return false;
}

SessionStoreSnapshot SessionStore::Snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  SessionStoreSnapshot s = counters_;
  s.sessions = static_cast<int64_t>(entries_.size());
  s.bytes = bytes_;
  return s;
}

}  // namespace qevict::server
