#include "server/request_log.h"

#include <cstdio>

namespace qevict::server {
namespace {

std::string EscapePath(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (c <= 0x20 || c == 0x7f) {
      char buffer[4];
      std::snprintf(buffer, sizeof(buffer), "%%%02X", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string Milliseconds(std::optional<double> seconds) {
  if (!seconds) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", *seconds * 1e3);
  return buffer;
}

}  // namespace

RequestLogEntry& CurrentRequestLog() {
  thread_local RequestLogEntry entry;
  return entry;
}

void BeginRequestLog() {
  RequestLogEntry& entry = CurrentRequestLog();
  entry = RequestLogEntry{};
  entry.start = RequestLogEntry::Clock::now();
}

void NoteFirstToken(RequestLogEntry& entry) {
  if (entry.first_token_seconds || !entry.start) return;
  entry.first_token_seconds =
      std::chrono::duration<double>(RequestLogEntry::Clock::now() - *entry.start).count();
}

std::string FormatRequestLogLine(const std::string& method, const std::string& path, int status,
                                 const RequestLogEntry& entry,
                                 RequestLogEntry::Clock::time_point now) {
  std::string line =
      "qevict serve: request " + method + " " + EscapePath(path) + " " + std::to_string(status);
  const auto& g = entry.generation;
  const std::string dash = "-";
  line += " prompt=" + (g ? std::to_string(g->prompt_tokens) : dash);
  line += " cached=" + (g ? std::to_string(g->cached_tokens) : dash);
  line += " generated=" + (g ? std::to_string(g->generated_tokens) : dash);
  line += " ttft_ms=" + Milliseconds(entry.first_token_seconds);
  std::string tps = dash;
  if (g && g->decode_tokens_per_second >= 0.0) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.1f", g->decode_tokens_per_second);
    tps = buffer;
  }
  line += " decode_tps=" + tps;
  line += " policy=" + (g && !g->policy.empty() ? g->policy : dash);
  line += " resident_bytes=" + (g ? std::to_string(g->resident_bytes) : dash);
  std::optional<double> total;
  if (entry.start) total = std::chrono::duration<double>(now - *entry.start).count();
  line += " total_ms=" + Milliseconds(total);
  return line;
}

}  // namespace qevict::server
