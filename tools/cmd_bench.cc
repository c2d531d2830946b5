// `qevict bench`: prefill and decode speed at several context lengths, resident memory, KV-cache
// bytes and the machine's memory bandwidth (to express decode as a fraction of its limit).
//
// For each context length L: a synthetic prompt of L ordinary tokens is prefilled (timed), then
// --gen greedy decode steps follow (timed): "decode at context L". When L + gen exceeds the
// model's window the prompt is shortened so that the run ends at the window. Each length runs
// --reps times on one session; the best repetition is reported (the medians are in the JSON).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "engine/loaded_model.h"
#include "engine/session.h"
#include "tokenizer/vocab.h"
#include "tools/build_revision.h"
#include "tools/commands.h"
#include "tools/kv_flags.h"
#include "tools/kv_stats_summary.h"
#include "util/bandwidth.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/memory_stats.h"

namespace qevict::cli {
namespace {

struct BenchFlags {
  std::string model;
  std::string ctx = "512,4096";
  int threads = 0;
  int gen = 64;
  int reps = 3;
  int batch = 256;
  int bandwidth_mib = 1024;
  int follow_up = 32;        // tokens of a later prompt after the decode steps (0: none)
  // "kept": the follow-up finds what the OS keeps of the cold file; "dropped": the file is
  // dropped from the page cache first (its reads go to the disk, as under memory pressure).
  std::string cold_page_cache = "kept";
  std::string perf_control;  // a `perf record --control fifo:` path
  std::string perf_phase = "decode";
  KvFlags kv;  // --json (machine-readable output) is registered with the --kv-* flags
};

struct Row {
  int64_t ctx = 0;
  int64_t prompt_tokens = 0;
  std::vector<double> prefill_tps, decode_tps;
  KvStats kv_prefill, kv_end;
  KvStats kv_after_follow_up;  // kv_end when there is no follow-up
  MemoryStats mem;
  double bytes_per_token = 0.0;  // weights + KV read by one decode step (mean over the steps)
  int prefill_chunk = 0;         // bounded prefill's routing chunk (0: routed at the prompt end)
  int64_t gen = 0;
  int64_t follow_up_tokens = 0;
  // A follow-up prompt (a question after the answer): its time to the first token, recalls
  // included, and the cold-store bytes read by the decode steps and by the follow-up.
  std::vector<double> follow_up_ttft_s;
  int64_t decode_cold_read_bytes = 0;
  int64_t follow_up_cold_read_bytes = 0;
  // Time the cache spent routing (KvStats::routing_seconds) during the decode steps and the
  // follow-up, in the last repetition.
  double decode_routing_s = 0.0;
  double follow_up_routing_s = 0.0;
};

std::vector<int64_t> ParseContexts(const std::string& list) {
  std::vector<int64_t> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v <= 0) {
      throw Error("--ctx '" + list +
                  "': give positive token counts separated by commas, e.g. "
                  "--ctx 512,2048,8192");
    }
    out.push_back(v);
  }
  if (out.empty()) throw Error("--ctx is empty: give token counts, e.g. --ctx 512,2048");
  return out;
}

// n deterministic prompt tokens: ordinary (non-control, non-byte) ids drawn by a fixed-seed
// generator, after BOS when the model wants one.
std::vector<int32_t> SyntheticPrompt(const LoadedModel& m, int64_t n, uint64_t seed = 20240601,
                                     bool bos = true) {
  const gguf::File& file = m.model->file();
  const int n_vocab = m.model->config().n_vocab;
  std::vector<int32_t> types;
  if (file.Has("tokenizer.ggml.token_type")) {
    types = file.GetInt32Array("tokenizer.ggml.token_type");
  }
  std::vector<int32_t> ordinary;
  for (int32_t id = 0; id < n_vocab; ++id) {
    const bool normal = types.size() == static_cast<size_t>(n_vocab)
                            ? types[id] == static_cast<int32_t>(TokenType::kNormal)
                            : !m.tokenizer->IsEndOfGeneration(id);
    if (normal && id != m.tokenizer->bos()) ordinary.push_back(id);
  }
  if (ordinary.empty()) throw Error("the vocabulary has no ordinary tokens to build a prompt from");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, ordinary.size() - 1);
  std::vector<int32_t> tokens;
  tokens.reserve(n);
  if (bos && m.tokenizer->add_bos() && m.tokenizer->bos() >= 0) {
    tokens.push_back(m.tokenizer->bos());
  }
  while (static_cast<int64_t>(tokens.size()) < n) tokens.push_back(ordinary[pick(rng)]);
  return tokens;
}

// Weight bytes one decode step reads: every tensor once, except that token_embd contributes a
// single row -- unless the output projection is tied to it, when it is read whole as the output.
double WeightBytesPerToken(const TransformerModel& model) {
  double bytes = 0.0;
  for (const gguf::TensorInfo& t : model.file().tensors()) {
    if (t.name == "token_embd.weight") {
      bytes += model.config().tied_output ? static_cast<double>(t.n_bytes)
                                          : static_cast<double>(t.n_bytes) / t.n_rows();
    } else {
      bytes += static_cast<double>(t.n_bytes);
    }
  }
  return bytes;
}

// Switches a `perf record -D -1 --control fifo:PATH` on around one phase of the last repetition,
// so that a profile shows that phase alone.
class PerfControl {
 public:
  explicit PerfControl(const std::string& fifo) {
    if (fifo.empty()) return;
    out_.open(fifo);
    if (!out_) {
      throw Error("cannot open --perf-control fifo '" + fifo +
                  "': create it with mkfifo and start `perf record -D -1 --control fifo:" + fifo +
                  "` first");
    }
  }
  void Send(const char* command) {
    if (out_.is_open()) out_ << command << '\n' << std::flush;
  }

 private:
  std::ofstream out_;
};

int32_t Argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

double Best(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Row BenchContext(const BenchFlags& f, const LoadedModel& m, ThreadPool& pool, int64_t ctx,
                 double weight_bytes, PerfControl& perf) {
  const int64_t window = m.model->config().context_length;
  Row row;
  row.ctx = ctx;
  // The prompt, the decode steps and a follow-up prompt (with its first token) fit the window.
  const int64_t after_prompt = f.gen + (f.follow_up > 0 ? f.follow_up + 1 : 0);
  row.prompt_tokens = std::min(ctx, window - after_prompt);
  if (row.prompt_tokens < 1) {
    throw Error("--ctx " + std::to_string(ctx) + " with --gen " + std::to_string(f.gen) +
                " and --follow-up " + std::to_string(f.follow_up) +
                " does not fit the model's window of " + std::to_string(window) +
                " tokens: lower --gen and --follow-up below " + std::to_string(window));
  }
  const std::vector<int32_t> prompt = SyntheticPrompt(m, row.prompt_tokens);
  const std::vector<int32_t> follow_up =
      SyntheticPrompt(m, f.follow_up, /*seed=*/20261206, /*bos=*/false);
  ResetPeakRss();
  SessionOptions so;
  so.n_ctx = row.prompt_tokens + after_prompt;
  so.prefill_chunk = f.batch;
  ApplyPrefillChunk(f.kv, so);
  const KvCacheFactory factory = MakeKvCacheFactory(f.kv);
  const KvConfig config = f.kv.Resolve();
  const bool budgeted = config.policy != "full" && config.limited();
  row.prefill_chunk = budgeted ? config.prefill_chunk : 0;
  row.gen = f.gen;
  row.follow_up_tokens = f.follow_up;
  for (int rep = 0; rep < f.reps; ++rep) {
    const bool last = rep + 1 == f.reps;
    // A fresh session (and cache) per repetition, as a new request would get.
    Session session(*m.model, pool, so, factory);
    session.set_score_context(MakeScoreContext(*m.tokenizer, config, prompt));
    session.BeginRun(row.prompt_tokens, f.gen);
    if (last && f.perf_phase == "prefill") perf.Send("enable");
    std::span<const float> logits = session.Prefill(prompt);
    if (last && f.perf_phase == "prefill") perf.Send("disable");
    row.kv_prefill = session.cache().Stats();
    if (last && f.perf_phase == "decode") perf.Send("enable");
    for (int i = 0; i < f.gen; ++i) logits = session.Decode(Argmax(logits));
    if (last && f.perf_phase == "decode") perf.Send("disable");
    const SessionTimings& t = session.timings();
    row.prefill_tps.push_back(t.prompt_tokens / std::max(t.prompt_seconds, 1e-9));
    row.decode_tps.push_back(t.generated_tokens / std::max(t.generate_seconds, 1e-9));
    row.kv_end = session.cache().Stats();
    row.kv_after_follow_up = row.kv_end;
    row.decode_cold_read_bytes = row.kv_end.cold_read_bytes - row.kv_prefill.cold_read_bytes;
    row.decode_routing_s = row.kv_end.routing_seconds - row.kv_prefill.routing_seconds;
    if (f.follow_up > 0) {
      // The follow-up as a conversation's next turn: what the cache holds is kept, and the time
      // to its first token is its prefill (recalls from the cold tier included) and the logits.
      session.ContinueRun(f.follow_up, 1);
      if (f.cold_page_cache == "dropped") session.cache().DropColdPageCache();
      if (last && f.perf_phase == "follow-up") perf.Send("enable");
      const auto start = std::chrono::steady_clock::now();
      session.Prefill(follow_up);
      if (last && f.perf_phase == "follow-up") perf.Send("disable");
      row.follow_up_ttft_s.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      const KvStats after = session.cache().Stats();
      row.kv_after_follow_up = after;
      row.follow_up_cold_read_bytes = after.cold_read_bytes - row.kv_end.cold_read_bytes;
      row.follow_up_routing_s = after.routing_seconds - row.kv_end.routing_seconds;
    }
    if (last) row.mem = ReadMemoryStats();
  }
  const double kv_read =
      0.5 * static_cast<double>(row.kv_prefill.resident_bytes() + row.kv_end.resident_bytes());
  row.bytes_per_token = weight_bytes + kv_read;
  if (f.kv.stats) PrintKvStats(f.kv, row.kv_end);
  return row;
}

// Pages the weights in and lets the pool's threads settle before anything is timed.
void WarmUp(const LoadedModel& m, ThreadPool& pool) {
  const std::vector<int32_t> prompt = SyntheticPrompt(m, 16);
  SessionOptions so;
  so.n_ctx = static_cast<int64_t>(prompt.size()) + 4;
  so.prefill_chunk = static_cast<int>(prompt.size());
  Session session(*m.model, pool, so, MakeKvCacheFactory(KvFlags{}));
  session.BeginRun(static_cast<int64_t>(prompt.size()), 4);
  std::span<const float> logits = session.Prefill(prompt);
  for (int i = 0; i < 4; ++i) logits = session.Decode(Argmax(logits));
}

nlohmann::json RowJson(const Row& r, double bandwidth_gbs) {
  const double decode = Best(r.decode_tps);
  return {{"ctx", r.ctx},
          {"prompt_tokens", r.prompt_tokens},
          {"prefill_tps", Best(r.prefill_tps)},
          {"prefill_tps_median", Median(r.prefill_tps)},
          {"prefill_tps_samples", r.prefill_tps},
          {"decode_tps", decode},
          {"decode_tps_median", Median(r.decode_tps)},
          {"decode_tps_samples", r.decode_tps},
          {"kv_resident_bytes", r.kv_end.resident_bytes()},
          {"kv_resident_bytes_after_prompt", r.kv_prefill.resident_bytes()},
          {"kv_peak_bytes", r.kv_end.peak_bytes},
          {"kv_prefill_peak_bytes", r.kv_end.prefill_peak_bytes},
          {"kv_reserved_bytes", r.kv_end.reserved_bytes},
          {"kv_peak_reserved_bytes", r.kv_end.peak_reserved_bytes},
          {"kv_routed_reserved_peak_bytes", r.kv_end.routed_reserved_peak_bytes},
          {"kv_prefill_chunk", r.prefill_chunk},
          {"kv_budget_bytes", r.kv_end.budget_bytes},
          {"kv_budget_scope", r.kv_end.budget_scope_global ? "global" : "all"},
          {"kv_global_budget_bytes", r.kv_end.global_budget_bytes},
          {"kv_sliding_bytes", r.kv_end.sliding_bytes},
          {"kv_full_fp16_bytes", r.kv_end.full_fp16_bytes},
          {"kv_cold_bytes", r.kv_end.cold_bytes},
          {"kv_cold_page_cache_bytes", r.kv_end.cold_page_cache_bytes},
          {"kv_cold_prefetch_bytes", r.kv_after_follow_up.cold_prefetch_bytes},
          {"follow_up_tokens", r.follow_up_ttft_s.empty() ? 0 : r.follow_up_tokens},
          {"follow_up_ttft_s",
           r.follow_up_ttft_s.empty() ? 0.0
                                      : *std::min_element(r.follow_up_ttft_s.begin(),
                                                          r.follow_up_ttft_s.end())},
          {"follow_up_ttft_s_samples", r.follow_up_ttft_s},
          {"cold_read_bytes_per_token",
           static_cast<double>(r.decode_cold_read_bytes) / std::max<int64_t>(r.gen, 1)},
          {"cold_read_bytes_follow_up", r.follow_up_cold_read_bytes},
          {"routing_ms_per_token", 1e3 * r.decode_routing_s / std::max<int64_t>(r.gen, 1)},
          {"routing_ms_follow_up", 1e3 * r.follow_up_routing_s},
          {"kv_infeasible", r.kv_end.infeasible},
          {"peak_rss_bytes", r.mem.peak_rss_bytes},
          {"rss_bytes", r.mem.rss_bytes},
          {"rss_anon_bytes", r.mem.rss_anon_bytes},
          {"rss_file_bytes", r.mem.rss_file_bytes},
          {"bytes_per_token", r.bytes_per_token},
          {"bandwidth_fraction",
           bandwidth_gbs > 0 ? r.bytes_per_token * decode / (bandwidth_gbs * 1e9) : 0.0}};
}

double Mib(double bytes) { return bytes / (1024.0 * 1024.0); }

void PrintText(const nlohmann::json& j) {
  std::printf("model: %s (%.1f MiB; %.1f MiB of weights read per decoded token); qevict %s\n",
              j["model"].get<std::string>().c_str(), Mib(j["model_bytes"].get<double>()),
              Mib(j["weight_bytes_per_token"].get<double>()), j["build"].get<std::string>().c_str());
  std::printf(
      "threads %d | simd %s | kv policy %s | prefill batch %d | %d decode steps | best of "
      "%d reps\n",
      j["threads"].get<int>(), j["simd"].get<std::string>().c_str(),
      j["kv_policy"].get<std::string>().c_str(), j["batch"].get<int>(), j["gen"].get<int>(),
      j["reps"].get<int>());
  const double bw = j["bandwidth_gbs"].get<double>();
  if (bw > 0) {
    std::printf(
        "memory bandwidth: %.1f GB/s read (%.0f MiB buffer, %d threads, best of %d); "
        "%.1f GB/s over a buffer the size of the weights\n",
        bw, Mib(j["bandwidth_buffer_bytes"].get<double>()), j["threads"].get<int>(),
        j["bandwidth_passes"].get<int>(), j["working_set_bandwidth_gbs"].get<double>());
  }
  std::printf("peak RSS: %.1f MiB\n\n", Mib(j["peak_rss_bytes"].get<double>()));
  std::printf("%7s %7s %14s %13s %12s %11s %10s %10s %9s %13s %11s %11s %13s %12s\n", "ctx",
              "prompt", "prefill tok/s", "decode tok/s", "KV resident", "peak RSS", "RSS file",
              "MiB/token", "% bw lim", "follow-up ms", "cold disk", "cold/token",
              "cold/follow-up", "route ms/tok");
  for (const nlohmann::json& r : j["rows"]) {
    std::printf(
        "%7lld %7lld %14.1f %13.1f %8.1f MiB %7.1f MiB %6.1f MiB %10.1f %8.1f%% %13.1f %7.1f MiB "
        "%7.1f KiB %9.1f MiB %12.3f\n",
        r["ctx"].get<long long>(), r["prompt_tokens"].get<long long>(),
        r["prefill_tps"].get<double>(), r["decode_tps"].get<double>(),
        Mib(r["kv_resident_bytes"].get<double>()), Mib(r["peak_rss_bytes"].get<double>()),
        Mib(r["rss_file_bytes"].get<double>()), Mib(r["bytes_per_token"].get<double>()),
        100.0 * r["bandwidth_fraction"].get<double>(), 1e3 * r["follow_up_ttft_s"].get<double>(),
        Mib(r["kv_cold_bytes"].get<double>()),
        r["cold_read_bytes_per_token"].get<double>() / 1024.0,
        Mib(r["cold_read_bytes_follow_up"].get<double>()),
        r["routing_ms_per_token"].get<double>());
  }
  std::printf("\n(follow-up ms: time to the first token of a %lld-token later prompt after the "
              "decode steps, recalls included; cold/token and cold/follow-up: bytes read back "
              "from the cold store per decoded token and by that prompt; route ms/tok: time "
              "the cache spent routing per decoded token, recall's ranking and tier moves "
              "included)\n",
              j["rows"].empty() ? 0LL : j["rows"][0]["follow_up_tokens"].get<long long>());
}

int Bench(const BenchFlags& f) {
  const std::vector<int64_t> contexts = ParseContexts(f.ctx);
  if (f.gen < 1) {
    throw Error("--gen " + std::to_string(f.gen) + ": give >= 1 tokens to decode per context");
  }
  if (f.reps < 1) throw Error("--reps " + std::to_string(f.reps) + ": give >= 1 repetitions");
  if (f.bandwidth_mib < 0) {
    throw Error("--bandwidth-mib " + std::to_string(f.bandwidth_mib) +
                ": give >= 0 MiB (0 skips the bandwidth measurement)");
  }
  LoadedModel m = LoadedModel::Load(f.model);
  ThreadPool pool(f.threads > 0 ? f.threads : ThreadPool::HardwareThreads());
  const double weight_bytes = WeightBytesPerToken(*m.model);
  MakeKvCacheFactory(f.kv);  // rejects a bad --kv-policy before anything runs
  WarmUp(m, pool);

  PerfControl perf(f.perf_control);
  std::vector<Row> rows;
  for (int64_t ctx : contexts) rows.push_back(BenchContext(f, m, pool, ctx, weight_bytes, perf));
  int64_t peak = ReadMemoryStats().peak_rss_bytes;
  for (const Row& r : rows) peak = std::max(peak, r.mem.peak_rss_bytes);

  // Measured last so that its buffer never counts towards the peaks above.
  BandwidthResult bw, ws;
  if (f.bandwidth_mib > 0) {
    bw = MeasureReadBandwidth(pool, static_cast<size_t>(f.bandwidth_mib) << 20, 5);
    ws = MeasureReadBandwidth(pool, static_cast<size_t>(weight_bytes), 10);
  }

  nlohmann::json j = {{"build", BuildRevision()},
                      {"model", f.model},
                      {"model_bytes", m.model->file().file_size()},
                      {"weight_bytes_per_token", weight_bytes},
                      {"threads", pool.size()},
                      {"simd", SimdLevelName(ActiveSimdLevel())},
                      {"kv_policy", f.kv.policy},
                      {"batch", f.batch},
                      {"gen", f.gen},
                      {"reps", f.reps},
                      {"cold_page_cache", f.cold_page_cache},
                      {"statistic", "best"},
                      {"bandwidth_gbs", bw.gb_per_s},
                      {"bandwidth_median_gbs", bw.median_gb_per_s},
                      {"bandwidth_buffer_bytes", bw.buffer_bytes},
                      {"bandwidth_passes", bw.passes},
                      {"working_set_bandwidth_gbs", ws.gb_per_s},
                      {"last_level_cache_bytes", LastLevelCacheBytes()},
                      {"peak_rss_bytes", peak},
                      {"rss_bytes", ReadMemoryStats().rss_bytes},
                      {"rows", nlohmann::json::array()}};
  for (const Row& r : rows) j["rows"].push_back(RowJson(r, bw.gb_per_s));
  if (f.kv.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    PrintText(j);
  }
  return 0;
}

}  // namespace

std::function<int()> RegisterBench(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "prefill/decode tokens per second, resident memory and memory bandwidth");
  cmd->add_option("-m,--model", flags->model, "GGUF model file")->required();
  cmd->add_option("--ctx", flags->ctx, "context lengths, comma-separated")->capture_default_str();
  cmd->add_option("-t,--threads", flags->threads, "threads (default: all available cores)");
  cmd->add_option("--gen", flags->gen, "decode steps timed at each context length")
      ->capture_default_str();
  cmd->add_option("--reps", flags->reps, "repetitions per context length (best is reported)")
      ->capture_default_str();
  cmd->add_option("-b,--batch", flags->batch, "prefill tokens per forward pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--bandwidth-mib", flags->bandwidth_mib,
                  "buffer for the memory-bandwidth measurement (0: skip it)")
      ->capture_default_str();
  cmd->add_option("--follow-up", flags->follow_up,
                  "tokens of a later prompt after the decode steps (a follow-up question), "
                  "whose time to the first token is reported (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--cold-page-cache", flags->cold_page_cache,
                  "before the follow-up: kept (the cold file as the OS page cache holds it) or "
                  "dropped (dropped from the page cache first, so recall reads the disk)")
      ->capture_default_str()
      ->check(CLI::IsMember({"kept", "dropped"}));
  cmd->add_option("--perf-control", flags->perf_control,
                  "fifo of `perf record -D -1 --control fifo:FIFO`: profile one phase only");
  cmd->add_option("--perf-phase", flags->perf_phase, "phase --perf-control enables")
      ->capture_default_str()
      ->check(CLI::IsMember({"prefill", "decode", "follow-up"}));
  AddKvFlags(*cmd, flags->kv,
             {true, true,
              "machine-readable output: one JSON object on stdout (with --kv-stats, the cache "
              "summary and statistics of each context on stderr too)"});
  return [flags] { return Bench(*flags); };
}

}  // namespace qevict::cli
