// Checks of a training run's inputs before any work (`wte train`'s start-up): paths, the
// checkpoint to resume or start from against the config, --stop-at. Contracts: train/start_checks.h.

#include "train/start_checks.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "src/io/config_values.h"
#include "src/io/file_checks.h"
#include "wte/data.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte {
namespace {

// The run directory must be a directory (or not exist yet) under a directory this process may
// write: checked before any work, so a bad --out never costs a data preparation.
void check_run_directory(const std::string& out_dir) {
  if (fs::exists(out_dir)) {
    if (!fs::is_directory(out_dir))
      throw Error("run directory (--out) '" + out_dir + "' exists and is not a directory");
    if (::access(out_dir.c_str(), W_OK | X_OK) != 0)
      throw Error("run directory (--out) '" + out_dir + "' is not writable: " +
                  std::strerror(errno));
    return;
  }
  fs::path parent = fs::absolute(out_dir).parent_path();
  while (!parent.empty() && !fs::exists(parent) && parent != parent.parent_path())
    parent = parent.parent_path();
  if (!fs::is_directory(parent))
    throw Error("run directory (--out) '" + out_dir + "' cannot be created: '" + parent.string() +
                "' is not a directory");
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    throw Error("run directory (--out) '" + out_dir + "' cannot be created in '" +
                parent.string() + "': " + std::strerror(errno));
}

// True if the INI file `path` sets `key` ("section.key"): a "key = ..." line under "[section]".
bool ini_file_sets(const std::string& path, const std::string& key) {
  const std::string section = key.substr(0, key.find('.')), name = key.substr(key.find('.') + 1);
  auto trim = [](std::string s) {
    const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
  };
  std::ifstream in(path);
  std::string line, current;
  while (std::getline(in, line)) {
    line = trim(line.substr(0, line.find('#')));
    if (line.size() > 1 && line.front() == '[' && line.back() == ']')
      current = trim(line.substr(1, line.size() - 2));
    else if (current == section && line.find('=') != std::string::npos &&
             trim(line.substr(0, line.find('='))) == name)
      return true;
  }
  return false;
}

// Where this run's value of config key `key` came from, for notes and errors: "the command line:
// --key=VALUE", "config file 'F'", "the built-in default; config file 'F' does not set it", or,
// without --config, `own`: the config the run started from (a checkpoint's own, the defaults).
std::string value_origin(const std::string& key, const RunOptions& opts, const std::string& own) {
  // The first override of a key wins (src/io/config.cc keeps Boost's first stored value).
  for (const std::string& o : opts.overrides)
    if (o.rfind("--" + key + "=", 0) == 0) return "the command line: " + o;
  if (opts.config_file.empty()) return own;
  if (ini_file_sets(opts.config_file, key)) return "config file '" + opts.config_file + "'";
  return "the built-in default; config file '" + opts.config_file + "' does not set it";
}

// "KEY: checkpoint A, now B" lines of resume_config_mismatches with where B came from appended.
std::string with_origin(const std::string& line, const RunOptions& opts) {
  return line + " (from " +
         value_origin(line.substr(0, line.find(':')), opts, "the checkpoint's own config") + ")";
}

// Resume with a config whose changeable keys (resume_mutable_keys) differ from the checkpoint's:
// a note on stderr naming each, with both values and where the new one came from (train.threads
// has its own note in check_resume). A --config given on resume replaces, e.g., the run's
// train.steps, and with it the learning-rate schedule's length: the note says how to keep them.
void note_changed_resume_keys(const Config& stored, const Config& cfg, const RunOptions& opts) {
  const std::vector<std::pair<std::string, std::string>> stored_values = config_values(stored),
                                                       now_values = config_values(cfg);
  const std::map<std::string, std::string> then(stored_values.begin(), stored_values.end()),
      now(now_values.begin(), now_values.end());
  auto shown = [](const std::string& v) { return v.empty() ? std::string("(empty)") : v; };
  std::string lines, keep;
  size_t count = 0;
  bool steps = false;
  for (const std::string& key : resume_mutable_keys()) {
    if (key == "train.threads") continue;
    const auto a = then.find(key), b = now.find(key);
    if (a == then.end() || b == now.end() || a->second == b->second) continue;
    const std::string origin = value_origin(key, opts, "the checkpoint's own config");
    lines += "\n  " + key + ": checkpoint " + shown(a->second) + ", now " + shown(b->second) +
             " (from " + origin + ")";
    if (origin.rfind("the command line", 0) != 0) keep += " --" + key + "=" + a->second;
    steps = steps || key == "train.steps";
    ++count;
  }
  if (count == 0) return;
  std::string hint;
  if (steps) hint += "\n(train.steps also sets the length of the learning-rate schedule)";
  if (!keep.empty())
    hint += "\n(to keep the checkpoint's values, pass" + keep +
            ", or leave out --config: a resumed run then takes the checkpoint's own config)";
  std::fprintf(stderr,
               "wte train: note: resuming from '%s' with %zu setting(s) that differ from the "
               "checkpoint's (allowed on resume):%s%s\n",
               opts.resume.c_str(), count, lines.c_str(), hint.c_str());
}

}  // namespace

// Checks that need no work: every missing path is reported before anything is computed.
void check_paths(const Config& cfg, const RunOptions& opts) {
  check_run_directory(opts.out_dir);
  // A directory, /dev/null or a FIFO is named as what it is (src/io/file_checks.h).
  auto require_file = [](const std::string& key, const std::string& path, const char* hint) {
    io::require_input_file(key + ": ", path, hint);
  };
  if (!cfg.data.train_tokens.empty()) {
    // A file, a directory or a glob: opening maps the files and checks their headers and sizes.
    (void)TokenStream::open(cfg.data.train_tokens, "data.train_tokens");
    (void)TokenStream::open(cfg.data.val_tokens, "data.val_tokens");
  } else if (cfg.data.text.empty()) {
    throw Error("data.text is not set: give the corpus path in the config's [data] section or as "
                "--data.text=PATH");
  } else {
    require_file("data.text", cfg.data.text,
                 cfg.data.text.find("kjv") != std::string::npos
                     ? " (make it with datasets/make_kjv.sh)"
                     : "");
  }
  if (cfg.data.tokenizer != "train") {
    std::error_code ec;
    if (fs::exists(cfg.data.tokenizer, ec) && !fs::is_directory(cfg.data.tokenizer, ec))
      throw Error("data.tokenizer: '" + cfg.data.tokenizer + "' is a file, not a directory (a "
                  "tokenizer directory holds GPT-2's encoder.json and vocab.bpe; or set "
                  "data.tokenizer = train)");
    for (const char* f : {"encoder.json", "vocab.bpe"})
      require_file("data.tokenizer", (fs::path(cfg.data.tokenizer) / f).string(),
                   " (a tokenizer directory holds GPT-2's encoder.json and vocab.bpe; or set "
                   "data.tokenizer = train)");
  }
}

// Resume: the checkpoint must be whole and resumable, and every setting that changes what a step
// computes must equal the checkpoint's. All checked before anything is written.
CheckpointInfo check_resume(const Config& cfg, const RunOptions& opts) {
  CheckpointInfo ckpt = read_checkpoint_info(opts.resume);  // validates every dataset
  if (!ckpt.resumable())
    throw Error("checkpoint '" + opts.resume + "' cannot be resumed: it has no " +
                (ckpt.has_optimizer ? "/data and /schedule (data order and schedule position)"
                                    : "/optimizer (AdamW moments)") +
                "; it is a weights-only file");
  const Config stored = parse_config(ckpt.config_ini, "the config stored in '" + opts.resume + "'");
  const std::vector<std::string> diffs = resume_config_mismatches(stored, cfg);
  if (!diffs.empty()) {
    std::string msg = "cannot resume from '" + opts.resume + "': " + std::to_string(diffs.size()) +
                      " setting(s) differ from the checkpoint's and may not change on resume:";
    for (const std::string& d : diffs) msg += "\n  " + with_origin(d, opts);
    msg += "\n(settings that may change: ";
    for (size_t i = 0; i < resume_mutable_keys().size(); ++i)
      msg += (i ? ", " : "") + resume_mutable_keys()[i];
    // Values that cannot be combined (with the checkpoint's): bad usage, exit status 2.
    throw UsageError(msg + ")");
  }
  if (static_cast<uint64_t>(ckpt.step) >= cfg.train.steps)
    throw UsageError("checkpoint '" + opts.resume + "' is at step " +
                          std::to_string(ckpt.step) + " and train.steps = " +
                          std::to_string(cfg.train.steps) + " (from " +
                          value_origin("train.steps", opts, "the checkpoint's own config") +
                          "): nothing left to train; raise --train.steps above " +
                          std::to_string(ckpt.step) + " to continue");
  // Said once the checkpoint was read and compared.
  if (!opts.config_file.empty() && !opts.quiet) {
    std::printf("resuming with config %s (checked against the checkpoint's)\n",
                opts.config_file.c_str());
    std::fflush(stdout);
  }
  note_changed_resume_keys(stored, cfg, opts);
  if (stored.train.threads != cfg.train.threads)
    std::fprintf(stderr,
                 "wte train: note: train.threads is %zu, the checkpoint's run used %zu: the run "
                 "continues, but oneDNN's rounding differs, so it is not bit-identical to an "
                 "uninterrupted run\n",
                 cfg.train.threads, stored.train.threads);
  return ckpt;
}

// --init-from: a fresh run (step 0, new optimizer, new data order) whose parameters come from a
// checkpoint (any: the trainer's, a snapshot, an imported model). The model's shapes and structure
// must equal the config's; each differing key is named with both values. Checked before any work.
CheckpointInfo check_init_from(const Config& cfg, const RunOptions& opts) {
  CheckpointInfo info = read_checkpoint_info(opts.init_from);  // validates every dataset
  const Config stored =
      parse_config(info.config_ini, "the config stored in '" + opts.init_from + "'");
  const ModelConfig &a = stored.model, &b = cfg.model;
  std::vector<std::string> diffs;
  std::string fix;  // "--model.d_model=16 --model.n_layer=1": the checkpoint's values
  bool from_file = false;  // a differing value came from the --config file (or its defaults)
  auto cmp = [&](const char* key, const std::string& then, const std::string& now) {
    if (then == now) return;
    const std::string origin = value_origin(key, opts, "the checkpoint's own config");
    if (origin.rfind("the command line", 0) != 0) from_file = true;
    diffs.push_back(std::string(key) + ": checkpoint " + then + ", now " + now + " (from " +
                    origin + ")");
    fix += (fix.empty() ? "--" : " --") + std::string(key) + "=" + then;
  };
  auto str = [](auto v) { return std::to_string(v); };
  auto yn = [](bool v) { return std::string(v ? "true" : "false"); };
  cmp("model.vocab_size", str(a.vocab_size), str(b.vocab_size));
  cmp("model.d_model", str(a.d_model), str(b.d_model));
  cmp("model.n_ctx", str(a.n_ctx), str(b.n_ctx));
  cmp("model.n_layer", str(a.n_layer), str(b.n_layer));
  if (a.n_layer > 0 || b.n_layer > 0) cmp("model.n_head", str(a.n_head), str(b.n_head));
  cmp("model.tie_embeddings", yn(a.tie_embeddings), yn(b.tie_embeddings));
  cmp("model.ln_f", yn(a.ln_f), yn(b.ln_f));
  if (a.ln_eps != b.ln_eps) {
    char then[32], now[32];
    std::snprintf(then, sizeof then, "%.9g", static_cast<double>(a.ln_eps));
    std::snprintf(now, sizeof now, "%.9g", static_cast<double>(b.ln_eps));
    cmp("model.ln_eps", then, now);
  }
  if (!diffs.empty()) {
    std::string msg = "cannot start from --init-from '" + opts.init_from + "': " +
                      std::to_string(diffs.size()) +
                      " model setting(s) of the config differ from the checkpoint's:";
    for (const std::string& d : diffs) msg += "\n  " + d;
    // Without --config the config is the checkpoint's own, so only command-line keys can differ.
    // Values that cannot be combined (with the checkpoint's): bad usage, exit status 2.
    throw UsageError(msg + "\n(set them to the checkpoint's values: " + fix +
                (opts.config_file.empty()
                     ? "; without --config the run takes the checkpoint's own config, so leaving "
                       "out the options that set these keys does the same)"
                     : from_file ? "; or leave out --config " + opts.config_file +
                                       " to train with the checkpoint's own config)"
                                 // Leaving out --config would not help: the command line set them.
                                 : std::string("; each was set on the command line)")));
  }
  return info;
}

void check_stop_at(const Config& cfg, const RunOptions& opts, bool resuming, int64_t resume_step) {
  if (opts.stop_at > 0 &&
      (opts.stop_at >= cfg.train.steps ||
       (resuming && opts.stop_at <= static_cast<uint64_t>(resume_step))))
    throw UsageError("--stop-at " + std::to_string(opts.stop_at) +
                          " must be after the start step " +
                          std::to_string(resuming ? resume_step : 0) +
                          " and before train.steps = " + std::to_string(cfg.train.steps));
}

void note_warmup_covers_run(const Config& cfg) {
  if (cfg.optim.warmup_steps < cfg.train.steps) return;
  std::fprintf(stderr,
               "wte train: note: optim.warmup_steps = %zu >= train.steps = %zu: the whole run is "
               "the linear warmup: the learning rate rises to %.3g at the last step (optim.lr = %.3g) "
               "and the cosine decay never starts (lower optim.warmup_steps for a full schedule)\n",
               cfg.optim.warmup_steps, cfg.train.steps,
               static_cast<double>(cfg.optim.lr) * static_cast<double>(cfg.train.steps) /
                   static_cast<double>(cfg.optim.warmup_steps),
               static_cast<double>(cfg.optim.lr));
}

void note_skipped_snapshots(const Config& cfg) {
  std::string skipped;
  for (size_t v : cfg.train.snapshot_steps)
    if (v > cfg.train.steps) {
      if (!skipped.empty()) skipped += ',';
      skipped += std::to_string(v);
    }
  if (!skipped.empty())
    std::fprintf(stderr,
                 "wte train: note: train.snapshot_steps %s come after train.steps = %zu and "
                 "will not be saved\n",
                 skipped.c_str(), cfg.train.steps);
}

}  // namespace wte
