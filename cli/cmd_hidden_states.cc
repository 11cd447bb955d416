// `wte hidden-states --checkpoint C --text "..." [--text "..."]`: every layer's row of every token
// (Hugging Face's hidden_states list), and the seed's check done honestly: the same token at the
// same index in two texts, compared layer by layer against each layer's baseline, with the
// reason the rows are equal or differ (a causal model's row sees only the tokens before it).
#include <boost/program_options.hpp>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "src/analysis/context_geometry.h"
#include "src/analysis/geometry.h"
#include "src/io/hdf5_util.h"
#include "src/model/decoder.h"
#include "cli/options.h"
#include "cli/commands.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
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

struct Encoded {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<std::vector<float>> rows;   // (L) each (T, C): hidden_states[l]
  std::vector<float> logits;              // (T, V), only for --out
};

// Every layer's rows of one text through the KV-cache decoder's prefill (each row has the bits
// of decoding the text one position at a time: a row sees only the tokens at or before it); with
// `logits`, also each position's logits (the unembedding, skipped otherwise).
void run_text(Decoder& dec, Encoded& e, size_t L, size_t C, bool logits) {
  dec.reset();
  const size_t T = e.ids.size();
  dec.prefill(e.ids.data(), T, logits);
  e.rows.assign(L, std::vector<float>(T * C));
  for (size_t l = 0; l < L; ++l) {
    const float* r = l + 1 == L ? dec.final_rows() : dec.residual_rows(l);
    std::memcpy(e.rows[l].data(), r, T * C * sizeof(float));
  }
  if (logits) e.logits.assign(dec.logits_rows(), dec.logits_rows() + T * dec.vocab_size());
}

// --out FILE.h5: every text's ids, hidden_states (L, T, C) and logits (T, V), written atomically.
void write_hidden_states(const std::string& out, const std::string& checkpoint,
                         const std::vector<Encoded>& texts, size_t n_layer, size_t C, size_t V) {
  const size_t L = texts.empty() ? 0 : texts[0].rows.size();  // hidden_state_layers(n_layer)
  // Reserved on disk before HDF5 writes (a full disk is then an error, not a crash inside
  // HDF5): every text's ids, rows, logits and text, and HDF5's metadata, estimated as the
  // checkpoint writer does (about 1 KiB per dataset; 2 KiB per dataset + 16 KiB reserved).
  uint64_t expected_bytes = (16 + 2 * 8) * uint64_t{1024};
  for (const Encoded& e : texts) {
    const uint64_t T = e.ids.size();
    expected_bytes += 4 * T * (1 + uint64_t{L} * C + V) + e.text.size() + 2 * 4 * uint64_t{1024};
  }
  hdf5::write_file_atomic(
      out, "hidden states '" + out + "'",
      [&](H5::H5File& file, const std::string&) {
        H5::Group root = file.openGroup("/");
        hdf5::write_string_attr(root, "format", "wte-hidden-states");
        hdf5::write_string_attr(root, "checkpoint", checkpoint);
        hdf5::write_string_attr(root, "layers",
                                "hidden_states[l] (Hugging Face's list): [0] = wte[id] + wpe[index], "
                                "[l] = the input of block l, the last = ln_f of the last block's "
                                "output (a model with no blocks: [0] and ln_f of it); logits = "
                                "the last · lm_headᵀ");
        hdf5::write_int_attr(root, "n_layer", static_cast<int64_t>(n_layer));
        hdf5::write_int_attr(root, "d_model", static_cast<int64_t>(C));
        hdf5::write_int_attr(root, "vocab_size", static_cast<int64_t>(V));
        hdf5::write_int_attr(root, "texts", static_cast<int64_t>(texts.size()));
        for (size_t ti = 0; ti < texts.size(); ++ti) {
          const Encoded& e = texts[ti];
          const size_t T = e.ids.size();
          H5::Group g = root.createGroup("text" + std::to_string(ti));
          hdf5::write_string(g, "text", e.text);
          const hsize_t dims[1] = {T};
          H5::DataSet ids = g.createDataSet("ids", H5::PredType::STD_I32LE, H5::DataSpace(1, dims));
          ids.write(e.ids.data(), H5::PredType::NATIVE_INT32);
          std::vector<float> hs;
          hs.reserve(L * T * C);
          for (size_t l = 0; l < L; ++l) hs.insert(hs.end(), e.rows[l].begin(), e.rows[l].end());
          hdf5::write_tensor(g, "hidden_states", {L, T, C}, hs.data());
          hdf5::write_tensor(g, "logits", {T, V}, e.logits.data());
        }
      },
      expected_bytes);
}

// The baseline rows: a sample of the token file, or (no file) the texts' own rows.
HiddenStateSample baseline_sample(const Model& model, const std::vector<Encoded>& texts,
                                  const std::string& data_path, size_t n_rows, size_t C) {
  if (!data_path.empty()) {
    const std::vector<int32_t> tokens = read_token_file(data_path);
    return sample_hidden_states(model, tokens, n_rows, model.config().n_ctx, data_path);
  }
  HiddenStateSample s;
  s.C = C;
  s.rows.resize(texts[0].rows.size());
  for (const Encoded& e : texts)
    for (size_t i = 0; i < e.ids.size(); ++i) {
      s.ids.push_back(e.ids[i]);
      s.positions.push_back(static_cast<uint32_t>(i));
      for (size_t l = 0; l < s.rows.size(); ++l)
        s.rows[l].insert(s.rows[l].end(), e.rows[l].begin() + i * C, e.rows[l].begin() + (i + 1) * C);
    }
  return s;
}

// Per layer: the baseline (mean cosine of random distinct rows, exact over the sample) and the
// centre (mean row) the centred cosine subtracts.
struct Baseline {
  std::vector<double> anisotropy;          // (L)
  std::vector<std::vector<double>> centre; // (L) each (C)
  size_t rows = 0;
  std::string source;
};

Baseline measure_baseline(const HiddenStateSample& s, const std::string& source) {
  Baseline b;
  b.source = source;
  b.rows = s.ids.size();
  for (size_t l = 0; l < s.layers(); ++l) {
    b.centre.push_back(layer_mean(s, l, 0));
    b.anisotropy.push_back(anisotropy(RowsView{s.rows[l].data(), s.ids.size(), s.C}).raw);
  }
  return b;
}

}  // namespace

int cmd_hidden_states(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint", po::value<std::string>(), "a checkpoint or snapshot .h5 written by wte train")
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
      "  wte hidden-states --checkpoint runs/default/checkpoint_00000600.h5 \\\n"
      "      --text \"The river bank was muddy\" --text \"The money bank was closed\"\n";
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  require_options(vm, {"checkpoint", "text"});
  const size_t dims_arg = whole_number_option(vm, "dims", 0, size_t{1} << 16);
  const size_t baseline_rows = whole_number_option(vm, "baseline-tokens", 2, size_t{1} << 20);
  const std::string path = vm["checkpoint"].as<std::string>();
  require_checkpoint_file("--checkpoint", path);
  const std::string out = vm.count("out") ? vm["out"].as<std::string>() : "";
  if (!out.empty()) {
    check_output_file("--out", out);
    // Every input: --checkpoint, --data or (without it) the val.bin read beside the checkpoint.
    std::vector<std::pair<std::string, std::string>> inputs = {{"--checkpoint", path}};
    if (vm.count("data"))
      inputs.push_back({"--data", vm["data"].as<std::string>()});
    else
      inputs.push_back({"the default --data (val.bin beside --checkpoint)",
                        (fs::path(path).parent_path() / "val.bin").string()});
    check_output_not_input("--out", out, inputs);
  }
  const CheckpointModel ck = load_checkpoint_model(path);
  const CheckpointInfo& info = ck.info;
  const Config& cfg = ck.config;
  const Model& model = *ck.model;
  const Tokenizer tok = Tokenizer::from_strings(info.encoder_json, info.vocab_bpe, path + " /tokenizer");
  const size_t C = cfg.model.d_model;
  const size_t dims = dims_arg == 0 ? C : std::min(C, dims_arg);
  std::string data_path;
  if (vm.count("data")) {
    data_path = vm["data"].as<std::string>();
    io::require_input_file("--data ", data_path);
  } else {
    const fs::path beside = fs::path(path).parent_path() / "val.bin";
    if (fs::is_regular_file(beside)) data_path = beside.string();
  }

  // Encode every text and check its length before any compute.
  std::vector<Encoded> texts;
  for (const std::string& t : vm["text"].as<std::vector<std::string>>()) {
    Encoded e;
    e.text = t;
    e.ids = tok.encode(t);
    if (e.ids.empty()) throw UsageError("--text \"" + t + "\" encodes to no tokens; give a non-empty text");
    if (e.ids.size() > cfg.model.n_ctx)
      throw UsageError("--text \"" + t + "\" is " + std::to_string(e.ids.size()) +
                  " tokens, more than the model's n_ctx = " + std::to_string(cfg.model.n_ctx) +
                  " position rows");
    check_token_ids(e.ids.data(), e.ids.size(), cfg.model.vocab_size,
                    "--text \"" + t + "\" (encoded with the checkpoint's tokenizer)");
    texts.push_back(std::move(e));
  }
  Decoder dec(model);
  const size_t n_layer = dec.n_layer(), L = hidden_state_layers(n_layer);
  const auto t_forward = std::chrono::steady_clock::now();
  const std::clock_t cpu_forward = std::clock();  // CPU time of all threads
  size_t positions = 0;
  for (Encoded& e : texts) {
    run_text(dec, e, L, C, !out.empty());
    positions += e.ids.size();
  }
  const double forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_forward).count();
  const double forward_cpu = static_cast<double>(std::clock() - cpu_forward) / CLOCKS_PER_SEC;
  const HiddenStateSample sample = baseline_sample(model, texts, data_path, baseline_rows, C);
  const Baseline base = measure_baseline(
      sample, data_path.empty() ? "the texts' own rows (no --data and no val.bin beside the checkpoint)"
                                : data_path);
  auto layer_name = [&](size_t l) {
    std::string s = "hidden_states[" + std::to_string(l) + "]";
    if (l + 1 == L) s += " (ln_f)";
    return s;
  };

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
  size_t rows_checked = 0, rows_equal = 0;
  for (size_t ti = 0; ti < texts.size(); ++ti) {
    const Encoded& e = texts[ti];
    std::printf("\ntext %zu: \"%s\"\n", ti, e.text.c_str());
    for (size_t l = 0; l < L; ++l) {
      std::printf("  index     id  piece             %s[index][0:%zu]\n", layer_name(l).c_str(), dims);
      for (size_t i = 0; i < e.ids.size(); ++i) {
        std::printf("  %5zu  %5d  %-16s ", i, e.ids[i], quoted_piece(tok, e.ids[i]).c_str());
        for (size_t c = 0; c < dims; ++c) std::printf(" %+.6f", e.rows[l][i * C + c]);
        std::printf("%s\n", dims < C ? " ..." : "");
      }
    }
    // Layer 0 must be exactly the float sum of the two stored rows.
    for (size_t i = 0; i < e.ids.size(); ++i) {
      bool equal = true;
      for (size_t c = 0; c < C; ++c) {
        const float want = model.params().wte[size_t(e.ids[i]) * C + c] + model.params().wpe[i * C + c];
        equal = equal && std::memcmp(&want, &e.rows[0][i * C + c], sizeof(float)) == 0;
      }
      ++rows_checked;
      rows_equal += equal;
    }
  }
  std::printf("\nevery hidden_states[0] row == wte[id] + wpe[index] (float sum of the stored tables), "
              "bit for bit: %zu of %zu rows\n", rows_equal, rows_checked);

  std::printf("\neach layer's baseline: the mean cosine of random distinct rows of that layer "
              "(exact over all pairs) of %zu rows of %s; 'centred' cosines subtract that layer's "
              "mean row first\n", base.rows, base.source.c_str());
  for (size_t l = 0; l < L; ++l)
    std::printf("  %-28s baseline %.4f\n", layer_name(l).c_str(), base.anisotropy[l]);

  bool causal_ok = true;
  size_t same_index = 0, tables = 0;
  std::printf("\nsame token at the same index in two texts, layer by layer:\n");
  for (size_t a = 0; a < texts.size(); ++a)
    for (size_t b = a + 1; b < texts.size(); ++b) {
      const std::vector<int32_t>&ia = texts[a].ids, &ib = texts[b].ids;
      const size_t n = std::min(ia.size(), ib.size());
      size_t first_diff = 0;
      while (first_diff < n && ia[first_diff] == ib[first_diff]) ++first_diff;
      bool later_shared = false;
      for (size_t i = first_diff; i < n; ++i) later_shared = later_shared || ia[i] == ib[i];
      if (first_diff == 0 && !later_shared) continue;
      std::printf("\n  text %zu and text %zu\n", a, b);
      // Indices before the first difference: the same tokens up to and including them.
      if (first_diff > 0) {
        std::printf("  why equal: the texts are the same tokens up to index %zu (%s). A row sees only "
                    "the tokens at or before its index (causal attention), so the rows at indices "
                    "0..%zu are equal at every layer, whatever comes after them:\n",
                    first_diff - 1, quoted_prefix(tok, ia, first_diff).c_str(), first_diff - 1);
        for (size_t i = 0; i < first_diff; ++i) {
          ++same_index;
          size_t identical_layers = 0;
          for (size_t l = 0; l < L; ++l)
            identical_layers += std::memcmp(texts[a].rows[l].data() + i * C,
                                            texts[b].rows[l].data() + i * C, C * sizeof(float)) == 0;
          causal_ok = causal_ok && identical_layers == L;
          std::printf("    %s (%d) at index %zu: %s\n", quoted_piece(tok, ia[i]).c_str(), ia[i], i,
                      identical_layers == L
                          ? ("bit-identical at all " + std::to_string(L) + " layers").c_str()
                          : "DIFFERENT at some layer, though it sees the same tokens: a bug");
        }
        if (!later_shared && first_diff > 1)
          std::printf("  (the words that differ come after these tokens, so they cannot change them; "
                      "to see context at work, put them BEFORE the token: \"The river bank was "
                      "muddy\" / \"The money bank was closed\")\n");
      }
      // Shared tokens after the first difference: only layer 0 is context-free.
      for (size_t i = first_diff; i < n; ++i) {
        if (ia[i] != ib[i]) continue;
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
          const float* ra = texts[a].rows[l].data() + i * C;
          const float* rb = texts[b].rows[l].data() + i * C;
          const bool identical = std::memcmp(ra, rb, C * sizeof(float)) == 0;
          double max_diff = 0;
          for (size_t c = 0; c < C; ++c)
            max_diff = std::max(max_diff, std::fabs(double(ra[c]) - double(rb[c])));
          std::printf("    %-28s %-13s %10.3g %9.4f %9.4f %9.4f\n", layer_name(l).c_str(),
                      identical ? "yes" : "no", max_diff, centred_cosine(ra, rb, nullptr, C),
                      base.anisotropy[l], centred_cosine(ra, rb, base.centre[l].data(), C));
          // Layer 0 is context-free; with no blocks, so is ln_f of it.
          if ((l == 0 || n_layer == 0) && !identical) {
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

  size_t other_index = 0;
  std::printf("\nsame token at different indices (any texts), layer 0: the rows differ by wpe[i] - wpe[j]\n");
  const float* wpe = model.params().wpe;
  for (size_t a = 0; a < texts.size(); ++a)
    for (size_t b = a; b < texts.size(); ++b)
      for (size_t i = 0; i < texts[a].ids.size(); ++i)
        for (size_t j = 0; j < texts[b].ids.size(); ++j) {
          if ((a == b && j <= i) || i == j || texts[a].ids[i] != texts[b].ids[j]) continue;
          ++other_index;
          double max_diff = 0, max_dev = 0;
          for (size_t c = 0; c < C; ++c) {
            const double d = double(texts[a].rows[0][i * C + c]) - double(texts[b].rows[0][j * C + c]);
            const double p = double(wpe[i * C + c]) - double(wpe[j * C + c]);
            max_diff = std::max(max_diff, std::fabs(d));
            max_dev = std::max(max_dev, std::fabs(d - p));
          }
          std::printf("  %s (%d) at index %zu of text %zu and index %zu of text %zu: rows differ by "
                      "up to %.3g; (row_i - row_j) - (wpe[%zu] - wpe[%zu]) is at most %.3g (float "
                      "rounding of the sums)\n",
                      quoted_piece(tok, texts[a].ids[i]).c_str(), texts[a].ids[i], i, a, j, b,
                      max_diff, i, j, max_dev);
        }
  if (other_index == 0) std::printf("  (none)\n");
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
