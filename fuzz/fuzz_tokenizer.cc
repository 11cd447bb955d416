// libFuzzer target: the tokenizer files (GPT-2's encoder.json and vocab.bpe, as Tokenizer::load
// and a checkpoint's /tokenizer read them) and, when they load, encode/decode of a text.
// Input: encoder.json, a 0x00 byte, vocab.bpe, a 0x00 byte, a text. Property: decode(encode(t))
// == t for every text, and every id encode returns is below size().
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "wte/error.h"
#include "wte/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t a = input.find('\0');
  if (a == std::string::npos) return 0;
  const size_t b = input.find('\0', a + 1);
  const std::string encoder = input.substr(0, a);
  const std::string merges = input.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  const std::string text = b == std::string::npos ? std::string("hello world") : input.substr(b + 1);
  wte::Tokenizer tok;
  try {
    tok = wte::Tokenizer::from_strings(encoder, merges, "fuzz tokenizer");
  } catch (const wte::Error&) {
    return 0;
  }
  const std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids)
    if (id < 0 || static_cast<size_t>(id) >= tok.size()) std::abort();
  if (tok.decode(ids) != text) {
    std::fprintf(stderr, "decode(encode(text)) != text for %zu bytes\n", text.size());
    std::abort();
  }
  // What save() writes must load back to the same vocabulary.
  const wte::Tokenizer again =
      wte::Tokenizer::from_strings(tok.encoder_json(), tok.vocab_bpe(), "fuzz tokenizer again");
  if (again.size() != tok.size() || again.num_merges() != tok.num_merges()) std::abort();
  return 0;
}
