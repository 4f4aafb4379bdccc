// examples/gpt/sampling.cpp — drawing text from the model, byte by byte.
#include "examples/gpt/sampling.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include <memgrad/autograd/elementwise.h>
#include <memgrad/autograd/grad_mode.h>
#include <memgrad/autograd/shape.h>
#include <memgrad/autograd/softmax.h>
#include <memgrad/autograd/topk.h>
#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>

namespace gpt {

std::string generate(mg::nn::GPT& model, const examples::MixedPrecision& precision, const SamplingOptions& options,
                     mg::Generator& generator, std::FILE* out) {
  MG_CHECK(!options.prompt.empty(), "generate: the prompt needs at least one byte");
  const int64_t vocabulary = model.options().vocab_size;
  const int64_t top_k = std::min(options.top_k.value_or(vocabulary), vocabulary);
  const int64_t block_size = model.options().block_size;
  mg::NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> context(options.prompt.begin(), options.prompt.end());
  for (int64_t& byte : context) byte = static_cast<uint8_t>(byte);  // chars may be signed
  std::fwrite(options.prompt.data(), 1, options.prompt.size(), out);
  std::string generated;
  for (int64_t i = 0; i < options.bytes; ++i) {
    const auto length = std::min<int64_t>(static_cast<int64_t>(context.size()), block_size);
    const std::vector<int64_t> window(context.end() - length, context.end());
    const mg::Tensor tokens = mg::from_vector(window, {1, length}).to(precision.device());  // (1, T)
    mg::Tensor logits;  // (256): the last position's
    {
      const examples::AutocastRegion autocast(precision);
      logits = mg::select(mg::select(model(tokens), 0, 0), 0, length - 1);
    }
    const auto [values, indices] = mg::topk(logits.to(mg::DType::Float32) / options.temperature, top_k);  // (k)
    const int64_t choice = mg::multinomial(mg::softmax(values, 0), 1, false, &generator).item<int64_t>();
    const auto byte = static_cast<uint8_t>(mg::select(indices, 0, choice).item<int64_t>());
    context.push_back(byte);
    generated.push_back(static_cast<char>(byte));
    std::fputc(byte, out);
    std::fflush(out);
  }
  model.train();
  return generated;
}

}  // namespace gpt
