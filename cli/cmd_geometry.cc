// `wte geometry --checkpoint C [--checkpoint C ...] [--query LIST] [--labels FILE] [--out DIR]`:
// measures and draws the geometry of wte in one checkpoint or a series (a run's snapshots). The
// reading and measuring are src/analysis/ (geometry_series.h, geometry_report.h,
// context_geometry.h); this file reads the options, prints the report and writes --out.
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
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
#include "src/analysis/geometry_series.h"
#include "src/analysis/geometry_summary.h"
#include "src/analysis/loss_curve.h"
#include "wte/model.h"
#include "wte/tokenizer.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "cli/commands.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {
namespace {

constexpr const char* kGeometryUsage =
    "Usage: wte geometry --checkpoint C [--checkpoint C ...] [--query LIST] [--labels FILE]\n"
    "                    [--out DIR]\n\n"
    "Measures wte's geometry in each checkpoint (in step order): anisotropy (mean cosine of\n"
    "distinct pairs of rows, raw and after subtracting the mean row, exact over all pairs),\n"
    "effective rank (participation ratio (sum s^2)^2 / sum s^4 of the singular values), mean\n"
    "row norm, and with --labels the k-NN class purity and silhouette (cosine distance) over the\n"
    "labelled rows; prints the nearest neighbours by cosine of --query and of the most frequent\n"
    "tokens at the first and last step; with --out writes the pictures, geometry.json and\n"
    "DIR/index.html (a summary and the neighbour table first). Then, for the last checkpoint\n"
    "of a model with blocks, the hidden states per layer (Hugging Face's hidden_states)\n"
    "of --context-tokens positions of the validation tokens: per layer the anisotropy (mean\n"
    "cosine of random rows) and Ethayarajh's (2019) self-similarity (mean cosine of the same\n"
    "token's rows in different contexts, tokens with >= 5 rows, positions >= 1), raw and after\n"
    "subtracting the layer's mean row, with a histogram of each per layer.\n\n";

constexpr const char* kGeometryExample =
    "Example:\n"
    "  datasets/make_planted.py\n"
    "  wte train --config configs/planted.ini --out runs/planted\n"
    "  wte geometry --checkpoint runs/planted --labels datasets/planted/labels.tsv "
    "--out runs/planted/geometry\n";

// `wte geometry`'s command line, every value checked.
struct GeometryOptions {
  bool help = false;                     // --help was printed
  std::vector<std::string> checkpoints;  // as given: files or run directories
  std::optional<std::string> query, labels, out, data, context_data;
  size_t frequent = 8, neighbours = 8, k = 5, max_points = 5000, context_tokens = 4096;
};

void add_geometry_options(po::options_description& opts) {
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint", po::value<std::vector<std::string>>(),
       "a checkpoint or snapshot .h5, or a run directory (its snapshot_<step>.h5 files, else its "
       "checkpoint_<step>.h5 files); repeat for a series")
      ("query", po::value<std::string>(),
       "comma-separated tokens whose nearest neighbours to show: each a "
       "token's text (a leading "
       "space counts: \" the\") or #ID")
      ("labels", po::value<std::string>(),
       "class labels, a TSV with header id<TAB>token<TAB>class (datasets/planted/labels.tsv): "
       "adds k-NN purity, silhouette and class colours")
      ("out,o", po::value<std::string>(),
       "directory for the pictures (SVG), geometry.csv, geometry.json (the summary's numbers) and "
       "index.html (one page with all of them)")
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
}

std::optional<std::string> optional_value(const po::variables_map& vm, const char* name) {
  if (!vm.count(name)) return std::nullopt;
  return vm[name].as<std::string>();
}

// Parses and checks `wte geometry`'s command line (argv[0] is "geometry"), every value before any
// checkpoint is read. Throws UsageError for a bad option or value, wte::Error for a bad
// --context-data file.
GeometryOptions parse_geometry_options(int argc, char** argv) {
  po::options_description opts("Options");
  add_geometry_options(opts);
  CommandSpec spec;
  spec.usage = kGeometryUsage;
  spec.example = kGeometryExample;
  spec.aliases = {{"--tokens", "--query"}};
  const CommandLine cl = parse_command_line(argc, argv, opts, spec);
  GeometryOptions o;
  if ((o.help = cl.help)) return o;
  const po::variables_map& vm = cl.vm;
  require_options(vm, {"checkpoint"});
  o.checkpoints = vm["checkpoint"].as<std::vector<std::string>>();
  constexpr size_t kMaxCount = size_t{1} << 24;  // model.vocab_size's upper bound
  o.frequent = whole_number_option(vm, "frequent", 0, kMaxCount);
  o.neighbours = whole_number_option(vm, "neighbours", 1, kMaxCount);
  o.k = whole_number_option(vm, "k", 1, kMaxCount);
  o.max_points = whole_number_option(vm, "max-points", 1, kMaxCount);
  o.context_tokens = whole_number_option(vm, "context-tokens", 0, size_t{1} << 20);
  o.query = optional_value(vm, "query");
  o.labels = optional_value(vm, "labels");
  o.out = optional_value(vm, "out");
  o.data = optional_value(vm, "data");
  o.context_data = optional_value(vm, "context-data");
  // "" or ",": an unset shell variable must not silently mean no query (empty items are skipped).
  if (o.query && o.query->find_first_not_of(',') == std::string::npos)
    throw UsageError("--query '" + *o.query + "' names no token; allowed: "
                     "comma-separated tokens, each a token's text or #ID (or leave --query out)");
  if (o.context_data) io::require_input_file("--context-data ", *o.context_data);
  return o;
}

// --out is created (and checked writable) before any checkpoint is read, and refused if writing
// its files (index.html, geometry.csv, geometry.json and the pictures *.svg, each through
// NAME.tmp) would overwrite an input.
void prepare_geometry_out(const GeometryOptions& o) {
  std::vector<std::pair<std::string, std::string>> inputs;
  if (o.labels) inputs.push_back({"--labels", *o.labels});
  if (o.data) inputs.push_back({"--data", *o.data});
  if (o.context_data) inputs.push_back({"--context-data", *o.context_data});
  for (const std::string& c : o.checkpoints) inputs.push_back({"--checkpoint", c});
  check_output_dir_not_input("--out", *o.out, inputs, [](const std::string& n) {
    const auto ends = [&](const std::string& e) {
      return n.size() >= e.size() && n.compare(n.size() - e.size(), e.size(), e) == 0;
    };
    return n == "index.html" || n == "geometry.csv" || n == "geometry.json" || ends(".svg");
  });
  prepare_output_dir("--out", *o.out);
}

// The labels (--labels, checked against --k) and the query ids (--query) of the series' vocabulary.
void read_labels_and_queries(const GeometryOptions& o, const Tokenizer& tok, TokenLabels* labels,
                             std::vector<int32_t>* queries) {
  if (o.labels) *labels = read_token_labels(*o.labels, tok);
  if (o.labels && o.k >= labels->ids.size())
    throw Error("--k " + std::to_string(o.k) + " must be below the number of labelled tokens, " +
                std::to_string(labels->ids.size()));
  if (!o.query) return;
  try {
    *queries = parse_token_list(*o.query, tok);
  } catch (const Error& e) {
    throw UsageError(e.what());  // a query that is not one token of this vocabulary
  }
}

// The hidden states per layer of the last checkpoint (its whole model, blocks included), when
// --context-tokens > 0: `ctx` and `sample` filled and the report returned, or a note if the model
// has no blocks (then the page has no such section) or the token file does not exist.
std::string context_part(const GeometryOptions& o, const std::string& last_checkpoint,
                         ContextGeometryRun& ctx, HiddenStateSample& sample) {
  ctx.checkpoint = last_checkpoint;
  // Without blocks a position's row is wte[id] + wpe[index] (and ln_f of it): no context enters.
  if (parse_config(read_checkpoint_info(last_checkpoint).config_ini, last_checkpoint + " /config/ini")
          .model.n_layer == 0)
    return "\n(no hidden states per layer: " + last_checkpoint +
           " has no transformer blocks (model.n_layer = 0), so no context enters a row)\n";
  ctx.data = o.context_data ? *o.context_data
                            : (fs::path(ctx.checkpoint).parent_path() / "val.bin").string();
  if (!fs::is_regular_file(ctx.data))
    return "\n(no hidden states per layer: " + ctx.data +
           " does not exist; pass --context-data or --context-tokens 0)\n";
  const CheckpointModel ck = load_checkpoint_model(ctx.checkpoint);
  sample = sample_hidden_states(*ck.model, read_token_file(ctx.data), o.context_tokens,
                                ck.config.model.n_ctx, ctx.data);
  ctx.sample = &sample;
  ctx.layers = context_geometry(sample, ctx.min_position, ctx.min_count);
  return "\n" + context_report(ctx);
}

// --out: the summary box and the neighbour table (also as geometry.json), the run's loss curve
// (from metrics.csv beside the last checkpoint, if it is there), the pictures of wte and of the
// hidden states, geometry.csv and index.html holding `report`.
void write_geometry_out(const std::string& out, const GeometryReportInput& in,
                        const std::vector<GeometryMeasures>& series, size_t max_points,
                        const ContextGeometryRun& ctx, const std::string& report) {
  const std::vector<WteSnapshot>& snaps = *in.snaps;
  const std::string& last = snaps.back().path;
  const fs::path run_dir = fs::path(last).parent_path();
  const std::string metrics = (run_dir / "metrics.csv").string();
  std::vector<PageSection> sections;
  LossSummary loss;
  {
    const Config last_cfg = parse_config(read_checkpoint_info(last).config_ini, last + " /config/ini");
    std::vector<Figure> fig =
        write_loss_figure(out, metrics, last_cfg.train.batch_size * last_cfg.data.seq_len);
    if (!fig.empty()) {
      loss = summarize_loss(read_loss_rows(metrics), metrics);
      sections.push_back({"Training", "", std::move(fig)});
    }
  }
  sections.push_back({"wte over training", "", write_wte_figures(out, in, max_points)});
  if (ctx.sample != nullptr) sections.push_back(write_context_figures(out, ctx));
  write_geometry_csv(out, snaps, series, in.labels != nullptr);
  const nlohmann::json j = geometry_json(in, loss, strip_picks(series, in.labels != nullptr, 6));
  write_geometry_json(out, j);
  constexpr size_t kTableNeighbours = 5;
  write_geometry_page(out,
                      summary_html(j, run_dir.empty() ? last : run_dir.string()) +
                          neighbour_table_html(j, std::min(in.neighbours, kTableNeighbours)),
                      sections, report);
  size_t n_figures = 0;
  for (const PageSection& sec : sections) n_figures += sec.figures.size();
  std::printf("\nwrote %zu pictures, geometry.csv, geometry.json and %s\n", n_figures,
              (fs::path(out) / "index.html").string().c_str());
}

}  // namespace

int cmd_geometry(int argc, char** argv) {
  const GeometryOptions o = parse_geometry_options(argc, argv);
  if (o.help) return 0;
  std::error_code ec;
  const RemoveEmptyDirOnError out_guard(o.out && !fs::exists(*o.out, ec) ? *o.out : "");
  if (o.out) prepare_geometry_out(o);
  // --- Read every checkpoint (validated) before any output.
  const std::vector<std::string> checkpoints = expand_checkpoints(o.checkpoints);
  progress_note("wte geometry", "reading " + std::to_string(checkpoints.size()) + " checkpoint" +
                                    (checkpoints.size() == 1 ? "" : "s") + ", then measuring");
  const WteSeries ws = read_wte_series(checkpoints);
  TokenLabels labels;
  std::vector<int32_t> queries;
  read_labels_and_queries(o, ws.tok, &labels, &queries);
  // Frequencies for "the most frequent tokens".
  const std::string data_path =
      o.data ? *o.data : (fs::path(ws.snaps.back().path).parent_path() / "train.bin").string();
  std::vector<int32_t> frequent, never_seen;
  if (o.data) io::require_input_file("--data ", data_path);
  const bool counted = fs::is_regular_file(data_path);
  if (counted) {
    const std::vector<uint64_t> counts = token_counts(data_path, ws.V);
    frequent = most_frequent(counts, o.frequent);
    never_seen = never_seen_ids(counts);
  }

  // --- Measures per step, the report, and with --out the pictures and the page.
  const std::vector<GeometryMeasures> series =
      measure_geometry(ws.snaps, ws.V, ws.C, o.labels ? &labels : nullptr, o.k);
  GeometryReportInput in;
  in.snaps = &ws.snaps;
  in.series = &series;
  in.tok = &ws.tok;
  in.V = ws.V, in.C = ws.C;
  in.labels = o.labels ? &labels : nullptr;
  in.k = o.k;
  in.queries = queries;
  in.has_queries = o.query.has_value();
  in.frequent = frequent;
  in.n_frequent = o.frequent;
  in.data_path = data_path;
  in.neighbours = o.neighbours;
  in.counted = counted;
  in.never_seen = never_seen;
  std::string report = geometry_report(in);
  std::cout << report;
  HiddenStateSample sample;
  ContextGeometryRun ctx;
  if (o.context_tokens > 0) {
    const std::string text = context_part(o, ws.snaps.back().path, ctx, sample);
    std::cout << text;
    report += text;
  }
  if (o.out) {
    progress_note("wte geometry", "writing the figures and the page into " + *o.out);
    write_geometry_out(*o.out, in, series, o.max_points, ctx, report);
  }
  return 0;
}

}  // namespace wte::cli
