#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include "engine/loaded_model.h"
#include "kv/disk_cold_store.h"
#include "server/http_routes.h"
#include "server/metrics.h"
#include "server/server_context.h"
#include "server/slot_scheduler.h"
#include "util/error.h"

namespace qevict::server {
namespace {

std::string ModelId(const ServerOptions& o) {
  if (!o.model_alias.empty()) return o.model_alias;
  std::string name = std::filesystem::path(o.model_path).filename().string();
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

SchedulerOptions MakeSchedulerOptions(const ServerOptions& o) {
  SchedulerOptions s;
  s.slots = o.slots;
  const int threads = o.threads > 0 ? o.threads : ThreadPool::HardwareThreads();
  s.threads_per_slot = std::max(1, threads / std::max(1, o.slots));  // no oversubscription
  s.kv_memory_limit = o.kv_memory_limit;
  s.max_queue = o.max_queue;
  s.queue_timeout = std::chrono::seconds(o.queue_timeout_seconds);
  return s;
}

// "FLAG VALUE: RULE" when value is outside [lo, hi].
void CheckRange(const char* flag, int64_t value, int64_t lo, int64_t hi, const char* rule) {
  if (value < lo || value > hi) {
    throw Error(std::string(flag) + " " + std::to_string(value) + ": " + rule);
  }
}

void CheckOptions(const ServerOptions& o) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  CheckRange("--slots", o.slots, 1, 256, "give 1 to 256 requests that generate at once");
  CheckRange("-t", o.threads, 0, kMax, "give a thread count >= 1, or 0 for every core");
  CheckRange("--kv-memory-limit", o.kv_memory_limit, 0, kMax,
             "give a size such as 512m or 2g, or 0 for no limit");
  CheckRange("--kv-cold-disk-total", o.kv_cold_disk_total, 0, kMax,
             "give a size such as 4g, or 0 for no limit");
  CheckRange("--queue", o.max_queue, 0, 4096, "give 0 to 4096 waiting requests");
  CheckRange("--queue-timeout", o.queue_timeout_seconds, 1, kMax, "give at least 1 second");
  CheckRange("-c", o.ctx, 0, kMax, "give a context in tokens, or 0 for the model's");
  CheckRange("-b", o.batch, 1, 4096, "give 1 to 4096 prompt tokens per forward pass");
  CheckRange("--default-max-tokens", o.default_max_tokens, 0, kMax,
             "give a token count, or 0 for OpenAI's defaults");
  CheckRange("--max-body", static_cast<int64_t>(o.max_body_bytes), 1024, kMax,
             "give at least 1024 bytes (e.g. 8m)");
  CheckRange("--port", o.port, 0, 65535, "give a port in [1, 65535], or 0 for any free one");
  CheckRange("--max-sessions", o.max_sessions, 0, 4096,
             "give 0 to 4096 kept conversations (0 turns reuse off)");
  CheckRange("--session-ttl", o.session_ttl_seconds, 1, kMax, "give at least 1 second");
  o.kv.Validate();
}

// Each request allocates its session's scratch and cache and frees them at the end (or keeps
// the cache for the conversation's next request), on its slot's thread. glibc would keep those buffers in per-thread arenas (its mmap
// threshold rises to the largest size freed), so resident memory would creep up with the number
// of threads that ever generated; a fixed threshold maps large buffers and returns them at free.
void ReturnLargeBuffersToTheOs() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#endif
}

}  // namespace

struct Server::State {
  ServerOptions options;
  LoadedModel model;
  SlotScheduler scheduler;
  SessionStore sessions;  // after the scheduler: kept sessions go before the slots' pools
  ServerMetrics metrics;
  ServerContext context;
  httplib::Server http;

  explicit State(const ServerOptions& o)
      : options(o),
        model(LoadedModel::Load(o.model_path)),
        scheduler(MakeSchedulerOptions(o)),
        sessions(SessionStoreOptions{o.max_sessions, std::chrono::seconds(o.session_ttl_seconds)}),
        metrics(o.slots) {
    if (!o.chat_template.empty()) model.OverrideChatTemplate(o.chat_template);
    scheduler.set_held_memory(&sessions);
    const int64_t model_ctx = model.model->config().context_length;
    context.model = &model;
    context.model_id = ModelId(o);
    context.build_info = o.build_info;
    context.created = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    context.defaults.kv = o.kv;
    context.defaults.context_tokens = o.ctx > 0 ? std::min(o.ctx, model_ctx) : model_ctx;
    context.defaults.vocab_size = model.model->config().n_vocab;
    context.default_max_tokens = o.default_max_tokens;
    context.batch = o.batch;
    context.scheduler = &scheduler;
    context.metrics = &metrics;
    context.sessions = &sessions;
  }
};

Server::Server(const ServerOptions& options) {
  CheckOptions(options);
  DiskColdStore::SetProcessDiskLimit(options.kv_cold_disk_total > 0 ? options.kv_cold_disk_total
                                                                    : -1);
  ReturnLargeBuffersToTheOs();
  state_ = std::make_unique<State>(options);
  // A running request's cold write that would pass --kv-cold-disk-total closes idle kept
  // conversations first (least recently used), as --kv-memory-limit does for RAM.
  DiskColdStore::SetProcessRoomMaker(
      [sessions = &state_->sessions](int64_t bytes) { return sessions->ReleaseColdBytes(bytes); });
}

Server::~Server() { DiskColdStore::SetProcessRoomMaker(nullptr); }

void Server::Run() {
  State& s = *state_;
  const ServerOptions& o = s.options;
  // Connection threads: one per running or queued request, plus room for /health, /metrics and
  // idle keep-alive connections. Generation runs on the slots' threads, not on these.
  const size_t connection_threads = static_cast<size_t>(o.slots + o.max_queue + 8);
  s.http.new_task_queue = [connection_threads] {
    return new httplib::ThreadPool(connection_threads);
  };
  // cpp-httplib's default sets SO_REUSEPORT, with which a second server on the same port would
  // start and silently share the traffic; SO_REUSEADDR alone still allows a quick restart.
  s.http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.http.set_tcp_nodelay(true);  // stream chunks leave at once, not after Nagle's delay
  s.http.set_payload_max_length(o.max_body_bytes);
  s.http.set_read_timeout(30, 0);
  s.http.set_write_timeout(30, 0);
  InstallRoutes(s.http, s.context, RouteOptions{o.log_requests, o.api_key});

  int port = o.port;
  if (port == 0) {
    port = s.http.bind_to_any_port(o.host);
    if (port <= 0) {
      throw Error("cannot listen on --host " + o.host +
                  " (any port): give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0");
    }
  } else if (!s.http.bind_to_port(o.host, port)) {
    throw Error("cannot listen on " + o.host + ":" + std::to_string(port) +
                " (address in use, or not an address of this machine): pick another --port "
                "(--port 0 takes any free one) or stop what holds it");
  }
  const SchedulerOptions& sched = s.scheduler.options();
  std::fprintf(stderr,
               "qevict serve: model %s on http://%s:%d | %d slot(s) x %d thread(s) | queue %d | "
               "kv memory limit %lld bytes | default kv policy %s | kept sessions %d, ttl %d s\n",
               s.context.model_id.c_str(), o.host.c_str(), port, sched.slots,
               sched.threads_per_slot, sched.max_queue,
               static_cast<long long>(sched.kv_memory_limit), o.kv.policy.c_str(), o.max_sessions,
               o.session_ttl_seconds);
  std::fflush(stderr);
  s.http.listen_after_bind();
}

void Server::Stop() {
  state_->scheduler.Shutdown();
  state_->http.stop();
}

}  // namespace qevict::server
