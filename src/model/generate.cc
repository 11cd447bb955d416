#include "wte/generate.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "wte/error.h"

namespace wte {

StopText::StopText(std::vector<std::string> stops, Sink sink)
    : stops_(std::move(stops)), sink_(std::move(sink)) {
  for (const std::string& s : stops_)
    if (s.empty()) throw Error("a stop string is empty (every text contains the empty one)");
}

bool StopText::add(const std::string& bytes) {
  const size_t before = text_.size();
  text_ += bytes;
  size_t start = std::string::npos;  // where the earliest stop string found, starts
  for (const std::string& s : stops_) {
    // Only a match that includes new bytes is new: start up to s.size() - 1 bytes earlier.
    const size_t from = before >= s.size() - 1 ? before - (s.size() - 1) : 0;
    const size_t at = text_.find(s, from);
    if (at != std::string::npos) start = std::min(start, at);
  }
  if (start != std::string::npos) {
    // Held back until now, so nothing at or past `start` was released.
    release_to(start);
    text_.resize(start);
    return true;
  }
  size_t hold = 0;  // the longest tail that is a proper prefix of a stop string
  for (const std::string& s : stops_)
    for (size_t n = std::min(s.size() - 1, text_.size() - released_); n > hold; --n)
      if (text_.compare(text_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  release_to(text_.size() - hold);
  return false;
}

void StopText::release_to(size_t end) {
  if (end > released_ && sink_) sink_(text_.data() + released_, end - released_);
  released_ = std::max(released_, end);
}

int32_t end_of_text_id(const Tokenizer& tok, size_t vocab_size) {
  const int32_t eot = tok.id_of("<|endoftext|>");
  return eot >= 0 && static_cast<size_t>(eot) < vocab_size ? eot : -1;
}

Generation generate(SlidingDecoder& dec, const std::vector<int32_t>& prompt, const Tokenizer& tok,
                    const GenerateOptions& opt, Rng& rng, const StopText::Sink& sink) {
  using clock = std::chrono::steady_clock;
  Generation g;
  StopText text(opt.stops, sink);
  const auto t0 = clock::now();
  const float* logits = dec.start(prompt.data(), prompt.size());
  const auto t1 = clock::now();
  while (g.drawn < opt.max_new_tokens) {
    const int32_t next = sample_token(logits, dec.vocab_size(), opt.sampling, rng);
    ++g.drawn;
    if (next == opt.eot && !opt.ignore_eos) {
      g.end = GenerationEnd::kEndOfText;
      break;
    }
    g.ids.push_back(next);
    if (text.add(tok.piece(next))) {
      g.end = GenerationEnd::kStop;
      break;
    }
    if (g.drawn == opt.max_new_tokens) break;
    logits = dec.push(next);
  }
  text.flush();
  g.text = text.released();
  g.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  g.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return g;
}

}  // namespace wte
