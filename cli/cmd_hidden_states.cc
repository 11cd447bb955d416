// `wte hidden-states --checkpoint C --text "..." [--text "..."]`: every layer's row of every token
// (Hugging Face's hidden_states list), and the seed's check done honestly: the same token at the
// same index in two texts, compared layer by layer against each layer's baseline, with the
// reason the rows are equal or differ (a causal model's row sees only the tokens before it).
#include <boost/program_options.hpp>
#include <omp.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "src/analysis/context_geometry.h"
#include "src/analysis/hidden_states.h"
#include "wte/decoder.h"
#include "cli/options.h"
#include "cli/commands.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {
namespace {

// A token's bytes in double quotes, escaped by escape_piece (include/wte/tokenizer.h).
std::string quoted_piece(const Tokenizer& tok, int32_t id) {
  std::string out = "\"";  // (append, not operator+: GCC 12 warns falsely with -Wrestrict on that)
  out += escape_piece(tok.piece(id));
  out += '"';
  return out;
}

// Tokens [0, n) of a text, quoted and joined: "The" " river".
std::string quoted_prefix(const Tokenizer& tok, const std::vector<int32_t>& ids, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ' ';
    out += quoted_piece(tok, ids[i]);
  }
  return out;
}

// The command line of `wte hidden-states`, checked (files are checked, not yet read).
struct HiddenStatesOptions {
  bool help = false;                // --help was printed: nothing else to do
  std::string checkpoint;
  std::vector<std::string> texts;   // (at least 1)
  size_t dims = 8;                  // values per row to print, as given (0: all)
  size_t baseline_rows = 2048;
  std::string out;                  // --out, or empty
  bool data_given = false;          // --data was given
  std::string data;                 // --data, or empty
};

// Parses and checks the options (UsageError / wte::Error on bad ones, before any file is read).
HiddenStatesOptions parse_hidden_states_options(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint", po::value<std::string>(), "a checkpoint or snapshot .h5 written by wte train, or a run directory (its newest checkpoint)")
      ("text,t", po::value<std::vector<std::string>>(), "a text; repeat to compare texts")
      ("dims", po::value<std::string>()->default_value("8"),
       "values of each row to print, in [0, 2^16] (0: all d_model; above d_model: all)")
      ("data", po::value<std::string>(),
       "int32 token file whose hidden states give each layer's baseline (default: val.bin beside "
       "the checkpoint, as wte train writes it; without one, the texts' own rows)")
      ("baseline-tokens", po::value<std::string>()->default_value("2048"),
       "rows of the token file for the baseline, in [2, 2^20] (windows of n_ctx tokens, evenly "
       "spaced)")
      ("out,o", po::value<std::string>(),
       "also write FILE.h5: per text /textN/ids (T,) int32, /textN/hidden_states (L, T, d_model) "
       "(L = n_layer + 1; 2 for a model with no blocks) and /textN/logits (T, vocab_size) float32: "
       "every row printed, whole");
  // clang-format on
  CommandSpec spec;
  spec.usage =
      "Usage: wte hidden-states --checkpoint C --text \"...\" [--text \"...\" ...] [--dims N]\n"
      "                         [--data FILE] [--baseline-tokens N] [--out FILE.h5]\n\n"
      "Encodes each text with the checkpoint's tokenizer and prints every token's index, id, piece\n"
      "and its row of every layer of Hugging Face's hidden_states list: hidden_states[0] =\n"
      "wte[id] + wpe[index] (before any block), hidden_states[l] the input of block l, and the last\n"
      "entry after ln_f (a model with no blocks: hidden_states[0] and ln_f of it). Rows come from\n"
      "the KV-cache decoder of wte sample (one prefill per text: bit for bit what decoding one\n"
      "position at a time gives), so a row sees only the tokens at or before its index, as in the\n"
      "causal model.\n"
      "Then checks, bit for bit, that every layer-0 row equals wte[id] + wpe[index] from the stored\n"
      "tables, and compares the same token at the same index in two texts layer by layer:\n"
      "bit-identical or not, max |difference|, cosine, the layer's baseline (mean cosine of random\n"
      "pairs of that layer's rows over a corpus sample) and the cosine after subtracting the\n"
      "layer's mean row; with the reason: texts equal up to that index give equal rows at every\n"
      "layer (a row cannot see later words); texts that differ before it share only layer 0.\n"
      "Exit 1 if a layer-0 row is not wte[id] + wpe[index] or equal prefixes give different rows.\n\n";
  spec.example =
      "Example (the run of configs/default.ini, as the README's tour trains it):\n"
      "  wte hidden-states --checkpoint runs/default \\\n"
      "      --text \"The river bank was muddy\" --text \"The money bank was closed\"\n";
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  HiddenStatesOptions o;
  o.help = cl.help;
  if (cl.help) return o;
  const po::variables_map& vm = cl.vm;
  require_options(vm, {"checkpoint", "text"});
  o.dims = whole_number_option(vm, "dims", 0, size_t{1} << 16);
  o.baseline_rows = whole_number_option(vm, "baseline-tokens", 2, size_t{1} << 20);
  o.checkpoint = checkpoint_option("--checkpoint", vm["checkpoint"].as<std::string>());
  const std::string& path = o.checkpoint;
  o.out = vm.count("out") ? vm["out"].as<std::string>() : "";
  o.data_given = vm.count("data") > 0;
  if (o.data_given) o.data = vm["data"].as<std::string>();
  if (!o.out.empty()) {
    check_output_file("--out", o.out);
    // Every input: --checkpoint, --data or (without it) the val.bin read beside the checkpoint.
    std::vector<std::pair<std::string, std::string>> inputs = {{"--checkpoint", path}};
    if (o.data_given)
      inputs.push_back({"--data", o.data});
    else
      inputs.push_back({"the default --data (val.bin beside --checkpoint)",
                        (fs::path(path).parent_path() / "val.bin").string()});
    check_output_not_input("--out", o.out, inputs);
  }
  o.texts = vm["text"].as<std::vector<std::string>>();
  return o;
}

std::string layer_name(size_t l, size_t L) {
  std::string s = "hidden_states[" + std::to_string(l) + "]";
  if (l + 1 == L) s += " (ln_f)";
  return s;
}

// Every text's rows (the first `dims` values of each) at every layer; returns how many layer-0
// rows are wte[id] + wpe[index] bit for bit (of `*rows_checked`).
size_t print_texts(const Model& model, const Tokenizer& tok, const std::vector<EncodedText>& texts,
                   size_t dims, size_t* rows_checked) {
  const size_t C = model.config().d_model;
  size_t rows_equal = 0;
  *rows_checked = 0;
  for (size_t ti = 0; ti < texts.size(); ++ti) {
    const EncodedText& e = texts[ti];
    const size_t L = e.rows.size();
    std::printf("\ntext %zu: \"%s\"\n", ti, e.text.c_str());
    for (size_t l = 0; l < L; ++l) {
      std::printf("  index     id  piece             %s[index][0:%zu]\n", layer_name(l, L).c_str(),
                  dims);
      for (size_t i = 0; i < e.ids.size(); ++i) {
        std::printf("  %5zu  %5d  %-16s ", i, e.ids[i], quoted_piece(tok, e.ids[i]).c_str());
        for (size_t c = 0; c < dims; ++c) std::printf(" %+.6f", e.rows[l][i * C + c]);
        std::printf("%s\n", dims < C ? " ..." : "");
      }
    }
    // Layer 0 must be exactly the float sum of the two stored rows.
    rows_equal += rows_equal_to_embedding(model, e);
    *rows_checked += e.ids.size();
  }
  return rows_equal;
}

// The same token at the same index in two texts, layer by layer; false if a row that cannot see
// other tokens (an equal prefix, or a context-free layer) differs.
bool print_same_index(const Tokenizer& tok, const std::vector<EncodedText>& texts,
                      const LayerBaseline& base, size_t n_layer) {
  bool causal_ok = true;
  size_t same_index = 0, tables = 0;
  const size_t L = texts[0].rows.size();
  std::printf("\nsame token at the same index in two texts, layer by layer:\n");
  for (const TextPairComparison& p : compare_same_index(texts, base, n_layer)) {
    const std::vector<int32_t>&ia = texts[p.a].ids, &ib = texts[p.b].ids;
    const size_t first_diff = p.first_diff;
    std::printf("\n  text %zu and text %zu\n", p.a, p.b);
    // Indices before the first difference: the same tokens up to and including them.
    if (first_diff > 0) {
      std::printf("  why equal: the texts are the same tokens up to index %zu (%s). A row sees only "
                  "the tokens at or before its index (causal attention), so the rows at indices "
                  "0..%zu are equal at every layer, whatever comes after them:\n",
                  first_diff - 1, quoted_prefix(tok, ia, first_diff).c_str(), first_diff - 1);
      for (size_t i = 0; i < first_diff; ++i) {
        ++same_index;
        const size_t identical_layers = p.prefix_identical_layers[i];
        causal_ok = causal_ok && identical_layers == L;
        std::printf("    %s (%d) at index %zu: %s\n", quoted_piece(tok, ia[i]).c_str(), ia[i], i,
                    identical_layers == L
                        ? ("bit-identical at all " + std::to_string(L) + " layers").c_str()
                        : "DIFFERENT at some layer, though it sees the same tokens: a bug");
      }
      if (!p.later_shared && first_diff > 1)
        std::printf("  (the words that differ come after these tokens, so they cannot change them; "
                    "to see context at work, put them BEFORE the token: \"The river bank was "
                    "muddy\" / \"The money bank was closed\")\n");
    }
    // Shared tokens after the first difference: only layer 0 is context-free.
    for (const SharedToken& s : p.shared) {
      const size_t i = s.index;
      ++same_index;
      ++tables;
      std::printf("  %s (%d) at index %zu; why: the texts differ at index %zu (%s vs %s), before it. "
                  "Layer 0 is wte[id] + wpe[%zu] in both, the context-free row, so it is "
                  "bit-identical; %s\n",
                  quoted_piece(tok, ia[i]).c_str(), ia[i], i, first_diff,
                  quoted_piece(tok, ia[first_diff]).c_str(),
                  quoted_piece(tok, ib[first_diff]).c_str(), i,
                  n_layer == 0 ? "this model has no blocks, so no later layer sees the other "
                                 "tokens either."
                               : "from hidden_states[1] on, attention has mixed the earlier "
                                 "tokens into the row, so it can differ.");
      std::printf("    %-28s %-13s %10s %9s %9s %9s\n", "layer", "bit-identical", "max|diff|",
                  "cosine", "baseline", "centred");
      for (size_t l = 0; l < L; ++l) {
        const SameIndexLayer& m = s.layers[l];
        std::printf("    %-28s %-13s %10.3g %9.4f %9.4f %9.4f\n", layer_name(l, L).c_str(),
                    m.identical ? "yes" : "no", m.max_diff, m.cosine, base.anisotropy[l],
                    m.centred);
        // Layer 0 is context-free; with no blocks, so is ln_f of it.
        if (m.context_free && !m.identical) {
          causal_ok = false;
          std::printf("    ^ DIFFERENT, but this row does not depend on other tokens: a bug\n");
        }
      }
    }
  }
  if (same_index == 0) std::printf("  (none: no two texts share a token at one index)\n");
  if (tables > 0)
    std::printf("\nread each cosine against its layer's baseline: when random rows of a layer "
                "already have a high mean cosine (they crowd into one cone), a high cosine says "
                "little; the centred cosine removes that common direction.\n");
  return causal_ok;
}

// The same token at different indices (any texts), layer 0.
void print_other_index(const Model& model, const Tokenizer& tok,
                       const std::vector<EncodedText>& texts) {
  std::printf("\nsame token at different indices (any texts), layer 0: the rows differ by wpe[i] - wpe[j]\n");
  const std::vector<OtherIndexPair> pairs =
      compare_other_index(texts, model.params().wpe, model.config().d_model);
  for (const OtherIndexPair& p : pairs) {
    const int32_t id = texts[p.a].ids[p.i];
    std::printf("  %s (%d) at index %zu of text %zu and index %zu of text %zu: rows differ by "
                "up to %.3g; (row_i - row_j) - (wpe[%zu] - wpe[%zu]) is at most %.3g (float "
                "rounding of the sums)\n",
                quoted_piece(tok, id).c_str(), id, p.i, p.a, p.j, p.b, p.max_diff, p.i, p.j,
                p.max_dev);
  }
  if (pairs.empty()) std::printf("  (none)\n");
}

}  // namespace

int cmd_hidden_states(int argc, char** argv) {
  const HiddenStatesOptions opt = parse_hidden_states_options(argc, argv);
  if (opt.help) return 0;
  const std::string& path = opt.checkpoint;
  const std::string& out = opt.out;
  const LoadedModel ck = load_model(path, "--checkpoint ");
  const CheckpointInfo& info = ck.info;
  const Config& cfg = ck.config;
  const Model& model = *ck.model;
  const Tokenizer& tok = ck.tokenizer;
  const size_t C = cfg.model.d_model;
  const size_t dims = opt.dims == 0 ? C : std::min(C, opt.dims);
  std::string data_path;
  if (opt.data_given) {
    data_path = opt.data;
    io::require_input_file("--data ", data_path);
  } else {
    const fs::path beside = fs::path(path).parent_path() / "val.bin";
    if (fs::is_regular_file(beside)) data_path = beside.string();
  }

  // Encode every text and check its length before any compute.
  std::vector<EncodedText> texts =
      encode_texts(tok, opt.texts, cfg.model.n_ctx, cfg.model.vocab_size);
  Decoder dec(model);
  const size_t n_layer = dec.n_layer(), L = hidden_state_layers(n_layer);
  const auto t_forward = std::chrono::steady_clock::now();
  const std::clock_t cpu_forward = std::clock();  // CPU time of all threads
  size_t positions = 0;
  for (EncodedText& e : texts) {
    run_hidden_states(dec, e, !out.empty());
    positions += e.ids.size();
  }
  const double forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_forward).count();
  const double forward_cpu = static_cast<double>(std::clock() - cpu_forward) / CLOCKS_PER_SEC;
  const HiddenStateSample sample =
      hidden_state_baseline_sample(model, texts, data_path, opt.baseline_rows);
  const LayerBaseline base = measure_baseline(
      sample, data_path.empty() ? "the texts' own rows (no --data and no val.bin beside the checkpoint)"
                                : data_path);

  std::printf("hidden states of %s (step %lld): vocab_size %zu, d_model %zu, n_layer %zu; first %zu "
              "values of each row\n",
              path.c_str(), static_cast<long long>(info.step), cfg.model.vocab_size, C, n_layer, dims);
  if (n_layer == 0)
    std::printf("layers: hidden_states[0] = wte[id] + wpe[index] (layer 0), hidden_states[1] = "
                "ln_f of it (this model has no blocks: no row ever sees another token)\n");
  else
    std::printf("layers (Hugging Face's hidden_states): [0] = wte[id] + wpe[index] (layer 0, before "
                "any block), [l] = the input of block l, [%zu] = after the last block and ln_f\n",
                n_layer);
  std::printf("rows come from the KV-cache decoder, bit for bit as if computed one position at a "
              "time: a row sees only the tokens at or before its index (causal attention)\n");
  size_t rows_checked = 0;
  const size_t rows_equal = print_texts(model, tok, texts, dims, &rows_checked);
  std::printf("\nevery hidden_states[0] row == wte[id] + wpe[index] (float sum of the stored tables), "
              "bit for bit: %zu of %zu rows\n", rows_equal, rows_checked);

  std::printf("\neach layer's baseline: the mean cosine of random distinct rows of that layer "
              "(exact over all pairs) of %zu rows of %s; 'centred' cosines subtract that layer's "
              "mean row first\n", base.rows, base.source.c_str());
  for (size_t l = 0; l < L; ++l)
    std::printf("  %-28s baseline %.4f\n", layer_name(l, L).c_str(), base.anisotropy[l]);

  const bool causal_ok = print_same_index(tok, texts, base, n_layer);
  print_other_index(model, tok, texts);
  std::printf("\nforward: %zu position(s) through %zu layer(s)%s in %.3f s (CPU time %.3f s; "
              "KV-cache decoder, one prefill per text, %d thread(s))\n",
              positions, L, out.empty() ? "" : " with logits", forward_seconds, forward_cpu,
              omp_get_max_threads());
  if (!out.empty()) {
    write_hidden_states(out, path, texts, n_layer, C, cfg.model.vocab_size);
    std::printf("wrote %s: ids, hidden_states (%zu, T, %zu) and logits (T, %zu) of %zu text(s)\n",
                out.c_str(), L, C, cfg.model.vocab_size, texts.size());
  }
  if (!causal_ok || rows_equal != rows_checked) {
    std::fprintf(stderr, "wte hidden-states: FAILED: %s\n",
                 !causal_ok ? "a token with the same tokens before it gave different rows"
                            : "a row is not wte[id] + wpe[index]");
    return 1;
  }
  return 0;
}

}  // namespace wte::cli
