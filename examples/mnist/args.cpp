// examples/mnist/args.cpp — parsing and checking the mnist program's flags.
#include "examples/mnist/args.h"

#include <charconv>
#include <cmath>
#include <functional>
#include <map>

namespace mnist {
namespace {

// Learning rates that train the MLP well in a few epochs (SGD with momentum 0.9).
double default_learning_rate(const std::string& optimizer) {
  static const std::map<std::string, double> rates = {
      {"sgd", 0.05}, {"adam", 1e-3}, {"adamw", 1e-3}, {"adagrad", 1e-2}};
  return rates.at(optimizer);
}

// The whole of `text` as a number of type T, or a UsageError naming the flag.
template <class T>
T parse_number(const std::string& flag, const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    throw UsageError(flag + " expects a number, got '" + text + "'");
  }
  return value;
}

int64_t parse_positive(const std::string& flag, const std::string& text) {
  const auto value = parse_number<int64_t>(flag, text);
  if (value < 1) throw UsageError(flag + " must be at least 1, got " + text);
  return value;
}

mg::Device parse_device(const std::string& text) {
  if (text == "cpu") return mg::Device::cpu();
  if (text == "cuda") return mg::Device::cuda();
  throw UsageError("--device must be cpu or cuda, got '" + text + "'");
}

}  // namespace

Args parse_args(int argc, char** argv) {
  Args args;
  bool lr_given = false;
  // What each flag does with its value.
  const std::map<std::string, std::function<void(const std::string&)>> flags = {
      {"--model",
       [&](const std::string& value) {
         if (value == "cnn") throw UsageError("model 'cnn' is not available yet; choose mlp");
         if (value != "mlp") throw UsageError("unknown model '" + value + "'; choose mlp");
         args.model = value;
       }},
      {"--data", [&](const std::string& value) { args.data_dir = value; }},
      {"--epochs", [&](const std::string& value) { args.epochs = parse_positive("--epochs", value); }},
      {"--batch", [&](const std::string& value) { args.batch_size = parse_positive("--batch", value); }},
      {"--lr",
       [&](const std::string& value) {
         args.lr = parse_number<double>("--lr", value);
         if (!(args.lr > 0) || !std::isfinite(args.lr)) {
           throw UsageError("--lr must be a positive number, got " + value);
         }
         lr_given = true;
       }},
      {"--optim",
       [&](const std::string& value) {
         if (value != "sgd" && value != "adam" && value != "adamw" && value != "adagrad") {
           throw UsageError("--optim must be sgd, adam, adamw or adagrad, got '" + value + "'");
         }
         args.optimizer = value;
       }},
      {"--schedule",
       [&](const std::string& value) {
         if (value != "cosine" && value != "constant") {
           throw UsageError("--schedule must be cosine or constant, got '" + value + "'");
         }
         args.schedule = value;
       }},
      {"--seed", [&](const std::string& value) { args.seed = parse_number<uint64_t>("--seed", value); }},
      {"--device", [&](const std::string& value) { args.device = parse_device(value); }},
      {"--threads",
       [&](const std::string& value) {
         args.threads = static_cast<int>(parse_positive("--threads", value));
       }},
      {"--summary-json",
       [&](const std::string& value) {
         if (value.empty()) throw UsageError("--summary-json needs a file name");
         args.summary_json = value;
       }},
  };

  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      args.help = true;
      continue;
    }
    std::optional<std::string> value;
    if (const size_t equals = flag.find('='); flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      value = flag.substr(equals + 1);
      flag.resize(equals);
    }
    const auto handler = flags.find(flag);
    if (handler == flags.end()) {
      throw UsageError(flag.rfind("--", 0) == 0 ? "unknown flag '" + flag + "'"
                                                : "unexpected argument '" + flag + "'");
    }
    if (!value) {
      if (i + 1 == argc) throw UsageError(flag + " needs a value");
      value = argv[++i];
    }
    handler->second(*value);
  }
  if (!lr_given) args.lr = default_learning_rate(args.optimizer);
  return args;
}

std::string usage(const std::string& program) {
  return "usage: " + program + R"( [options]
Trains a model on an MNIST-format dataset and reports accuracy, speed and memory.

  --model mlp              the model (mlp: 784-512-256-10 with ReLU)
  --data DIR               folder with train-images-idx3-ubyte[.gz] and its three
                           companions (default /usr/share/datasets/fashion-mnist)
  --epochs N               passes over the training set (default 3)
  --batch N                samples per batch (default 128)
  --optim NAME             sgd (momentum 0.9), adam, adamw or adagrad (default adam)
  --lr X                   learning rate (default: sgd 0.05, adam/adamw 1e-3, adagrad 1e-2)
  --schedule NAME          cosine (the learning rate falls from --lr to 0 along a half
                           cosine over all steps) or constant (default cosine)
  --seed N                 seeds initialisation and shuffling (default 0)
  --device cpu|cuda        where to train (default cpu)
  --threads N              CPU threads (default: all cores)
  --summary-json FILE      write a summary of the run (accuracy, time, memory) as JSON
  --help                   show this text
)";
}

}  // namespace mnist
