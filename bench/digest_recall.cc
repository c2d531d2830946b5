// How well each window digest (src/kv/window_digest.h) ranks a real model's windows for real
// queries: recall of the true top-k windows (k = 5 % and 10 % of the windows) by each digest's
// estimate. The data: the model reads a long text through a FullCache; the keys after RoPE come
// from DenseLayer, the queries are those of the prompt's last tokens (captured by a KvCache
// wrapper around the FullCache as the model hands them to Attend).
//
// Three rankings are scored:
//   head max:   per layer, query and query head, windows by their max logit q . k (the quantity
//               Quest bounds);
//   head mass:  the same, windows by their attention mass (log-sum-exp of their logits);
//   layer mass: per layer (a window is one unit for all heads, as in the cache), windows by the
//               largest share of attention any query head of any captured query gives them.
//               Estimated shares divide by the resident tokens' exact mass (sinks and the
//               queries' own region, which recall would hold in fp16) plus every window's
//               estimated mass.
//
//   digest_recall MODEL.gguf TEXT... [--tokens N] [--queries Q] [--window W] [--sinks S]
//                 [--digests KIND[:G],...] [--fit-tokens F]
//
// --digests names the digests scored (DigestKindName's names); KIND:G builds one digest per G
// consecutive windows (over their G * W keys, so it costs 1 / G of the bytes a window) and gives
// every window of the group the group's estimate: a coarser granularity at fewer bytes. The
// default list is every kind per window and a few coarser ones near 1 % of a window. The
// context kinds (mean-key-q4c, ...) fit each layer's DigestContext on the windows within the
// first F tokens (default 1024: what a cache sees of a prompt at its first evictions) and, for
// the low-rank kinds, the queries of those tokens, once, and read every window of the layer
// against it.
//
// With sliding-window layers (Gemma 3), the model runs as in a session (rings for the sliding
// layers beside the FullCache of the global layers) and only the global layers are scored: the
// sliding layers keep their ring whatever the policy and never have cold windows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "engine/session.h"
#include "kv/full_cache.h"
#include "kv/window_digest.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace qevict {
namespace {

// A model's cache that remembers the queries of the last Attend call of every model layer, and
// those of the tokens before fit_tokens (what the low-rank digest contexts are fitted on).
class QueryCapture final : public KvCache {
 public:
  QueryCapture(KvCache& base, int n_layers, int n_heads, int head_dim, int64_t fit_tokens)
      : base_(base),
        queries_(n_layers),
        fit_queries_(n_layers),
        row_(static_cast<int64_t>(n_heads) * head_dim),
        fit_tokens_(fit_tokens) {}
  void BeginRun(int64_t p, int64_t g) override { base_.BeginRun(p, g); }
  void Store(int layer, int n, const int32_t* pos, const float* k, const float* v) override {
    base_.Store(layer, n, pos, k, v);
  }
  void Attend(int layer, int n, const int32_t* pos, const float* q, float* out,
              ThreadPool& pool) override {
    queries_[layer].assign(q, q + n * row_);
    for (int i = 0; i < n; ++i) {
      if (pos[i] < fit_tokens_) {
        fit_queries_[layer].insert(fit_queries_[layer].end(), q + i * row_, q + (i + 1) * row_);
      }
    }
    base_.Attend(layer, n, pos, q, out, pool);
  }
  void EndBatch(BatchKind kind, ThreadPool& pool) override { base_.EndBatch(kind, pool); }
  KvStats Stats() const override { return base_.Stats(); }
  const KvGeometry& geometry() const override { return base_.geometry(); }
  int64_t n_tokens() const override { return base_.n_tokens(); }
  void DenseLayer(int layer, std::vector<float>* keys, std::vector<float>* values,
                  std::vector<int32_t>* positions) const override {
    base_.DenseLayer(layer, keys, values, positions);
  }
  const std::vector<float>& queries(int layer) const { return queries_[layer]; }
  const std::vector<float>& fit_queries(int layer) const { return fit_queries_[layer]; }

 private:
  KvCache& base_;
  std::vector<std::vector<float>> queries_;      // [model layer][n][n_heads][head_dim]
  std::vector<std::vector<float>> fit_queries_;  // the same for the tokens before fit_tokens
  int64_t row_;
  int64_t fit_tokens_;
};

// The cache a session would build for the `full` policy (engine/session.cc): a FullCache, or
// with sliding-window layers rings for those beside a FullCache of the global layers.
std::vector<int> TopK(const std::vector<double>& score, int k) {
  std::vector<int> idx(score.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  });
  idx.resize(k);
  return idx;
}

double Recall(const std::vector<double>& truth, const std::vector<double>& est, int k) {
  const auto t = TopK(truth, k), e = TopK(est, k);
  int hit = 0;
  for (int i : e) hit += std::count(t.begin(), t.end(), i) > 0 ? 1 : 0;
  return static_cast<double>(hit) / k;
}

double LogSumExp(const double* x, int n) {
  double m = -INFINITY;
  for (int i = 0; i < n; ++i) m = std::max(m, x[i]);
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(x[i] - m);
  return m + std::log(s);
}

// A digest scored: its kind over groups of `group` consecutive windows.
struct DigestConfig {
  DigestKind kind;
  int group = 1;
  std::string Name() const {
    return DigestKindName(kind) + (group == 1 ? std::string() : " x" + std::to_string(group));
  }
};

std::vector<DigestConfig> ParseDigestConfigs(const std::string& list) {
  std::vector<DigestConfig> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    DigestConfig c;
    const size_t colon = item.find(':');
    if (colon != std::string::npos) {
      const std::string g = item.substr(colon + 1);
      if (g.empty() || g.size() > 4 || g.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(g) < 1) {
        throw Error("--digests: '" + item + "' needs a group of 1 to 9999 windows after ':'");
      }
      c.group = std::stoi(g);
      item.resize(colon);
    }
    c.kind = ParseDigestKind(item);
    out.push_back(c);
  }
  if (out.empty()) throw Error("--digests needs at least one digest");
  return out;
}

struct Totals {
  double sum[3][2] = {};  // [ranking][k]
  int64_t n[3] = {};
};

int Main(int argc, char** argv) {
  std::string model_path;
  std::vector<std::string> texts;
  int64_t max_tokens = 4096;
  int n_queries = 16, window = 8, sinks = 4;
  int64_t fit_tokens = 1024;
  std::string digest_list =
      "quest-minmax,sign-sketch,mean-key,mean-key-q8,mean-key-q4,mean-key-q3,mean-key-q2,"
      "quest-minmax-q4,quest-minmax:4,quest-minmax:8,quest-minmax-q4:4,mean-key:4,mean-key:8,"
      "mean-key-q8:2,mean-key-q4:2,mean-key-q4c,mean-key-q3c,mean-key-q2c,mean-key-q4c:2,"
      "mean-key-pca-q8,mean-key-pca-q4,mean-key-pca-q8:2";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> int64_t {
      if (i + 1 >= argc) throw Error(a + " needs a value");
      const std::string v = argv[++i];
      size_t used = 0;
      int64_t x = -1;
      try {
        x = std::stoll(v, &used);
      } catch (const std::exception&) {
      }
      if (used != v.size() || x < 0 || x > (int64_t{1} << 24)) {
        throw Error(a + " needs a whole number from 0 to 16777216, not '" + v + "'");
      }
      return x;
    };
    if (a == "--tokens")
      max_tokens = value();
    else if (a == "--queries")
      n_queries = static_cast<int>(value());
    else if (a == "--window")
      window = static_cast<int>(value());
    else if (a == "--sinks")
      sinks = static_cast<int>(value());
    else if (a == "--fit-tokens")
      fit_tokens = value();
    else if (a == "--digests") {
      if (i + 1 >= argc) throw Error(a + " needs a value");
      digest_list = argv[++i];
    } else if (a.rfind("--", 0) == 0)
      throw Error("unknown option " + a);
    else if (model_path.empty())
      model_path = a;
    else
      texts.push_back(a);
  }
  if (model_path.empty() || texts.empty()) {
    throw Error(
        "usage: digest_recall MODEL.gguf TEXT... [--tokens N] [--queries Q] "
        "[--window W] [--sinks S] [--digests KIND[:G],...] [--fit-tokens F]");
  }
  std::string text;
  for (const auto& path : texts) {
    std::ifstream in(path);
    if (!in) throw Error("cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str() + "\n\n";
  }
  LoadedModel m = LoadedModel::Load(model_path);
  const ModelConfig& cfg = m.model->config();
  std::vector<int32_t> tokens = m.EncodeRaw(text);
  if (static_cast<int64_t>(tokens.size()) > max_tokens) tokens.resize(max_tokens);
  const int T = static_cast<int>(tokens.size());
  if (n_queries < 1 || window < 1) throw Error("--queries and --window must be at least 1");
  if ((T - n_queries - sinks) / window < 20) {
    throw Error("the text gives " + std::to_string(T) + " tokens: fewer than 20 windows of " +
                std::to_string(window) + " before the " + std::to_string(n_queries) +
                " queries (give a longer text or more --tokens)");
  }
  const KvGeometry geo = m.model->kv_geometry(T);
  const RopeTables ropes = m.model->MakeRopes(T);
  std::unique_ptr<KvCache> session_cache = MakeSessionCache(
      *m.model, T, ropes, [](const KvGeometry& g, const Rope& rope) -> std::unique_ptr<KvCache> {
        return std::make_unique<FullCache>(g, rope);
      });
  QueryCapture cache(*session_cache, cfg.n_layers, geo.n_heads, geo.head_dim, fit_tokens);
  ThreadPool pool(2);
  const int chunk = 256;
  ForwardScratch scratch(cfg, chunk);
  cache.BeginRun(T, 0);
  std::vector<int32_t> pos(T);
  for (int i = 0; i < T; ++i) pos[i] = i;
  // The last n_queries tokens go in a batch of their own: their queries are the ones captured.
  const int body = T - n_queries;
  for (int at = 0; at < body; at += chunk) {
    const int n = std::min(chunk, body - at);
    m.model->Forward(tokens.data() + at, pos.data() + at, n, 0, ropes, cache, scratch, pool);
  }
  m.model->Forward(tokens.data() + body, pos.data() + body, n_queries, 1, ropes, cache, scratch,
                   pool);

  const int d = geo.head_dim, n_kv = geo.n_kv_heads, n_heads = geo.n_heads;
  const int group = n_heads / n_kv;
  const int n_windows = (body - sinks) / window;
  const int ks[2] = {std::max(1, n_windows * 5 / 100), std::max(1, n_windows * 10 / 100)};
  const std::vector<DigestConfig> configs = ParseDigestConfigs(digest_list);
  const int n_configs = static_cast<int>(configs.size());
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<Totals> totals(n_configs);
  std::vector<int64_t> context_bytes(n_configs, 0);  // per layer, of the config's context
  int context_windows = 0;
  int64_t bound_violations = 0, bound_checks = 0;

  std::vector<float> keys, values;
  std::vector<int32_t> kpos;
  for (int layer = 0; layer < cfg.n_layers; ++layer) {
    if (cfg.is_sliding(layer)) continue;
    cache.DenseLayer(layer, &keys, &values, &kpos);  // [T][n_kv][d]
    if (static_cast<int>(kpos.size()) != T)
      throw Error("layer " + std::to_string(layer) + " holds " + std::to_string(kpos.size()) +
                  " tokens, not all " + std::to_string(T));
    const std::vector<float>& q = cache.queries(layer);
    // The layer's context for the context kinds: fitted on the windows of the first fit_tokens.
    const int n_fit = static_cast<int>(
        std::clamp<int64_t>((fit_tokens - sinks) / window, 1, static_cast<int64_t>(n_windows)));
    // One per rank the configs read (0: the per-channel context; r: a rank-r basis).
    std::map<int, std::shared_ptr<const DigestContext>> contexts;
    std::vector<float> fit(static_cast<size_t>(n_fit) * n_kv * window * d);
    {
      for (int w = 0; w < n_fit; ++w) {
        for (int h = 0; h < n_kv; ++h) {
          for (int t = 0; t < window; ++t) {
            const float* src =
                keys.data() + ((static_cast<int64_t>(sinks) + w * window + t) * n_kv + h) * d;
            std::copy(src, src + d,
                      fit.data() + ((static_cast<int64_t>(w) * n_kv + h) * window + t) * d);
          }
        }
      }
      context_windows = n_fit;
    }
    for (int k = 0; k < n_configs; ++k) {
      if (!DigestNeedsContext(configs[k].kind)) continue;
      const DigestGeometry fit_g{n_kv, d, window};
      const int rank = DigestContextRank(configs[k].kind, fit_g);
      if (contexts.count(rank) == 0) {
        const std::vector<float>& fq = cache.fit_queries(layer);
        contexts[rank] = std::make_shared<const DigestContext>(DigestContext::Fit(
            fit_g, fit.data(), n_fit, rank, fq.data(),
            static_cast<int>(fq.size() / (static_cast<size_t>(n_heads) * d)), n_heads));
      }
      context_bytes[k] = contexts[rank]->bytes();
    }
    // Per config, a digest per group of windows (the last group may hold fewer), built over the
    // group's keys in the block layout [n_kv][tokens][d].
    std::vector<std::vector<WindowDigest>> digests(n_configs);
    for (int k = 0; k < n_configs; ++k) {
      const int group = configs[k].group;
      for (int first = 0; first < n_windows; first += group) {
        const int tokens = std::min(group, n_windows - first) * window;
        std::vector<float> wk(static_cast<size_t>(n_kv) * tokens * d);
        for (int h = 0; h < n_kv; ++h) {
          for (int t = 0; t < tokens; ++t) {
            const float* src =
                keys.data() + ((static_cast<int64_t>(sinks) + first * window + t) * n_kv + h) * d;
            std::copy(src, src + d, wk.data() + (static_cast<int64_t>(h) * tokens + t) * d);
          }
        }
        const DigestGeometry group_g{n_kv, d, tokens};
        const auto ctx = DigestNeedsContext(configs[k].kind)
                             ? contexts.at(DigestContextRank(configs[k].kind, group_g))
                             : nullptr;
        digests[k].push_back(WindowDigest::Build(configs[k].kind, group_g, wk.data(), ctx));
      }
    }
    // Layer ranking: per window, the max share over (query, head).
    std::vector<double> layer_true(n_windows, 0.0);
    std::vector<std::vector<double>> layer_est(n_configs, std::vector<double>(n_windows, 0.0));
    std::vector<double> logits(T), win_max(n_windows), win_lse(n_windows), est(n_windows);
    for (int qi = 0; qi < n_queries; ++qi) {
      const int qpos = body + qi;
      for (int h = 0; h < n_heads; ++h) {
        const float* qh = q.data() + (static_cast<int64_t>(qi) * n_heads + h) * d;
        const int kvh = h / group;
        for (int t = 0; t <= qpos; ++t) {
          const float* k = keys.data() + (static_cast<int64_t>(t) * n_kv + kvh) * d;
          double s = 0;
          for (int c = 0; c < d; ++c) s += static_cast<double>(qh[c]) * k[c];
          logits[t] = s;
        }
        for (int w = 0; w < n_windows; ++w) {
          const double* l = logits.data() + sinks + w * window;
          win_max[w] = *std::max_element(l, l + window);
          std::vector<double> scaled(window);
          for (int t = 0; t < window; ++t) scaled[t] = l[t] * inv_sqrt_d;
          win_lse[w] = LogSumExp(scaled.data(), window);
        }
        std::vector<double> all(qpos + 1);
        for (int t = 0; t <= qpos; ++t) all[t] = logits[t] * inv_sqrt_d;
        const double lse_all = LogSumExp(all.data(), qpos + 1);
        // Resident: sinks and the tail after the last whole window (up to the query).
        std::vector<double> resident;
        for (int t = 0; t < sinks; ++t) resident.push_back(all[t]);
        for (int t = sinks + n_windows * window; t <= qpos; ++t) resident.push_back(all[t]);
        const double lse_res = LogSumExp(resident.data(), static_cast<int>(resident.size()));
        for (int w = 0; w < n_windows; ++w) {
          layer_true[w] = std::max(layer_true[w], std::exp(win_lse[w] - lse_all));
        }
        for (int k = 0; k < n_configs; ++k) {
          const int group = configs[k].group;
          for (int gi = 0; gi < static_cast<int>(digests[k].size()); ++gi) {
            const double e = digests[k][gi].Estimate(kvh, qh);
            for (int w = gi * group; w < std::min(n_windows, (gi + 1) * group); ++w) est[w] = e;
          }
          if (DigestIsUpperBound(configs[k].kind)) {
            for (int w = 0; w < n_windows; ++w) {
              ++bound_checks;
              if (est[w] < win_max[w] - 1e-6 * std::fabs(win_max[w])) ++bound_violations;
            }
          }
          // A window's estimated mass: W tokens at the estimated logit.
          std::vector<double> parts(n_windows + 1);
          for (int w = 0; w < n_windows; ++w) parts[w] = est[w] * inv_sqrt_d + std::log(window);
          parts[n_windows] = lse_res;
          const double lse_est = LogSumExp(parts.data(), n_windows + 1);
          for (int w = 0; w < n_windows; ++w) {
            layer_est[k][w] = std::max(layer_est[k][w], std::exp(parts[w] - lse_est));
          }
          for (int r = 0; r < 2; ++r) {
            const auto& truth = r == 0 ? win_max : win_lse;
            for (int ki = 0; ki < 2; ++ki) totals[k].sum[r][ki] += Recall(truth, est, ks[ki]);
            ++totals[k].n[r];
          }
        }
      }
    }
    for (int k = 0; k < n_configs; ++k) {
      for (int ki = 0; ki < 2; ++ki)
        totals[k].sum[2][ki] += Recall(layer_true, layer_est[k], ks[ki]);
      ++totals[k].n[2];
    }
  }

  std::printf(
      "model %s: %d global layers scored (of %d), %d query heads, %d KV heads, "
      "head_dim %d\n",
      model_path.c_str(), geo.n_layers, cfg.n_layers, n_heads, n_kv, d);
  std::printf(
      "%d tokens, %d captured queries, %d windows of %d after %d sinks; k = %d (5%%), "
      "%d (10%%); a random ranking recalls k / windows on average (%.3f, %.3f)\n\n",
      T, n_queries, n_windows, window, sinks, ks[0], ks[1], static_cast<double>(ks[0]) / n_windows,
      static_cast<double>(ks[1]) / n_windows);
  std::printf(
      "| digest | bytes/window | share of fp16 window | context B/layer | share with context | "
      "head max @5%% | head max @10%% | head mass @5%% | head mass @10%% | layer mass @5%% | "
      "layer mass @10%% |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  const DigestGeometry dg{n_kv, d, window};
  for (int k = 0; k < n_configs; ++k) {
    // A digest per G windows costs 1 / G of its bytes a window.
    const int group = configs[k].group;
    const double bytes =
        static_cast<double>(DigestBytes(configs[k].kind, DigestGeometry{n_kv, d, group * window})) /
        group;
    // The context's bytes spread over this text's windows (less a window as the context grows).
    const double with_context = bytes + static_cast<double>(context_bytes[k]) / n_windows;
    std::printf("| `%s` | %g | %.2f %% | %lld | %.2f %% |", configs[k].Name().c_str(), bytes,
                100.0 * bytes / WindowFp16Bytes(dg), static_cast<long long>(context_bytes[k]),
                100.0 * with_context / WindowFp16Bytes(dg));
    for (int r = 0; r < 3; ++r) {
      for (int ki = 0; ki < 2; ++ki) std::printf(" %.3f |", totals[k].sum[r][ki] / totals[k].n[r]);
    }
    std::printf("\n");
  }
  std::printf(
      "\ncontext kinds: each layer's DigestContext fitted on its first %d windows; "
      "'share with context' spreads it over the %d windows\n",
      context_windows, n_windows);
  std::printf("bound kinds below the true max logit: %lld of %lld windows x heads x queries\n",
              static_cast<long long>(bound_violations), static_cast<long long>(bound_checks));
  return 0;
}

}  // namespace
}  // namespace qevict

int main(int argc, char** argv) {
  try {
    return qevict::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "digest_recall: error: %s\n", e.what());
    return 1;
  }
}
