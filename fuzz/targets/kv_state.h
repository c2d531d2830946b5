// Fuzz target "kv_state": a tiered cache's saved state (KvCache::LoadState, the part of a prompt
// cache file that lies behind its checksum; engine/prompt_cache.h) altered at will. A small
// cache of the policy the flags pick reads a synthetic prompt and a few generated tokens, saves
// its state, and the input's edits are applied to those bytes (or, in raw mode, the input is the
// state); a fresh cache then loads them. Whatever the bytes: LoadState ends in an Error or in a
// cache whose ledger agrees with its allocators and that keeps running (more tokens stored,
// attended and routed, then saved and loaded again, byte for byte).
//
// Input: flags byte, then
//   bit 7 clear: (prompt tokens - 1) byte, then edits of 3 bytes each: offset (u16, modulo the
//                state's size) and a byte XORed there;
//   bit 7 set:   the state's bytes as they are (raw mode).
//   bits 0-3     the policy (index into PolicyNames(), modulo their count)
//   bit 4        exact recovery (a cold store)
//   bit 5        bounded prefill (chunks of 32 routed as they arrive)
//
// Links: qevict_policy
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_target.h"
#include "kv/kv_test_util.h"
#include "kv/tiered_cache.h"
#include "policy/registry.h"
#include "util/error.h"

namespace qevict::fuzz {
namespace kv_state_target {

struct Setup {
  KvGeometry geometry = testing::SmallGeometry(2, 4, 2, 16, 512);
  Rope rope{testing::TestRopeConfig(16), 512};
  testing::SyntheticModel model{geometry, 11};
  ThreadPool pool{1};
};

inline Setup& Shared() {
  static Setup* setup = new Setup();
  return *setup;
}

inline KvConfig ConfigFor(uint8_t flags) {
  const std::vector<std::string> names = PolicyNames();
  KvConfig c;
  c.policy = names[(flags & 15) % names.size()];
  c.budget = c.policy == "full" ? 1.0 : 0.3;
  c.window = 4;
  c.sinks = 2;
  c.recent = 8;
  c.set_option("kivi_group", 4);
  c.snapkv_window = 8;
  c.route_every = 4;
  c.recovery = flags & 16 ? RecoveryFidelity::kExact : RecoveryFidelity::kPaper;
  c.prefill_chunk = flags & 32 ? 32 : 0;
  return c;
}

}  // namespace kv_state_target

inline int FuzzKvStateBytes(const uint8_t* data, size_t size) {
  using namespace kv_state_target;
  Setup& s = Shared();
  FuzzInput in(data, size);
  const uint8_t flags = in.Byte();
  const KvConfig config = ConfigFor(flags);
  std::vector<uint8_t> state;
  int32_t next = 0;  // position of the next token once the state is loaded
  if (flags & 128) {
    const std::string_view raw = in.Rest();
    state.assign(raw.begin(), raw.end());
  } else {
    const int prompt = 1 + in.Byte();
    std::unique_ptr<KvCache> source = CreateKvCache(config, s.geometry, s.rope);
    source->BeginRun(prompt, 8);
    testing::RunPromptAndGenerate(*source, s.model, prompt, config.prefill_chunk, 3, s.pool);
    ByteWriter out;
    source->SaveState(out);
    state = out.bytes();
    next = prompt + 3;
    while (in.size() >= 3 && !state.empty()) {
      const size_t at = static_cast<size_t>(in.Uint(2)) % state.size();
      state[at] ^= in.Byte();
    }
  }
  std::unique_ptr<KvCache> cache = CreateKvCache(config, s.geometry, s.rope);
  ByteReader reader(state, "fuzzed KV state");
  try {
    cache->LoadState(reader);
  } catch (const Error&) {
    return 0;
  }
  if (auto* tiered = dynamic_cast<TieredCache*>(cache.get())) {
    Require(tiered->AllocatorResidentBytes() == tiered->resident_bytes(),
            "the restored ledger disagrees with the allocators");
  }
  next = static_cast<int32_t>(cache->n_tokens());
  // It keeps running: a further turn, stored, attended and routed.
  if (next + 12 <= s.geometry.max_tokens) {
    cache->ContinueRun(4, 8);
    testing::RunBatch(*cache, s.model, next, 4, BatchKind::kPromptEnd, s.pool);
    for (int i = 0; i < 8; ++i) {
      testing::RunBatch(*cache, s.model, next + 4 + i, 1, BatchKind::kGenerated, s.pool);
    }
  }
  // And what it saves now loads again into the same bytes.
  ByteWriter again;
  cache->SaveState(again);
  std::unique_ptr<KvCache> copy = CreateKvCache(config, s.geometry, s.rope);
  ByteReader reread(again.bytes(), "re-saved KV state");
  copy->LoadState(reread);
  ByteWriter twice;
  copy->SaveState(twice);
  Require(twice.bytes() == again.bytes(), "a saved state does not survive a load and a save");
  return 0;
}

inline const bool kKvStateTargetRegistered = RegisterFuzzTarget("kv_state", &FuzzKvStateBytes);

}  // namespace qevict::fuzz
