// `wte grad --checkpoint C --batch FILE --out grads.h5 [--precision float32|float64]`
#include <H5Cpp.h>
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "src/analysis/gradcheck.h"
#include "src/io/hdf5_util.h"
#include "wte/model.h"
#include "src/reference/model.h"
#include "cli/options.h"
#include "src/io/suggest.h"
#include "cli/commands.h"

namespace po = boost::program_options;

namespace wte::cli {
namespace {

const char* kHelp =
    "Usage: wte grad --checkpoint C --batch FILE --out grads.h5 [--precision float32|float64]\n\n"
    "One forward and backward of the model in checkpoint C on one batch, written to HDF5 so that\n"
    "any framework can compare its numbers with wte's (scripts/compare_torch.py does it with\n"
    "PyTorch). The batch file holds integer ids separated by spaces, one sequence per line, every\n"
    "line the same length L: inputs are ids[:-1] and targets ids[1:] of each line, so B = lines\n"
    "and T = L - 1 (<= n_ctx). Every id is checked against [0, vocab_size) first.\n\n"
    "grads.h5 (float32, or float64 with --precision float64):\n"
    "  /loss                  scalar   mean next-token cross-entropy (nats)\n"
    "  /logits                (B, T, V)\n"
    "  /inputs, /targets      int32 (B, T)\n"
    "  /wte, /wpe, /ln_f/g, /ln_f/b  (and /lm_head when untied), and every block tensor\n"
    "  /h{l}/ln_1/g ... /h{l}/mlp/c_proj/b: the gradient of /loss with respect to the\n"
    "                         checkpoint's tensor of the same name and shape\n"
    "  attributes: format 'wte-grads', format_version 1, checkpoint, tokens, precision, model\n"
    "float32 runs the production model (oneDNN + Highway: what `wte train` computes, with the\n"
    "checkpoint's model.matmul_precision: bf16 GEMM inputs where it is bf16, as the attribute\n"
    "'model' says); float64 runs\n"
    "the double-precision reference (src/reference/model.h, plain loops, for small models).\n"
    "The shapes come from the checkpoint's tensors (a hand-made model may have vocab_size < 256).\n"
    "The file is written to OUT.tmp and renamed: on error nothing is left at OUT.\n\n";

// Writes `data` (float or double) as a dataset of the same precision and `shape` ({} = scalar),
// making the groups of a path like "ln_f/g" first.
template <typename F>
void write_array(H5::Group& root, const std::string& name, const std::vector<size_t>& shape,
                 const F* data) {
  hdf5::ensure_parent_groups(root, name);
  hdf5::write_tensor(root, name, shape, data);
}

void write_ids(H5::Group& root, const std::string& name, size_t B, size_t T, const int32_t* ids) {
  const hsize_t dims[2] = {B, T};
  H5::DataSet ds =
      root.createDataSet(name, H5::PredType::STD_I32LE, H5::DataSpace(2, dims));
  ds.write(ids, H5::PredType::NATIVE_INT32);
}

}  // namespace

int cmd_grad(int argc, char** argv) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "print this help")(
      "checkpoint", po::value<std::string>(), "HDF5 checkpoint (wte train writes them), or a run directory (its newest checkpoint)")(
      "batch", po::value<std::string>(),
      "token batch: ids separated by spaces, a sequence a line")(
      "out,o", po::value<std::string>(), "HDF5 file to write")(
      "precision", po::value<std::string>()->default_value("float32"),
      "float32 (the production model) or float64 (the double reference)");
  CommandSpec spec;
  spec.usage = kHelp;
  spec.example =
      "Example:\n  wte grad --checkpoint runs/x/checkpoint_00000010.h5 --batch batch.txt --out "
      "grads.h5\n";
  spec.aliases = {{"--tokens", "--batch"}};
  const CommandLine cl = parse_command_line(argc, argv, desc, spec);
  if (cl.help) return 0;
  const po::variables_map& vm = cl.vm;
  require_options(vm, {"checkpoint", "batch", "out"});
  const std::string precision = vm["precision"].as<std::string>();
  if (precision != "float32" && precision != "float64")
    throw UsageError("--precision = '" + precision + "' is not allowed; allowed: float32 or float64" +
                     io::did_you_mean(precision, {"float32", "float64"}));
  const std::string ckpt = checkpoint_option("--checkpoint", vm["checkpoint"].as<std::string>());
  const std::string tokens = vm["batch"].as<std::string>();
  const std::string out = vm["out"].as<std::string>();
  check_output_not_input("--out", out, {{"--checkpoint", ckpt}, {"--batch", tokens}});

  Config cfg;
  std::unique_ptr<Model> model = load_model_file(ckpt, &cfg);
  const ModelConfig& mc = model->config();
  const TokenBatch batch = read_token_batch(tokens, mc.vocab_size, mc.n_ctx);
  const size_t B = batch.B, T = batch.T, N = B * T, V = mc.vocab_size;

  // Compute everything before the file is created.
  std::vector<float> logits_f;
  float loss_f = 0;
  ref::ModelGrads<double> grads_d;
  ref::ModelActivations<double> act_d;
  double loss_d = 0;
  if (precision == "float32") {
    const float* logits = model->forward_logits(batch.inputs.data(), B, T);
    logits_f.assign(logits, logits + N * V);
    loss_f = model->forward(batch.inputs.data(), batch.targets.data(), B, T);
    model->backward();
  } else {
    loss_d = ref::model_forward_backward(reference_params(*model), batch.inputs.data(),
                                         batch.targets.data(), B, T, &grads_d, &act_d);
  }

  const auto fill = [&](H5::H5File& file, const std::string& /*tmp*/) {
    H5::Group root = file.openGroup("/");
    hdf5::write_string_attr(root, "format", "wte-grads");
    hdf5::write_int_attr(root, "format_version", 1);
    hdf5::write_string_attr(root, "checkpoint", ckpt);
    hdf5::write_string_attr(root, "tokens", tokens);
    hdf5::write_string_attr(root, "precision", precision);
    hdf5::write_string_attr(
        root, "model",
        precision == "float64" ? "wte::ref reference model (double)"
        : model->gemm_precision() == MatmulPrecision::bf16
            ? "wte::Model (oneDNN + Highway, bf16 GEMM inputs, float32 accumulation)"
            : "wte::Model (oneDNN + Highway, float32)");
    write_ids(root, "inputs", B, T, batch.inputs.data());
    write_ids(root, "targets", B, T, batch.targets.data());
    if (precision == "float32") {
      write_array(root, "loss", {}, &loss_f);
      write_array(root, "logits", {B, T, V}, logits_f.data());
      for (const TensorSpec& t : model->tensors())
        write_array(root, t.name, t.shape, dense_gradient(*model, t).data());
    } else {
      write_array(root, "loss", {}, &loss_d);
      write_array(root, "logits", {B, T, V}, act_d.logits.data());
      auto named = ref::named_tensors(grads_d);
      for (const TensorSpec& t : model->tensors()) {
        const std::vector<double>* g = nullptr;
        for (const auto& nt : named)
          if (t.name == nt.name) g = nt.data;
        if (g == nullptr || g->size() != t.size)
          throw Error("the double reference has no gradient for tensor '" + t.name + "'");
        write_array(root, t.name, t.shape, g->data());
      }
    }
  };
  const uint64_t width = precision == "float32" ? 4 : 8;
  hdf5::write_file_atomic(out, "'" + out + "'", fill,
                          width * (N * V + model->num_parameters()) + 8 * N +
                              (16 + 2 * (model->tensors().size() + 4)) * uint64_t{1024});
  std::printf("wrote %s: loss %.9g (%s), B %zu, T %zu, vocab_size %zu; gradients of", out.c_str(),
              precision == "float32" ? static_cast<double>(loss_f) : loss_d, precision.c_str(), B,
              T, V);
  for (const TensorSpec& t : model->tensors()) std::printf(" %s", t.name.c_str());
  std::printf("\n");
  return 0;
}

}  // namespace wte::cli
