// The server's log line, one per response on stderr with -v (docs/server.md, "Request log"):
//   qevict serve: request POST /v1/chat/completions 200 prompt=412 cached=380 generated=64
//   ttft_ms=123.4 decode_tps=55.1 policy=qevict resident_bytes=1234567 total_ms=1402.7
// Every key is always there, "-" where it does not apply (no generation, an error before it),
// so that the line parses the same way for every request.
//
// The figures are gathered on the connection thread that serves the request: cpp-httplib calls
// the route's handler, the response's content provider (which drives the generation) and then
// the logger on that one thread, and has no per-request user data, so the entry is thread-local.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace qevict::server {

struct GenerationLogFields {
  int64_t prompt_tokens = 0;  // the whole rendered prompt
  int64_t cached_tokens = 0;  // of which a kept conversation held (not prefilled)
  int64_t generated_tokens = 0;
  double decode_tokens_per_second = -1.0;  // < 0: unknown (fewer than 2 tokens)
  std::string policy;
  int64_t resident_bytes = 0;  // the cache's fp16 + quantized + metadata bytes at the end
};

struct RequestLogEntry {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> start;         // the request was routed
  std::optional<double> first_token_seconds;      // after start, the first text was released
  std::optional<GenerationLogFields> generation;  // a generation ran to its end
};

// The entry of the request the calling thread serves.
RequestLogEntry& CurrentRequestLog();
// Starts a request's entry (the previous one's figures are dropped).
void BeginRequestLog();
// Marks the first text of the answer in `entry` (kept from the first call only). The text
// comes out on the slot's thread while the connection thread waits for it, so the caller takes
// its entry (CurrentRequestLog()) on the connection thread and passes it here.
void NoteFirstToken(RequestLogEntry& entry);

// The line without its newline. Whitespace and control characters in the path are %-escaped
// so that the fields stay separated by single spaces.
std::string FormatRequestLogLine(const std::string& method, const std::string& path, int status,
                                 const RequestLogEntry& entry,
                                 RequestLogEntry::Clock::time_point now);

}  // namespace qevict::server
