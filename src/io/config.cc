// INI + command-line configuration through Boost.Program_options.
// Every key is registered as a string and parsed here, so that a bad value is reported with its key,
// its source and the allowed range (Boost's own casts would, for example, wrap "-1" into a huge
// unsigned number).
#include "wte/config.h"
#include "src/io/config_values.h"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "wte/data.h"
#include "wte/error.h"
#include "src/io/program_options_message.h"
#include "src/io/suggest.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte {
namespace {

// One configuration key: its INI name, meaning, how to read it from text and how to print it.
struct Key {
  std::string name;         // "section.key"
  std::string help;
  std::string allowed;      // shown in errors and --help
  std::function<void(Config&, const std::string&)> set;   // throws std::invalid_argument(allowed)
  std::function<std::string(const Config&)> get;
  bool is_path = false;     // resolved against the config file's directory
};

[[noreturn]] void bad(const std::string& why) { throw std::invalid_argument(why); }

// The length of the well-formed UTF-8 sequence at s[0..n) (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF) of a character that is not a C1 control (U+0080..U+009F);
// 0 if there is none.
size_t utf8_char(const unsigned char* s, size_t n) {
  auto in = [](unsigned char b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; };
  const unsigned char c = s[0];
  size_t len = 0;
  unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c == 0xC2) len = 2, lo = 0xA0;  // U+0080..U+009F are C1 controls
  else if (in(c, 0xC3, 0xDF)) len = 2;
  else if (c == 0xE0) len = 3, lo = 0xA0;
  else if (in(c, 0xE1, 0xEC) || in(c, 0xEE, 0xEF)) len = 3;
  else if (c == 0xED) len = 3, hi = 0x9F;
  else if (c == 0xF0) len = 4, lo = 0x90;
  else if (in(c, 0xF1, 0xF3)) len = 4;
  else if (c == 0xF4) len = 4, hi = 0x8F;
  if (len == 0 || len > n || !in(s[1], lo, hi)) return 0;
  for (size_t k = 2; k < len; ++k)
    if (!in(s[k], 0x80, 0xBF)) return 0;
  return len;
}

// Bytes from a config file, for an error message: printable ASCII and well-formed UTF-8 characters
// as they are, a backslash as \\ (so a literal "\x1f" is not read as an escaped byte), every other
// byte as \xNN (a binary file's bytes must not reach the terminal raw); cut after about `max` bytes
// of output, then "... (N bytes in all)".
std::string printable(const std::string& text, size_t max = 120) {
  std::string out;
  const size_t n = text.size();
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < n && out.size() < max) {
    const unsigned char c = bytes[i];
    if (const size_t len = c >= 0x80 ? utf8_char(bytes + i, n - i) : 0; len > 0) {
      out.append(text, i, len);
      i += len;
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
    ++i;
  }
  if (i < n) out += "... (" + std::to_string(n) + " bytes in all)";
  return out;
}

uint64_t parse_uint(const std::string& s, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (!s.empty() && ec == std::errc::result_out_of_range && ptr == end) bad("out of range");
  if (s.empty() || ec != std::errc() || ptr != end) bad("not a whole number");
  if (v < lo || v > hi) bad("out of range");
  return v;
}

double parse_double(const std::string& s, double lo, double hi, bool lo_open = false) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) bad("not a number");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) bad("not a number");  // "0.1abc"
  if (!std::isfinite(v)) bad("not a finite number");
  if (v < lo || v > hi || (lo_open && v == lo)) bad("out of range");
  return v;
}

bool parse_bool(const std::string& s) {
  if (s == "true" || s == "1" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "0" || s == "no" || s == "off") return false;
  bad("not a boolean");
}

// The shortest text that reads back as the same value: as a float when the value is one (most
// keys are float, and 0.003f printed as a double would read 0.00300000003), else as a double.
std::string fmt_double(double v) {
  char buf[64];
  const float f = static_cast<float>(v);
  const auto r = static_cast<double>(f) == v ? std::to_chars(buf, buf + sizeof buf, f)
                                             : std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Builders for the table below: `get` reads the key's member of a Config, `put` writes it.
Key make_uint(std::string name, std::string help, uint64_t lo, uint64_t hi,
              std::function<uint64_t(const Config&)> get,
              std::function<void(Config&, uint64_t)> put) {
  std::string allowed = "a whole number in [" + std::to_string(lo) + ", " +
                        (hi == std::numeric_limits<uint64_t>::max() ? std::string("2^64)")
                                                                    : std::to_string(hi) + "]");
  return Key{std::move(name), std::move(help), allowed,
             [=](Config& c, const std::string& s) { put(c, parse_uint(s, lo, hi)); },
             [=](const Config& c) { return std::to_string(get(c)); }};
}

Key make_float(std::string name, std::string help, double lo, double hi, bool lo_open,
               std::function<double(const Config&)> get, std::function<void(Config&, double)> put,
               bool hi_open = false) {
  std::string allowed = std::string("a number in ") + (lo_open ? "(" : "[") + fmt_double(lo) +
                        ", " + fmt_double(hi) + (hi_open ? ")" : "]");
  return Key{std::move(name), std::move(help), allowed,
             [=](Config& c, const std::string& s) {
               const double v = parse_double(s, lo, hi, lo_open);
               if (hi_open && v >= hi) bad("out of range");
               put(c, v);
             },
             [=](const Config& c) { return fmt_double(get(c)); }};
}

Key make_bool(std::string name, std::string help, std::function<bool(const Config&)> get,
              std::function<void(Config&, bool)> put) {
  return Key{std::move(name), std::move(help), "true or false (also 1/0, yes/no, on/off)",
             [=](Config& c, const std::string& s) { put(c, parse_bool(s)); },
             [=](const Config& c) { return std::string(get(c) ? "true" : "false"); }};
}

// A string key. `optional` keys may be empty (unset); the rest must not be.
Key make_string(std::string name, std::string help, std::string allowed, bool is_path,
                bool optional, std::function<std::string(const Config&)> get,
                std::function<void(Config&, const std::string&)> put) {
  Key k{std::move(name), std::move(help), std::move(allowed),
        [=](Config& c, const std::string& s) {
          if (s.empty() && !optional) bad("empty");
          put(c, s);
        },
        std::move(get)};
  k.is_path = is_path;
  return k;
}

#define WTE_UINT(sec, key, lo, hi, help)                                                          \
  make_uint(#sec "." #key, help, lo, hi, [](const Config& c) { return uint64_t(c.sec.key); }, \
            [](Config& c, uint64_t v) { c.sec.key = static_cast<decltype(c.sec.key)>(v); })
#define WTE_FLOAT(sec, key, lo, hi, lo_open, help)                                             \
  make_float(#sec "." #key, help, lo, hi, lo_open,                                             \
             [](const Config& c) { return double(c.sec.key); },                                \
             [](Config& c, double v) { c.sec.key = stored_as<decltype(c.sec.key)>(v); })
#define WTE_FLOAT_BELOW(sec, key, lo, hi, help)                                          \
  make_float(#sec "." #key, help, lo, hi, false,                                          \
             [](const Config& c) { return double(c.sec.key); },                           \
             [](Config& c, double v) { c.sec.key = stored_as<decltype(c.sec.key)>(v); }, \
             /*hi_open=*/true)
// `v` converted to the type the key is stored in (float for most keys). A nonzero value that
// becomes 0 or subnormal there (optim.eps = 1e-50 is 0 in float32: the division it guards is
// then unguarded, and the run's own checkpoints fail validation) or infinite is out of range.
template <typename T>
T stored_as(double v) {
  const T t = static_cast<T>(v);
  if (!std::isfinite(t)) bad("out of range (infinite in " + std::string(sizeof(T) == 4 ? "float32" : "float64") + ")");
  if (v != 0 && std::fabs(t) < std::numeric_limits<T>::min()) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "out of range (%s in %s, whose smallest normal value is %g)",
                  t == 0 ? "it rounds to 0" : "it is subnormal",
                  sizeof(T) == 4 ? "float32" : "float64",
                  static_cast<double>(std::numeric_limits<T>::min()));
    bad(buf);
  }
  return t;
}

#define WTE_BOOL(sec, key, help)                                                      \
  make_bool(#sec "." #key, help, [](const Config& c) { return bool(c.sec.key); }, \
            [](Config& c, bool v) { c.sec.key = v; })

constexpr uint64_t kMaxU = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxSteps = uint64_t{1} << 53;

const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      WTE_UINT(model, vocab_size, 256, 1u << 24,
               "V: rows of wte (>= 256, the byte tokens); must equal the tokenizer's size"),
      WTE_UINT(model, d_model, 1, 1u << 16, "C: width of every embedding row"),
      WTE_UINT(model, n_ctx, 1, 1u << 20, "number of position rows in wpe (max sequence length)"),
      WTE_UINT(model, n_layer, 0, 1024,
               "transformer blocks (GPT-2's h0, h1, ...): x = x + attn(ln_1(x)); "
               "x = x + mlp(ln_2(x)); 0: the embedding-only model (wte + wpe -> ln_f -> logits)"),
      WTE_UINT(model, n_head, 1, 1u << 16,
               "NH: attention heads per block; must divide model.d_model (head size d_model / "
               "n_head)"),
      WTE_BOOL(model, ln_f, "apply the final LayerNorm ln_f (after the last block) before the unembedding"),
      WTE_BOOL(model, tie_embeddings,
               "true: logits = h · wteᵀ (GPT-2's tied lm_head); false: a separate lm_head (V, C) and a "
               "row-sparse lazy AdamW for wte (only the rows a step looks up are updated)"),
      WTE_FLOAT(model, wte_init_std, 0.0, 10.0, false, "std of wte's normal init (GPT-2: 0.02)"),
      WTE_FLOAT(model, wpe_init_std, 0.0, 10.0, false, "std of wpe's normal init (GPT-2: 0.01)"),
      WTE_FLOAT(model, ln_eps, 0.0, 1.0, true, "LayerNorm epsilon added to the variance (ln_f, and ln_1/ln_2 of every block)"),
      Key{"model.matmul_precision",
          "the GEMMs' inputs: f32, or bf16 (bfloat16 copies of weights, activations and "
          "gradients; float32 accumulation, outputs, parameters, gradients and AdamW; oneDNN's "
          "AVX512_BF16 or AMX kernels, float32 where the CPU has neither)",
          "f32 or bf16",
          [](Config& c, const std::string& s) {
            if (s == "f32") c.model.matmul_precision = MatmulPrecision::f32;
            else if (s == "bf16") c.model.matmul_precision = MatmulPrecision::bf16;
            else bad("not a precision");
          },
          [](const Config& c) { return std::string(to_string(c.model.matmul_precision)); }},
      Key{"model.attention",
          "the causal attention: dense (full T x T score matrices, the softmax probabilities kept per "
          "layer: B x n_head x T x T floats), tiled (key blocks up to the diagonal only, one "
          "log-sum-exp per row kept, the probabilities recomputed in the backward), or auto (tiled "
          "from 128 tokens per sequence on, where it is faster, dense below)",
          "dense, tiled or auto",
          [](Config& c, const std::string& s) {
            if (s == "dense") c.model.attention = AttentionImpl::dense;
            else if (s == "tiled") c.model.attention = AttentionImpl::tiled;
            else if (s == "auto") c.model.attention = AttentionImpl::automatic;
            else bad("not an attention");
          },
          [](const Config& c) { return std::string(to_string(c.model.attention)); }},
      Key{"model.gemm",
          "the library of the float32 GEMMs (not the attention's batched ones): auto (per GEMM "
          "shape the fastest of onednn, openblas and blis, timed once per machine and thread count "
          "and kept in a cache file: $WTE_GEMM_CACHE, else $XDG_CACHE_HOME/wte or ~/.cache/wte), or "
          "one library for all; the environment variable WTE_GEMM sets it where this says auto",
          "auto, onednn, openblas or blis",
          [](Config& c, const std::string& s) {
            if (s == "auto") c.model.gemm = GemmChoice::automatic;
            else if (s == "onednn") c.model.gemm = GemmChoice::onednn;
            else if (s == "openblas") c.model.gemm = GemmChoice::openblas;
            else if (s == "blis") c.model.gemm = GemmChoice::blis;
            else bad("not a GEMM library");
          },
          [](const Config& c) { return std::string(to_string(c.model.gemm)); }},
      WTE_UINT(model, loss_chunk, 0, kMaxLossChunk,
               "rows per block of the fused unembedding + cross-entropy, which never stores the "
               "(tokens, vocab_size) logits (memory: rows x vocab_size floats); 0: automatic (fused "
               "with 256 rows per block, fewer if their logits pass 64 MiB, when vocab_size > 16384, else the unfused "
               "path with its logits buffer of train.batch_size x data.seq_len x vocab_size floats)"),
      WTE_UINT(model, loss_vocab_tile, 0, kMaxLossVocabTile,
               "vocabulary ids per tile of the fused loss (0: automatic, a tile of about 512 KiB)"),
      make_string("data.text", "UTF-8 corpus; documents separated by a blank line",
                  "a path to a text file", true, true, [](const Config& c) { return c.data.text; },
                  [](Config& c, const std::string& s) { c.data.text = s; }),
      make_string("data.train_tokens",
                  "token ids for training, used instead of data.text: a file, a directory (its "
                  "*.bin) or a glob of llm.c shards (wte prepare) or raw little-endian int32 token "
                  "files (e.g. a run's train.bin), read as one stream, memory-mapped",
                  "a token file, a directory or a glob pattern", true, true,
                  [](const Config& c) { return c.data.train_tokens; },
                  [](Config& c, const std::string& s) { c.data.train_tokens = s; }),
      make_string("data.val_tokens",
                  "token ids for validation (with data.train_tokens): a file, directory or glob, "
                  "as data.train_tokens",
                  "a token file, a directory or a glob pattern", true, true,
                  [](const Config& c) { return c.data.val_tokens; },
                  [](Config& c, const std::string& s) { c.data.val_tokens = s; }),
      make_string("data.tokenizer",
                  "'train' to train BPE on the train split, or a directory with GPT-2's "
                  "encoder.json and vocab.bpe",
                  "'train' or a directory path", false, false,
                  [](const Config& c) { return c.data.tokenizer; },
                  [](Config& c, const std::string& s) { c.data.tokenizer = s; }),
      WTE_FLOAT(data, val_fraction, 0.0, 0.5, true,
                "share of documents held out for validation, spread evenly through the corpus"),
      WTE_UINT(data, seq_len, 1, 1u << 20, "T: tokens per training sequence (<= model.n_ctx)"),
      WTE_UINT(train, batch_size, 1, 1u << 20, "B: sequences per step"),
      // 2^53: step counts stay exact in the double arithmetic of the schedule and in the int64
      // step of a checkpoint.
      WTE_UINT(train, steps, 1, kMaxSteps, "optimizer steps"),
      WTE_UINT(train, seed, 0, kMaxU, "seed of the init and of the data order"),
      WTE_UINT(train, threads, 0, 1024, "OpenMP threads (0: OMP_NUM_THREADS or all cores)"),
      WTE_UINT(train, eval_interval, 0, kMaxU, "steps between validation losses (0: end only)"),
      Key{"train.eval_tokens",
          "validation tokens each evaluation covers at most, the final one included (the first "
          "of the split, in whole data.seq_len windows; the final loss and the unigram baseline "
          "are over the same tokens). 0: the whole split; auto: as many as the run trains on "
          "(train.steps x batch_size x seq_len), so a short run evaluates briefly and a long one "
          "(600 default steps) on the whole split",
          "auto, or a whole number in [0, 2^64-1)",
          [](Config& c, const std::string& s) {
            c.train.eval_tokens = s == "auto" ? kEvalTokensAuto : parse_uint(s, 0, kMaxU - 1);
          },
          [](const Config& c) {
            return c.train.eval_tokens == kEvalTokensAuto ? std::string("auto")
                                                          : std::to_string(c.train.eval_tokens);
          }},
      WTE_UINT(train, log_interval, 1, kMaxU, "steps between progress lines"),
      WTE_UINT(train, grad_accum_steps, 1, 1u << 20,
               "micro-batches per optimizer step (gradient accumulation): the batch of "
               "train.batch_size sequences runs in slices of train.batch_size / grad_accum_steps "
               "(activations shrink with it); loss and gradient are those of the whole batch; must "
               "divide train.batch_size"),
      Key{"train.snapshot_steps",
          "comma-separated steps after which wte is saved as DIR/snapshot_<step>.h5 (0: the "
          "initial noise), e.g. 0,10,100,1000; steps after train.steps are skipped with a note; "
          "empty: none",
          "empty, or strictly increasing whole numbers separated by commas",
          [](Config& c, const std::string& s) {
            std::vector<size_t> steps;
            size_t pos = 0;
            while (pos < s.size()) {
              size_t end = s.find(',', pos);
              if (end == std::string::npos) end = s.size();
              std::string item = s.substr(pos, end - pos);
              const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
              item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
              steps.push_back(parse_uint(item, 0, kMaxU));
              if (steps.size() > 1 && steps.back() <= steps[steps.size() - 2])
                bad("not strictly increasing");
              pos = end + 1;
              if (end + 1 == s.size()) bad("ends with a comma");
            }
            c.train.snapshot_steps = steps;
          },
          [](const Config& c) {
            std::string out;
            for (size_t v : c.train.snapshot_steps) {
              if (!out.empty()) out += ',';
              out += std::to_string(v);
            }
            return out;
          }},
      WTE_FLOAT(optim, lr, 0.0, 10.0, true, "peak learning rate"),
      WTE_FLOAT(optim, min_lr, 0.0, 10.0, false, "learning rate at the end of the cosine decay"),
      WTE_UINT(optim, warmup_steps, 0, kMaxSteps, "linear warmup steps"),
      WTE_FLOAT_BELOW(optim, beta1, 0.0, 1.0, "AdamW beta1"),
      WTE_FLOAT_BELOW(optim, beta2, 0.0, 1.0, "AdamW beta2"),
      WTE_FLOAT(optim, eps, 0.0, 1.0, true, "AdamW epsilon"),
      WTE_FLOAT(optim, weight_decay, 0.0, 10.0, false,
                "decoupled weight decay on wte, wpe, lm_head and the blocks' weights */w (never biases or LayerNorms)"),
      WTE_FLOAT(optim, grad_clip, 0.0, 1e6, false, "clip the global gradient norm (0: off)"),
      WTE_UINT(checkpoint, interval, 0, kMaxU, "steps between checkpoints (0: at the end only)"),
      WTE_UINT(checkpoint, keep_last, 0, kMaxU,
               "keep the newest K checkpoints in the run directory, delete older ones (0: all)"),
  };
  return table;
}

// "; did you mean 'VALUE'?" for a key whose allowed values are an enumeration of words ("f32 or
// bf16", "dense, tiled or auto", "true or false"): the word closest to `value`, or "". Keys that
// allow numbers or paths give "".
std::string value_suggestion(const std::string& value, const std::string& allowed) {
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 0; i <= allowed.size(); ++i) {
    const char c = i < allowed.size() ? allowed[i] : ' ';
    if (c == ' ' || c == ',') {
      if (!word.empty() && word != "or") words.push_back(word);
      word.clear();
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') {
      word += c;
    } else {
      return "";  // "a number in [0, 1]", "a path": not an enumeration
    }
  }
  return words.size() >= 2 ? io::did_you_mean(value, words) : "";
}

// "; did you mean 'PREFIXsection.key'?" for the config key closest to `typed`, or "".
std::string key_suggestion(const std::string& typed, const std::string& prefix) {
  std::vector<std::string> names;
  for (const Key& k : keys()) names.push_back(prefix + k.name);
  return io::did_you_mean(typed, names);
}

po::options_description describe() {
  po::options_description desc;
  for (const Key& k : keys()) desc.add_options()(k.name.c_str(), po::value<std::string>(), "");
  return desc;
}

// Cross-key checks, after every key is set. `from(key)` says where a key's value came from.
// Throws ConfigValueError if `user_config` (load_config), else wte::Error.
void validate(const Config& c, const std::function<std::string(const std::string&)>& from,
              bool user_config) {
  auto fail = [user_config](const std::string& msg) {
    if (user_config) throw ConfigValueError(msg);
    throw Error(msg);
  };
  auto val = [&](const std::string& key, const std::string& value) {
    return key + " = " + value + " (" + from(key) + ")";
  };
  if (c.data.seq_len > c.model.n_ctx)
    fail(val("data.seq_len", std::to_string(c.data.seq_len)) + " exceeds " +
         val("model.n_ctx", std::to_string(c.model.n_ctx)) +
         "; a sequence may be at most n_ctx tokens long");
  // Only a model with blocks has heads: zero-block configs (and their checkpoints) of any d_model
  // stay valid.
  if (c.model.n_layer > 0 && c.model.d_model % c.model.n_head != 0)
    fail(val("model.n_head", std::to_string(c.model.n_head)) + " does not divide " +
         val("model.d_model", std::to_string(c.model.d_model)) + " (with " +
         val("model.n_layer", std::to_string(c.model.n_layer)) +
         "); every head has d_model / n_head channels");
  if (c.train.batch_size % c.train.grad_accum_steps != 0)
    fail(val("train.grad_accum_steps", std::to_string(c.train.grad_accum_steps)) +
         " does not divide " + val("train.batch_size", std::to_string(c.train.batch_size)) +
         "; every micro-batch has train.batch_size / grad_accum_steps sequences");
  if (c.data.train_tokens.empty() != c.data.val_tokens.empty())
    fail("data.train_tokens and data.val_tokens must be given together (" +
         (c.data.train_tokens.empty() ? val("data.val_tokens", c.data.val_tokens)
                                      : val("data.train_tokens", c.data.train_tokens)) +
         ")");
  if (!c.data.train_tokens.empty() && c.data.tokenizer == "train")
    fail("data.train_tokens (" + from("data.train_tokens") +
         ") needs data.tokenizer = a directory with encoder.json and vocab.bpe (the tokenizer "
         "those ids came from), not 'train'");
  // train.snapshot_steps past train.steps are not an error: a shorter run of the same config
  // (--train.steps=500 on configs/default.ini) just reaches fewer of them; the trainer says so.
  // Also checked per key; a double just below 1 can still round to 1.0f.
  if (c.optim.beta1 >= 1.0f) fail(val("optim.beta1", fmt_double(c.optim.beta1)) + " must be < 1");
  if (c.optim.beta2 >= 1.0f) fail(val("optim.beta2", fmt_double(c.optim.beta2)) + " must be < 1");
  if (c.optim.min_lr > c.optim.lr)
    fail(val("optim.min_lr", fmt_double(c.optim.min_lr)) + " exceeds " +
         val("optim.lr", fmt_double(c.optim.lr)));
}

// Why `value` would not read back unchanged from an INI line "key = value", or nullptr. The
// reader is Boost.Program_options' parse_config_file, which has no quoting or escapes: '#' starts
// a comment anywhere in a line, a line ends at '\n', and spaces, tabs, '\r' and '\n' at either
// end of a value are trimmed. A value holding one of them would be cut (a path "dir#1/p.txt"
// read back as "dir") or split into other keys (a newline followed by "steps = 3").
const char* ini_unsafe(const std::string& value) {
  if (value.find('#') != std::string::npos) return "contains '#'";
  if (value.find('\n') != std::string::npos) return "contains a line break";
  const std::string ws = " \t\r";
  if (!value.empty() && (ws.find(value.front()) != std::string::npos ||
                         ws.find(value.back()) != std::string::npos))
    return "begins or ends with a space, tab or carriage return";
  return nullptr;
}

// Where `--section.key=value` overrides came from, as errors name it: `wte` subcommands' command
// line, or Python's wte.train(**overrides), whose keys the user spelled section__key or
// "section.key".
struct Overrides {
  explicit Overrides(OverridesFrom f)
      : from(f), name(cli() ? "the command line" : "the keyword arguments") {}
  OverridesFrom from;
  std::string name;
  bool cli() const { return from == OverridesFrom::command_line; }
  // How the user wrote `key` ("train.steps").
  std::string spelling(const std::string& key) const { return cli() ? "--" + key : key; }
  // The error for an unknown override `option` ("--train.stepz", as the parser names it).
  std::string unknown(std::string option) const {
    while (!option.empty() && option.front() == '-') option.erase(0, 1);
    if (cli())
      return "unknown option '--" + option +
             "' on the command line (option names are exact; keys are --section.key=value)" +
             key_suggestion("--" + option, "--");
    return "unknown config key '" + option +
           "' in the keyword arguments (key names are exact: section__key or \"section.key\")" +
           key_suggestion(option, "");
  }
};

// Applies every stored option of `vm` to `cfg`. `from_cli` holds keys given on the command line.
// A value that does not parse or is out of range throws ConfigValueError if it came from the
// command line or `user_config` (load_config's file), else wte::Error (a checkpoint's stored config).
void apply(Config& cfg, const po::variables_map& vm, const std::set<std::string>& from_cli,
           const Overrides& overrides_from, const std::string& file_origin,
           const fs::path& file_dir, bool user_config) {
  for (const Key& k : keys()) {
    if (!vm.count(k.name)) continue;
    std::string value = vm[k.name].as<std::string>();
    const bool cli = from_cli.count(k.name) > 0;
    const std::string where =
        cli ? overrides_from.name + " (" + overrides_from.spelling(k.name) + ")" : file_origin;
    try {
      k.set(cfg, value);
    } catch (const std::invalid_argument& e) {
      const std::string msg = k.name + " = '" + printable(value) + "' from " + where + " is " +
                              e.what() + "; allowed: " + k.allowed +
                              value_suggestion(value, k.allowed);
      if (cli || user_config) throw ConfigValueError(msg);
      throw Error(msg);
    }
    // Paths are stored absolute, so a resolved config (config.ini, a checkpoint's) means the same
    // wherever it is read: relative to the file's directory when they come from a file, to the
    // current directory when they come from the command line. data.tokenizer is a path unless it
    // is "train".
    const bool path_like = k.is_path || (k.name == "data.tokenizer" && value != "train");
    if (path_like && !value.empty() && fs::path(value).is_relative()) {
      const fs::path base = (cli || file_dir.empty()) ? fs::current_path() : fs::absolute(file_dir);
      k.set(cfg, (base / value).lexically_normal().string());
    }
    // The value as config.ini will store it must read back unchanged (see ini_unsafe).
    const std::string stored = k.get(cfg);
    if (const char* why = ini_unsafe(stored)) {
      const std::string msg =
          k.name + " = '" + printable(stored) + "'" + (stored == value ? "" : " (resolved from '" +
          printable(value) + "')") + " from " + where + " " + why + ", which the run's config.ini "
          "(also stored in each checkpoint, read back by --resume, inspect and sample) cannot "
          "hold: our INI reader has no quoting; allowed: " + k.allowed + " without '#', a line "
          "break, or spaces at either end (rename the file or directory, or give a symbolic link "
          "to it)";
      if (cli || user_config) throw ConfigValueError(msg);
      throw Error(msg);
    }
  }
}

// `user_config`: the text is the user's config file (load_config), not a stored one.
Config parse_impl(std::istream& ini, const std::string& origin, const fs::path& file_dir,
                  const std::vector<std::string>& overrides, bool user_config,
                  const Overrides& overrides_from) {
  const po::options_description desc = describe();
  po::variables_map vm;
  std::set<std::string> from_cli;
  // Boost rejects an empty "--key=" ("should follow immediately after the equal sign"); an empty
  // value is meaningful for optional keys (train.snapshot_steps=, data.text=), so store those here.
  std::vector<std::string> rest;
  std::vector<std::pair<std::string, std::string>> empty_values;
  for (const std::string& o : overrides) {
    if (o.size() > 3 && o.rfind("--", 0) == 0 && o.back() == '=' &&
        o.find('=') == o.size() - 1) {
      empty_values.emplace_back(o.substr(2, o.size() - 3), "");
    } else {
      rest.push_back(o);
    }
  }
  try {
    // Command line first: Boost keeps the first stored value, so it wins over the file.
    po::parsed_options cli = po::command_line_parser(rest)
                                 .options(desc)
                                 // Exact key names only: "--train.step=3" is as unknown here
                                 // as "step = 3" is in an INI file (Boost guesses prefixes by
                                 // default).
                                 .style(po::command_line_style::unix_style &
                                        ~po::command_line_style::allow_guessing)
                                 .run();
    for (const auto& [key, value] : empty_values) {
      if (desc.find_nothrow(key, false) == nullptr)
        throw Error(overrides_from.unknown(key));
      po::option opt(key, {value});
      cli.options.push_back(opt);
    }
    for (const auto& opt : cli.options) from_cli.insert(opt.string_key);
    po::store(cli, vm);
  } catch (const po::unknown_option& e) {
    const std::string name = e.get_option_name();
    throw Error(overrides_from.unknown(name.substr(0, name.find('='))));
  } catch (const po::error& e) {
    throw Error(overrides_from.name + ": " + io::program_options_message(e));
  }
  try {
    po::store(po::parse_config_file(ini, desc, /*allow_unregistered=*/false), vm);
  } catch (const po::unknown_option& e) {
    throw Error(origin + ": unknown key '" + printable(e.get_option_name()) +
                "'; sections are [model], [data], [train], [optim], [checkpoint]; see "
                "'wte train --help' for every key" + key_suggestion(e.get_option_name(), ""));
  } catch (const po::error& e) {
    throw Error(origin + ": " + printable(io::program_options_message(e), 200));
  }
  Config cfg;
  // A stored config (a checkpoint's, a hand-made model file's) that omits a [model] key keeps the
  // meaning it had when stored configs were written: ModelConfig's own field defaults (the
  // embedding-only model), not the default model of a new run (configs/default.ini's). wte writes
  // every key, so this only decides for files written elsewhere.
  if (!user_config) cfg.model = ModelConfig{};
  apply(cfg, vm, from_cli, overrides_from, origin, file_dir, user_config);
  validate(
      cfg,
      [&](const std::string& key) {
        if (from_cli.count(key)) return "from " + overrides_from.name;
        return vm.count(key) ? "from " + origin : std::string("the default");
      },
      user_config);
  return cfg;
}

}  // namespace

const char* to_string(MatmulPrecision p) { return p == MatmulPrecision::bf16 ? "bf16" : "f32"; }

const char* to_string(AttentionImpl a) {
  return a == AttentionImpl::dense ? "dense" : a == AttentionImpl::tiled ? "tiled" : "auto";
}

const char* to_string(GemmChoice g) {
  switch (g) {
    case GemmChoice::onednn: return "onednn";
    case GemmChoice::openblas: return "openblas";
    case GemmChoice::blis: return "blis";
    case GemmChoice::automatic: break;
  }
  return "auto";
}

Config load_config(const std::string& ini_path, const std::vector<std::string>& overrides,
                   OverridesFrom overrides_from) {
  const Overrides from(overrides_from);
  if (ini_path.empty()) {
    std::istringstream empty;
    return parse_impl(empty, "the defaults", {}, overrides, true, from);
  }
  if (fs::is_directory(ini_path))
    throw Error("config file '" + ini_path + "' is a directory; give an INI file");
  if (::access(ini_path.c_str(), R_OK) != 0)
    throw Error("cannot open config file '" + ini_path + "' (no such file or unreadable)");
  // Read whole first: a read error (EIO) is then an error naming the file, not a config cut short.
  std::string text;
  try {
    text = read_text_file(ini_path);
  } catch (const Error& e) {
    throw Error("config file: " + std::string(e.what()));
  }
  // A UTF-8 byte order mark (Windows editors write one) is not part of the first line: skip it
  // (it read as an invalid line "[model]" whose invisible first bytes the error printed raw).
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  // A NUL byte: a binary file (a token file given as the config). Named here, because the INI
  // parser's message would end at the NUL and say nothing of why.
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error("config file '" + ini_path + "' holds a NUL byte at offset " + std::to_string(nul) +
                " (line " + std::to_string(1 + std::count(text.begin(), text.begin() + nul, '\n')) +
                "): it is not a text file; give an INI file such as configs/default.ini");
  std::istringstream in(text);
  return parse_impl(in, "config file '" + ini_path + "'", fs::path(ini_path).parent_path(),
                    overrides, true, from);
}

Config parse_config(const std::string& ini_text, const std::string& origin) {
  std::istringstream in(ini_text);
  return parse_impl(in, origin, {}, {}, false, Overrides(OverridesFrom::command_line));
}

Config parse_config(const std::string& ini_text, const std::string& origin,
                    const std::vector<std::string>& overrides) {
  std::istringstream in(ini_text);
  return parse_impl(in, origin, {}, overrides, false, Overrides(OverridesFrom::command_line));
}

std::string Config::to_ini() const {
  std::ostringstream os;
  std::string section;
  for (const Key& k : keys()) {
    const std::string sec = k.name.substr(0, k.name.find('.'));
    if (sec != section) {
      os << (section.empty() ? "" : "\n") << "[" << sec << "]\n";
      section = sec;
    }
    os << k.name.substr(k.name.find('.') + 1) << " = " << k.get(*this) << "\n";
  }
  return os.str();
}

std::vector<std::pair<std::string, std::string>> config_values(const Config& config) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const Key& k : keys()) values.emplace_back(k.name, k.get(config));
  return values;
}

std::string set_config_key(Config& config, const std::string& key, const std::string& value) {
  for (const Key& k : keys()) {
    if (k.name != key) continue;
    Config c = config;
    try {
      k.set(c, value);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()) + "; allowed: " + k.allowed +
             value_suggestion(value, k.allowed);
    }
    config = c;
    return "";
  }
  throw Error("internal error: no config key '" + key + "'");
}

size_t eval_token_cap(const Config& c) {
  if (c.train.eval_tokens != kEvalTokensAuto) return c.train.eval_tokens;
  const size_t per_step = c.train.batch_size * c.data.seq_len;  // both <= 2^20
  if (per_step != 0 && c.train.steps > std::numeric_limits<size_t>::max() / per_step)
    return std::numeric_limits<size_t>::max();
  return c.train.steps * per_step;
}

std::string config_help() {
  const Config defaults;
  std::ostringstream os;
  for (const Key& k : keys()) {
    os << "  --" << k.name << "=" << k.get(defaults) << "\n      " << k.help << "\n      allowed: "
       << k.allowed << "\n";
  }
  return os.str();
}

}  // namespace wte
