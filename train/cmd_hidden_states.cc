// `wte hidden-states --checkpoint C --text "..." [--text "..."]`: the row each token enters the
// model as, hidden_states[0] = wte[id] + wpe[pos], and the check that it knows nothing of the
// sentence: the same token at the same index is the same bits in every text.
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/tokenizer.h"
#include "train/cli_util.h"
#include "train/commands.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

// A token's bytes in double quotes, escaped by escape_piece (include/wte/tokenizer.h).
std::string quoted_piece(const Tokenizer& tok, int32_t id) {
  std::string out = "\"";  // (append, not operator+: GCC 12 warns falsely with -Wrestrict on that)
  out += escape_piece(tok.piece(id));
  out += '"';
  return out;
}

struct Encoded {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<float> rows;   // (T, C) hidden_states[0]
};

}  // namespace

int cmd_hidden_states(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint,c", po::value<std::string>(), "a checkpoint or snapshot .h5 written by wte train")
      ("text,t", po::value<std::vector<std::string>>(), "a text; repeat to compare texts")
      ("dims", po::value<std::string>()->default_value("8"),
       "values of each row to print, in [0, 2^16] (0: all d_model; above d_model: all)");
  // clang-format on
  const char* usage =
      "Usage: wte hidden-states --checkpoint C --text \"...\" [--text \"...\" ...] [--dims N]\n\n"
      "Encodes each text with the checkpoint's tokenizer, runs the model's forward, and prints\n"
      "each token's index, id, piece and hidden_states[0][index] = wte[id] + wpe[index] (layer 0:\n"
      "the row before any block; this model has no blocks yet, contextual layers come later).\n"
      "Then checks, bit for bit: every row equals wte[id] + wpe[index] computed from the stored\n"
      "tables; the same token at the same index in two texts gives bit-identical rows (exit 1 if\n"
      "not); the same token at different indices differs only by wpe[i] - wpe[j].\n\n";
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "wte hidden-states: %s\n\n%s", e.what(), usage);
    std::cerr << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << usage << opts
              << "\nExample (GPT-2's vocabulary, a model of vocab_size 50257):\n"
                 "  wte hidden-states --checkpoint runs/gpt2vocab/checkpoint_00000002.h5 \\\n"
                 "      --text \"The bank was muddy\" --text \"The bank was closed\"\n";
    return 0;
  }
  if (!vm.count("checkpoint") || !vm.count("text")) {
    std::fprintf(stderr, "wte hidden-states: needs --checkpoint and at least one --text\n\n%s",
                 usage);
    std::cerr << opts;
    return 2;
  }
  const size_t dims_arg = whole_number_option(vm, "dims", 0, size_t{1} << 16);
  const std::string path = vm["checkpoint"].as<std::string>();
  const CheckpointInfo info = read_checkpoint_info(path);
  const Config cfg = parse_config(info.config_ini, path + " /config/ini");
  const Tokenizer tok = Tokenizer::from_strings(info.encoder_json, info.vocab_bpe, path + " /tokenizer");
  const size_t C = cfg.model.d_model;
  const size_t dims = dims_arg == 0 ? C : std::min(C, dims_arg);

  // Encode every text and check its length before any compute.
  std::vector<Encoded> texts;
  for (const std::string& t : vm["text"].as<std::vector<std::string>>()) {
    Encoded e;
    e.text = t;
    e.ids = tok.encode(t);
    if (e.ids.empty()) throw Error("--text \"" + t + "\" encodes to no tokens");
    if (e.ids.size() > cfg.model.n_ctx)
      throw Error("--text \"" + t + "\" is " + std::to_string(e.ids.size()) +
                  " tokens, more than the model's n_ctx = " + std::to_string(cfg.model.n_ctx) +
                  " position rows");
    texts.push_back(std::move(e));
  }
  Model model(cfg.model);
  load_checkpoint(path, model, nullptr);
  const float* wte = model.params().wte;
  const float* wpe = model.params().wpe;
  for (Encoded& e : texts) {
    model.forward_logits(e.ids.data(), 1, e.ids.size());
    const float* h = model.hidden_states();
    e.rows.assign(h, h + e.ids.size() * C);
  }

  std::printf("hidden_states[0] (layer 0: wte[id] + wpe[index], before any block; this model has "
              "no blocks yet) from %s (step %lld), vocab_size %zu, d_model %zu; first %zu values "
              "of each row\n",
              path.c_str(), static_cast<long long>(info.step), cfg.model.vocab_size, C, dims);
  size_t rows_checked = 0, rows_equal = 0;
  for (size_t ti = 0; ti < texts.size(); ++ti) {
    const Encoded& e = texts[ti];
    std::printf("\ntext %zu: \"%s\"\n  index     id  piece             hidden_states[0][index][0:%zu]\n",
                ti, e.text.c_str(), dims);
    for (size_t i = 0; i < e.ids.size(); ++i) {
      std::printf("  %5zu  %5d  %-16s ", i, e.ids[i], quoted_piece(tok, e.ids[i]).c_str());
      for (size_t c = 0; c < dims; ++c) std::printf(" %+.6f", e.rows[i * C + c]);
      std::printf("%s\n", dims < C ? " ..." : "");
      // The row must be exactly the float sum of the two stored rows.
      bool equal = true;
      for (size_t c = 0; c < C; ++c) {
        const float want = wte[size_t(e.ids[i]) * C + c] + wpe[i * C + c];
        equal = equal && std::memcmp(&want, &e.rows[i * C + c], sizeof(float)) == 0;
      }
      ++rows_checked;
      rows_equal += equal;
    }
  }
  std::printf("\nevery row == wte[id] + wpe[index] (float sum of the stored tables), bit for bit: "
              "%zu of %zu rows\n",
              rows_equal, rows_checked);

  bool all_identical = true;
  size_t same_index = 0, other_index = 0;
  std::printf("\nsame token at the same index in two texts:\n");
  for (size_t a = 0; a < texts.size(); ++a)
    for (size_t b = a + 1; b < texts.size(); ++b)
      for (size_t i = 0; i < std::min(texts[a].ids.size(), texts[b].ids.size()); ++i) {
        if (texts[a].ids[i] != texts[b].ids[i]) continue;
        ++same_index;
        const bool identical =
            std::memcmp(&texts[a].rows[i * C], &texts[b].rows[i * C], C * sizeof(float)) == 0;
        all_identical = all_identical && identical;
        std::printf("  %s (%d) at index %zu of text %zu and text %zu: %s\n",
                    quoted_piece(tok, texts[a].ids[i]).c_str(), texts[a].ids[i], i, a, b,
                    identical ? "bit-identical (all d_model floats equal)" : "DIFFERENT");
      }
  if (same_index == 0) std::printf("  (none: no two texts share a token at one index)\n");

  std::printf("\nsame token at different indices (any texts): the rows differ by wpe[i] - wpe[j]\n");
  for (size_t a = 0; a < texts.size(); ++a)
    for (size_t b = a; b < texts.size(); ++b)
      for (size_t i = 0; i < texts[a].ids.size(); ++i)
        for (size_t j = 0; j < texts[b].ids.size(); ++j) {
          if ((a == b && j <= i) || i == j || texts[a].ids[i] != texts[b].ids[j]) continue;
          ++other_index;
          double max_diff = 0, max_dev = 0;
          for (size_t c = 0; c < C; ++c) {
            const double d = double(texts[a].rows[i * C + c]) - double(texts[b].rows[j * C + c]);
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
  if (!all_identical || rows_equal != rows_checked) {
    std::fprintf(stderr, "wte hidden-states: FAILED: %s\n",
                 !all_identical ? "a token at the same index gave different rows"
                                : "a row is not wte[id] + wpe[index]");
    return 1;
  }
  return 0;
}

}  // namespace wte::cli
