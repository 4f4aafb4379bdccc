// interop/gpt_logits.cpp — memgrad's half of the GPT-2 interop check
// (interop/check_gpt_interop.py): builds a GPT (nn/gpt.h) from a safetensors state_dict
// (written by PyTorch or by memgrad) or from a seed, optionally saves it, and writes the
// logits of the token ids in another safetensors file.
//
//   gpt_logits --load W.safetensors --tokens T.safetensors --out L.safetensors
//              [--device cpu|cuda] [--amp bf16|fp16|fp32] [model flags]
//   gpt_logits --init-seed N --save W.safetensors [--tokens T --out L] [model flags]
//
// Model flags: --preset gpt2|gpt2-medium|gpt2-large (default gpt2: 12 layers, 12 heads,
// 768 wide, vocab 50257, block 1024), then --layers/--heads/--embd/--vocab/--block replace
// single sizes of it, whatever their order on the line.
//
// Files: the tokens under the key "tokens", (B, T) int64; the logits under "logits",
// (B, T, vocab), float32, or bfloat16/float16 under --amp as autocast leaves them (as
// PyTorch's autocast does); state_dicts with GPT-2's keys, the tied lm_head not stored,
// tagged {"format": "pt"} so that safetensors.torch.load_file reads them. A loaded file
// must fit the model exactly (strict load). On CUDA float32 matmuls run in full float32
// (TF32 off), since TF32's ~1e-3 relative error would hide a real mismatch.
//
// Exit codes: 0 done, 1 an error while running (printed as "error: ..."), 2 a bad command line.
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/random.h"
#include "memgrad/io/safetensors.h"
#include "examples/common/cli.h"
#include "examples/common/gpt_sizes.h"
#include "examples/common/mixed_precision.h"
#include "memgrad/nn/gpt.h"

#ifdef MG_WITH_CUDA
#include "memgrad/cuda/runtime.h"
#endif

namespace {

using examples::UsageError;

struct Args {
  std::string load;    // a state_dict to load, or empty: a fresh model from init_seed
  std::optional<uint64_t> init_seed;
  std::string save;    // where to save the model's state_dict, or empty
  std::string tokens;  // the file holding "tokens", or empty: no logits
  std::string out;     // where to write "logits"
  mg::Device device = mg::Device::cpu();
  std::optional<mg::DType> amp;
  std::string preset = "gpt2";
  examples::GPTSizeFlags sizes;  // replace the preset's
  bool help = false;
};

std::string usage(const std::string& program) {
  const std::string indent(program.size(), ' ');
  return "usage: " + program + " --load W.safetensors --tokens T.safetensors --out L.safetensors\n"
         "       " + indent + " [--device cpu|cuda] [--amp bf16|fp16|fp32] [model flags]\n"
         "   or: " + program + " --init-seed N --save W.safetensors [--tokens T --out L] [model flags]\n"
         "model flags: --preset gpt2|gpt2-medium|gpt2-large, --layers N --heads N --embd N --vocab N --block N\n"
         "\n"
         "Builds a GPT from a state_dict (GPT-2's keys, lm_head tied and not stored; strict load) or\n"
         "from a seed, saves its state_dict with --save, and writes the logits of the (B, T) int64\n"
         "tensor \"tokens\" of T as the tensor \"logits\" of L, in evaluation mode, under autocast\n"
         "with --amp. Defaults: --preset gpt2 --device cpu --amp fp32 --init-seed 0.\n";
}

Args parse_args(int argc, char** argv) {
  Args args;
  examples::FlagHandlers flags = {
      {"--load", [&](const std::string& value) { args.load = value; }},
      {"--init-seed",
       [&](const std::string& value) { args.init_seed = examples::parse_number<uint64_t>("--init-seed", value); }},
      {"--save", [&](const std::string& value) { args.save = value; }},
      {"--tokens", [&](const std::string& value) { args.tokens = value; }},
      {"--out", [&](const std::string& value) { args.out = value; }},
      {"--device", [&](const std::string& value) { args.device = examples::parse_device(value); }},
      {"--amp", [&](const std::string& value) { args.amp = examples::parse_amp(value); }},
      {"--preset",
       [&](const std::string& value) {
         if (value != "gpt2" && value != "gpt2-medium" && value != "gpt2-large") {
           throw UsageError("--preset must be gpt2, gpt2-medium or gpt2-large, got '" + value + "'");
         }
         args.preset = value;
       }},
  };
  args.sizes.add_to(flags, /*with_vocab=*/true);
  const examples::SwitchHandlers switches = {
      {"--help", [&] { args.help = true; }},
      {"-h", [&] { args.help = true; }},
  };
  examples::parse_flags(argc, argv, flags, switches);
  if (args.help) return args;  // the checks below are for a run
  if (!args.load.empty() && args.init_seed) {
    throw UsageError("give --load or --init-seed, not both: a loaded model's values come from the file");
  }
  if (args.tokens.empty() != args.out.empty()) throw UsageError("--tokens and --out go together");
  if (args.save.empty() && args.out.empty()) {
    throw UsageError("nothing to do: give --save, or --tokens and --out (or both)");
  }
  examples::check_amp_device(args.amp, args.device);
  return args;
}

mg::nn::GPTOptions model_options(const Args& args) {
  return args.sizes.apply(args.preset == "gpt2-medium"  ? mg::nn::GPTOptions::gpt2_medium()
                          : args.preset == "gpt2-large" ? mg::nn::GPTOptions::gpt2_large()
                                                        : mg::nn::GPTOptions::gpt2());
}

// The tensor stored under `key` in a safetensors file, on `device`.
mg::Tensor load_tensor(const std::string& path, const std::string& key, mg::Device device) {
  for (auto& [name, tensor] : mg::load_safetensors(path, device)) {
    if (name == key) return tensor;
  }
  throw mg::Error("'" + path + "' holds no tensor named \"" + key + "\"");
}

int run(const Args& args) {
  const mg::nn::GPTOptions options = model_options(args);
  mg::Generator generator(args.init_seed.value_or(0));
  auto model = std::make_shared<mg::nn::GPT>(options, &generator);
  const std::string shape = mg::detail::str_cat(options.n_layer, " layers, ", options.n_head, " heads, ",
                                                options.n_embd, " wide, vocab ", options.vocab_size, ", block ",
                                                options.block_size, "; ", model->num_parameters(), " parameters");
#ifdef MG_WITH_CUDA
  if (args.device.is_cuda()) mg::cuda::set_allow_tf32(false);
#endif
  model->to(args.device);
  if (!args.load.empty()) mg::nn::load(*model, args.load, /*strict=*/true);
  std::cout << "gpt (" << shape << ") " << (args.load.empty() ? "initialised from seed " +
                                                                    std::to_string(args.init_seed.value_or(0))
                                                              : "loaded from " + args.load)
            << "\n";
  if (!args.save.empty()) {
    mg::nn::save(*model, args.save);
    std::cout << "state_dict saved to " << args.save << "\n";
  }
  if (args.out.empty()) return 0;

  model->eval();
  const mg::Tensor tokens = load_tensor(args.tokens, "tokens", args.device);  // (B, T)
  MG_CHECK(tokens.dtype() == mg::DType::Int64 && tokens.dim() == 2, "'", args.tokens,
           "': \"tokens\" must be a (B, T) int64 tensor, got ", tokens.sizes(), " ", tokens.dtype());
  mg::NoGradGuard no_grad;
  mg::Tensor logits;  // (B, T, vocab)
  {
    mg::amp::AutocastGuard autocast(args.amp.value_or(mg::DType::BFloat16), args.device.type, args.amp.has_value());
    logits = model->forward(tokens);
  }
  mg::save_safetensors(args.out, {{"logits", logits}}, {{"format", "pt"}});
  std::cout << "logits " << logits.sizes() << " " << logits.dtype() << " on " << args.device << " ("
            << examples::amp_name(args.amp) << ") written to " << args.out << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  return examples::run_main(
      argc, argv, "gpt_logits",
      [&](int count, char** values) {
        args = parse_args(count, values);
        return !args.help;
      },
      usage, [&] { return run(args); });
}
