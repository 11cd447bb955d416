// `wte geometry --checkpoint C [--checkpoint C ...] [--query LIST] [--labels FILE] [--out DIR]`:
// measures and draws the geometry of wte in one checkpoint or a series (a run's snapshots).
#include <boost/program_options.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "src/analysis/context_geometry.h"
#include "src/analysis/context_page.h"
#include "src/analysis/geometry.h"
#include "src/analysis/geometry_page.h"
#include "src/analysis/geometry_report.h"
#include "wte/model.h"
#include "src/io/snapshot.h"
#include "wte/tokenizer.h"
#include "cli/options.h"
#include "cli/commands.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {
namespace {

std::vector<std::string> expand_checkpoints(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    if (fs::is_directory(a)) {
      auto list = list_snapshots(a);
      // The run's final checkpoint always ends the series, also when it is no snapshot step
      // (a shorter run of a config whose snapshot_steps go further).
      const auto checkpoints = list_snapshots(a, "checkpoint_");
      if (list.empty()) list = checkpoints;
      else if (!checkpoints.empty() && checkpoints.back().first > list.back().first)
        list.push_back(checkpoints.back());
      if (list.empty())
        throw Error("--checkpoint " + a + ": the directory has no snapshot_<step>.h5 or " +
                    "checkpoint_<step>.h5 files (train with --train.snapshot_steps=0,10,100,...)");
      for (auto& [step, path] : list) out.push_back(path);
    } else {
      io::require_input_file("--checkpoint ", a, " (give a checkpoint .h5 or a run directory)");
      out.push_back(a);
    }
  }
  return out;
}

// wte of every checkpoint (validated), in step order, with the first one's tokenizer.
struct WteSeries {
  std::vector<WteSnapshot> snaps;
  Tokenizer tok;
  size_t V = 0, C = 0;
};

WteSeries read_wte_series(const std::vector<std::string>& paths) {
  WteSeries ws;
  std::string encoder_json;
  for (const std::string& path : paths) {
    const CheckpointModel ck = load_checkpoint_model(path);
    const CheckpointInfo& info = ck.info;
    const Config& cfg = ck.config;
    if (ws.snaps.empty()) {
      ws.tok = Tokenizer::from_strings(info.encoder_json, info.vocab_bpe, path + " /tokenizer");
      encoder_json = info.encoder_json;
      ws.V = cfg.model.vocab_size, ws.C = cfg.model.d_model;
    } else if (cfg.model.vocab_size != ws.V || cfg.model.d_model != ws.C ||
               info.encoder_json != encoder_json) {
      throw Error(path + ": wte is (" + std::to_string(cfg.model.vocab_size) + ", " +
                  std::to_string(cfg.model.d_model) + ") with its own tokenizer, but " +
                  ws.snaps[0].path + " has (" + std::to_string(ws.V) + ", " +
                  std::to_string(ws.C) + "); a series must come from one run");
    }
    WteSnapshot s;
    s.path = path;
    s.step = info.step;
    s.wte.assign(ck.model->params().wte, ck.model->params().wte + ws.V * ws.C);
    ws.snaps.push_back(std::move(s));
  }
  std::stable_sort(ws.snaps.begin(), ws.snaps.end(),
                   [](const WteSnapshot& a, const WteSnapshot& b) { return a.step < b.step; });
  return ws;
}

}  // namespace

int cmd_geometry(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint", po::value<std::vector<std::string>>(),
       "a checkpoint or snapshot .h5, or a run directory (its snapshot_<step>.h5 files, else its "
       "checkpoint_<step>.h5 files); repeat for a series")
      ("query", po::value<std::string>(),
       "comma-separated tokens whose nearest neighbours to show (old name --tokens): each a "
       "token's text (a leading "
       "space counts: \" the\") or #ID")
      ("labels", po::value<std::string>(),
       "class labels, a TSV with header id<TAB>token<TAB>class (datasets/planted/labels.tsv): "
       "adds k-NN purity, silhouette and class colours")
      ("out,o", po::value<std::string>(),
       "directory for the pictures (SVG), geometry.csv and index.html (one page with all of them)")
      ("data", po::value<std::string>(),
       "int32 token file whose frequencies pick the most frequent tokens (default: train.bin "
       "beside the last checkpoint, as wte train writes it)")
      ("frequent", po::value<std::string>()->default_value("8"),
       "most frequent tokens to show, in [0, 2^24] (0: only --query)")
      ("neighbours", po::value<std::string>()->default_value("8"), "neighbours per token, in [1, 2^24]")
      ("k", po::value<std::string>()->default_value("5"),
       "k of the k-NN class purity, in [1, 2^24] (and below the number of labelled tokens)")
      ("max-points", po::value<std::string>()->default_value("5000"),
       "without labels, the PCA picture shows the rows of ids [0, max-points), in [1, 2^24]")
      ("context-tokens", po::value<std::string>()->default_value("4096"),
       "hidden states per layer of the last checkpoint: rows sampled from --context-data, in "
       "[0, 2^20] (0: skip); adds anisotropy and self-similarity per layer and their pictures")
      ("context-data", po::value<std::string>(),
       "int32 token file for the hidden-state sample (default: val.bin beside the last "
       "checkpoint, as wte train writes it)");
  // clang-format on
  CommandSpec spec;
  spec.usage =
      "Usage: wte geometry --checkpoint C [--checkpoint C ...] [--query LIST] [--labels FILE]\n"
      "                    [--out DIR]\n\n"
      "Measures wte's geometry in each checkpoint (in step order): anisotropy (mean cosine of\n"
      "distinct pairs of rows, raw and after subtracting the mean row, exact over all pairs),\n"
      "effective rank (participation ratio (sum s^2)^2 / sum s^4 of the singular values), mean\n"
      "row norm, and with --labels the k-NN class purity and silhouette (cosine distance) over the\n"
      "labelled rows; prints the nearest neighbours by cosine of --query and of the most frequent\n"
      "tokens at the first and last step; with --out writes the pictures and DIR/index.html.\n"
      "Then, for the last checkpoint, the hidden states per layer (Hugging Face's hidden_states)\n"
      "of --context-tokens positions of the validation tokens: per layer the anisotropy (mean\n"
      "cosine of random rows) and Ethayarajh's (2019) self-similarity (mean cosine of the same\n"
      "token's rows in different contexts, tokens with >= 5 rows, positions >= 1), raw and after\n"
      "subtracting the layer's mean row, with a histogram of each per layer.\n\n";
  spec.example =
      "Example:\n"
      "  datasets/make_planted.py\n"
      "  wte train --config configs/planted.ini --out runs/planted\n"
      "  wte geometry --checkpoint runs/planted --labels datasets/planted/labels.tsv "
      "--out runs/planted/geometry\n";
  spec.aliases = {{"--tokens", "--query"}};
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  require_options(vm, {"checkpoint"});
  constexpr size_t kMaxCount = size_t{1} << 24;  // model.vocab_size's upper bound
  const size_t n_freq = whole_number_option(vm, "frequent", 0, kMaxCount),
               n_nb = whole_number_option(vm, "neighbours", 1, kMaxCount),
               k = whole_number_option(vm, "k", 1, kMaxCount),
               max_points = whole_number_option(vm, "max-points", 1, kMaxCount),
               context_rows = whole_number_option(vm, "context-tokens", 0, size_t{1} << 20);
  // "" or ",": an unset shell variable must not silently mean no query (empty items are skipped).
  if (vm.count("query") && vm["query"].as<std::string>().find_first_not_of(',') == std::string::npos)
    throw UsageError("--query '" + vm["query"].as<std::string>() + "' names no token; allowed: "
                     "comma-separated tokens, each a token's text or #ID (or leave --query out)");
  if (vm.count("context-data")) io::require_input_file("--context-data ", vm["context-data"].as<std::string>());
  // The output directory is created (and checked writable) before any checkpoint is read.
  if (vm.count("out")) {
    // --out's files: index.html, geometry.csv and the pictures (*.svg), each through NAME.tmp.
    std::vector<std::pair<std::string, std::string>> inputs;
    for (const char* o : {"labels", "data", "context-data"})
      if (vm.count(o)) inputs.push_back({std::string("--") + o, vm[o].as<std::string>()});
    for (const std::string& c : vm["checkpoint"].as<std::vector<std::string>>())
      inputs.push_back({"--checkpoint", c});
    check_output_dir_not_input("--out", vm["out"].as<std::string>(), inputs, [](const std::string& n) {
      const auto ends = [&](const std::string& e) {
        return n.size() >= e.size() && n.compare(n.size() - e.size(), e.size(), e) == 0;
      };
      return n == "index.html" || n == "geometry.csv" || ends(".svg");
    });
    prepare_output_dir("--out", vm["out"].as<std::string>());
  }

  // --- Read every checkpoint (validated) before any output.
  const std::vector<std::string> paths = expand_checkpoints(vm["checkpoint"].as<std::vector<std::string>>());
  WteSeries ws = read_wte_series(paths);
  const std::vector<WteSnapshot>& snaps = ws.snaps;
  const Tokenizer& tok = ws.tok;
  const size_t V = ws.V, C = ws.C;
  TokenLabels labels;
  const bool has_labels = vm.count("labels") > 0;
  if (has_labels) labels = read_token_labels(vm["labels"].as<std::string>(), tok);
  if (has_labels && k >= labels.ids.size())
    throw Error("--k " + std::to_string(k) + " must be below the number of labelled tokens, " +
                std::to_string(labels.ids.size()));
  std::vector<int32_t> queries;
  if (vm.count("query")) {
    try {
      queries = parse_token_list(vm["query"].as<std::string>(), tok);
    } catch (const Error& e) {
      throw UsageError(e.what());  // a query that is not one token of this vocabulary
    }
  }

  // Frequencies for "the most frequent tokens".
  std::string data_path = vm.count("data") ? vm["data"].as<std::string>()
                                           : (fs::path(snaps.back().path).parent_path() / "train.bin").string();
  std::vector<int32_t> frequent;
  std::vector<uint64_t> counts;
  if (vm.count("data")) io::require_input_file("--data ", data_path);
  if (fs::is_regular_file(data_path)) {
    const std::vector<int32_t> ids = read_token_file(data_path);
    check_token_ids(ids.data(), ids.size(), V, data_path);
    counts.assign(V, 0);
    for (int32_t id : ids) ++counts[id];
    frequent = most_frequent(counts, n_freq);
  }

  // --- Measures per step, the report, and with --out the pictures and the page.
  const std::vector<GeometryMeasures> series =
      measure_geometry(snaps, V, C, has_labels ? &labels : nullptr, k);
  GeometryReportInput in;
  in.snaps = &snaps;
  in.series = &series;
  in.tok = &tok;
  in.V = V, in.C = C;
  in.labels = has_labels ? &labels : nullptr;
  in.k = k;
  in.queries = queries;
  in.has_queries = vm.count("query") > 0;
  in.frequent = frequent;
  in.n_frequent = n_freq;
  in.data_path = data_path;
  in.neighbours = n_nb;
  std::string report = geometry_report(in);
  std::cout << report;
  // Hidden states per layer of the last checkpoint (its whole model, blocks included).
  HiddenStateSample sample;
  ContextGeometryRun ctx;
  if (context_rows > 0) {
    ctx.checkpoint = snaps.back().path;
    ctx.data = vm.count("context-data")
                   ? vm["context-data"].as<std::string>()
                   : (fs::path(ctx.checkpoint).parent_path() / "val.bin").string();
    if (fs::is_regular_file(ctx.data)) {
      const CheckpointModel ck = load_checkpoint_model(ctx.checkpoint);
      sample = sample_hidden_states(*ck.model, read_token_file(ctx.data), context_rows,
                                    ck.config.model.n_ctx, ctx.data);
      ctx.sample = &sample;
      ctx.layers = context_geometry(sample, ctx.min_position, ctx.min_count);
      const std::string text = "\n" + context_report(ctx);
      std::cout << text;
      report += text;
    } else {
      const std::string note = "\n(no hidden states per layer: " + ctx.data +
                               " does not exist; pass --context-data or --context-tokens 0)\n";
      std::cout << note;
      report += note;
    }
  }
  if (!vm.count("out")) return 0;

  const std::string out = vm["out"].as<std::string>();  // created by prepare_output_dir above
  std::vector<PageSection> sections;
  {  // The run's loss curve, from metrics.csv beside the last checkpoint (if it is there).
    const std::string& last = snaps.back().path;
    const Config last_cfg = parse_config(read_checkpoint_info(last).config_ini, last + " /config/ini");
    std::vector<Figure> loss = write_loss_figure(
        out, (fs::path(last).parent_path() / "metrics.csv").string(),
        last_cfg.train.batch_size * last_cfg.data.seq_len);
    if (!loss.empty()) sections.push_back({"Training", "", std::move(loss)});
  }
  sections.push_back({sections.empty() ? "" : "wte over training", "",
                      write_wte_figures(out, in, max_points)});
  if (ctx.sample != nullptr) sections.push_back(write_context_figures(out, ctx));
  write_geometry_csv(out, snaps, series, has_labels);
  const std::string intro = "Rows of wte from " + std::to_string(snaps.size()) +
                            " checkpoint(s), steps " + std::to_string(snaps.front().step) + " to " +
                            std::to_string(snaps.back().step) + ".";
  write_geometry_page(out, intro, sections, report);
  size_t n_figures = 0;
  for (const PageSection& sec : sections) n_figures += sec.figures.size();
  std::printf("\nwrote %zu pictures, geometry.csv and %s\n", n_figures,
              (fs::path(out) / "index.html").string().c_str());
  return 0;
}

}  // namespace wte::cli
