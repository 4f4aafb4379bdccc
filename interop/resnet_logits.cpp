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
#include <charconv>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/random.h"
#include "core/safetensors.h"
#include "nn/resnet.h"

#ifdef MG_WITH_CUDA
#include "cuda/cudnn/settings.h"
#include "cuda/runtime.h"
#endif

namespace {

struct Args {
  std::string weights;    // run mode: the state_dict to load
  std::string input;      // run mode: the file holding "input"
  std::string output;     // run mode: the file to write "logits" to
  std::string save_init;  // init mode: where to save a fresh model's state_dict
  std::string device = "cpu";
  std::string arch = "resnet18";
  int64_t num_classes = 1000;
  bool small_image_stem = false;
  uint64_t seed = 0;
  bool help = false;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

const char* kUsage =
    "usage: resnet_logits --weights W.safetensors --input X.safetensors --output Y.safetensors\n"
    "                     [--device cpu|cuda] [--arch resnet18|resnet34|resnet50]\n"
    "                     [--num-classes N] [--small-image-stem]\n"
    "   or: resnet_logits --save-init W.safetensors [--seed N] [--arch ...] [--num-classes N]\n"
    "                     [--small-image-stem]\n"
    "\n"
    "Loads a ResNet state_dict (torchvision's keys) strictly, runs it in evaluation mode on the\n"
    "tensor \"input\" of X and writes the tensor \"logits\" to Y; or saves the state_dict of a\n"
    "model freshly initialised from --seed. Defaults: --device cpu --arch resnet18\n"
    "--num-classes 1000 --seed 0, the ImageNet stem (7x7 stride 2 and a max pool).\n";

template <class T>
T parse_number(const std::string& flag, const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    throw UsageError(flag + " expects a non-negative integer, got '" + text + "'");
  }
  return value;
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      args.help = true;
      return args;
    }
    if (flag == "--small-image-stem") {
      args.small_image_stem = true;
      continue;
    }
    if (i + 1 >= argc) throw UsageError("unknown flag or missing value: '" + flag + "'");
    const std::string value = argv[++i];
    if (flag == "--weights") args.weights = value;
    else if (flag == "--input") args.input = value;
    else if (flag == "--output") args.output = value;
    else if (flag == "--save-init") args.save_init = value;
    else if (flag == "--device") args.device = value;
    else if (flag == "--arch") args.arch = value;
    else if (flag == "--num-classes") args.num_classes = parse_number<int64_t>(flag, value);
    else if (flag == "--seed") args.seed = parse_number<uint64_t>(flag, value);
    else throw UsageError("unknown flag '" + flag + "'");
  }
  if (args.arch != "resnet18" && args.arch != "resnet34" && args.arch != "resnet50") {
    throw UsageError("--arch must be resnet18, resnet34 or resnet50, got '" + args.arch + "'");
  }
  if (args.num_classes < 1) throw UsageError("--num-classes must be at least 1");
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

  const mg::Device device = mg::Device::parse(args.device);
#ifdef MG_WITH_CUDA
  mg::cuda::set_allow_tf32(false);
  mg::cuda::set_cudnn_allow_tf32(false);
#endif
  model->to(device);
  mg::nn::load(*model, args.weights, /*strict=*/true);
  model->eval();
  const mg::Tensor input = load_tensor(args.input, "input", device);  // (N, C, H, W)
  MG_CHECK(input.dtype() == mg::DType::Float32, "'", args.input, "': \"input\" must be float32, got ",
           input.dtype());
  mg::NoGradGuard no_grad;
  const mg::Tensor logits = model->forward(input);  // (N, num_classes)
  mg::save_safetensors(args.output, {{"logits", logits}}, {{"format", "pt"}});
  std::cout << args.arch << " logits " << logits.sizes() << " on " << device << " written to "
            << args.output << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const UsageError& error) {
    std::cerr << "error: " << error.what() << "\n\n" << kUsage;
    return 2;
  }
  if (args.help) {
    std::cout << kUsage;
    return 0;
  }
  try {
    return run(args);
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << "\n";
    return 1;
  }
}
