// wte's run configuration: an INI file with sections [model], [data], [train], [optim],
// [checkpoint], overridable from the command line as --section.key=value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wte/error.h"

namespace wte {

/// The largest model.loss_chunk and model.loss_vocab_tile (also the ranges of `wte profile loss`'s
/// --loss-chunk and --loss-vocab-tile).
inline constexpr uint64_t kMaxLossChunk = uint64_t{1} << 20;
inline constexpr uint64_t kMaxLossVocabTile = uint64_t{1} << 24;

/// A config value that does not parse, is out of range, or does not fit another key's value
/// (data.seq_len > model.n_ctx), in a config read by load_config: the user's config file, the
/// defaults, or --section.key=value. Bad usage wherever it was written (`wte` exits 2 for it, as
/// for a bad option). A checkpoint's stored config (parse_config) throws plain wte::Error for the
/// same, since there it means a broken file.
class ConfigValueError : public Error {
 public:
  explicit ConfigValueError(const std::string& what) : Error(what) {}
};

/// What the model's GEMMs read (model.matmul_precision). f32: float32 inputs. bf16: bfloat16 copies
/// of their inputs (weights converted once per forward, activations and gradients once where they
/// are made), float32 accumulation and float32 outputs; parameters, gradients and AdamW stay
/// float32. On a CPU where oneDNN has no native bf16 GEMM the model runs f32 and says so
/// (Model::gemm_precision_note).
enum class MatmulPrecision { f32, bf16 };

/// Which causal attention the blocks run (model.attention). dense: q·kᵀ and att·v as full (T,T)
/// GEMMs with the softmax probabilities kept per layer, (B,NH,T,T) floats. tiled: FlashAttention-2's
/// scheme (src/model/attention_tiled.h): key blocks up to the diagonal only, keeping the output and
/// one log-sum-exp per row, (B,NH,T) floats, and recomputing the probabilities in the backward.
/// automatic (`auto`): tiled from a number of tokens per sequence on, dense below; the number
/// depends on the vector width of the CPU's kernels (a table measured with
/// bench/attention_speed.sh: tiled_attention_min_t in src/model/attention_tiled.h).
enum class AttentionImpl { dense, tiled, automatic };
/// Which library runs the model's float32 GEMMs of rank 2 (model.gemm; docs/kernels.md, "The GEMM
/// layer"). automatic (`auto`): per GEMM shape, the fastest of oneDNN, OpenBLAS and BLIS as timed
/// the first time this machine met the shape at this thread count, then kept in a cache file so
/// later runs choose the same. onednn, openblas, blis: that library for every such GEMM. The
/// attention's batched GEMMs and bf16 GEMMs always run on oneDNN. Results are bit-identical for a
/// fixed config, seed, thread count and choice; different libraries give different bits.
enum class GemmChoice { automatic, onednn, openblas, blis };

// The built-in defaults of every config key (a default-constructed Config) are configs/default.ini's
// values (the Quick start's 4-block model and its 600-step job), so a command run without a config
// (wte train's --help, gradcheck, profile) means that model; tests/io/test_default_config.cc checks
// that they agree.

/// Model shapes. GPT-2 names: vocab_size V, d_model C, n_ctx the number of position rows.
/// A ModelConfig built field by field starts from a small embedding-only model (vocab_size 4096,
/// d_model 128, n_layer 0); the configuration's default model is default_model_config().
struct ModelConfig {
  size_t vocab_size = 4096;
  size_t d_model = 128;
  size_t n_ctx = 128;
  size_t n_layer = 0;           // transformer blocks h0..h{n_layer-1}; 0: the embedding-only model
  size_t n_head = 4;            // NH attention heads per block; must divide d_model (hs = C / NH)
  bool ln_f = true;             // final LayerNorm before the tied unembedding
  bool tie_embeddings = true;   // true: logits = h · wteᵀ; false: separate lm_head (V,C)
  float wte_init_std = 0.02f;   // GPT-2 model.py: wte ~ N(0, 0.02²)
  float wpe_init_std = 0.01f;   // GPT-2 model.py: wpe ~ N(0, 0.01²)
  float ln_eps = 1e-5f;         // GPT-2 model.py norm(): epsilon 1e-5
  MatmulPrecision matmul_precision = MatmulPrecision::f32;  // the GEMMs' inputs: f32 or bf16
  AttentionImpl attention = AttentionImpl::automatic;     // dense, tiled or auto (by T)
  GemmChoice gemm = GemmChoice::automatic;   // auto, onednn, openblas or blis
  // The loss (unembedding + cross-entropy, src/model/unembedding.h): rows of h' per block of the
  // fused, chunked path that never stores the (N, V) logits. 0: automatic (fused with an automatic
  // block height (256 rows, fewer past 64 MiB of logits) when vocab_size > 16384, else the unfused path with its (N, V) logits buffer).
  size_t loss_chunk = 0;
  size_t loss_vocab_tile = 0;   // vocabulary ids per tile of the fused path (0: automatic)
};

/// configs/default.ini's model, the model of a default-constructed Config: vocab_size 8192,
/// d_model 256, n_ctx 128, 4 blocks of 4 heads, ln_f, tied lm_head.
inline ModelConfig default_model_config() {
  ModelConfig m;
  m.vocab_size = 8192;
  m.d_model = 256;
  m.n_layer = 4;
  return m;
}

/// "f32" or "bf16".
const char* to_string(MatmulPrecision p);

/// "dense", "tiled" or "auto".
const char* to_string(AttentionImpl a);

/// "auto", "onednn", "openblas" or "blis".
const char* to_string(GemmChoice g);

struct DataConfig {
  std::string text;             // UTF-8 corpus; documents separated by a blank line
  std::string train_tokens;     // optional: int32 token files used instead of `text`
  std::string val_tokens;       //   (both or neither; needs a tokenizer directory)
  std::string tokenizer = "train";  // "train" (BPE on the train split) or a dir with encoder.json + vocab.bpe
  double val_fraction = 0.1;    // share of documents in the validation split (spread evenly)
  size_t seq_len = 128;         // T, tokens per training sequence (<= model.n_ctx)
};

/// train.eval_tokens = auto: every evaluation covers at most as many validation tokens as the run
/// trains on (train.steps x batch_size x seq_len). An evaluation is a forward pass only (about a
/// third of a training step's work per token), so a short run spends a fraction of its training
/// time evaluating, and a run that trains on more tokens than the split holds (the default 600
/// steps: 1.2 M tokens) evaluates on the whole split.
inline constexpr size_t kEvalTokensAuto = ~size_t{0};

struct TrainConfig {
  size_t batch_size = 16;       // B
  size_t steps = 600;
  uint64_t seed = 1337;
  size_t threads = 0;           // 0: OpenMP's default (OMP_NUM_THREADS or all cores)
  size_t eval_interval = 200;   // steps between validation losses (0: only at the end)
  // Validation tokens each evaluation covers at most, the final one included (the first ones of
  // the split, in whole windows of seq_len): 0 the whole split; kEvalTokensAuto ("auto") the
  // tokens the run trains on (steps x batch_size x seq_len), see eval_token_cap.
  size_t eval_tokens = kEvalTokensAuto;
  size_t log_interval = 50;     // steps between progress lines
  // Micro-batches per optimizer step: each step's batch_size sequences run forward + backward in
  // grad_accum_steps slices of batch_size / grad_accum_steps, their gradients summed; loss and
  // gradient are those of the whole batch (a mean over every target token). Must divide batch_size.
  size_t grad_accum_steps = 1;
  // Steps after which wte is saved as a weights-only snapshot DIR/snapshot_<step>.h5 (src/io/snapshot.h);
  // step 0 is the initial noise. Strictly increasing, each <= steps. Empty: none.
  std::vector<size_t> snapshot_steps = {0, 100, 300, 600};
};

struct OptimConfig {
  float lr = 3e-3f;             // peak learning rate
  float min_lr = 3e-4f;         // end of the cosine decay
  size_t warmup_steps = 50;     // linear warmup from lr/warmup_steps
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;    // decoupled (AdamW): wte, wpe, lm_head, blocks' */w; never biases or LayerNorms
  float grad_clip = 1.0f;       // clip the global gradient L2 norm to this (0: off)
};

struct CheckpointConfig {
  size_t interval = 200;        // steps between checkpoints (0: only at the end)
  size_t keep_last = 3;         // keep the newest K checkpoints of the run directory (0: keep all)
};

/// The whole resolved configuration.
struct Config {
  ModelConfig model = default_model_config();
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  CheckpointConfig checkpoint;

  /// The resolved configuration as INI text (every key, with its value); parse_config of this text
  /// gives back the same Config.
  std::string to_ini() const;
};

/// Where `--section.key=value` overrides come from, as errors about them name it: a `wte`
/// subcommand's command line, or the keyword arguments of Python's wte.train.
enum class OverridesFrom { command_line, keyword_arguments };

/// Builds a Config from an INI file (may be empty: defaults only) and `--section.key=value`
/// overrides; the overrides win over the file. Paths (data.text, data.train_tokens,
/// data.val_tokens, a data.tokenizer directory) are made absolute: relative paths in the file
/// against the file's directory, on the command line against the current directory.
/// Throws, before any work: wte::Error for a missing or unreadable file (names the path), or an
/// unknown section or key (names it and where it came from); ConfigValueError for a value that
/// does not parse or is out of range (names the key, the value, where it came from and what is
/// allowed) and for values that do not fit together (data.seq_len > model.n_ctx, ...).
/// `overrides_from` only changes how errors name the overrides ("from the command line
/// (--train.steps)", or "from the keyword arguments (train.steps)").
Config load_config(const std::string& ini_path, const std::vector<std::string>& overrides,
                   OverridesFrom overrides_from = OverridesFrom::command_line);

/// Same, from INI text already in memory (a checkpoint's stored config); `origin` names it in errors.
Config parse_config(const std::string& ini_text, const std::string& origin);
/// Same, with `--section.key=value` overrides that win over the text (as load_config's). A value
/// the overrides replace is never parsed or range-checked (wte gradcheck/grad use this to read a
/// hand-made model's stored config, whose shapes they take from its tensors).
Config parse_config(const std::string& ini_text, const std::string& origin,
                    const std::vector<std::string>& overrides);

/// Sets one key ("model.ln_eps") of `config` from `value` with the INI parser's own check (its
/// range; for a float key also that the stored float32 is neither 0 nor subnormal), for values
/// that come from elsewhere (`wte import` reads model.ln_eps from config.json's
/// layer_norm_epsilon). Returns "" when set; else, and `config` unchanged, why not and what is
/// allowed: "out of range (it rounds to 0 in float32, whose smallest normal value is
/// 1.17549e-38); allowed: a number in (0, 1]". Throws wte::Error for a key that does not exist.
std::string set_config_key(Config& config, const std::string& key, const std::string& value);

/// The validation tokens each evaluation of a run with config `c` covers at most:
/// train.eval_tokens, or for auto train.steps x batch_size x seq_len (saturating); 0: no cap.
size_t eval_token_cap(const Config& c);

/// The help text listing every key with its default and meaning (for `wte train --help`).
std::string config_help();

}  // namespace wte
