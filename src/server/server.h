// `qevict serve`: an OpenAI-compatible HTTP server over one model. The weights are loaded once
// (mmap'd, shared read-only by every slot); each request gets its own Session and KV cache on
// one of N slots; see docs/server.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kv/kv_config.h"

namespace httplib {
class Server;
}

namespace qevict::server {

struct ServerOptions {
  std::string model_path;
  std::string model_alias;  // id in /v1/models ("" = the file name without .gguf)
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (printed on stderr)
  int slots = 1;
  int threads = 0;              // total compute threads (0: all available cores)
  int64_t kv_memory_limit = 0;  // bytes reserved over running requests (0: no limit)
  // Bytes every cold file of the server may hold on disk together (kept conversations and
  // running requests; 0: no limit but each session's --kv-cold-disk-limit).
  int64_t kv_cold_disk_total = 0;
  int max_queue = 32;
  int queue_timeout_seconds = 600;
  int64_t ctx = 0;  // most prompt + completion tokens per request (0: the model's)
  int batch = 256;
  int64_t default_max_tokens = 0;
  size_t max_body_bytes = size_t{8} << 20;
  int max_sessions = 16;           // kept conversations (0: no reuse)
  int session_ttl_seconds = 600;   // idle kept conversations are dropped after this
  KvConfig kv;  // defaults for requests, validated
  bool log_requests = true;  // one stderr line per request (docs/server.md); --log-disable
  std::string api_key;  // "" : no authentication
  std::string chat_template;  // --chat-template ("" : the model's)
  std::string build_info;  // the binary's source revision, reported by /props
};

class Server {
 public:
  // Loads the model (throws qevict::Error on a bad file or options).
  explicit Server(const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and serves until Stop(); throws qevict::Error when the address cannot be bound.
  void Run();
  // Thread-safe: refuses new requests, cancels running generations, stops listening.
  void Stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace qevict::server
