#include "engine/generate.h"

#include <algorithm>
#include <cmath>

namespace qevict {
namespace {

// Length of the UTF-8 sequence a lead byte announces (1 for invalid bytes, emitted as is).
size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return 2;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return 4;
  return 1;
}

}  // namespace

TokenLogprob TokenLogprobs(std::span<const float> logits, int32_t token, int top) {
  float max = logits[0];
  for (float l : logits) max = std::max(max, l);
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  TokenLogprob out;
  out.token = token;
  out.logprob = logits[token] - log_z;
  const size_t n = std::min(logits.size(), static_cast<size_t>(std::max(0, top)));
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (size_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], logits[ids[i]] - log_z);
  return out;
}

std::string Utf8Stream::Push(std::string_view bytes) {
  pending_.append(bytes);
  size_t complete = 0;
  while (complete < pending_.size()) {
    const size_t len = SequenceLength(static_cast<unsigned char>(pending_[complete]));
    if (complete + len > pending_.size()) break;
    complete += len;
  }
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string Utf8Stream::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

GenerateResult Generate(Session& session, const Tokenizer& tokenizer, std::span<const float> logits,
                        const GenerateOptions& options) {
  GenerateResult result;
  result.finish_reason = "length";
  Sampler sampler(options.sampling);
  Utf8Stream utf8;
  // Text is held back while it could still be the start of a stop string.
  size_t emitted = 0;
  auto emit_until = [&](size_t end) {
    if (end > emitted && options.on_text) {
      if (!options.on_text(std::string_view(result.text).substr(emitted, end - emitted))) {
        return false;
      }
    }
    emitted = std::max(emitted, end);
    return true;
  };
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const int32_t token = sampler.Sample(logits);
    if (tokenizer.IsEndOfGeneration(token)) {
      result.finish_reason = "stop";
      break;
    }
    result.tokens.push_back(token);
    if (options.top_logprobs >= 0) {
      result.logprobs.push_back(TokenLogprobs(logits, token, options.top_logprobs));
    }
    result.text += utf8.Push(tokenizer.TokenToPiece(token));
    size_t safe = result.text.size();
    bool stopped = false;
    for (const std::string& stop : options.stop) {
      if (stop.empty()) continue;
      const size_t at = result.text.find(stop);
      if (at != std::string::npos) {
        result.text.resize(at);
        safe = at;
        stopped = true;
        break;
      }
      // Hold back a suffix that is a prefix of the stop string.
      for (size_t k = std::min(stop.size() - 1, result.text.size()); k > 0; --k) {
        if (result.text.compare(result.text.size() - k, k, stop, 0, k) == 0) {
          safe = std::min(safe, result.text.size() - k);
          break;
        }
      }
    }
    if (!emit_until(std::min(safe, result.text.size()))) {
      result.finish_reason = "cancelled";
      return result;
    }
    if (stopped) {
      result.finish_reason = "stop";
      return result;
    }
    if (i + 1 == options.max_new_tokens) break;  // no forward pass for a token never used
    logits = session.Decode(token);
  }
  result.text += utf8.Flush();
  emit_until(result.text.size());
  return result;
}

}  // namespace qevict
