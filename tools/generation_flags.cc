#include "tools/generation_flags.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "util/error.h"

namespace qevict::cli {

SamplerOptions SamplingFlags::Options(uint64_t seed_offset) const {
  SamplerOptions o;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.repeat_penalty = repeat_penalty;
  o.repeat_last_n = repeat_last_n;
  o.presence_penalty = presence_penalty;
  o.frequency_penalty = frequency_penalty;
  o.seed = seed + seed_offset;
  return o;
}

void AddSamplingFlags(CLI::App& cmd, SamplingFlags& flags, const std::string& seed_help) {
  const char* group = "Sampling";
  cmd.add_option("--temp", flags.temperature, "temperature; 0 = greedy")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--top-k", flags.top_k, "top-k (<= 0: off)")->capture_default_str()->group(group);
  cmd.add_option("--top-p", flags.top_p, "top-p (1: off)")->capture_default_str()->group(group);
  cmd.add_option("--min-p", flags.min_p,
                 "drop tokens less likely than min-p x the most likely one (0: off)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--repeat-penalty", flags.repeat_penalty,
                 "divide the logits of the tokens in the --repeat-last-n window by this (1: off)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--repeat-last-n", flags.repeat_last_n,
                 "the penalties' window: last N tokens of prompt + output (-1: all, 0: off)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--presence-penalty", flags.presence_penalty,
                 "subtract from the logit of every token in the --repeat-last-n window")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--frequency-penalty", flags.frequency_penalty,
                 "subtract per occurrence of a token in the --repeat-last-n window")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--seed", flags.seed, seed_help)->capture_default_str()->group(group);
  cmd.add_option("--stop", flags.stop,
                 "stop before this text (repeatable); it is not printed")
      ->group(group);
}

std::function<void(int64_t, int64_t, const KvCache&)> PrefillProgressLine() {
  if (isatty(STDERR_FILENO) == 0) return {};
  struct Start {
    std::chrono::steady_clock::time_point time;
    int64_t done = -1;  // tokens done at `time` (-1: no prompt under way)
  };
  auto start = std::make_shared<Start>();
  return [start](int64_t done, int64_t total, const KvCache& cache) {
    if (total <= 512) return;
    const auto now = std::chrono::steady_clock::now();
    if (done >= total) {
      std::fputs("\r\033[K", stderr);  // erase the line: the summary follows
      start->done = -1;
      return;
    }
    if (start->done < 0) {  // the first chunk: the rate is measured from here on
      *start = {now, done};
      return;
    }
    const double seconds = std::chrono::duration<double>(now - start->time).count();
    const double rate = seconds > 0.0 ? static_cast<double>(done - start->done) / seconds : 0.0;
    const double eta = rate > 0.0 ? static_cast<double>(total - done) / rate : 0.0;
    const KvStats kv = cache.Stats();
    std::fprintf(stderr, "\r\033[Kprefill %lld/%lld tokens, %.0f tok/s, ETA %.0f s | KV %.1f MiB "
                 "resident, %.1f MiB reserved",
                 static_cast<long long>(done), static_cast<long long>(total), rate, eta,
                 static_cast<double>(kv.resident_bytes()) / (1 << 20),
                 static_cast<double>(kv.reserved_bytes) / (1 << 20));
    std::fflush(stderr);
  };
}

void AddEngineFlags(CLI::App& cmd, std::string& chat_template, int& threads, int& batch) {
  cmd.add_option("--chat-template", chat_template,
                 "chat template instead of the model's: chatml, llama3, llama2, gemma, phi3, or a "
                 "Jinja file of one of those families");
  cmd.add_option("-t,--threads", threads, "threads (default: all available cores)");
  cmd.add_option("-b,--batch,--batch-size", batch, "prefill tokens per forward pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
}

std::string ReadTextFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot read " + what + " '" + path + "': " + std::strerror(errno) +
                "; check the path given to -f");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace qevict::cli
