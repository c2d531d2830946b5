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

namespace {

// Hands the generated text and the tokens' logprobs out as they are released.
class Releaser {
 public:
  Releaser(const GenerateOptions& options, GenerateResult& result)
      : options_(options), result_(result) {}

  // A token entered the byte stream with `bytes` bytes of text.
  void AddToken(size_t bytes) {
    token_ends_.push_back(token_ends_.empty() ? bytes : token_ends_.back() + bytes);
  }

  // Releases the text up to `end` and the tokens whose text ends there or before; with `cut`
  // (a stop string begins at `end`), also those whose text begins before it. False: stop.
  bool ReleaseUntil(size_t end, bool cut) {
    size_t tokens = released_tokens_;
    auto begin = [&](size_t i) { return i == 0 ? size_t{0} : token_ends_[i - 1]; };
    while (tokens < token_ends_.size() &&
           (token_ends_[tokens] <= end || (cut && begin(tokens) < end))) {
      ++tokens;
    }
    const std::string_view text =
        end > emitted_ ? std::string_view(result_.text).substr(emitted_, end - emitted_)
                       : std::string_view();
    std::span<const TokenLogprob> logprobs;
    if (options_.top_logprobs >= 0) {
      logprobs = std::span<const TokenLogprob>(result_.logprobs)
                     .subspan(released_tokens_, tokens - released_tokens_);
    }
    emitted_ = std::max(emitted_, end);
    released_tokens_ = tokens;
    if (options_.on_chunk) {
      return (text.empty() && logprobs.empty()) || options_.on_chunk(text, logprobs);
    }
    return text.empty() || !options_.on_text || options_.on_text(text);
  }

  // After a stop string: the logprobs of the tokens never released are not the output's.
  void DropUnreleased() {
    if (options_.top_logprobs >= 0) result_.logprobs.resize(released_tokens_);
  }

 private:
  const GenerateOptions& options_;
  GenerateResult& result_;
  std::vector<size_t> token_ends_;  // byte offset where each token's text ends
  size_t emitted_ = 0;
  size_t released_tokens_ = 0;
};

}  // namespace

GenerateResult Generate(Session& session, const Tokenizer& tokenizer, std::span<const float> logits,
                        const GenerateOptions& options) {
  GenerateResult result;
  result.finish_reason = "length";
  Sampler sampler(options.sampling);
  sampler.Accept(options.seen_tokens);
  Utf8Stream utf8;
  // Text is held back while it could still be the start of a stop string.
  Releaser releaser(options, result);
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
    const std::string piece = tokenizer.TokenToPiece(token);
    releaser.AddToken(piece.size());
    result.text += utf8.Push(piece);
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
    if (!releaser.ReleaseUntil(std::min(safe, result.text.size()), stopped)) {
      result.finish_reason = "cancelled";
      return result;
    }
    if (stopped) {
      releaser.DropUnreleased();
      result.finish_reason = "stop";
      return result;
    }
    if (i + 1 == options.max_new_tokens) break;  // no forward pass for a token never used
    logits = session.Decode(token);
  }
  result.text += utf8.Flush();
  releaser.ReleaseUntil(result.text.size(), /*cut=*/false);
  return result;
}

}  // namespace qevict
