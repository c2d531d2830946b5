// `qevict serve`: the OpenAI-compatible HTTP server (src/server/, docs/server.md).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "server/server.h"
#include "tools/build_revision.h"
#include "tools/commands.h"
#include "tools/kv_flags.h"
#include "util/error.h"

namespace qevict::cli {
namespace {

struct ServeFlags {
  server::ServerOptions options;
  KvFlags kv;
};

// SIGINT / SIGTERM stop the server gracefully. They are blocked in every thread (see Serve) and
// taken by one thread with sigwait, which may then call Server::Stop (not async-signal-safe)
// freely. SIGUSR1 only wakes that thread so that it can be joined when the server has stopped.
class SignalStopper {
 public:
  explicit SignalStopper(server::Server& server) {
    const sigset_t set = StopSignals();
    thread_ = std::thread([&server, set] {
      int signal = 0;
      if (sigwait(&set, &signal) == 0 && signal != SIGUSR1) {
        std::fprintf(stderr, "qevict serve: signal %d, shutting down\n", signal);
        server.Stop();
      }
    });
  }
  ~SignalStopper() {
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }
  SignalStopper(const SignalStopper&) = delete;
  SignalStopper& operator=(const SignalStopper&) = delete;

  static sigset_t StopSignals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    return set;
  }

 private:
  std::thread thread_;
};

int Serve(ServeFlags& f) {
  // Block the stop signals before any thread starts so that every thread inherits the mask, and
  // ignore SIGPIPE: a client that disconnects mid-stream must not kill the server.
  const sigset_t set = SignalStopper::StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  f.options.kv = f.kv.Resolve();
  f.options.build_info = BuildRevision();
  server::Server server(f.options);
  SignalStopper stopper(server);
  server.Run();
  std::fprintf(stderr, "qevict serve: stopped\n");
  return 0;
}

}  // namespace

std::function<int()> RegisterServe(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  server::ServerOptions& o = flags->options;
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (docs/server.md)");
  cmd->add_option("-m,--model", o.model_path, "GGUF model file")->required();
  cmd->add_option("--host", o.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o.port, "port (0: any free port, printed on stderr)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--slots,--parallel", o.slots,
                  "requests decoded concurrently, each with its own KV cache (llama-server's "
                  "-np / --parallel)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("-t,--threads", o.threads,
                  "compute threads in total, split evenly over the slots (default: all cores)");
  cmd->add_option("--kv-memory-limit", o.kv_memory_limit,
                  "KV bytes reserved over running requests (e.g. 512m, 2g; 0: no limit); a "
                  "request waits until its reservation fits")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str()
      ->group("KV cache");
  cmd->add_option("--kv-cold-disk-total", o.kv_cold_disk_total,
                  "bytes the cold files of every conversation (qevict-recall's cold tier) may "
                  "hold on disk together (e.g. 4g; 0: no limit but each one's "
                  "--kv-cold-disk-limit); a write past it closes idle kept conversations "
                  "first, then ends the writing conversation with 507")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str()
      ->group("KV cache");
  cmd->add_option("--queue", o.max_queue, "requests that may wait for a slot; more get 503")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--queue-timeout", o.queue_timeout_seconds,
                  "seconds a request may wait for a slot before 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  // llama-server's -c with its shared (unified) KV cache: every request may use up to -c tokens;
  // what the slots hold together is bounded by --kv-memory-limit, in bytes.
  cmd->add_option("-c,--ctx,--ctx-size", o.ctx,
                  "most prompt + completion tokens per request (default: the model's context); "
                  "the slots' bytes together are bounded by --kv-memory-limit");
  cmd->add_option("-b,--batch,--batch-size", o.batch, "prefill tokens per forward pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--default-max-tokens", o.default_max_tokens,
                  "max_tokens when a request gives none (0: OpenAI's defaults: the rest of the "
                  "context for chat, 16 for completions)")
      ->capture_default_str();
  cmd->add_option("--max-body", o.max_body_bytes, "largest request body in bytes (more: 413)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--max-sessions", o.max_sessions,
                  "conversations kept for reuse: a request that extends one prefills only its "
                  "new tokens (0: none; docs/server.md, \"Kept sessions\")")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--session-ttl", o.session_ttl_seconds,
                  "seconds an idle kept conversation lives")
      ->capture_default_str()
      ->check(CLI::Range(1, 604800));
  cmd->add_option("--alias", o.model_alias, "model id to report (default: the file name)");
  // One line per request on stderr by default, as llama-server logs its requests.
  cmd->add_flag("--log-disable{false},-v{true},--verbose{true}", o.log_requests,
                "--log-disable: no request log line on stderr (logged by default; -v, --verbose "
                "are accepted for the same default)");
  cmd->add_option("--chat-template", o.chat_template,
                  "chat template instead of the model's: chatml, llama3, llama2, gemma, phi3, or a "
                  "Jinja file of one of those families");
  cmd->add_option("--api-key", o.api_key,
                  "require 'Authorization: Bearer KEY' on every route but /health (401 otherwise)");
  AddKvFlags(*cmd, flags->kv, {true, false, ""});  // statistics: each response's kv object
  return [flags] { return Serve(*flags); };
}

}  // namespace qevict::cli
