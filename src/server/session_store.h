// Conversations kept between requests (docs/server.md, "Kept sessions"). After a request, its
// Conversation -- the compressed cache with its tiers and scores, and the exact tokens it holds
// -- is kept here; a later request whose rendered prompt extends those tokens under the same kv
// settings continues from it and prefills only the new tokens. A request may also name its
// conversation (`session_id`): then only that one is considered, and it is replaced by the
// request's own when the prompt diverges from it.
//
// Memory: a kept conversation holds its cache's reserved bytes (KvStats::reserved_bytes). They
// count against --kv-memory-limit beside the running requests' reservations: the scheduler asks
// Reclaim for bytes before a request waits, and least recently used conversations go first.
// One a waiting request has found is pinned until it is taken or let go, and one in use is not
// here at all, so neither can be dropped. --max-sessions and --session-ttl bound the rest.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "engine/conversation.h"
#include "kv/kv_config.h"
#include "server/slot_scheduler.h"

namespace qevict::server {

struct SessionStoreOptions {
  int max_sessions = 16;  // kept conversations at most (0: none are kept)
  std::chrono::seconds ttl{std::chrono::minutes(10)};  // idle longer: dropped
};

struct SessionStoreSnapshot {
  int64_t sessions = 0;  // kept now (idle and pinned)
  int64_t bytes = 0;     // their reserved bytes
  int64_t hits = 0, misses = 0, reused_tokens = 0;
  int64_t dropped_lru = 0, dropped_ttl = 0, dropped_memory = 0, dropped_diverged = 0;
  int64_t dropped_cold_disk = 0;  // closed to make room under --kv-cold-disk-total
};

class SessionStore : public HeldMemory {
 public:
  explicit SessionStore(const SessionStoreOptions& options);
  ~SessionStore() override;

  bool enabled() const { return options_.max_sessions > 0; }

  struct Found {
    uint64_t id = 0;
    int64_t reusable_tokens = 0;
    int64_t bytes = 0;  // the conversation's reserved bytes (counted here until taken)
  };
  // The kept conversation `prompt` continues under kv_key: the named one when `name` is set
  // (dropped if the prompt diverges from it), else the unnamed one with the longest reusable
  // prefix. It is pinned (not dropped) until Take or Unpin. Counts a hit or a miss.
  std::optional<Found> Find(const std::string& name, const std::string& kv_key,
                            std::span<const int32_t> prompt);
  // Removes a pinned conversation and hands it over; its bytes leave this store's count (the
  // request's lease covers them from now on). nullptr if it is gone (never, while pinned).
  std::unique_ptr<Conversation> Take(uint64_t id, int64_t reused_tokens);
  void Unpin(uint64_t id);

  // Keeps a conversation after its request (replacing one of the same name), then drops least
  // recently used idle ones beyond max_sessions. Called under the scheduler's lock, so the
  // caller does the slow parts first: it frees the conversation's scratch (Session::Trim) and
  // passes what the cache then holds from the OS (KvStats::reserved_bytes), for which Stats()
  // walks every window, and what its cold tier holds on disk (KvStats::cold_bytes).
  void Keep(const std::string& name, const std::string& kv_key,
            std::unique_ptr<Conversation> conversation, int64_t reserved_bytes,
            int64_t cold_bytes = 0);

  // HeldMemory (called by the scheduler under its lock): kept bytes, and dropping idle
  // conversations, least recently used first, until `bytes` are freed.
  int64_t held_bytes() const override;
  int64_t Release(int64_t bytes) override;

  // The server's cold files together would pass --kv-cold-disk-total
  // (DiskColdStore::SetProcessRoomMaker): drops idle conversations that hold cold bytes, least
  // recently used first, until `bytes` of them are freed (their files close with them). Returns
  // the cold bytes freed. Called on a running request's thread; pinned ones stay.
  int64_t ReleaseColdBytes(int64_t bytes);

  SessionStoreSnapshot Snapshot() const;

  // Calls `inspect` with the kept conversation named `name` and its reserved bytes, under the
  // store's lock (so it is neither taken nor dropped meanwhile; `inspect` reads it and must not
  // call the store). False when none of that name is kept: never kept, dropped, or in use by a
  // running request. Its idle time is not reset (looking at a conversation is not using it).
  bool Inspect(const std::string& name,
               const std::function<void(const Conversation&, int64_t bytes)>& inspect) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    uint64_t id = 0;
    std::string name;
    std::string kv_key;
    std::unique_ptr<Conversation> conversation;
    int64_t bytes = 0;
    int64_t cold_bytes = 0;  // its cold file on disk (outside bytes)
    Clock::time_point last_used;
    bool pinned = false;
  };
  using List = std::list<Entry>;  // least recently used first

  void ExpireLocked(Clock::time_point now);  // with mutex_ held
  void DropLocked(List::iterator it, int64_t& counter);

  SessionStoreOptions options_;
  mutable std::mutex mutex_;
  List entries_;
  uint64_t next_id_ = 1;
  int64_t bytes_ = 0;
  SessionStoreSnapshot counters_;
};


}  // namespace qevict::server
