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

#include "engine/loaded_model.h"
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

void CheckOptions(const ServerOptions& o) {
  if (o.slots < 1 || o.slots > 256) throw Error("--slots must be in [1, 256]");
  if (o.threads < 0) throw Error("-t must be >= 0");
  if (o.kv_memory_limit < 0) throw Error("--kv-memory-limit must be >= 0 bytes");
  if (o.max_queue < 0 || o.max_queue > 4096) throw Error("--queue must be in [0, 4096]");
  if (o.queue_timeout_seconds < 1) throw Error("--queue-timeout must be >= 1 second");
  if (o.ctx < 0) throw Error("-c must be >= 0");
  if (o.batch < 1 || o.batch > 4096) throw Error("-b must be in [1, 4096]");
  if (o.default_max_tokens < 0) throw Error("--default-max-tokens must be >= 0");
  if (o.max_body_bytes < 1024) throw Error("--max-body must be at least 1024 bytes");
  if (o.port < 0 || o.port > 65535) throw Error("--port must be in [0, 65535]");
  if (o.max_sessions < 0 || o.max_sessions > 4096) {
    throw Error("--max-sessions must be in [0, 4096]");
  }
  if (o.session_ttl_seconds < 1) throw Error("--session-ttl must be >= 1 second");
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
  ReturnLargeBuffersToTheOs();
  state_ = std::make_unique<State>(options);
}

Server::~Server() = default;

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
    if (port <= 0) throw Error("cannot listen on " + o.host + " (any port)");
  } else if (!s.http.bind_to_port(o.host, port)) {
    throw Error("cannot listen on " + o.host + ":" + std::to_string(port) +
                " (address in use, or not an address of this machine)");
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
