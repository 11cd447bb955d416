// Text generation as `wte sample` prints it and the Python module's Model.generate returns it:
// the prompt through a SlidingDecoder, then up to max_new_tokens tokens drawn by sample_token,
// ending early at <|endoftext|> or at a stop string. The same model, prompt, options and Rng
// state give the same tokens and text wherever this runs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wte/decoder.h"
#include "wte/rng.h"
#include "wte/tokenizer.h"

namespace wte {

/// The generated text (the continuation, not the prompt) and the part of it that is final. With
/// stop strings, the text ends where the first stop string it contains starts: the stop string
/// and everything after it (the rest of the token that completed it included) are never released,
/// as OpenAI's `stop` and llama.cpp's stop strings cut the text. Until then, a tail that could be
/// the start of a stop string is held back (released once it cannot be, or by flush()). Each final
/// piece goes to the sink as it becomes final (the CLI prints it; null: none).
class StopText {
 public:
  using Sink = std::function<void(const char* data, size_t size)>;
  /// `stops`: non-empty strings (an empty one would match everywhere; throws wte::Error).
  StopText(std::vector<std::string> stops, Sink sink);
  /// Appends a token's bytes and releases what is final. Returns true if the text now contains a
  /// stop string (released up to where it starts, not further; the text is cut there).
  bool add(const std::string& bytes);
  /// Releases what was held back (generation ended without a stop string).
  void flush() { release_to(text_.size()); }
  /// Everything released so far: the continuation as printed.
  std::string released() const { return text_.substr(0, released_); }

 private:
  void release_to(size_t end);
  std::vector<std::string> stops_;
  Sink sink_;
  std::string text_;
  size_t released_ = 0;
};

/// How generate() draws and when it stops.
struct GenerateOptions {
  size_t max_new_tokens = 256;
  SamplingParams sampling;
  int32_t eot = -1;                // <|endoftext|>'s id in the vocabulary (-1: it has none)
  bool ignore_eos = false;         // do not stop at a drawn eot
  std::vector<std::string> stops;  // stop strings (each non-empty)
};

/// <|endoftext|>'s id in `tok` if the tokenizer has it and it is below vocab_size (GPT-2's
/// vocabulary has it; a vocabulary wte trained has not), else -1.
int32_t end_of_text_id(const Tokenizer& tok, size_t vocab_size);

/// Why generate() ended.
enum class GenerationEnd { kLength, kEndOfText, kStop };

/// What generate() drew.
struct Generation {
  std::vector<int32_t> ids;   // the new tokens: every drawn token but an eot that ended generation
  std::string text;           // the continuation as released: the pieces of `ids`, cut where the
                              // first stop string starts
  GenerationEnd end = GenerationEnd::kLength;
  size_t drawn = 0;           // tokens drawn (an eot that ended generation included)
  double prefill_seconds = 0;   // wall time of the prompt's prefill
  double generate_seconds = 0;  // wall time of drawing the new tokens
};

/// Starts `dec` on the prompt ids (non-empty; longer than n_ctx: its last n_ctx tokens, see
/// SlidingDecoder::start), then draws up to opt.max_new_tokens tokens with sample_token from
/// `rng`, each appended to the window, until a drawn eot (unless ignore_eos; not part of the
/// text) or a stop string in the text. Each token's piece (tok.piece) goes through a StopText
/// whose released parts go to `sink` as they are drawn. Throws wte::Error as SlidingDecoder and
/// sample_token do, before drawing anything for a bad prompt id.
Generation generate(SlidingDecoder& dec, const std::vector<int32_t>& prompt, const Tokenizer& tok,
                    const GenerateOptions& opt, Rng& rng, const StopText::Sink& sink = nullptr);

}  // namespace wte
