// interop/resnet_logits.cpp — memgrad's half of the PyTorch interop check
// (interop/check_torch_interop.py): runs a ResNet whose weights come from a safetensors
// state_dict (written by PyTorch or by memgrad) on an input from another safetensors file,
// in evaluation mode, and writes the logits to a third file; or writes a freshly
// initialised model's state_dict, for PyTorch to load.
//
//   resnet_logits --weights W.safetensors --input X.safetensors --output Y.safetensors
//                 [--device cpu|cuda] [--arch resnet18|resnet34|resnet50]
//                 [--num-classes N] [--small-image-stem]
//   resnet_logits --save-init W.safetensors [--seed N] [--arch ...] [--num-classes N]
//                 [--small-image-stem]
//
// Files: the input under the key "input", (N, C, H, W) float32; the logits under "logits",
// (N, num_classes) float32; state_dicts with torchvision's keys, num_batches_tracked as a
// 0-d int64, tagged {"format": "pt"} so that safetensors.torch.load_file reads them.
// The weights must fit the model exactly (strict load): a missing, extra, reshaped or
// retyped tensor is an error, not a silent skip. On CUDA everything computes in full
// float32: TF32 is switched off for matmuls and for cuDNN (where memgrad, like PyTorch,
// allows it by default), since its ~1e-3 relative error would hide a real mismatch.
//
// Exit codes: 0 done, 1 an error while running (printed as "error: ..."), 2 a bad command line.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/random.h"
#include "memgrad/io/safetensors.h"
#include "examples/common/cli.h"
#include "memgrad/nn/resnet.h"

#ifdef MG_WITH_CUDA
#include "memgrad/cuda/cudnn/settings.h"
#include "memgrad/cuda/runtime.h"
#endif

namespace {

using examples::UsageError;

struct Args {
  std::string weights;    // run mode: the state_dict to load
  std::string input;      // run mode: the file holding "input"
  std::string output;     // run mode: the file to write "logits" to
  std::string save_init;  // init mode: where to save a fresh model's state_dict
  mg::Device device = mg::Device::cpu();
  std::string arch = "resnet18";
  int64_t num_classes = 1000;
  bool small_image_stem = false;
  uint64_t seed = 0;
  bool help = false;
};

std::string usage(const std::string& program) {
  const std::string indent(program.size(), ' ');
  return "usage: " + program + " --weights W.safetensors --input X.safetensors --output Y.safetensors\n"
         "       " + indent + " [--device cpu|cuda] [--arch resnet18|resnet34|resnet50]\n"
         "       " + indent + " [--num-classes N] [--small-image-stem]\n"
         "   or: " + program + " --save-init W.safetensors [--seed N] [--arch ...] [--num-classes N]\n"
         "       " + indent + " [--small-image-stem]\n"
         "\n"
         "Loads a ResNet state_dict (torchvision's keys) strictly, runs it in evaluation mode on the\n"
         "tensor \"input\" of X and writes the tensor \"logits\" to Y; or saves the state_dict of a\n"
         "model freshly initialised from --seed. Defaults: --device cpu --arch resnet18\n"
         "--num-classes 1000 --seed 0, the ImageNet stem (7x7 stride 2 and a max pool).\n";
}

Args parse_args(int argc, char** argv) {
  Args args;
  const examples::FlagHandlers flags = {
      {"--weights", [&](const std::string& value) { args.weights = value; }},
      {"--input", [&](const std::string& value) { args.input = value; }},
      {"--output", [&](const std::string& value) { args.output = value; }},
      {"--save-init", [&](const std::string& value) { args.save_init = value; }},
      {"--device", [&](const std::string& value) { args.device = examples::parse_device(value); }},
      {"--arch",
       [&](const std::string& value) {
         if (value != "resnet18" && value != "resnet34" && value != "resnet50") {
           throw UsageError("--arch must be resnet18, resnet34 or resnet50, got '" + value + "'");
         }
         args.arch = value;
       }},
      {"--num-classes", [&](const std::string& value) { args.num_classes = examples::parse_count("--num-classes", value); }},
      {"--seed", [&](const std::string& value) { args.seed = examples::parse_number<uint64_t>("--seed", value); }},
  };
  const examples::SwitchHandlers switches = {
      {"--help", [&] { args.help = true; }},
      {"-h", [&] { args.help = true; }},
      {"--small-image-stem", [&] { args.small_image_stem = true; }},
  };
  examples::parse_flags(argc, argv, flags, switches);
  if (args.help) return args;  // the mode checks below are for a run
  const bool run_mode = !args.weights.empty() || !args.input.empty() || !args.output.empty();
  if (run_mode == !args.save_init.empty()) {
    throw UsageError("give either --weights, --input and --output, or --save-init");
  }
  if (run_mode && (args.weights.empty() || args.input.empty() || args.output.empty())) {
    throw UsageError("running the model needs all of --weights, --input and --output");
  }
  return args;
}

std::shared_ptr<mg::nn::ResNet> build_model(const Args& args, mg::Generator& generator) {
  mg::nn::ResNetOptions options;
  options.num_classes = args.num_classes;
  options.small_image_stem = args.small_image_stem;
  options.generator = &generator;
  if (args.arch == "resnet18") return mg::nn::resnet18(options);
  if (args.arch == "resnet34") return mg::nn::resnet34(options);
  return mg::nn::resnet50(options);
}

// The tensor stored under `key` in a safetensors file, on `device`.
mg::Tensor load_tensor(const std::string& path, const std::string& key, mg::Device device) {
  for (auto& [name, tensor] : mg::load_safetensors(path, device)) {
    if (name == key) return tensor;
  }
  throw mg::Error("'" + path + "' holds no tensor named \"" + key + "\"");
}

int run(const Args& args) {
  mg::Generator generator(args.seed);
  std::shared_ptr<mg::nn::ResNet> model = build_model(args, generator);
  if (!args.save_init.empty()) {
    mg::nn::save(*model, args.save_init);
    std::cout << args.arch << " (seed " << args.seed << ", " << model->num_parameters()
              << " parameters) saved to " << args.save_init << "\n";
    return 0;
  }

#ifdef MG_WITH_CUDA
  mg::cuda::set_allow_tf32(false);
  mg::cuda::set_cudnn_allow_tf32(false);
#endif
  model->to(args.device);
  mg::nn::load(*model, args.weights, /*strict=*/true);
  model->eval();
  const mg::Tensor input = load_tensor(args.input, "input", args.device);  // (N, C, H, W)
  MG_CHECK(input.dtype() == mg::DType::Float32, "'", args.input, "': \"input\" must be float32, got ",
           input.dtype());
  mg::NoGradGuard no_grad;
  const mg::Tensor logits = model->forward(input);  // (N, num_classes)
  mg::save_safetensors(args.output, {{"logits", logits}}, {{"format", "pt"}});
  std::cout << args.arch << " logits " << logits.sizes() << " on " << args.device << " written to "
            << args.output << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  return examples::run_main(
      argc, argv, "resnet_logits",
      [&](int count, char** values) {
        args = parse_args(count, values);
        return !args.help;
      },
      usage, [&] { return run(args); });
}
